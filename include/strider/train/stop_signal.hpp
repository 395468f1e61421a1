#pragma once
/// \file
/// Preemption: SIGUSR1 / SIGTERM (Slurm's warning before preemption or the time limit) set a flag
/// that the training loop polls; the ranks then agree on a stop step, checkpoint, and exit 75.

#include "strider/comm/communicator.hpp"

namespace strider {

/// Exit status of a run stopped by a signal after checkpointing: EX_TEMPFAIL, "requeue me".
constexpr int exit_code_preempted = 75;

/// Installs handlers for SIGUSR1 and SIGTERM that only set a flag (async-signal-safe). Idempotent.
void install_stop_signal_handlers();
/// Whether a stop signal arrived in this process (since the last clear).
bool stop_signal_received() noexcept;
/// Clears the flag (tests).
void clear_stop_signal() noexcept;

/// Collective over comm: every rank must call at the same step. True on every rank when any rank
/// has received a stop signal: the signal reaches ranks at different times, the decision does not.
bool agree_on_stop(const Communicator& comm);

}  // namespace strider
