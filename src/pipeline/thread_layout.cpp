#include "pipeline/thread_layout.hpp"

#include <sched.h>
#include <unistd.h>

#include "strider/comm/communicator.hpp"

namespace strider::pipeline_detail {

bool has_spare_core(int local_ranks) {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  const int online_cores = online > 0 ? static_cast<int>(online) : 1;
  const int affinity_cores = sched_getaffinity(0, sizeof(mask), &mask) == 0 ? CPU_COUNT(&mask) : online_cores;
  return cores_per_rank(affinity_cores, online_cores, local_ranks) >= 2;
}

AgreedLayout agree_thread_layout(const Communicator& comm, const LayoutMeasurement& mine) {
  double slowest[3] = {mine.io_thread_us_per_step, mine.caller_thread_us_per_step, mine.spare_core ? 0.0 : 1.0};
  comm.all_reduce(slowest, 3, ReduceOp::max);
  AgreedLayout agreed;
  agreed.io_thread_us_per_step = slowest[0];
  agreed.caller_thread_us_per_step = slowest[1];
  agreed.spare_core = slowest[2] == 0.0;
  agreed.caller_thread = keeps_caller_thread(slowest[0], slowest[1], agreed.spare_core);
  return agreed;
}

}  // namespace strider::pipeline_detail
