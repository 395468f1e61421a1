#!/usr/bin/env bash
# ctest-label: plain-only
# The GPU bundle (scripts/gpu-bundle.sh) made from this build and run as on a bare CUDA machine: in a
# mount namespace where the system's copies of every library the bundle packs (Open MPI's, parallel
# HDF5's, Boost's, libdeflate, the CUDA runtime ...) are hidden file by file (/dev/null bound over
# each), Open MPI's and PMIx's folders, mpirun and orted, /usr/local/cuda and the build's libstrider
# hidden too, and NCCL and cuBLAS found only in stand-ins for NVIDIA's Python wheels. A library missing from the
# bundle fails here, not on the GPU machine. Runs strider-gen and strider-train at 2 ranks through
# the bundle's mpirun (the trace must equal the build's own), strider-inspect, ldd over every packed
# program and library, and the GPU programs, which report their GPU parts skipped with the reason
# where no GPU works. The bundle's size is checked (55 MiB). Last, scripts/gpu-check.sh on the
# bundle: without a GPU it exits 77 after its inventory, the CPU half of the end-to-end test and the
# GPU parts reported skipped with the reason, its logs in one tarball and its table printed last.
# Skipped (77) where the build has no CUDA backend, or without root or mount namespaces.
source "$(dirname "$0")/common.sh"
bundle=$work/bundle
export STRIDER_LOG_LEVEL=warn

if ((EUID != 0)) || ! unshare --mount true 2>/dev/null; then
  echo "skipped: needs root and mount namespaces (to hide the system's libraries)"
  exit 77
fi
status=0
"$STRIDER_SOURCE_DIR/scripts/gpu-bundle.sh" --build "$STRIDER_BUILD_DIR" --out "$bundle" >"$work/bundle.log" 2>&1 || status=$?
if ((status == 77)); then
  echo "$(cat "$work/bundle.log")"
  exit 77
fi
((status == 0)) || { fail "gpu-bundle.sh: exit $status: $(tail -n 3 "$work/bundle.log")"; finish; }
cat "$work/bundle.log"
expect_at_most "bundle size, KiB" "$(du -sk "$bundle" | cut -f1)" $((55 * 1024))
for file in bin/strider-train bin/strider_gpu_tests lib/libstrider.so.0 ompi/bin/orted ompi/bin/mpirun env.sh run; do
  grep -q "  $file\$" "$bundle/MANIFEST.txt" || [[ -L $bundle/$file ]] || fail "the manifest does not list $file"
done
pass "the manifest lists the programs, libstrider, mpirun and orted, env.sh and run"

# The reference: the build's own strider-gen and strider-train, outside the namespace.
mpirun_n 2 "$STRIDER_BIN/strider-gen" --kind features --classes 4 --samples 3000 --dim 16 --seed 2 --out "$work/f.h5" \
  --no-progress >/dev/null
train_args=(--data "$work/f.h5" --backend cpu --epochs 2 --batch-size 32 --seed 3)
mpirun_n 2 "$STRIDER_BIN/strider-train" "${train_args[@]}" --trace-samples "$work/build-trace" >/dev/null 2>&1 ||
  fail "the build's strider-train"

