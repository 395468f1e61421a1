#include "io/owner_thread.hpp"

#include "strider/core/error.hpp"

namespace strider::io_detail {

void OwnerThread::check(const std::string& path) {
  const std::thread::id me = std::this_thread::get_id();
  std::thread::id owner = owner_.load(std::memory_order_acquire);
  if (owner == me) return;
  if (owner == std::thread::id() && owner_.compare_exchange_strong(owner, me, std::memory_order_acq_rel)) return;
  STRIDER_THROW(UsageError, "the hdf5 engine reading " + path +
                                " was called from a second thread; HDF5 here is not thread-safe, so one thread (the "
                                "first that read, usually the prefetcher's I/O thread) makes every read");
}

}  // namespace strider::io_detail
