# Shared by the scripts (sourced): repository root, build folder, and the MPI environment for
# running as root in a container (DESIGN.md section 4). Never set inside the library.
repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${STRIDER_BUILD_DIR:-$repo_root/build}
jobs=${STRIDER_JOBS:-$(nproc)}

if ((EUID == 0)); then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
export OMPI_MCA_rmaps_base_oversubscribe=${OMPI_MCA_rmaps_base_oversubscribe:-1}
export OMPI_MCA_pml=${OMPI_MCA_pml:-ob1} OMPI_MCA_btl=${OMPI_MCA_btl:-self,vader}
export OMPI_MCA_btl_vader_single_copy_mechanism=${OMPI_MCA_btl_vader_single_copy_mechanism:-none}
# Ranks may outnumber cores (CI has 2): yield instead of spinning in collectives.
export OMPI_MCA_mpi_yield_when_idle=${OMPI_MCA_mpi_yield_when_idle:-1}

# configure_and_build BUILD_DIR [cmake options...]   (STRIDER_BUILD_TARGETS: only these targets)
configure_and_build() {
  local dir=$1
  shift
  local generator=() targets=()
  command -v ninja >/dev/null && [[ ! -f $dir/CMakeCache.txt || -f $dir/build.ninja ]] && generator=(-G Ninja)
  [[ -n ${STRIDER_BUILD_TARGETS:-} ]] && read -r -a targets <<<"--target $STRIDER_BUILD_TARGETS"
  cmake -S "$repo_root" -B "$dir" "${generator[@]}" "$@"
  cmake --build "$dir" --parallel "$jobs" "${targets[@]}"
}

# run_stage NAME COMMAND [ARGS...]: runs COMMAND (a program or a function), prints how long it took,
# and appends "NAME SECONDS EXIT" to $STRIDER_STAGE_LOG when that is set (.ci/run's table). Returns
# COMMAND's exit status.
run_stage() {
  local name=$1 start=$SECONDS status=0
  shift
  "$@" || status=$?
  echo "stage $name: $((SECONDS - start)) s$( ((status == 0)) || echo ", exit $status")"
  [[ -n ${STRIDER_STAGE_LOG:-} ]] && echo "$name $((SECONDS - start)) $status" >>"$STRIDER_STAGE_LOG"
  return $status
}

# strider_ctest BUILD_DIR JUNIT_NAME [ctest args...]: ctest over BUILD_DIR in parallel, failing when no
# test matches (--no-tests=error), with a JUnit report at BUILD_DIR/JUNIT_NAME.xml that
# .ci/check-skips.py reads (which tests skipped, and why). ctest's slots are half a core each: every
# entry's PROCESSORS is the cores it keeps busy in such slots (tests/test-times.txt).
strider_ctest() {
  local dir=$1 junit=$2
  shift 2
  ctest --test-dir "$dir" --output-on-failure --no-tests=error --parallel "$((2 * jobs))" \
    --output-junit "$dir/$junit.xml" "$@"
}