# NCCL from a stand-in for NVIDIA's wheel (nvidia/nccl/lib/libnccl.so.2 on python3's path), and
# cuBLAS from one for NVIDIA's CUDA 13 wheels (nvidia/cu13/lib: hard links where the file system
# allows, cuBLASLt being 540 MB).
nccl=$(sed -n 's/^NCCL_LIBRARY:[A-Z]*=//p' "$STRIDER_BUILD_DIR/CMakeCache.txt")
mkdir -p "$work/site/nvidia/nccl/lib" "$work/site/nvidia/cu13/lib"
cp -L "$(dirname "$nccl")/libnccl.so.2" "$work/site/nvidia/nccl/lib/"
cublas_name=$(sed -n 's/^needs cublas: //p' "$bundle/MANIFEST.txt")
[[ $cublas_name == libcublas.so.* ]] || fail "the manifest names no cuBLAS libstrider opens: '$cublas_name'"
nvcc=$(sed -n 's/^set(CMAKE_CUDA_COMPILER "\(.*\)")$/\1/p' "$STRIDER_BUILD_DIR"/CMakeFiles/*/CMakeCUDACompiler.cmake | head -n 1)
cuda_lib=$(dirname "$(dirname "$(readlink -f "$nvcc")")")/lib64
for name in "$cublas_name" "${cublas_name/libcublas/libcublasLt}"; do
  cp -lL "$cuda_lib/$name" "$work/site/nvidia/cu13/lib/$name" 2>/dev/null || cp -L "$cuda_lib/$name" "$work/site/nvidia/cu13/lib/$name" ||
    fail "no $name in the build's CUDA toolkit ($cuda_lib)"
done

# What is hidden: every library the build's programs and Open MPI's launcher and components load
# from the system (found from them, not from the bundle, so that one the bundle lacks is hidden
# too), except glibc, NCCL and what python3 needs (a machine with a Python has those, and env.sh
# asks python3 for the wheel); then the libraries' folders and the launchers.
# python3's own libraries and its ctypes module's (libffi), with which gpu-check.sh asks the CUDA
# runtime and NCCL for their versions.
python_needs=" $(ldd /usr/bin/python3 "$(/usr/bin/python3 -c 'import _ctypes; print(_ctypes.__file__)')" |
  awk '{print $1}' | tr '\n' ' ') "
ompi_components=$(ompi_info --path all 2>/dev/null | awk '$1 == "Pkglibdir:" {print $2; exit}')
hidden=()
while read -r name path; do
  [[ $python_needs == *" $name "* || $path != /* ]] && continue
  case $name in
    libc.so.* | libm.so.* | libdl.so.* | libpthread.so.* | librt.so.* | libresolv.so.* | libutil.so.* | libanl.so.* | \
      libstdc++.so.* | libgcc_s.so.* | libcuda.so.* | libnccl.so.* | ld-linux*) continue ;;
  esac
  hidden+=("$(readlink -f "$path")")
done < <(ldd "$STRIDER_BIN"/strider-{train,gen,bench,inspect} "$STRIDER_BUILD_DIR"/tests/gpu/strider_gpu_{tests,benchmark,probe} \
  "$(command -v orterun)" "$ompi_components"/*.so 2>/dev/null | awk '$2 == "=>" {print $1, $3}' | sort -u)
hidden+=("$(readlink -f "$STRIDER_BUILD_DIR/src/libstrider.so.0")")
for program in mpirun mpiexec orterun orted; do
  command -v $program >/dev/null && hidden+=("$(readlink -f "$(command -v $program)")")
done
mapfile -t hidden < <(printf '%s\n' "${hidden[@]}" | sort -u)
folders=()
for folder in /usr/lib/x86_64-linux-gnu/openmpi /usr/lib/x86_64-linux-gnu/pmix2 /usr/lib/x86_64-linux-gnu/hdf5 \
  /usr/share/openmpi /usr/local/cuda; do
  [[ -d $folder ]] && folders+=("$(readlink -f "$folder")")
done
echo "hiding ${#hidden[@]} files and ${#folders[@]} folders: ${folders[*]}"

# Inside the namespace: only bash, the bundle and python3 (for the wheel); each result into a file.
cat >"$work/inside.sh" <<'EOF'
set -u
work=$1 bundle=$2
shift 2
for file in $HIDDEN; do mount --bind /dev/null "$file" || { echo "cannot hide $file" >"$work/inside.err"; exit 3; }; done
for folder in $FOLDERS; do mount -t tmpfs tmpfs "$folder" || { echo "cannot hide $folder" >"$work/inside.err"; exit 3; }; done
cd "$work"
run=$bundle/run
$run sh -c 'echo "$STRIDER_BUNDLE_NCCL"' >nccl.out 2>&1
$run sh -c 'echo "$STRIDER_BUNDLE_CUBLAS"' >cublas.out 2>&1
$run strider_gpu_probe >probe.out 2>&1
echo $? >probe.status
$run mpirun -np 2 strider-gen --kind features --classes 4 --samples 3000 --dim 16 --seed 2 --out "$work/g.h5" \
  --no-progress >gen.out 2>&1
echo $? >gen.status
$run mpirun -np 2 strider-train "$@" --trace-samples "$work/bundle-trace" >train.out 2>&1
echo $? >train.status
$run strider-inspect info "$work/f.h5" >inspect.out 2>&1
echo $? >inspect.status
$run strider_gpu_tests >gpu-tests.out 2>&1
echo $? >gpu-tests.status
$run strider_gpu_benchmark >gpu-benchmark.out 2>&1
echo $? >gpu-benchmark.status
bash "$STRIDER_SOURCE_DIR/scripts/gpu-check.sh" --bundle "$bundle" --out "$work/check" --deadline 120 >check.out 2>&1
echo $? >check.status
source "$bundle/env.sh"
ldd "$bundle"/bin/* "$bundle"/lib/*.so* "$bundle"/ompi/bin/orted "$bundle"/ompi/bin/orterun "$bundle"/ompi/lib/openmpi3/*.so \
  "$bundle"/ompi/pmix/*.so >ldd.out 2>&1
EOF
HIDDEN="${hidden[*]}" FOLDERS="${folders[*]}" PYTHONPATH=$work/site timeout -k 5 240 \
  env -u NCCL_ROOT -u CUDA_HOME -u LD_LIBRARY_PATH -u OPAL_PREFIX PATH=/usr/bin:/bin \
  unshare --mount --propagation private bash "$work/inside.sh" "$work" "$bundle" "${train_args[@]}"
[[ -s $work/inside.err ]] && fail "$(cat "$work/inside.err")"

expect_equal "NCCL found in the wheel" "$(cat "$work/nccl.out")" "$work/site/nvidia/nccl/lib/libnccl.so.2"
expect_equal "cuBLAS found in the wheel" "$(cat "$work/cublas.out")" "$work/site/nvidia/cu13/lib/$cublas_name"
expect_equal "strider-gen at 2 ranks through the bundle's mpirun (exit)" "$(cat "$work/gen.status")" 0
[[ -s $work/g.h5 ]] && cmp -s <("$STRIDER_BIN/strider-inspect" info "$work/g.h5" 2>&1 | grep -v '^file') \
  <("$STRIDER_BIN/strider-inspect" info "$work/f.h5" 2>&1 | grep -v '^file') &&
  pass "the bundle's strider-gen wrote what the build's does" || fail "the bundle's strider-gen: $(tail -n 3 "$work/gen.out")"
expect_equal "strider-train at 2 ranks through the bundle (exit)" "$(cat "$work/train.status")" 0
grep -q "accuracy" "$work/train.out" || fail "strider-train through the bundle: $(tail -n 3 "$work/train.out")"
if cmp -s "$work/build-trace.rank0" "$work/bundle-trace.rank0" && cmp -s "$work/build-trace.rank1" "$work/bundle-trace.rank1"; then
  pass "the bundle's strider-train traces what the build's does"
else
  fail "the bundle's strider-train trace differs from the build's"
fi
expect_equal "strider-inspect through the bundle (exit)" "$(cat "$work/inspect.status")" 0
not_found=$(grep -ciE 'not found|error|too short' "$work/ldd.out")
outside=$(grep '=> /' "$work/ldd.out" | awk '{print $3}' | grep -v "^$bundle/" |
  grep -vE '/(libc|libm|libdl|libpthread|librt|libresolv|libutil|libanl)\.so|/ld-linux-x86-64\.so|/libnccl\.so\.2$' |
  grep -vE "^$work/site/nvidia/cu13/lib/libcublas(Lt)?\.so" |
  sort -u | while read -r path; do
    name=$(basename "$path")
    [[ $python_needs == *" $name "* || $name == libstdc++.so.6 || $name == libgcc_s.so.1 ]] || echo "$path"
  done)
expect_equal "ldd over every packed program and library: libraries not found or unloadable" "$not_found" 0
expect_equal "ldd: libraries from outside the bundle (glibc, NCCL, cuBLAS and python3's aside)" "$outside" ""
# The GPU programs: exit 77 with their reason where no GPU works (GPU parts skipped), 0 with a GPU.
for part in probe gpu-tests gpu-benchmark; do
  part_status=$(cat "$work/$part.status")
  case $part_status in
    77) echo "skipped (GPU part): $part: $(grep -m1 -iE 'no CUDA|GPU|skip' "$work/$part.out")" ;;
    0) pass "$part ran on a GPU" ;;
    *) fail "$part through the bundle: exit $part_status: $(tail -n 3 "$work/$part.out")" ;;
  esac
done

# scripts/gpu-check.sh on the bundle where no GPU works (on a machine with one it exits 0 or 1: not
# checked here).
check=$work/check.out
check_status=$(cat "$work/check.status")
if [[ $check_status != 77 && -e /dev/nvidia0 ]]; then
  echo "skipped (GPU part): gpu-check: exit $check_status on a machine with a GPU"
  finish
fi
failures_before=$failures
expect_equal "gpu-check without a GPU (exit)" "$check_status" 77
# The inventory: every item printed, before the first part's outcome.
items_missing=""
for pattern in 'host: .* cores' 'gpu: nvidia-smi not found' 'cuda \(bundle\): runtime [0-9]+\.[0-9]+ .*no driver loaded' \
  'nvcc: not found' 'compute-sanitizer: not found' "nccl: [0-9]+\.[0-9]+\.[0-9]+ \($work/site/nvidia/nccl/lib/libnccl.so.2\)" \
  "cublas: [0-9]+\.[0-9]+\.[0-9]+ \($work/site/nvidia/cu13/lib/$cublas_name\)" 'mpi: mpirun \(Open MPI\) [0-9]' 'glibc: glibc [0-9.]+; the bundle needs GLIBC_' 'python: Python 3' \
  'manifest: cuda architectures: .*90'; do
  grep -qE "^gpu-check:   $pattern" "$check" || items_missing+=" '$pattern'"
done
expect_equal "gpu-check: inventory items not printed" "$items_missing" ""
expect_equal "gpu-check: the first outcome printed, after the inventory" \
  "$(grep -m 1 -E '^gpu-check: [a-z].*: (passed|failed|skipped|unsupported|timeout)' "$check" | cut -d: -f2-3)" " inventory: passed"
# The table, printed last: a header, one row per part, the verdict.
table=$(sed -n '/^part  *status  *time  *key figure$/,$p' "$check")
rows_missing=""
for row in 'inventory +passed' 'bundle +passed' 'probe +skipped +[0-9]+s  no CUDA device \(' \
  'end to end +skipped +[0-9]+s  CPU half passed \(1 rank\(s\), cpu: evaluation accuracy'; do
  grep -qE "^$row" <<<"$table" || rows_missing+=" '$row'"
done
for part in 'tests \[cuda-vs-cpu\]' 'tests \[overlap\]' 'tests \[device-batches\]' 'tests \[allreduce\] 2 ranks' \
  'nccl 1 rank' 'benchmark copy-bound' 'benchmark compute-bound' 'train 328 MB' memcheck synccheck; do
  grep -qE "^$part +skipped +[0-9]+s  no working GPU: no CUDA device \(" <<<"$table" || rows_missing+=" '$part'"
done
expect_equal "gpu-check: table rows missing (GPU parts skipped with the reason)" "$rows_missing" ""
expect_equal "gpu-check: the table's lines (a header, 14 parts, the verdict)" "$(wc -l <<<"$table")" 16
expect_equal "gpu-check: the last line" "$(tail -n 1 "$check" | sed -E 's/  +/ /g; s/ [0-9]+s / Ns /')" \
  "gpu-check exit 77 Ns no working GPU: $(grep -m 1 -o 'no CUDA device (.*)' <<<"$table")"
expect_equal "gpu-check: what its folder holds" "$(ls "$work/check")" gpu-check.tar.gz
expect_equal "gpu-check: the tarball's logs" \
  "$(tar -tzf "$work/check/gpu-check.tar.gz" | grep -E '/(console|bundle|probe|end-to-end)\.log$|/summary\.txt$' | sort | tr '\n' ' ')" \
  "gpu-check/bundle.log gpu-check/console.log gpu-check/end-to-end.log gpu-check/probe.log gpu-check/summary.txt "
((failures == failures_before)) || sed 's/^/  | /' "$check"
finish
