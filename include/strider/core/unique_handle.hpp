#pragma once
/// \file
/// One move-only owner for every native handle (hid_t, MPI_Comm, MPI_Datatype, cudaStream_t, ...).

#include <utility>

namespace strider {

/// Owns a native handle of type Traits::handle_type and releases it with Traits::release, which must
/// not throw (destructors never throw: a failing release is logged and ignored).
/// Traits provides: `using handle_type = ...; static handle_type null(); static void release(handle_type) noexcept;`
/// Copying is deleted: no collective or native call hides in a copy.
template <typename Traits>
class UniqueHandle {
 public:
  using handle_type = typename Traits::handle_type;

  UniqueHandle() noexcept : handle_(Traits::null()) {}
  explicit UniqueHandle(handle_type handle) noexcept : handle_(handle) {}
  UniqueHandle(const UniqueHandle&) = delete;
  UniqueHandle& operator=(const UniqueHandle&) = delete;
  UniqueHandle(UniqueHandle&& other) noexcept : handle_(other.release()) {}
  UniqueHandle& operator=(UniqueHandle&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  ~UniqueHandle() { reset(); }

  /// The native handle (still owned by this object).
  handle_type get() const noexcept { return handle_; }
  /// True when a handle is held.
  explicit operator bool() const noexcept { return !(handle_ == Traits::null()); }
  /// Gives up ownership without releasing.
  handle_type release() noexcept { return std::exchange(handle_, Traits::null()); }
  /// Releases the held handle (if any) and takes `handle`.
  void reset(handle_type handle = Traits::null()) noexcept {
    handle_type old = std::exchange(handle_, handle);
    if (!(old == Traits::null())) Traits::release(old);
  }

 private:
  handle_type handle_;
};

}  // namespace strider
