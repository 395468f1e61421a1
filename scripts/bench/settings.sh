# Shared by the benchmark scripts (sourced, with $here set to scripts/bench): the MPI environment of
# scripts/common.sh, where the apps, the data files and the results are (STRIDER_BIN, BENCH_DIR,
# BENCH_OUT), the Python that runs the helpers, and generate.
# shellcheck source=scripts/common.sh
source "$here/../common.sh"
bin=${STRIDER_BIN:-$build_dir/bin}
# The build folder the apps come from (its libstrider and generated headers), which may be outside
# the repository.
bench_build=$(cd "$bin/.." && pwd)
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
