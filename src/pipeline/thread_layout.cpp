#include "pipeline/thread_layout.hpp"

#include "strider/comm/communicator.hpp"

namespace strider::pipeline_detail {

AgreedLayout agree_thread_layout(const Communicator& comm, const LayoutMeasurement& mine) {
  double slowest[2] = {mine.io_thread_us_per_step, mine.caller_thread_us_per_step};
  comm.all_reduce(slowest, 2, ReduceOp::max);
  AgreedLayout agreed;
  agreed.io_thread_us_per_step = slowest[0];
  agreed.caller_thread_us_per_step = slowest[1];
  agreed.caller_thread = keeps_caller_thread(slowest[0], slowest[1]);
  return agreed;
}

}  // namespace strider::pipeline_detail
