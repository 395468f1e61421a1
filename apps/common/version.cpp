// What --version prints. STRIDER_COMMIT is set on this file alone (apps/CMakeLists.txt), so that a new
// commit recompiles one small file.
#include <boost/version.hpp>
#include <string>

#include "common/cli.hpp"
#include "strider/comm/mpi_runtime.hpp"
#include "strider/config.hpp"
#include "strider/device/gpu_probe.hpp"
#include "strider/io/hdf5_handle.hpp"

#ifndef STRIDER_COMMIT
#define STRIDER_COMMIT "unknown"
#endif

namespace strider::cli {

std::string version_text(const std::string& program) {
  const std::string boost =
      "Boost " + std::to_string(BOOST_VERSION / 100000) + "." + std::to_string(BOOST_VERSION / 100 % 1000);
#if defined(__clang__)
  const std::string compiler = "clang " __clang_version__;
#elif defined(__GNUC__)
  const std::string compiler = "gcc " __VERSION__;
#else
  const std::string compiler = "an unknown compiler";
#endif
  return program + " (strider) " + STRIDER_VERSION_STRING + ", commit " + STRIDER_COMMIT + "\n" + "built with " +
         gpu_build_versions() + ", " + hdf5_build_version() + ", " + mpi_build_version() + ", " + boost + ", " +
         compiler + "\n";
}

}  // namespace strider::cli
