#!/usr/bin/env bash
# The GPU check, for a machine with an NVIDIA GPU: builds strider
# with the CUDA backend (Release, sm_90 only to save time), runs the gpu-labelled tests (the CUDA
# backend against the CPU backend, copy/compute overlap, the gradient all-reduce at 2 ranks, and
# strider-train --backend cuda against --backend cpu end to end) and a short training benchmark, in a
# few minutes. It ends with a summary of what it exercised and what it did not (NCCL needs two GPUs),
# kernel time / step time, and the stall fraction of the CUDA training run, whose ring is pinned.
#
#   scripts/gpu-check.sh [build-dir]        (default: build-gpu-check in the repository)
#   STRIDER_CUDA_ARCHS=80 scripts/gpu-check.sh   (another architecture: A100 is 80, H100/H200 90)
#   STRIDER_GPU_CHECK_BUILD_TIMEOUT_S=900 ...    (a slower machine; default 240 s, fine with 16 cores)
#
# Needs no network: it uses what is installed. When something is missing it says what, with the
# Debian package that provides it (scripts/setup.sh installs those where the Debian archive is
# reachable; CUDA and NCCL come from NVIDIA's installers under /usr/local/cuda), and exits 2.
# Exit codes: 0 all passed, 1 a build, test or benchmark failure (also: no gpu test ran although
# the GPU works), 2 missing prerequisites, 77 no working GPU (the tests then report themselves as
# skipped).
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$repo/build-gpu-check}
archs=${STRIDER_CUDA_ARCHS:-90}
cuda_root=${CUDA_HOME:-/usr/local/cuda}
jobs=$(nproc 2>/dev/null || echo 4)
build_timeout_s=${STRIDER_GPU_CHECK_BUILD_TIMEOUT_S:-240}
started=$SECONDS

say() { printf 'gpu-check: %s\n' "$*"; }

# ---- Prerequisites ----------------------------------------------------------------------------
missing=()
need_command() {  # command, what provides it
  command -v "$1" >/dev/null 2>&1 || missing+=("$1 ($2)")
}
need_file() {  # description, what provides it, candidate paths...
  local what=$1 provider=$2
  shift 2
  for path in "$@"; do
    [[ -e $path ]] && return 0
  done
  missing+=("$what ($provider)")
}
export PATH="$cuda_root/bin:$PATH"
need_command cmake "Debian: cmake >= 3.25"
need_command g++ "Debian: g++"
need_command mpicxx "Debian: libopenmpi-dev"
need_command mpirun "Debian: openmpi-bin"
need_command nvcc "CUDA Toolkit under $cuda_root"
need_file "parallel HDF5 headers" "Debian: libhdf5-openmpi-dev" /usr/include/hdf5/openmpi/hdf5.h
need_file "Catch2 2.x headers" "Debian: catch2" /usr/include/catch2/catch.hpp
need_file "Boost.Program_options" "Debian: libboost-program-options-dev" /usr/include/boost/program_options.hpp
need_file "nccl.h" "NCCL, e.g. under $cuda_root/include" "$cuda_root/include/nccl.h" /usr/include/nccl.h
need_file "libnccl.so" "NCCL" "$cuda_root/lib64/libnccl.so" "$cuda_root/lib/libnccl.so" \
  /usr/lib/x86_64-linux-gnu/libnccl.so
