#!/usr/bin/env bash
# Mutation runs: proves that the tests catch broken code. Applies each mutant of a list (by default
# scripts/mutation/mutants.txt: a file, an exact text in it, its replacement and the tests that
# cover it), one at a time, to a scratch git worktree of a commit; rebuilds what changed; runs the
# covering tests; and says which mutants survived (their tests still passed). The tree you work in
# is never touched. Not part of CI: the whole list takes about an hour or more on 2 cores.
#
# Usage: scripts/mutation-check.sh [options]
#   --area A[,B...]   only the mutants of these areas (sampling io pipeline train comm device core)
#   --id ID[,ID...]   only these mutants
#   --list            print the selected mutants (id, area, file, tests) and exit
#   --check           check the list without building: its syntax, and that every selected mutant's
#                     exact text occurs exactly once in its file under --source; exit
#   --show            print each selected mutant as a diff against its file under --source; exit
#   --mutants FILE    the list (default scripts/mutation/mutants.txt)
#   --source DIR      the tree --check and --show read (default this repository's working tree)
#   --commit REV      the commit to mutate (default HEAD); uncommitted changes are not tested
#   --workdir DIR     scratch worktree, build folder and logs (default build-mutation/ here)
#   --timeout S       time limit of each test command (default 10x its time on the unmutated
#                     build, at least 120 s); a mutant that makes a test exceed it is killed (timeout)
#   --equivalent      also run the mutants marked equivalent that name covering tests (each
#                     should survive them)
#   --clean           remove the scratch worktree and build folder, and exit
# Exit status: 0 every mutant run was killed; 1 some survived or did not build; 2 a usage error,
# a stale or malformed list, or a covering test that fails without any mutant.
#
# The list: blocks separated by blank lines, one "key: value" per line, '#' starts a comment line.
#   id:          a unique name (lower case, digits, '-')
#   area:        sampling | io | pipeline | train | comm | device | core
#   file:        the mutated file, from the repository root
#   find:        the exact text to replace; it must occur exactly once in the file
#   find+:       continues `find` on a new line (repeatable, so a mutant can span lines)
#   replace:     the replacement (may be empty); replace+: continues it on a new line
#   test:        a covering test (repeatable; run in order, the first failure kills the mutant):
#                  unit SPEC         the Catch2 unit tests with the test spec SPEC ("[tag]~[slow]")
#                  mpi RANKS SPEC    the Catch2 MPI tests under mpirun -np RANKS
#                  ctest REGEX       the ctest entries matching REGEX (e.g. an integration script)
#   equivalent:  why no test can tell this mutant from the original; such a mutant is not run
#                (unless --equivalent, with its test lines) and counts apart from killed and survived
#   note:        what the mutant models (free text)
set -euo pipefail
# The whole script is one group, read before it runs: editing the script (or checking out another
# commit) while a run goes on cannot change the running one.
{
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

areas_known=(sampling io pipeline train comm device core)
list=$repo_root/scripts/mutation/mutants.txt
source_root=$repo_root
workdir=$repo_root/build-mutation
commit_arg=HEAD
mode=run
timeout_fixed=""
run_equivalent=0
selected_areas=()
selected_ids=()

usage_error() {
  echo "mutation-check: $*" >&2
  echo "usage: scripts/mutation-check.sh [--area A] [--id ID] [--list | --check | --show | --clean] [--mutants FILE]" \
    "[--source DIR] [--commit REV] [--workdir DIR] [--timeout S] [--equivalent]" >&2
  exit 2
}

while (($#)); do
  case $1 in
    --area | --id | --mutants | --source | --commit | --workdir | --timeout)
      (($# >= 2)) || usage_error "$1 needs a value"
      case $1 in
        --area) IFS=, read -r -a more <<<"$2" && selected_areas+=("${more[@]}") ;;
        --id) IFS=, read -r -a more <<<"$2" && selected_ids+=("${more[@]}") ;;
        --mutants) list=$2 ;;
        --source) source_root=$2 ;;
        --commit) commit_arg=$2 ;;
        --workdir) workdir=$2 ;;
        --timeout) timeout_fixed=$2 ;;
      esac
      shift 2
      ;;
    --list) mode=list && shift ;;
    --check) mode=check && shift ;;
    --show) mode=show && shift ;;
    --clean) mode=clean && shift ;;
    --equivalent) run_equivalent=1 && shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' && exit 0 ;;
    *) usage_error "unknown argument '$1'" ;;
  esac
