#pragma once
// The thread rule of the hdf5 engine, checked: Debian's parallel HDF5 is built without thread
// safety, so after open exactly one thread may call it for a reader. The first read claims the
// reader for its thread (the prefetcher's I/O thread, or the caller's when there is no prefetcher);
// a call from any other thread afterwards is refused with a clear error instead of racing inside
// HDF5. Costs one atomic load per batch.

#include <atomic>
#include <string>
#include <thread>

namespace strider::io_detail {

/// The one thread allowed to call HDF5 for one reader. Thread-safe.
class OwnerThread {
 public:
  /// Claims the reader for the calling thread if no thread has yet; otherwise throws UsageError,
  /// naming the reader's file `path`, when the caller is not the owner.
  void check(const std::string& path);

 private:
  std::atomic<std::thread::id> owner_{};
};

}  // namespace strider::io_detail