generator="Unix Makefiles"
command -v ninja >/dev/null 2>&1 && generator=Ninja
if ((${#missing[@]} > 0)); then
  say "missing prerequisites:"
  for item in "${missing[@]}"; do say "  - $item"; done
  say "install them (scripts/setup.sh needs the Debian archive; this script never downloads anything) and rerun"
  exit 2
fi
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.total --format=csv,noheader 2>&1 | sed 's/^/gpu-check: gpu /'
else
  say "nvidia-smi not found (the driver may still work; the tests probe the CUDA runtime themselves)"
fi

# ---- Build ------------------------------------------------------------------------------------
mkdir -p "$build"
say "configuring $build (Release, CUDA architectures $archs, $generator)"
if ! timeout 120 cmake -S "$repo" -B "$build" -G "$generator" -DCMAKE_BUILD_TYPE=Release -DSTRIDER_ENABLE_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES="$archs" -DSTRIDER_BUILD_APPS=ON -DSTRIDER_BUILD_TESTS=ON >"$build/gpu-check.configure.log" 2>&1; then
  tail -n 30 "$build/gpu-check.configure.log"
  say "FAILED: configure (log: $build/gpu-check.configure.log)"
  exit 1
fi
say "building the library, the gpu tests, strider-gen, strider-train and the benchmark with $jobs jobs"
timeout "$build_timeout_s" cmake --build "$build" -j "$jobs" --target strider_gpu_tests strider_gpu_benchmark \
  strider_gpu_probe strider-gen strider-train >"$build/gpu-check.build.log" 2>&1
build_status=$?
if ((build_status != 0)); then
  grep -E 'error|FAILED' "$build/gpu-check.build.log" | head -n 30
  ((build_status == 124)) && say "the build took longer than $build_timeout_s s (STRIDER_GPU_CHECK_BUILD_TIMEOUT_S)"
  say "FAILED: build (log: $build/gpu-check.build.log)"
  exit 1
fi
warnings=$(grep -c 'warning' "$build/gpu-check.build.log" || true)
say "built in $((SECONDS - started)) s ($warnings warning lines in $build/gpu-check.build.log)"
probe=$("$build/tests/gpu/strider_gpu_probe")
probe_status=$?
devices=0
((probe_status == 0)) && devices=$probe
say "usable CUDA devices: $devices$( ((probe_status == 0)) || echo " ($probe)")"

# ---- Tests ------------------------------------------------------------------------------------
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 \
  OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
say "ctest -L gpu (verbose log: $build/gpu-check.ctest.log)"
# --no-tests=error: a label that matches no test fails instead of passing. Each test's Catch2 run
# fails too when its filter matches no test case (--warn NoTests in tests/gpu/CMakeLists.txt).
ctest --test-dir "$build" -L gpu --no-tests=error -V --timeout 300 >"$build/gpu-check.ctest.log" 2>&1
ctest_status=$?
grep -E '^ *[0-9]+/[0-9]+ Test +#|tests passed|tests failed' "$build/gpu-check.ctest.log" | sed 's/^ */gpu-check: /'
if ((ctest_status != 0)); then
  grep -nE 'FAILED|FAIL:|with expansion|error:' "$build/gpu-check.ctest.log" | head -n 40 | sed 's/^/gpu-check: /'
fi
# "N% tests passed, F tests failed out of T", and one "***Skipped" status line per skipped test.
total=$(sed -n 's/.*tests failed out of \([0-9][0-9]*\).*/\1/p' "$build/gpu-check.ctest.log" | tail -n 1)
total=${total:-0}
skipped=$(grep -c '\*\*\*Skipped' "$build/gpu-check.ctest.log" || true)
ran=$((total - skipped))
say "gpu tests: $total in all, $ran ran, $skipped skipped"

# ---- Benchmark --------------------------------------------------------------------------------
bench_status=0
for shape in "--batch 8192 --features 1024 --hidden 512" "--batch 256 --features 64 --hidden 64"; do
  say "training benchmark (mlp, $shape, float32 batches from pinned memory)"
  # shellcheck disable=SC2086
  timeout 90 "$build/tests/gpu/strider_gpu_benchmark" --steps 100 $shape 2>&1 | tee -a "$build/gpu-check.bench.log"
  status=${PIPESTATUS[0]}
  ((status != 0 && bench_status == 0)) && bench_status=$status
done

# ---- What ran ---------------------------------------------------------------------------------
say "summary after $((SECONDS - started)) s:"
mode=$(sed -n 's/.*gpu all-reduce mode at 2 ranks: \([a-z-]*\).*/\1/p' "$build/gpu-check.ctest.log" | head -n 1)
case "$mode" in
  nccl) say "  NCCL exercised: the gradient all-reduce ran through NCCL at 2 ranks on $devices GPUs" ;;
  mpi-host) say "  NCCL not exercised: $devices GPU (the 2-rank all-reduce shared it and went through MPI in host memory)" ;;
  *) say "  NCCL not exercised: the 2-rank all-reduce test did not report its mode ($devices GPU(s))" ;;
esac
if grep -q 'note: 2 ranks not run' "$build/gpu-check.ctest.log"; then
  say "  strider-train --backend cuda vs cpu: 1 rank only (2 ranks need 2 GPUs)"
elif grep -q '2 rank(s), rank 1: identical sample traces' "$build/gpu-check.ctest.log"; then
  say "  strider-train --backend cuda vs cpu: 1 and 2 ranks"
fi
grep -h 'stall fraction' "$build/gpu-check.ctest.log" | sed 's/^/gpu-check:   /'
grep -h 'kernel time / step time' "$build/gpu-check.bench.log" 2>/dev/null | sed 's/^/gpu-check:   /'
say "  not exercised here: NCCL failures and timeouts (unit and MPI tests stand NCCL in), a driver too old or busy devices (unit tests stand the CUDA runtime in)"

if ((ctest_status != 0)); then
  say "FAILED: ctest exit $ctest_status, benchmark exit $bench_status"
  exit 1
fi
if ((bench_status == 77 && ran == 0)); then
  say "no working GPU here: the gpu tests were skipped, nothing was measured"
  exit 77
fi
if ((bench_status != 0)); then
  say "FAILED: benchmark exit $bench_status"
  exit 1
fi
if ((ran == 0)); then
  say "FAILED: the GPU works (the benchmark ran) but no gpu test ran ($total found, $skipped skipped)"
  exit 1
fi
((skipped > 0)) && say "note: $skipped gpu test(s) reported themselves skipped"
say "all gpu tests passed ($ran ran)"
exit 0
