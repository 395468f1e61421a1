#pragma once
// CPU time and context switches of the calling thread, for the pipeline's CPU account.

#include <sys/resource.h>
#include <time.h>

#include <cstdint>

namespace strider::pipeline_detail {

/// The calling thread's CPU time (user + system, CLOCK_THREAD_CPUTIME_ID: exact also while it runs)
/// and context switches so far (getrusage RUSAGE_THREAD). Two system calls: not for every batch.
struct ThreadUsage {
  double cpu_seconds = 0;
  std::int64_t voluntary_switches = 0;    ///< it blocked
  std::int64_t involuntary_switches = 0;  ///< it was preempted
  static ThreadUsage now() noexcept {
    timespec cpu{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu);
    rusage usage{};
    ::getrusage(RUSAGE_THREAD, &usage);
    return {static_cast<double>(cpu.tv_sec) + 1e-9 * static_cast<double>(cpu.tv_nsec), usage.ru_nvcsw, usage.ru_nivcsw};
  }
  /// The calling thread's CPU time alone (one system call).
  static double cpu_seconds_now() noexcept {
    timespec cpu{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu);
    return static_cast<double>(cpu.tv_sec) + 1e-9 * static_cast<double>(cpu.tv_nsec);
  }
};

}  // namespace strider::pipeline_detail
