#include "strider/train/stop_signal.hpp"

#include <csignal>

namespace strider {
namespace {

volatile std::sig_atomic_t stop_flag = 0;

extern "C" void on_stop_signal(int) {
  stop_flag = 1;
}

}  // namespace

void install_stop_signal_handlers() {
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGUSR1, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

bool stop_signal_received() noexcept {
  return stop_flag != 0;
}

void clear_stop_signal() noexcept {
  stop_flag = 0;
}

bool agree_on_stop(const Communicator& comm) {
  return comm.all_reduce(stop_signal_received() ? 1 : 0, ReduceOp::max) != 0;
}

}  // namespace strider
