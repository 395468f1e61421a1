#pragma once
// Test-only fault injection: every STRIDER_TEST_* variable is read here and nowhere else, so the
// hooks that the reliability tests use are listed in one place. Each hook is off when its variable
// is unset or malformed; RANK:STEP hooks apply only to the process whose world rank is RANK.
//   STRIDER_TEST_FAIL_READ=RANK:STEP     that rank's I/O thread fails reading STEP (of any epoch)
//   STRIDER_TEST_FAIL_LOAD=RANK:PIECE    that rank fails loading piece PIECE (0, 1, ...) of its share
//                                        into the in-memory store, as a failing disk would
//   STRIDER_TEST_FAIL_WRITE=RANK:PIECE   that rank's collective H5Dwrite of piece PIECE (0, 1, ...) in
//                                        strider-gen fails inside HDF5, on that rank alone
//   STRIDER_TEST_HANG_AT=RANK:STEP       that rank never finishes training step STEP (the watchdog's test)
//   STRIDER_TEST_STEP_DELAY_US=US        every training step sleeps US more (a signal can land mid-epoch)
//   STRIDER_TEST_READ_DELAY_US=US        every batch read sleeps US first (a slow disk: Ctrl-C lands in a wait)
//   STRIDER_TEST_KILL_IN_CHECKPOINT=N    the process writing its N-th checkpoint (counting from 1) kills
//                                        itself with SIGKILL halfway through the temporary file

#include <cstdint>

namespace strider::detail {

/// The hooks for this process (-1 or 0: off).
struct TestHooks {
  std::int64_t fail_read_step = -1;      ///< STRIDER_TEST_FAIL_READ, when it names this rank
  std::int64_t fail_load_piece = -1;     ///< STRIDER_TEST_FAIL_LOAD, when it names this rank
  std::int64_t fail_write_piece = -1;    ///< STRIDER_TEST_FAIL_WRITE, when it names this rank
  std::int64_t hang_step = -1;           ///< STRIDER_TEST_HANG_AT, when it names this rank
  std::int64_t step_delay_us = 0;        ///< STRIDER_TEST_STEP_DELAY_US
  std::int64_t read_delay_us = 0;        ///< STRIDER_TEST_READ_DELAY_US
  std::int64_t kill_in_checkpoint = -1;  ///< STRIDER_TEST_KILL_IN_CHECKPOINT
};

/// Reads the variables now (after MPI_Init, so that the rank is known). Not for per-step use.
/// Thread-safe (getenv only).
TestHooks test_hooks() noexcept;

}  // namespace strider::detail
