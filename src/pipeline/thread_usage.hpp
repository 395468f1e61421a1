#pragma once
// CPU time and context switches of the calling thread, for the pipeline's CPU account.

#include <sys/resource.h>

#include <cstdint>

namespace strider::pipeline_detail {

/// The calling thread's CPU time (user + system) and context switches so far (getrusage
/// RUSAGE_THREAD). Exact once the thread has blocked; while it runs, up to a scheduler tick behind.
struct ThreadUsage {
  double cpu_seconds = 0;
  std::int64_t voluntary_switches = 0;    ///< it blocked
  std::int64_t involuntary_switches = 0;  ///< it was preempted
  static ThreadUsage now() noexcept {
    rusage usage{};
    ::getrusage(RUSAGE_THREAD, &usage);
    return {static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                1e-6 * static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec),
            usage.ru_nvcsw, usage.ru_nivcsw};
  }
};

}  // namespace strider::pipeline_detail
