# Shared by the benchmark scripts (sourced, with $here set to bench/scripts): the MPI environment of
# scripts/common.sh, where the apps, the data files and the results are (STRIDER_BIN, BENCH_DIR,
# BENCH_OUT), the Python that runs the helpers, and generate.
# shellcheck source=scripts/common.sh
source "$here/../../scripts/common.sh"
bin=${STRIDER_BIN:-$build_dir/bin}
# The build (or install) folder the apps come from, which may be outside the repository.
bench_build=$(cd "$bin/.." && pwd)
# The libstrider the apps load (as ldd resolves it; a build tree's src/ or an install's lib/ when the
# apps link it statically) and the folder of its generated strider/config.hpp, for the benchmark
# programs compiled against it.
strider_lib_dir() {
  local lib folder
  lib=$(ldd "$bin/strider-bench" 2>/dev/null | awk '$1 ~ /^libstrider\.so/ && $3 ~ /^\// { print $3; exit }')
  if [[ -n $lib ]]; then
    dirname "$(readlink -f "$lib")"
    return
  fi
  for folder in "$bench_build/src" "$bench_build/lib" "$bench_build/lib64"; do
    [[ -e $folder/libstrider.so || -e $folder/libstrider.a ]] && { echo "$folder"; return; }
  done
  echo "no libstrider for $bin/strider-bench (looked in ldd's answer and $bench_build/{src,lib,lib64})" >&2
  return 1
}
strider_config_include() {
  local folder
  for folder in "$bench_build/include" "$(dirname "$1")/include"; do
    [[ -f $folder/strider/config.hpp ]] && { echo "$folder"; return; }
  done
  echo "no generated strider/config.hpp beside $bench_build or $1" >&2
  return 1
}
data=${BENCH_DIR:-/tmp/strider-bench}
out=${BENCH_OUT:-$data/results}
python=/usr/bin/python3

# generate NAME strider-gen options...: $data/NAME.h5 made at 2 ranks, kept while the options stay the
# same (the caller's log function names what is made; strider-gen's output goes to $out/logs).
generate() {
  local name=$1 file=$data/$1.h5
  shift
  if [[ -f $file && -f $file.options && $(cat "$file.options") == "$*" ]]; then return; fi
  log "generating $name.h5: $*"
  rm -f "$file" "$file.options"
  mpirun --bind-to none -np 2 "$bin/strider-gen" --out "$file" --seed 1 --no-progress "$@" >"$out/logs/gen-$name.log" 2>&1
  echo "$*" >"$file.options"
}
