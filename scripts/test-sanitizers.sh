#!/usr/bin/env bash
# The test suite again under sanitizers (CUDA off): the whole suite with AddressSanitizer +
# UndefinedBehaviorSanitizer (all but the tests labelled slow: exhaustive sweeps that the plain run
# covers, and plain-only: integration scripts that drive daemons or other scripts (Slurm, fio, the
# mutation list, the layer check, --help alike) while the apps they run are sanitized in other tests), then the
# prefetcher and pipeline tests with ThreadSanitizer.
# Usage: scripts/test-sanitizers.sh [all|asan|tsan|ci]   (default: all = asan and tsan)
#   ci: what .ci/run runs to stay under 30 minutes on 2 cores: ASan + UBSan over the library's own
#       test binaries only (unit, the MPI and fuzz suites at 2 ranks; the apps and the integration
#       scripts are not built), then tsan. Every sanitized app exits through LeakSanitizer's check, which costs
#       1.5-4 s per process here (the full unwinding the suppressions need), and the integration
#       scripts start several hundred: the full asan pass takes 15-25 minutes on its own. Run it
#       (the default) before a release and after changes to the apps or the I/O paths.
set -euo pipefail
source "$(dirname "$0")/common.sh"
which=${1:-all}
supp=$repo_root/tests/sanitizers
# -O0 -g1: the sanitizers insert their checks at any optimisation level, and under ASan + UBSan the
# library compiles in 40 s at -O0 against 67 s at -O1 (from an empty cache here) while the CI pass's
# tests take as long (55 s against 53 s); -g1 keeps stacks readable.
fast_debug=(-DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-O0 -g1" "-DCMAKE_C_FLAGS_DEBUG=-O0 -g1")

case $which in
  all | asan | tsan | ci) ;;
  *)
    echo "test-sanitizers: unknown pass '$which' (all, asan, tsan or ci)" >&2
    exit 2
    ;;
esac

asan_ctest() {
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=0:fast_unwind_on_malloc=0 \
  LSAN_OPTIONS=suppressions=$supp/lsan.supp:print_suppressions=0:fast_unwind_on_malloc=0 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    strider_ctest "$1" ctest-asan "${@:2}"
}

if [[ $which == all || $which == asan ]]; then
  dir=${build_dir}-asan
  run_stage asan-build configure_and_build "$dir" "${fast_debug[@]}" -DSTRIDER_ENABLE_CUDA=OFF \
    -DSTRIDER_SANITIZE=address,undefined
  echo "test-sanitizers: AddressSanitizer + UndefinedBehaviorSanitizer, whole suite"
  run_stage asan-tests asan_ctest "$dir" --label-exclude "^(slow|plain-only)$"
fi

if [[ $which == ci ]]; then
  dir=${build_dir}-asan-lib
  STRIDER_BUILD_TARGETS="strider_unit_tests strider_mpi_tests strider_fuzz_tests" run_stage asan-build \
    configure_and_build "$dir" "${fast_debug[@]}" -DSTRIDER_ENABLE_CUDA=OFF -DSTRIDER_SANITIZE=address,undefined
  echo "test-sanitizers: AddressSanitizer + UndefinedBehaviorSanitizer, the library's test binaries"
  # The MPI and fuzz suites at 2 ranks, which take the collective and remote (STRIDER_NODE_SIZE=1)
  # paths: each more rank count is a minute or more here (mpi_np4 81 s); the asan pass runs them all.
  run_stage asan-tests asan_ctest "$dir" --tests-regex "^(unit|mpi_np2|mpi_np2_abandons|fuzz_np2)$"
fi

if [[ $which == all || $which == tsan || $which == ci ]]; then
  dir=${build_dir}-tsan
  STRIDER_BUILD_TARGETS="strider_unit_tests strider_mpi_tests" run_stage tsan-build configure_and_build "$dir" \
    "${fast_debug[@]}" -DSTRIDER_ENABLE_CUDA=OFF -DSTRIDER_SANITIZE=thread -DSTRIDER_BUILD_APPS=OFF
  echo "test-sanitizers: ThreadSanitizer, the threaded parts (prefetcher, Loader, store, communicator)"
  TSAN_OPTIONS="suppressions=$supp/tsan.supp:halt_on_error=1:second_deadlock_stack=1" \
    run_stage tsan-tests strider_ctest "$dir" ctest-tsan -L tsan
fi
