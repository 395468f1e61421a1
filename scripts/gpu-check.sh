#!/usr/bin/env bash
# The GPU check, for a machine with an NVIDIA GPU, run from the bundle that scripts/gpu-bundle.sh
# made on the build machine: compiles nothing, needs no MPI, HDF5 or Boost on the machine, ends
# before a global deadline and packs every log into one tarball. See --help.
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

usage() {
  cat <<'EOF'
Usage: scripts/gpu-check.sh [--bundle DIR] [--out DIR] [--deadline S]
Runs the GPU check from the bundle DIR (default gpu-bundle/ in the repository; make it with
scripts/gpu-bundle.sh and carry it to the GPU machine with the working tree), in this order:
  inventory     the GPU, driver and CUDA versions, nvcc, compute-sanitizer, NCCL and cuBLAS (path and version),
                Open MPI, glibc, Python and torch, the bundle's manifest; printed before anything
                can fail, each item whatever became of the others
  bundle        the bundle's environment (env.sh: glibc, libnccl.so.2, cuBLAS)
  probe         strider_gpu_probe: the usable GPUs, or why there is none
  gpu tests     strider_gpu_tests [cuda-vs-cpu], [overlap], [device-batches] at 1 rank and
                [allreduce] at 2 ranks (NCCL with 2 GPUs; with 1 GPU the ranks share it, MPI path)
  nccl 1 rank   [allreduce] at 1 rank with STRIDER_TEST_NCCL_ONE_RANK=1: NCCL's init, all-reduce and
                abort through a communicator of one
  end to end    tests/gpu/test_train_cuda_vs_cpu.sh on the bundle's programs (its CPU half runs
                everywhere)
  benchmark     strider_gpu_benchmark on a copy-bound shape (64 MiB batches, mlp hidden 16) from
                pinned and pageable memory (H2D GB/s against the pinned peak, overlap of copy k+1
                with step k), and on a compute-bound shape (dense layers on cuBLAS, then on the kernels)
  train         strider-gen writes 328 MB at up to 8 ranks; strider-train --backend cuda on it:
                samples/s and stall fraction per epoch
  memcheck,     compute-sanitizer --tool memcheck / synccheck on strider_gpu_tests [cuda-vs-cpu];
  synccheck     "unsupported" with the reason where compute-sanitizer is missing or refuses to run
Every part runs under a timeout that leaves the rest of the deadline (default 290 s) to pack the
logs: a part that hangs is killed and reported as timed out, a part with no time left as not
started. Logs: OUT/gpu-check.tar.gz (OUT: --out, else STRIDER_GPU_CHECK_OUT, else gpu-check-out/
in the repository). Printed last: one line per part (passed, failed, skipped, unsupported or
timeout, with its key figure).
Exit codes: 0 all passed; 1 a part failed or timed out; 77 no working GPU (the GPU parts skipped with
the reason, the rest passed).
EOF
}

bundle=$repo/gpu-bundle out=${STRIDER_GPU_CHECK_OUT:-$repo/gpu-check-out} deadline_s=290
while (($#)); do
  case $1 in
    -h | --help) usage; exit 0 ;;
    --bundle) bundle=${2:?--bundle needs a folder}; shift 2 ;;
    --out) out=${2:?--out needs a folder}; shift 2 ;;
    --deadline) deadline_s=${2:?--deadline needs seconds}; shift 2 ;;
    *) echo "gpu-check: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ $deadline_s =~ ^[0-9]+$ ]] && ((deadline_s >= 30)) || { echo "gpu-check: --deadline takes seconds, at least 30" >&2; exit 2; }
[[ -d $bundle ]] && bundle=$(cd "$bundle" && pwd)
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
logs=$out/gpu-check
rm -rf "$logs" "$out/gpu-check.tar.gz"
mkdir -p "$logs"
scratch=$(mktemp -d "${TMPDIR:-/tmp}/strider-gpu-check.XXXXXX")
trap 'rm -rf "$scratch"' EXIT

started=$SECONDS
end=$((SECONDS + deadline_s))
pack_s=8 # kept back from every part for the tarball and the table
run=$bundle/run
cuda_root=${CUDA_HOME:-/usr/local/cuda}

