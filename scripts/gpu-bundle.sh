#!/usr/bin/env bash
# Packs a CUDA build of strider into one folder that runs on a bare CUDA machine (a driver, the CUDA
# runtime, a Python with NVIDIA's NCCL wheel; no Open MPI, HDF5 or Boost): nothing is compiled
# there. See --help.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

usage() {
  cat <<'EOF'
Usage: scripts/gpu-bundle.sh [--build DIR] [--out DIR] [--max-mib N]
Packs the build DIR (default build/, CUDA on: STRIDER_ENABLE_CUDA found nvcc and NCCL) into OUT
(default gpu-bundle/, ignored by git), stripped, at most N MiB (default 55):
  bin/      strider-train, strider-gen, strider-bench, strider-inspect and the GPU test programs
  lib/      libstrider and every shared library they need but glibc, libcuda, NCCL and cuBLAS (Open
            MPI, parallel HDF5, Boost, libdeflate, the CUDA runtime, ...); lib/compat/ holds
            libstdc++ and libgcc_s, used only where the machine's are older than the build's
  ompi/     Open MPI's mpirun, orted, MCA components and help files, and PMIx's components
  env.sh    sourced: PATH, LD_LIBRARY_PATH, OPAL_PREFIX and the component paths, libnccl.so.2
            from NCCL_ROOT, the machine's Python wheel (nvidia-nccl-cu*) or the system, in that order,
            and cuBLAS from CUDA_HOME, the CUDA beside nvcc, /usr/local/cuda, the wheels or the system
  run       run CMD...: CMD in that environment (e.g. gpu-bundle/run mpirun -np 1 strider-train ...)
  MANIFEST.txt   the build (CUDA architectures, compilers, versions), the glibc and libstdc++
            versions it needs, and every file with its size
Exit codes: 0 packed; 1 a failure; 77 the build has no CUDA backend (the reason is printed).
EOF
}

build=$repo/build out=$repo/gpu-bundle max_mib=55
while (($#)); do
  case $1 in
    -h | --help) usage; exit 0 ;;
    --build) build=$(cd "${2:?--build needs a folder}" && pwd); shift 2 ;;
    --out) out=${2:?--out needs a folder}; shift 2 ;;
    --max-mib) max_mib=${2:?--max-mib needs a number}; shift 2 ;;
    *) echo "gpu-bundle: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
die() { echo "gpu-bundle: $*" >&2; exit 1; }

