#pragma once
// Catch2's session for every test binary (unit, MPI, fuzz, GPU). Catch2's implementation lives in one
// object file, tests/catch_session.cpp, compiled once per build rather than once per test binary.

namespace strider::testing {

/// Runs Catch2 with the command line; the report goes to `report_path` (nullptr: standard output).
/// Returns Catch2's exit code (non-zero when a test failed or the command line is wrong).
int run_catch_session(int argc, char** argv, const char* report_path = nullptr);

}  // namespace strider::testing