say() { printf 'gpu-check: %s\n' "$*" | tee -a "$logs/console.log"; }
# show FILE [PATTERN]: the file's lines (those matching PATTERN), indented, on the console.
show() {
  if [[ -n ${2:-} ]]; then grep -E -- "$2" "$1"; else cat "$1"; fi 2>/dev/null | sed 's/^/gpu-check:   /' |
    tee -a "$logs/console.log"
}

# ---- Parts and their outcomes -----------------------------------------------------------------
parts=() statuses=() seconds=() figures=()
part_started=$SECONDS
begin() { part_started=$SECONDS; say "-- $1"; }
# record PART STATUS FIGURE: one row of the final table.
record() {
  parts+=("$1") statuses+=("$2") seconds+=("$((SECONDS - part_started))") figures+=("$3")
  say "$1: $2${3:+: $3}"
}
# timed CAP_S LOG CMD...: CMD with its output in LOG, under CAP_S or what the deadline leaves of it,
# whichever is less. Sets `status` (CMD's exit status; 124 or 137: killed at its limit) and `limit`;
# returns 1 without running CMD when fewer than 3 s are left.
timed() {
  local cap=$1 log=$2
  shift 2
  limit=$((end - pack_s - SECONDS))
  ((cap < limit)) && limit=$cap
  if ((limit < 3)); then
    echo "not started: $((end - SECONDS)) s left before the deadline" >"$log"
    status=124
    return 1
  fi
  # timeout signals its whole process group (mpirun, its ranks, the sanitizer's target): TERM, then
  # KILL 5 s later.
  timeout -k 5 "$limit" "$@" >"$log" 2>&1 </dev/null
  status=$?
  return 0
}
timed_out() { ((status == 124 || status == 137)); }
# outcome PART LOG PASSED_FIGURE: records passed (status 0), timeout or failed (the log's first
# failure line).
outcome() {
  if ((status == 0)); then
    record "$1" passed "$3"
  elif timed_out; then
    record "$1" timeout "$(head -n 1 "$2" | grep '^not started' || echo "killed after $limit s")"
  else
    record "$1" failed "exit $status: $(grep -m 1 -E 'FAILED|FAIL:|error|Error|REQUIRE|CHECK' "$2" || tail -n 1 "$2")"
  fi
}

say "deadline ${deadline_s} s, bundle $bundle, logs into $out/gpu-check.tar.gz"