done
for area in "${selected_areas[@]}"; do
  [[ " ${areas_known[*]} " == *" $area "* ]] || usage_error "unknown area '$area' (${areas_known[*]})"
done
[[ -z $timeout_fixed || $timeout_fixed =~ ^[1-9][0-9]*$ ]] || usage_error "--timeout needs whole seconds, got '$timeout_fixed'"

# ---- The list ------------------------------------------------------------------------------------

m_id=() m_area=() m_file=() m_find=() m_replace=() m_tests=() m_equivalent=() m_line=()
list_errors=()

# Parse state of the block being read (has_*: whether the key was given).
block_reset() {
  b_line=0 b_id="" b_area="" b_file="" b_find="" b_replace="" b_tests="" b_equivalent=""
  has_find=0 has_replace=0 has_equivalent=0 last_key=""
}

list_error() { list_errors+=("$list:$1: $2"); }

block_end() {
  ((b_line > 0)) || return 0
  local where=$b_line name=${b_id:-"(no id)"} spec k
  [[ -n $b_id ]] || list_error "$where" "a mutant without id:"
  [[ -z $b_id || $b_id =~ ^[a-z0-9][a-z0-9-]*$ ]] || list_error "$where" "$name: the id may hold only a-z, 0-9 and '-'"
  for ((k = 0; k < ${#m_id[@]}; k++)); do
    [[ ${m_id[k]} != "$b_id" ]] || list_error "$where" "$name: the id is used already (line ${m_line[k]})"
  done
  [[ " ${areas_known[*]} " == *" $b_area "* ]] ||
    list_error "$where" "$name: area '$b_area' is none of ${areas_known[*]}"
  [[ -n $b_file ]] || list_error "$where" "$name: no file"
  ((has_find)) && [[ -n $b_find ]] || list_error "$where" "$name: no find text"
  ((has_replace)) || list_error "$where" "$name: no replace line (an empty one deletes the text)"
  [[ $b_find != "$b_replace" ]] || list_error "$where" "$name: the replacement equals the text"
  if ((has_equivalent)) && [[ -z $b_equivalent ]]; then list_error "$where" "$name: equivalent needs a reason"; fi
  [[ -n $b_tests || -n $b_equivalent ]] || list_error "$where" "$name: no test covers it (and it is not equivalent)"
  while IFS= read -r spec; do
    [[ -z $spec || $spec =~ ^unit\ [^\ ].*$ || $spec =~ ^mpi\ [1-4]\ [^\ ].*$ || $spec =~ ^ctest\ [^\ ].*$ ]] ||
      list_error "$where" "$name: bad test '$spec' (unit SPEC, mpi RANKS SPEC or ctest REGEX)"
  done <<<"$b_tests"
  m_id+=("$b_id") m_area+=("$b_area") m_file+=("$b_file") m_find+=("$b_find") m_replace+=("$b_replace")
  m_tests+=("$b_tests") m_equivalent+=("$b_equivalent") m_line+=("$b_line")
  block_reset
}

parse_list() {
  [[ -f $list ]] || usage_error "no mutant list at $list"
  local line number=0 key value pattern='^([a-z+]+):[ ]?(.*)$'
  block_reset
  while IFS= read -r line || [[ -n $line ]]; do
    number=$((number + 1))
    if [[ $line =~ ^[[:space:]]*$ ]]; then
      block_end
      continue
    fi
    [[ $line == '#'* ]] && continue
    if [[ ! $line =~ $pattern ]]; then
      list_error "$number" "expected 'key: value', got '$line'"
      continue
    fi
    key=${BASH_REMATCH[1]} value=${BASH_REMATCH[2]}
    ((b_line > 0)) || b_line=$number
    case $key in
      id) b_id=$value ;;
      area) b_area=$value ;;
      file) b_file=$value ;;
      find) b_find=$value has_find=1 ;;
      replace) b_replace=$value has_replace=1 ;;
      find+ | replace+)
        if [[ $last_key != "${key%+}" && $last_key != "$key" ]]; then
          list_error "$number" "$key must follow ${key%+} or another $key"
        elif [[ $key == find+ ]]; then
          b_find+=$'\n'$value
        else
          b_replace+=$'\n'$value
        fi
        ;;
      test) b_tests+=${b_tests:+$'\n'}$value ;;
      equivalent) b_equivalent=$value has_equivalent=1 ;;
      note) ;;
      *) list_error "$number" "unknown key '$key'" ;;
    esac
    [[ $key == *+ ]] && last_key=${key%+} || last_key=$key
  done <"$list"
  block_end
  if ((${#list_errors[@]})); then
    echo "mutation-check: the list $list is malformed:" >&2
    printf '  %s\n' "${list_errors[@]}" >&2
    exit 2
  fi
}

# The indices of the mutants selected by --area and --id.
select_mutants() {
  selected=()
  local k area id
  for id in "${selected_ids[@]}"; do
    local found=0
    for ((k = 0; k < ${#m_id[@]}; k++)); do [[ ${m_id[k]} == "$id" ]] && found=1; done
    ((found)) || usage_error "no mutant '$id' in $list"
  done
  for ((k = 0; k < ${#m_id[@]}; k++)); do
    if ((${#selected_areas[@]})); then
      [[ " ${selected_areas[*]} " == *" ${m_area[k]} "* ]] || continue
    fi
    if ((${#selected_ids[@]})); then
      [[ " ${selected_ids[*]} " == *" ${m_id[k]} "* ]] || continue
    fi
    selected+=("$k")
  done
  ((${#selected[@]})) || usage_error "no mutant selected"
}

# ---- Texts in files ------------------------------------------------------------------------------

# occurrences TEXT PATTERN: how many times PATTERN occurs in TEXT (not overlapping).
occurrences() {
  local rest=$1 count=0
  while [[ $rest == *"$2"* ]]; do
    rest=${rest#*"$2"}
    count=$((count + 1))
  done
  echo "$count"
}

# file_text PATH: sets `text` to the file's bytes, trailing newlines included.
file_text() {
  text=""
  IFS= read -r -d '' text <"$1" || true
}

# mutate K PATH: sets `text` to the file's bytes with mutant K applied, and `where` to FILE:LINE of
# the change (the text occurs once: check_texts ran).
mutate() {
  file_text "$2"
  local prefix=${text%%"${m_find[$1]}"*} newlines
  newlines=${prefix//[^$'\n']/}
  where="${m_file[$1]}:$((${#newlines} + 1))"
  text=$prefix${m_replace[$1]}${text#*"${m_find[$1]}"}
}

# check_texts ROOT: every selected mutant's text occurs exactly once in ROOT/file; names each one
# that does not (stale: the code moved on) and exits 2.
check_texts() {
  local root=$1 k problems=()
  for k in "${selected[@]}"; do
    local path=$root/${m_file[k]} where="${m_id[k]} ($list:${m_line[k]})"
    if [[ ! -f $path ]]; then
      problems+=("stale mutant $where: ${m_file[k]} does not exist")
      continue
    fi
    file_text "$path"
    local found
    found=$(occurrences "$text" "${m_find[k]}")
    if ((found == 0)); then
      problems+=("stale mutant $where: its text is no longer in ${m_file[k]}:"$'\n'"$(sed 's/^/      | /' <<<"${m_find[k]}")")
    elif ((found > 1)); then
      problems+=("ambiguous mutant $where: its text occurs $found times in ${m_file[k]}; lengthen it")
    fi
  done
  if ((${#problems[@]})); then
    echo "mutation-check: ${#problems[@]} mutant(s) do not match the code in $root; update $list:" >&2
    printf '  %s\n' "${problems[@]}" >&2
    exit 2
  fi
}

# ---- Modes that build nothing --------------------------------------------------------------------

parse_list

if [[ $mode == clean ]]; then
  if [[ -e $workdir/tree ]]; then git -C "$repo_root" worktree remove --force "$workdir/tree" || true; fi
  git -C "$repo_root" worktree prune
  rm -rf "$workdir"
  echo "mutation-check: removed $workdir"
  exit 0
fi

select_mutants

if [[ $mode == list ]]; then
  printf '%-40s %-9s %-44s %s\n' ID AREA FILE TESTS
  for k in "${selected[@]}"; do
    tests=$(paste -sd ';' <<<"${m_tests[k]}")
    [[ -n ${m_equivalent[k]} ]] && tests="(equivalent: ${m_equivalent[k]})"
    printf '%-40s %-9s %-44s %s\n' "${m_id[k]}" "${m_area[k]}" "${m_file[k]}" "$tests"
  done
  echo "${#selected[@]} of ${#m_id[@]} mutants"
  exit 0
fi

if [[ $mode == check ]]; then
  check_texts "$source_root"
  echo "mutation-check: ${#selected[@]} mutant(s) of $list match the code in $source_root"
  exit 0
fi

if [[ $mode == show ]]; then
  check_texts "$source_root"
  for k in "${selected[@]}"; do
    mutate "$k" "$source_root/${m_file[k]}"
    echo "== ${m_id[k]} (${m_area[k]}) at $where${m_equivalent[k]:+, equivalent: ${m_equivalent[k]}}"
    diff -u --label "a/${m_file[k]}" --label "b/${m_file[k]}" "$source_root/${m_file[k]}" - < <(printf '%s' "$text") || true
  done
  exit 0
fi

# ---- The scratch worktree and its build ----------------------------------------------------------

tree=$workdir/tree
build=$workdir/build
logs=$workdir/logs
commit=$(git -C "$repo_root" rev-parse --verify --quiet "$commit_arg^{commit}") || usage_error "no commit '$commit_arg'"
mkdir -p "$workdir" "$logs"
workdir=$(cd "$workdir" && pwd)
tree=$workdir/tree build=$workdir/build logs=$workdir/logs

if ! git -C "$repo_root" diff --quiet HEAD -- 2>/dev/null && [[ $commit_arg == HEAD ]]; then
  echo "mutation-check: note: uncommitted changes in $repo_root are not part of the run (it mutates $commit)"
fi
if [[ -e $tree ]]; then
  if [[ $(git -C "$tree" rev-parse --show-toplevel 2>/dev/null) != "$tree" ]]; then
    echo "mutation-check: $tree is not a git worktree; remove it (scripts/mutation-check.sh --clean)" >&2
    exit 2
  fi
  git -C "$tree" checkout -q -f --detach "$commit"
  git -C "$tree" clean -q -f -d
else
  git -C "$repo_root" worktree add -q --detach "$tree" "$commit"
fi

# The tree holds the commit, unchanged, whatever happens to this script.
restore_tree() { git -C "$tree" checkout -q -f -- . 2>/dev/null || true; }
trap restore_tree EXIT
trap 'restore_tree; exit 130' INT TERM

check_texts "$tree"

echo "mutation-check: commit $(git -C "$tree" log -1 --format='%h %cs %s' "$commit")"
echo "mutation-check: building the unmutated tree in $build (log: $logs/build-unmutated.log)"
if ! {
  if [[ ! -f $build/CMakeCache.txt ]]; then
    cmake -S "$tree" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRIDER_BUILD_TESTS=ON \
      -DSTRIDER_ENABLE_CUDA=OFF
  fi
  cmake --build "$build" --parallel "$jobs"
} >"$logs/build-unmutated.log" 2>&1; then
  tail -n 30 "$logs/build-unmutated.log" >&2
  echo "mutation-check: the unmutated tree does not build" >&2
  exit 2
fi
mpiexec=$(sed -n 's/^MPIEXEC_EXECUTABLE:[A-Z]*=//p' "$build/CMakeCache.txt")
mpiexec=${mpiexec:-mpiexec}
export STRIDER_LOG_LEVEL=warn

# run_test SPEC SECONDS LOG: runs one covering test; returns 0 (passed), 124 (timed out) or 1.
run_test() {
  local spec=$1 seconds=$2 log=$3 status=0 command=()
  case $spec in
    unit\ *) command=("$build/tests/strider_unit_tests" "${spec#unit }" --warn NoTests) ;;
    mpi\ *)
      local rest=${spec#mpi }
      command=("$mpiexec" --bind-to none -np "${rest%% *}" "$build/tests/strider_mpi_tests" "${rest#* }" --warn NoTests)
      ;;
    ctest\ *)
      command=(ctest --test-dir "$build" -R "${spec#ctest }" --output-on-failure --no-tests=error --timeout "$seconds")
      seconds=$((seconds + 30))
      ;;
  esac
  echo "== $spec (limit ${seconds}s): ${command[*]}" >>"$log"
  timeout -k 10 "$seconds" "${command[@]}" >>"$log" 2>&1 </dev/null || status=$?
  if ((status == 124 || status == 137)) || { [[ $spec == ctest\ * ]] && ((status != 0)) &&
    grep -q '\*\*\*Timeout' "$log"; }; then
    return 124
  fi
  ((status == 0)) || return 1
}

# The targets a mutant's tests need (all of them for ctest entries, which run the apps).
targets_for() {
  local spec targets=()
  while IFS= read -r spec; do
    case $spec in
      unit\ *) targets+=(strider_unit_tests) ;;
      mpi\ *) targets+=(strider_mpi_tests) ;;
      ctest\ *) targets=(all) && break ;;
    esac
  done <<<"$1"
  printf '%s\n' "${targets[@]}" | sort -u | paste -sd ' '
}

# ---- The covering tests pass without a mutant ----------------------------------------------------

to_run=()
for k in "${selected[@]}"; do
  if [[ -n ${m_equivalent[k]} ]]; then
    ((run_equivalent)) || continue
    if [[ -z ${m_tests[k]} ]]; then
      echo "mutation-check: note: ${m_id[k]} is equivalent and names no covering test; not run"
      continue
    fi
  fi
  to_run+=("$k")
done
if ((${#to_run[@]} == 0)); then
  echo "mutation-check: nothing to run (the selected mutants are equivalent; --equivalent runs those with tests)"
  exit 0
fi
declare -A limit_of=()
specs=()
for k in "${to_run[@]}"; do
  while IFS= read -r spec; do
    [[ -n $spec && -z ${limit_of[$spec]:-} ]] || continue
    limit_of[$spec]=0
    specs+=("$spec")
  done <<<"${m_tests[k]}"
done
echo "mutation-check: ${#specs[@]} covering test command(s) on the unmutated build (log: $logs/unmutated.log)"
: >"$logs/unmutated.log"
baseline_failed=0
for spec in "${specs[@]}"; do
  start=$SECONDS
  if run_test "$spec" 1800 "$logs/unmutated.log"; then
    took=$((SECONDS - start))
    limit=$((10 * took > 120 ? 10 * took : 120))
    limit_of[$spec]=${timeout_fixed:-$limit}
    echo "  passes in ${took}s: $spec"
  else
    echo "  FAILS without a mutant: $spec" >&2
    baseline_failed=1
  fi
done
if ((baseline_failed)); then
  echo "mutation-check: a covering test fails on the unmutated tree (see $logs/unmutated.log);" \
    "no mutant can be judged by it" >&2
  exit 2
fi

# ---- The mutants ---------------------------------------------------------------------------------

declare -A status_of=() detail_of=()
total=${#to_run[@]}
position=0
run_start=$SECONDS
for k in "${to_run[@]}"; do
  position=$((position + 1))
  id=${m_id[k]} path=$tree/${m_file[k]} log=$logs/${m_id[k]}.log
  mutate "$k" "$path"
  printf '%s' "$text" >"$path"
  {
    echo "mutant $id at $where"
    git -C "$tree" diff
  } >"$log"
  start=$SECONDS
  read -r -a targets <<<"$(targets_for "${m_tests[k]}")"
  target_args=()
  [[ ${targets[0]} == all ]] || target_args=(--target "${targets[@]}")
  if ! cmake --build "$build" --parallel "$jobs" "${target_args[@]}" >>"$log" 2>&1; then
    status=build-error detail="does not build (see $log)"
  else
    status=survived detail="every covering test passed"
    while IFS= read -r spec; do
      result=0
      run_test "$spec" "${limit_of[$spec]}" "$log" || result=$?
      if ((result == 124)); then
        status=killed detail="$spec timed out after ${limit_of[$spec]}s"
        break
      elif ((result != 0)); then
        status=killed detail="$spec failed"
        break
      fi
    done <<<"${m_tests[k]}"
  fi
  git -C "$tree" checkout -q -f -- "${m_file[k]}"
  git -C "$tree" diff --quiet || {
    echo "mutation-check: could not restore $tree" >&2
    exit 2
  }
  if [[ -n ${m_equivalent[k]} ]]; then
    [[ $status == survived ]] && status=equivalent detail="survived, as its equivalence says" ||
      detail="marked equivalent but $detail: the reason in the list is wrong"
  fi
  status_of[$id]=$status detail_of[$id]=$detail
  printf '[%*d/%d] %-40s %-10s %s (%ss; %s)\n' "${#total}" "$position" "$total" "$id" "$status" "$detail" \
    "$((SECONDS - start))" "$where"
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$(date -u +%FT%TZ)" "$(git -C "$tree" rev-parse --short HEAD)" "$id" \
    "${m_area[k]}" "$status" "$detail" >>"$workdir/results.tsv"
done

# ---- Summary -------------------------------------------------------------------------------------

# Sets survivors and failures (the list entries to fix) while it prints the table.
summary() {
  echo
  echo "mutation-check: commit $(git -C "$tree" log -1 --format='%h (%cs)' "$commit"), run $(date -u +%F)," \
    "$(((SECONDS - run_start) / 60)) min"
  printf '%-9s %7s %8s %9s %11s %11s\n' area killed timeout survived equivalent build-error
  survivors=() failures=()
  for area in "${areas_known[@]}" total; do
    killed=0 timed_out=0 survived=0 equivalent=0 broken=0
    for k in "${selected[@]}"; do
      [[ $area == total || ${m_area[k]} == "$area" ]] || continue
      id=${m_id[k]}
      status=${status_of[$id]:-}
      [[ -n $status || -z ${m_equivalent[k]} ]] || status=equivalent
      case $status in
        killed) [[ ${detail_of[$id]} == *"timed out"* ]] && timed_out=$((timed_out + 1)) || killed=$((killed + 1)) ;;
        survived) survived=$((survived + 1)) ;;
        equivalent) equivalent=$((equivalent + 1)) ;;
        build-error) broken=$((broken + 1)) ;;
      esac
      if [[ $area == total && $status == survived ]]; then survivors+=("$id (${m_file[k]})"); fi
      if [[ $area == total && ($status == build-error || (-n ${m_equivalent[k]} && $status == killed)) ]]; then
        failures+=("$id: ${detail_of[$id]}")
      fi
    done
    ((killed + timed_out + survived + equivalent + broken > 0)) || continue
    printf '%-9s %7d %8d %9d %11d %11d\n' "$area" "$killed" "$timed_out" "$survived" "$equivalent" "$broken"
  done
  judged=$((killed + timed_out + survived))
  if ((judged > 0)); then
    echo "killed $((killed + timed_out)) of $judged non-equivalent mutants run" \
      "($(((killed + timed_out) * 100 / judged))%), timeouts included"
  fi
  if ((${#survivors[@]})); then
    echo "survivors (a test that kills each, or an 'equivalent:' line saying why none can):"
    printf '  %s\n' "${survivors[@]}"
  fi
  if ((${#failures[@]})); then
    echo "to fix in the list:"
    printf '  %s\n' "${failures[@]}"
  fi
}
summary >"$workdir/summary.txt"
cat "$workdir/summary.txt"
if ((${#survivors[@]} == 0 && ${#failures[@]} == 0)); then exit 0; else exit 1; fi
}