[[ -f $build/CMakeCache.txt ]] || die "$build is no CMake build folder (build first: scripts/test.sh or cmake)"
cache() { sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt" | head -n 1; }
if ! grep -q '^#define STRIDER_HAS_CUDA 1' "$build/include/strider/config.hpp" 2>/dev/null; then
  echo "skipped: $build has no CUDA backend (STRIDER_ENABLE_CUDA=$(cache STRIDER_ENABLE_CUDA); nvcc or NCCL not found)"
  exit 77
fi
archs=$(cache CMAKE_CUDA_ARCHITECTURES)
nvcc=$(sed -n 's/^set(CMAKE_CUDA_COMPILER "\(.*\)")$/\1/p' "$build"/CMakeFiles/*/CMakeCUDACompiler.cmake | head -n 1)
[[ ";$archs;" == *";90;"* || ";$archs;" == *";90a;"* ]] ||
  die "the build's CUDA architectures are '$archs': H100/H200 need 90 (cmake -DCMAKE_CUDA_ARCHITECTURES=80;90)"

programs=(bin/strider-train bin/strider-gen bin/strider-bench bin/strider-inspect
  tests/gpu/strider_gpu_tests tests/gpu/strider_gpu_benchmark tests/gpu/strider_gpu_probe)
for program in "${programs[@]}"; do [[ -x $build/$program ]] || die "$build/$program is missing: build it first"; done
ompi_path() { ompi_info --path all 2>/dev/null | awk -v key="$1:" '$1 == key {print $2; exit}'; }
ompi_components=$(ompi_path Pkglibdir)
ompi_share=$(ompi_path Pkgdatadir)
pmix_lib=$(dirname "$(ldconfig -p | awk '/libpmix\.so\.2 / {print $NF; exit}')")
[[ -d $ompi_components && -d $ompi_share ]] || die "Open MPI's components or help files not found ($ompi_components, $ompi_share)"
[[ -d $pmix_lib/pmix ]] || pmix_lib=$(dirname "$(find /usr/lib -name libpmix.so.2 -print -quit)")

rm -rf "$out"
mkdir -p "$out/bin" "$out/lib/compat" "$out/ompi/bin" "$out/ompi/lib/openmpi3" "$out/ompi/share/openmpi" "$out/ompi/pmix"

# Libraries never packed: glibc (the machine's own, with its loader), the driver's libcuda, NCCL (the
# machine's matching one), cuBLAS (part of every CUDA toolkit and wheel set, 600 MB with cuBLASLt),
# and libstdc++/libgcc_s (packed apart, in lib/compat).
skip_library() {
  case $1 in
    linux-vdso.so.* | ld-linux-x86-64.so.* | libc.so.* | libm.so.* | libdl.so.* | libpthread.so.* | librt.so.* | \
      libresolv.so.* | libutil.so.* | libanl.so.* | libcuda.so.* | libnccl.so.* | libcublas.so.* | \
      libcublasLt.so.*) return 0 ;;
  esac
  return 1
}
# Open MPI components not packed: transports and tools for fabrics a one-node GPU check does not use,
# whose libraries (UCX, libfabric, verbs, PSM, Java) a bare machine lacks. ob1 with self, vader and
# tcp carries everything.
skip_component() { # DEPENDENCIES (ldd's output)
  grep -qE 'libuc[pst]|libfabric|libibverbs|librdmacm|libpsm|libjvm|libcuda\.so|not found' <<<"$1"
}

declare -A packed=()
pack_dependencies() { # FILE [DEPENDENCIES]: every shared library FILE needs (ldd's closure, or the
  # given ldd output of FILE), into lib/ or lib/compat/
  local name path dependencies=${2:-$(ldd "$1")}
  while read -r name path; do
    [[ -n $path && -f $path ]] || continue
    skip_library "$name" && continue
    [[ -n ${packed[$name]:-} ]] && continue
    packed[$name]=$path
    case $name in
      libstdc++.so.* | libgcc_s.so.*) cp -L "$path" "$out/lib/compat/$name" ;;
      *) cp -L "$path" "$out/lib/$name" && strip --strip-unneeded "$out/lib/$name" 2>/dev/null || true ;;
    esac
  done < <(awk '$2 == "=>" {print $1, $3}' <<<"$dependencies")
}

for program in "${programs[@]}"; do
  strip -o "$out/bin/$(basename "$program")" "$build/$program"
  pack_dependencies "$build/$program"
done
# libstrider from the build (ldd resolved it there through the RUNPATH), stripped.
strip -o "$out/lib/libstrider.so.0" "$(readlink -f "$build/src/libstrider.so.0")"

# Open MPI: the launcher and the daemon, the components it loads, its help files; PMIx's components.
cp -L "$(command -v orterun)" "$out/ompi/bin/orterun"
ln -s orterun "$out/ompi/bin/mpirun"
cp -L "$(command -v orted)" "$out/ompi/bin/orted"
pack_dependencies "$(command -v orterun)"
pack_dependencies "$(command -v orted)"
skipped_components=()
# One ldd over every component (much faster than one each), split at its "FILE:" lines.
declare -A component_dependencies=()
current=""
while IFS= read -r line; do
  if [[ $line == "$ompi_components"/*: ]]; then
    current=${line%:}
  elif [[ -n $current ]]; then
    component_dependencies[$current]+=$line$'\n'
  fi
done < <(ldd "$ompi_components"/*.so 2>&1)
for component in "$ompi_components"/*.so; do
  dependencies=${component_dependencies[$component]:-}
  if skip_component "$dependencies"; then
    skipped_components+=("$(basename "$component" .so)")
    continue
  fi
  cp -L "$component" "$out/ompi/lib/openmpi3/"
  pack_dependencies "$component" "$dependencies"
done
for component in "$pmix_lib"/pmix/*.so; do
  [[ -e $component ]] || continue
  cp -L "$component" "$out/ompi/pmix/"
  pack_dependencies "$component"
done
cp -r "$ompi_share"/. "$out/ompi/share/openmpi/"
if [[ -d /usr/share/pmix ]]; then mkdir -p "$out/ompi/share/pmix" && cp -r /usr/share/pmix/. "$out/ompi/share/pmix/"; fi

# What the packed code needs of the machine's glibc and libstdc++ (the highest symbol versions).
highest() { # PREFIX FILES...: the highest PREFIX_x.y[.z] version the files' dynamic symbols name
  local prefix=$1
  shift
  objdump -T "$@" 2>/dev/null | grep -oE "\(${prefix}_[0-9.]+\)" | tr -d '()' | sort -u -V | tail -n 1
}
mapfile -t elves < <(find "$out/bin" "$out/lib" "$out/ompi" -maxdepth 2 -type f \( -perm -u+x -o -name '*.so*' \) ! -path '*/compat/*')
needs_glibc=$(highest GLIBC "${elves[@]}")
needs_glibcxx=$(highest GLIBCXX "${elves[@]}")

cat >"$out/env.sh" <<'EOF'
# Sourced (by ./run or by hand): the environment the bundle's programs run in. Prints one line and
# returns 1 when the machine cannot run them (glibc too old, no libnccl.so.2, no cuBLAS).
bundle=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bundle_need() { sed -n "s/^needs $1: //p" "$bundle/MANIFEST.txt"; }
# glibc: the machine's must be at least the build's.
bundle_glibc=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
if [[ -n $(bundle_need glibc) && $(printf '%s\n' "$(bundle_need glibc | sed 's/GLIBC_//')" "$bundle_glibc" | sort -V | head -n 1) != "$(bundle_need glibc | sed 's/GLIBC_//')" ]]; then
  echo "gpu-bundle: this machine's glibc is $bundle_glibc but the bundle needs $(bundle_need glibc); build the bundle on a system with an older glibc" >&2
  return 1
fi
# NCCL: NCCL_ROOT, then the Python wheel (python3 on PATH, asked before LD_LIBRARY_PATH changes), then
# the system's loader cache.
bundle_nccl=""
for candidate in ${NCCL_ROOT:+"$NCCL_ROOT/lib" "$NCCL_ROOT/lib64" "$NCCL_ROOT"}; do
  [[ -e $candidate/libnccl.so.2 ]] && bundle_nccl=$candidate && break
done
if [[ -z $bundle_nccl ]] && command -v python3 >/dev/null; then
  bundle_nccl=$(python3 -c 'import os, nvidia.nccl as n; print(next(os.path.join(p, "lib") for p in n.__path__ if os.path.exists(os.path.join(p, "lib", "libnccl.so.2"))))' 2>/dev/null) || bundle_nccl=""
fi
if [[ -z $bundle_nccl ]]; then
  bundle_nccl=$(dirname "$(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2 / {print $NF; exit}')" 2>/dev/null)
  [[ $bundle_nccl == . ]] && bundle_nccl=""
fi
if [[ -z $bundle_nccl ]]; then
  echo "gpu-bundle: no libnccl.so.2: set NCCL_ROOT, or install NVIDIA's wheel (pip install nvidia-nccl-cu13) for python3 on PATH" >&2
  return 1
fi
export STRIDER_BUNDLE_NCCL=$bundle_nccl/libnccl.so.2
# cuBLAS (the version libstrider names): CUDA_HOME, the CUDA beside nvcc, /usr/local/cuda, the Python
# wheels (nvidia-cublas*), then the system's loader cache.
unset STRIDER_BUNDLE_CUBLAS
bundle_cublas="" bundle_cublas_name=$(bundle_need cublas)
if [[ -n $bundle_cublas_name ]]; then
  bundle_nvcc=$(readlink -f "$(command -v nvcc 2>/dev/null)" 2>/dev/null)
  for candidate in ${CUDA_HOME:+"$CUDA_HOME/lib64" "$CUDA_HOME/lib"} ${bundle_nvcc:+"$(dirname "$(dirname "$bundle_nvcc")")/lib64"} \
    /usr/local/cuda/lib64 /usr/local/cuda/lib; do
    [[ -f $candidate/$bundle_cublas_name && -s $candidate/$bundle_cublas_name ]] && bundle_cublas=$candidate && break
  done
  if [[ -z $bundle_cublas ]] && command -v python3 >/dev/null; then
    bundle_cublas=$(python3 -c 'import glob, os, sys, nvidia; print(next(os.path.dirname(f) for d in nvidia.__path__ for f in glob.glob(os.path.join(d, "*", "lib", sys.argv[1]))))' "$bundle_cublas_name" 2>/dev/null) || bundle_cublas=""
  fi
  if [[ -z $bundle_cublas ]]; then
    bundle_cublas=$(dirname "$(ldconfig -p 2>/dev/null | awk -v name="$bundle_cublas_name" '$1 == name {print $NF; exit}')" 2>/dev/null)
    [[ $bundle_cublas == . ]] && bundle_cublas=""
  fi
  if [[ -z $bundle_cublas ]]; then
    echo "gpu-bundle: no $bundle_cublas_name: set CUDA_HOME to a CUDA toolkit, or install NVIDIA's wheel (pip install nvidia-cublas) for python3 on PATH" >&2
    return 1
  fi
  export STRIDER_BUNDLE_CUBLAS=$bundle_cublas/$bundle_cublas_name
fi
# libstdc++: the machine's unless it lacks the version the build needs.
bundle_compat=""
bundle_libstdcxx=$(ldconfig -p 2>/dev/null | awk '/libstdc\+\+\.so\.6 .*x86-64/ {print $NF; exit}')
if [[ -n $(bundle_need libstdc++) ]] && ! { [[ -n $bundle_libstdcxx ]] && grep -qa "$(bundle_need libstdc++)" "$bundle_libstdcxx"; }; then
  bundle_compat=$bundle/lib/compat:
fi
export PATH=$bundle/bin:$bundle/ompi/bin:$PATH
export LD_LIBRARY_PATH=$bundle_compat$bundle/lib:$bundle_nccl${bundle_cublas:+:$bundle_cublas}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export OPAL_PREFIX=$bundle/ompi
export OMPI_MCA_mca_base_component_path=$bundle/ompi/lib/openmpi3
export PMIX_MCA_mca_base_component_path=$bundle/ompi/pmix
export OPAL_PKGDATADIR=$bundle/ompi/share/openmpi
export PMIX_INSTALL_PREFIX=$bundle/ompi
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader,tcp OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_orte_launch_agent=$bundle/ompi/bin/orted
if ((EUID == 0)); then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
export OMPI_MCA_rmaps_base_oversubscribe=1
unset bundle_glibc bundle_compat bundle_libstdcxx bundle_cublas bundle_cublas_name bundle_nvcc candidate
EOF

cat >"$out/run" <<'EOF'
#!/usr/bin/env bash
# run CMD...: CMD in the bundle's environment (env.sh).
source "$(dirname "${BASH_SOURCE[0]}")/env.sh" || exit 2
exec "$@"
EOF
chmod +x "$out/run"

# Open MPI's help files sit under ${datadir}/openmpi of its prefix: with OPAL_PREFIX=ompi they are
# looked up in ompi/share/openmpi, where they are.
{
  echo "strider GPU bundle"
  echo "build: $build ($(cache CMAKE_BUILD_TYPE))"
  echo "cuda architectures: $archs"
  echo "nvcc: $("$nvcc" --version | grep -o 'release [0-9.]*')"
  echo "c++: $("$(cache CMAKE_CXX_COMPILER)" --version | head -n 1)"
  echo "open mpi: $(orterun --version 2>/dev/null | head -n 1)"
  echo "nccl at build time: $(grep -hE '^#define NCCL_(MAJOR|MINOR|PATCH) ' "$(cache NCCL_INCLUDE_DIR)/nccl.h" | awk '{print $3}' | paste -sd.) ($(cache NCCL_LIBRARY))"
  echo "needs glibc: $needs_glibc"
  echo "needs libstdc++: $needs_glibcxx"
  # libstrider opens cuBLAS at run time by this name (dense_layers.cpp), so ldd does not list it.
  echo "needs cublas: $(grep -aom 1 'libcublas\.so\.[0-9][0-9]*' "$out/lib/libstrider.so.0" | head -n 1)"
  echo "open mpi components left out (fabric libraries a bare machine lacks): ${skipped_components[*]}"
  echo "files:"
  (cd "$out" && find . -type f -printf '%10s  %P\n' | sort -k2)
} >"$out/MANIFEST.txt"

size_kib=$(du -sk "$out" | cut -f1)
echo "gpu-bundle: $out: $((size_kib / 1024)) MiB, $(find "$out" -type f | wc -l) files (needs $needs_glibc, $needs_glibcxx)"
((size_kib <= max_mib * 1024)) || die "the bundle is $((size_kib / 1024)) MiB, over its $max_mib MiB (what travels to a GPU machine is at most 64 MiB with the working tree)"
