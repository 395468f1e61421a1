#include "strider/io/hdf5_handle.hpp"

#include <mutex>

namespace strider {
namespace {

struct StackTop {
  std::string innermost;  // the first record walking upward: where the error was first detected
};

herr_t remember_innermost(unsigned index, const H5E_error2_t* record, void* data) {
  auto* top = static_cast<StackTop*>(data);
  if (index == 0 && record != nullptr && record->desc != nullptr) top->innermost = record->desc;
  return 0;
}

}  // namespace

void silence_hdf5_errors() noexcept {
  static std::once_flag once;
  std::call_once(once, [] { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); });
}

std::string hdf5_build_version() {
#ifdef H5_HAVE_PARALLEL
  const char* parallel = " (parallel)";
#else
  const char* parallel = " (serial)";
#endif
  return "HDF5 " + std::to_string(H5_VERS_MAJOR) + "." + std::to_string(H5_VERS_MINOR) + "." +
         std::to_string(H5_VERS_RELEASE) + parallel;
}

namespace detail {

void throw_hdf5_error(long long code, const char* call, const char* file, int line, const std::string& hint) {
  StackTop top;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, remember_innermost, &top);
  H5Eclear2(H5E_DEFAULT);
  std::string full_hint = hint;
  if (!top.innermost.empty()) full_hint += (full_hint.empty() ? "" : ": ") + top.innermost;
  throw Hdf5Error(ErrorContext{call, file, line, -1, code, full_hint});
}

}  // namespace detail
}  // namespace strider