# ---- Inventory: printed before anything can fail ----------------------------------------------
begin inventory
# item_limit: seconds for one inventory item, 20 or what the deadline leaves (at least 1).
item_limit() {
  local left=$((end - pack_s - SECONDS))
  echo $((left > 20 ? 20 : left < 1 ? 1 : left))
}
# item NAME COMMAND: COMMAND's output (at most item_limit s), or why there is none; never stops the
# check.
item() {
  local name=$1 text seconds_allowed
  seconds_allowed=$(item_limit)
  text=$(timeout -k 1 "$seconds_allowed" bash -c "$2" 2>&1 </dev/null)
  local item_status=$?
  [[ -n $text ]] || text="(nothing printed, exit $item_status)"
  ((item_status == 124 || item_status == 137)) && text+=" (timed out after $seconds_allowed s)"
  while IFS= read -r line; do say "  $name: $line"; done <<<"$text"
}
export bundle cuda_root
# The CUDA runtime's and NCCL's own answers, asked through ctypes (no GPU needed): KIND PATH.
# shellcheck disable=SC2089,SC2090 # python source, passed as one argument
versions_py='
import ctypes, sys
kind, path = sys.argv[1], sys.argv[2]
lib = ctypes.CDLL(path)
value = ctypes.c_int(0)
if kind == "cudart":
    lib.cudaRuntimeGetVersion(ctypes.byref(value))
    runtime = value.value
    value.value = 0
    lib.cudaDriverGetVersion(ctypes.byref(value))
    driver = value.value
    text = lambda v: "%d.%d" % (v // 1000, v % 1000 // 10)
    print("runtime %s (%s); the driver supports CUDA %s" % (text(runtime), path, text(driver) if driver else "- (no driver loaded)"))
elif kind == "cublas":
    parts = []
    for which in range(3):  # MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL
        lib.cublasGetProperty(which, ctypes.byref(value))
        parts.append(str(value.value))
    print("%s (%s)" % (".".join(parts), path))
else:
    lib.ncclGetVersion(ctypes.byref(value))
    v = value.value
    print("%d.%d.%d (%s)" % (v // 10000, v % 10000 // 100, v % 100, path))
'
# shellcheck disable=SC2090
export versions_py
item host 'echo "$(hostname), $(nproc) cores, $(awk "/MemTotal/ {printf \"%.0f GiB\", \$2 / 1048576}" /proc/meminfo), Linux $(uname -r)"'
item gpu 'command -v nvidia-smi >/dev/null || { echo "nvidia-smi not found"; exit 0; }
  nvidia-smi --query-gpu=index,name,memory.total,driver_version,compute_cap,pci.bus_id --format=csv,noheader ||
    nvidia-smi -L'
item "cuda (driver)" 'command -v nvidia-smi >/dev/null || { echo "nvidia-smi not found"; exit 0; }
  nvidia-smi | grep -oE "Driver Version: [0-9.]+ +CUDA Version: [0-9.]+" | tr -s " "'
item "cuda (bundle)" 'cudart=$(ls "$bundle"/lib/libcudart.so.* 2>/dev/null | head -n 1)
  [[ -n $cudart ]] || { echo "no libcudart in $bundle/lib"; exit 0; }
  python3 -c "$versions_py" cudart "$cudart" || echo "python3 could not ask $cudart"'
item nvcc 'nvcc=$(command -v nvcc || ls "$cuda_root/bin/nvcc" 2>/dev/null)
  if [[ -n $nvcc ]]; then echo "$nvcc: $("$nvcc" --version | grep -o "release [0-9.]*, V[0-9.]*")"; else echo "not found (not needed: the bundle is compiled)"; fi'
item compute-sanitizer 'tool=$(command -v compute-sanitizer || ls "$cuda_root/bin/compute-sanitizer" 2>/dev/null)
  if [[ -n $tool ]]; then echo "$tool: $("$tool" --version | grep -m 1 -i version)"; else echo "not found"; fi'
item nccl 'nccl=$("$bundle/run" sh -c "echo \$STRIDER_BUNDLE_NCCL") || { echo "the bundle found none: $nccl"; exit 0; }
  python3 -c "$versions_py" nccl "$nccl" 2>/dev/null ||
    echo "$(grep -aoE -m 1 "NCCL version [0-9]+\.[0-9]+\.[0-9]+(\+cuda[0-9.]+)?" "$nccl" | head -n 1 | cut -d" " -f3) ($nccl, from its strings)"
  python3 -c "import importlib.metadata as m
for d in m.distributions():
    if d.metadata[\"Name\"].startswith(\"nvidia-nccl\"): print(\"python wheel\", d.metadata[\"Name\"], d.version)" 2>/dev/null'
item cublas 'cublas=$("$bundle/run" sh -c "echo \$STRIDER_BUNDLE_CUBLAS") || { echo "the bundle found none: $cublas"; exit 0; }
  [[ -n $cublas ]] || { echo "not needed (the bundle names no cuBLAS)"; exit 0; }
  python3 -c "$versions_py" cublas "$cublas" 2>/dev/null || echo "$cublas (python3 could not ask it its version)"'
item mpi '"$bundle/run" mpirun --version 2>&1 | head -n 1'
item glibc 'echo "$(getconf GNU_LIBC_VERSION); the bundle needs $(sed -n "s/^needs glibc: //p" "$bundle/MANIFEST.txt" 2>/dev/null)"'
item python 'command -v python3 >/dev/null || { echo "python3 not found"; exit 0; }
  echo "$(python3 --version 2>&1); $(python3 -c "import torch; print(\"torch\", torch.__version__, \"cuda\", torch.version.cuda, \"gpu available:\", torch.cuda.is_available())" 2>&1 | tail -n 1)"'
item manifest '[[ -f $bundle/MANIFEST.txt ]] && sed "/^files:/,\$d" "$bundle/MANIFEST.txt" || echo "no $bundle/MANIFEST.txt"'
gpu_name=$(timeout -k 1 "$(item_limit)" nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n 1)
nccl_version=$(grep -m 1 'gpu-check:   nccl: [0-9]' "$logs/console.log" | awk '{print $3}')
record inventory passed "${gpu_name:-no GPU from nvidia-smi}; NCCL ${nccl_version:-?}"

# ---- The bundle's environment -----------------------------------------------------------------
begin bundle
bundle_ok=0
if [[ ! -x $run ]]; then
  record bundle failed "no $run (make the bundle with scripts/gpu-bundle.sh and carry gpu-bundle/ here)"
else
  timed 30 "$logs/bundle.log" "$run" true
  ((status == 0)) && bundle_ok=1
  outcome bundle "$logs/bundle.log" \
    "$(du -sh "$bundle" | cut -f1), CUDA architectures $(sed -n 's/^cuda architectures: //p' "$bundle/MANIFEST.txt")"
fi

# ---- The probe: whether a GPU works, and how many -----------------------------------------------
begin probe
devices=0 no_gpu=""
if ((!bundle_ok)); then
  no_gpu="the bundle's programs cannot run (see the bundle row)"
  record probe skipped "$no_gpu"
else
  timed 30 "$logs/probe.log" "$run" strider_gpu_probe
  if ((status == 0)); then
    devices=$(tail -n 1 "$logs/probe.log")
    record probe passed "$devices usable GPU(s)"
  elif ((status == 77)); then
    no_gpu=$(tail -n 1 "$logs/probe.log")
    record probe skipped "$no_gpu"
  else
    no_gpu="the probe $(timed_out && echo "timed out" || echo "failed (exit $status)")"
    outcome probe "$logs/probe.log" ""
  fi
fi

# gpu_part PART: true where a GPU works; else records PART skipped with the reason.
gpu_part() {
  begin "$1"
  [[ -z $no_gpu ]] && return 0
  record "$1" skipped "no working GPU: $no_gpu"
  return 1
}
# catch_figure LOG: Catch2's summary line.
catch_figure() { sed 's/\x1b\[[0-9;]*m//g' "$1" | grep -oE '(All tests passed|test cases:).*' | tail -n 1; }

# ---- The GPU tests, as ctest runs them ---------------------------------------------------------
for tag in cuda-vs-cpu overlap device-batches; do
  if gpu_part "tests [$tag]"; then
    timed 120 "$logs/tests-$tag.log" "$run" mpirun --bind-to none -np 1 strider_gpu_tests "[$tag]" --warn NoTests
    outcome "tests [$tag]" "$logs/tests-$tag.log" "$(catch_figure "$logs/tests-$tag.log")"
  fi
done
# all_reduce_figure LOG: the mode the test printed, and Catch2's summary.
all_reduce_figure() {
  echo "$(grep -m 1 -o 'gpu all-reduce mode at .*' "$1"); $(catch_figure "$1")"
}
if gpu_part "tests [allreduce] 2 ranks"; then
  timed 90 "$logs/tests-allreduce-np2.log" "$run" mpirun --bind-to none -np 2 strider_gpu_tests "[allreduce]" --warn NoTests
  outcome "tests [allreduce] 2 ranks" "$logs/tests-allreduce-np2.log" \
    "$(all_reduce_figure "$logs/tests-allreduce-np2.log")$( ((devices >= 2)) || echo " (1 GPU: shared, MPI path)")"
fi

# ---- A NCCL communicator of one rank ----------------------------------------------------------
if gpu_part "nccl 1 rank"; then
  timed 90 "$logs/nccl-one-rank.log" env STRIDER_TEST_NCCL_ONE_RANK=1 "$run" mpirun --bind-to none -np 1 \
    -x STRIDER_TEST_NCCL_ONE_RANK strider_gpu_tests "[allreduce]" --warn NoTests
  if ((status == 0)) && ! grep -q 'gpu all-reduce mode at 1 ranks: nccl' "$logs/nccl-one-rank.log"; then
    record "nccl 1 rank" failed "the all-reduce did not run through NCCL: $(grep -m 1 -o 'gpu all-reduce mode.*' "$logs/nccl-one-rank.log")"
  else
    outcome "nccl 1 rank" "$logs/nccl-one-rank.log" "$(all_reduce_figure "$logs/nccl-one-rank.log")"
  fi
fi

# ---- strider-train --backend cuda against --backend cpu, end to end ------------------------------
begin "end to end"
if ((!bundle_ok)); then
  record "end to end" skipped "$no_gpu"
else
  timed 150 "$logs/end-to-end.log" env -u STRIDER_BUILD_DIR STRIDER_BIN="$bundle/bin" \
    STRIDER_MPIEXEC="$bundle/ompi/bin/mpirun" STRIDER_SOURCE_DIR="$repo" STRIDER_GPU_PROBE="$bundle/bin/strider_gpu_probe" \
    "$run" bash "$repo/tests/gpu/test_train_cuda_vs_cpu.sh"
  show "$logs/end-to-end.log" '^(ok|FAIL|skipped|note|stall)'
  cpu_half=$(grep -m 1 -oE 'ok: 1 rank\(s\), cpu: evaluation accuracy \(margin [-+0-9.]+\)' "$logs/end-to-end.log" | sed 's/^ok: //')
  if ((status == 77)); then
    record "end to end" skipped "CPU half passed ($cpu_half); GPU half: $(grep -m 1 '^skipped' "$logs/end-to-end.log" | sed 's/^skipped: //; s/ (the CPU half passed)//')"
  else
    outcome "end to end" "$logs/end-to-end.log" \
      "$(grep -c '^ok:' "$logs/end-to-end.log") checks; $(grep -m 1 -o 'stall fraction with pinned memory.*' "$logs/end-to-end.log")"
  fi
fi

# ---- Measurements: does the pipeline feed the GPU? ---------------------------------------------
if gpu_part "benchmark copy-bound"; then
  timed 90 "$logs/benchmark-copy-bound.log" "$run" strider_gpu_benchmark --steps 200 --batch 65536 --features 256 \
    --hidden 16 --memory both
  show "$logs/benchmark-copy-bound.log" 'peak|h2d|kernel time'
  # bench_figure RUN: "h2d X GB/s (P% of the peak), pipeline Y GB/s (Q%), overlap O%" of one run.
  bench_figure() {
    sed -n "s/^$1 *h2d \([0-9.]*\) GB\/s (copy stream, \([0-9]*%\) of the pinned peak), pipeline \([0-9.]*\) GB\/s (wall, \([0-9]*%\) of the pinned peak).*overlapped with the previous step \([0-9.]*%\)/h2d \1 GB\/s (\2), pipeline \3 GB\/s (\4), overlap \5/p" \
      "$logs/benchmark-copy-bound.log"
  }
  outcome "benchmark copy-bound" "$logs/benchmark-copy-bound.log" \
    "pinned peak $(grep -o 'pinned [0-9.]* GB/s' "$logs/benchmark-copy-bound.log" | head -n 1 | cut -d' ' -f2) GB/s; pinned staged: $(bench_figure 'pinned staged'); pageable staged: $(bench_figure 'pageable staged')"
fi
if gpu_part "benchmark compute-bound"; then
  # The same shape with the dense layers on cuBLAS (the default) and on strider's own kernels.
  log=$logs/benchmark-compute-bound.log
  : >"$log"
  for dense in cublas kernels; do
    echo "STRIDER_CUDA_DENSE=$dense" >>"$log"
    timed 45 "$log.part" env STRIDER_CUDA_DENSE=$dense "$run" strider_gpu_benchmark --steps 50 --batch 8192 \
      --features 1024 --hidden 512 --memory pinned
    cat "$log.part" >>"$log"
    ((status == 0)) || break
  done
  show "$log" 'STRIDER_CUDA_DENSE|kernel time'
  # dense_figure NAME: "NAME K ms / S ms" (kernel time and step time per step) of that run.
  dense_figure() {
    sed -n "/^STRIDER_CUDA_DENSE=$1/,/^STRIDER_CUDA_DENSE=/s/^pinned staged *kernel time \/ step time: \([0-9.]*\) ms \/ \([0-9.]*\) ms.*/$1 \1 ms \/ \2 ms/p" "$log" | head -n 1
  }
  # A failure or timeout is read from the log of the run that stopped the loop.
  outcome "benchmark compute-bound" "$log.part" "kernel time / step time per step: $(dense_figure cublas); $(dense_figure kernels)"
  rm -f "$log.part"
fi
if gpu_part "train 328 MB"; then
  gen_ranks=$(nproc)
  ((gen_ranks > 8)) && gen_ranks=8
  data=$scratch/features.h5
  timed 60 "$logs/train-gen.log" "$run" mpirun --bind-to none -np "$gen_ranks" strider-gen --kind features --classes 10 \
    --samples 320000 --dim 256 --seed 1 --out "$data" --no-progress
  show "$logs/train-gen.log" 'wrote'
  if ((status != 0)); then
    outcome "train 328 MB" "$logs/train-gen.log" ""
  else
    timed 120 "$logs/train.log" "$run" mpirun --bind-to none -np 1 strider-train --data "$data" --backend cuda \
      --model mlp --hidden 64 --epochs 3 --batch-size 2048 --seed 1 --json "$logs/train.json"
    show "$logs/train.log" 'epoch [0-9]+/|evaluation|warn|error'
    # The last epoch: samples/s, input GB/s (1 KiB per sample) and the stall fraction.
    last=$(grep -o '"samples_per_s":[0-9.eE+]*,"stall_fraction":[0-9.eE+-]*' "$logs/train.json" 2>/dev/null | tail -n 1)
    outcome "train 328 MB" "$logs/train.log" "$(awk -F'[:,]' -v ranks="$gen_ranks" '{printf "epoch 3: %.0f samples/s (%.2f GB/s), stall %.1f%% (generated at %d ranks)", $2, $2 * 1024 / 1e9, 100 * $4, ranks}' <<<"$last")"
  fi
  rm -f "$data"
fi

# ---- compute-sanitizer, last: it takes what time is left -------------------------------------
sanitizer=$(command -v compute-sanitizer || ls "$cuda_root/bin/compute-sanitizer" 2>/dev/null)
for tool in memcheck synccheck; do
  begin "$tool"
  if [[ -n $no_gpu ]]; then
    record "$tool" skipped "no working GPU: $no_gpu (compute-sanitizer: ${sanitizer:-not found})"
    continue
  elif [[ -z $sanitizer ]]; then
    record "$tool" unsupported "compute-sanitizer not found (PATH, $cuda_root/bin)"
    continue
  fi
  log=$logs/sanitizer-$tool.log
  timed 120 "$log" "$run" mpirun --bind-to none -np 1 "$sanitizer" --tool "$tool" --error-exitcode 86 --print-limit 20 \
    "$bundle/bin/strider_gpu_tests" "[cuda-vs-cpu]" --warn NoTests
  summary=$(grep -m 1 -o 'ERROR SUMMARY: [0-9]* error.*' "$log")
  refusal=$(grep -m 1 -iE 'not supported|unsupported|Internal Sanitizer Error|Unable to|Failed to|terminated before first instrumented' "$log")
  if timed_out; then
    outcome "$tool" "$log" ""
  elif [[ -z $summary && -n $refusal ]]; then
    record "$tool" unsupported "$(sed 's/^=* *//' <<<"$refusal")"
  elif ((status == 0)); then
    record "$tool" passed "${summary:-no summary}; $(catch_figure "$log")"
  else
    record "$tool" failed "exit $status: ${summary:-no summary}; $(grep -m 1 -E '^=+ (Invalid|Barrier|Race|Program hit|Error)' "$log" | sed 's/^=* *//')"
  fi
done

# ---- The tarball and the table -----------------------------------------------------------------
failed=0
for ((i = 0; i < ${#parts[@]}; ++i)); do
  [[ ${statuses[i]} == failed || ${statuses[i]} == timeout ]] && failed=$((failed + 1))
done
if ((failed > 0)); then
  exit_code=1 verdict="$failed part(s) failed or timed out"
elif [[ -n $no_gpu ]]; then
  exit_code=77 verdict="no working GPU: $no_gpu"
else
  exit_code=0 verdict="all passed"
fi
{
  printf '%-26s %-11s %5s  %s\n' part status time "key figure"
  for ((i = 0; i < ${#parts[@]}; ++i)); do
    printf '%-26s %-11s %4ss  %s\n' "${parts[i]}" "${statuses[i]}" "${seconds[i]}" "${figures[i]}"
  done
  printf '%-26s %-11s %4ss  %s\n' "gpu-check" "exit $exit_code" "$((SECONDS - started))" "$verdict"
} >"$logs/summary.txt"
cp "$logs/summary.txt" "$scratch/"
if tar -czf "$out/gpu-check.tar.gz" -C "$out" gpu-check 2>"$scratch/tar.err"; then
  rm -rf "$logs"
  echo "gpu-check: logs: $out/gpu-check.tar.gz ($(tar -tzf "$out/gpu-check.tar.gz" | grep -c '[^/]$') files)"
else
  echo "gpu-check: packing the logs failed ($(head -n 1 "$scratch/tar.err")); they are in $logs"
fi
cat "$scratch/summary.txt"
exit "$exit_code"
