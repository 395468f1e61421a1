#!/usr/bin/env bash
# ctest-label: plain-only
# scripts/mutation-check.sh, the parts that build nothing: the repository's mutant list matches its
# code; --list and --area select from it; --show applies a mutant (one line, several lines) exactly;
# --check names a stale, an ambiguous and a missing-file mutant of a made-up list; a malformed list
# is refused naming each bad line.
source "$(dirname "$0")/common.sh"
script=$STRIDER_SOURCE_DIR/scripts/mutation-check.sh

# ---- The repository's own list -----------------------------------------------------------------
if "$script" --check >"$work/check.out" 2>&1; then
  pass "the mutant list matches the code: $(cat "$work/check.out")"
else
  fail "the mutant list no longer matches the code (update scripts/mutation/mutants.txt):"
  cat "$work/check.out"
fi

"$script" --list >"$work/list.out" 2>&1 || fail "--list failed: $(cat "$work/list.out")"
listed=$(tail -n 1 "$work/list.out" | awk '{print $1}')
expect_at_least "mutants in the list" "$listed" 40
for area in sampling io pipeline train comm device; do
  expect_at_least "mutants of area $area" "$(awk -v a="$area" '$2 == a' "$work/list.out" | wc -l)" 1
done
"$script" --list --area comm >"$work/comm.out" 2>&1 || fail "--list --area comm failed: $(cat "$work/comm.out")"
expect_equal "--area comm lists the comm mutants, and only them" \
  "$(awk 'NR > 1 && $2 != "" && !/ of [0-9]+ mutants$/' "$work/comm.out" | awk '{print $1, $2}' | sort)" \
  "$(awk '$2 == "comm" {print $1, $2}' "$work/list.out" | sort)"

# ---- A made-up tree and lists ------------------------------------------------------------------
tree=$work/tree
mkdir -p "$tree/src"
cat >"$tree/src/a.cpp" <<'EOF'
int f(int x) { return x < 3 ? 1 : 0; }
int g(int y) { return y + 1; }
int h(int y) { return y + 1; }
EOF
cat >"$work/good.txt" <<'EOF'
# a comment
id: fake-flip
area: sampling
file: src/a.cpp
find: x < 3
replace: x <= 3
test: unit [fake]

id: fake-two-lines
area: io
file: src/a.cpp
find: int g(int y) { return y + 1; }
find+: int h(int y) { return y + 1; }
replace: int g(int y) { return y; }
replace+: int h(int y) { return y + 2; }
test: mpi 2 [fake]
test: ctest ^fake$

id: fake-same
area: core
file: src/a.cpp
find: ? 1 : 0
replace: ? 1 : 1
equivalent: a made-up reason
EOF
if "$script" --check --source "$tree" --mutants "$work/good.txt" >"$work/good.out" 2>&1; then
  pass "a list whose texts occur once passes --check"
else
  fail "a good list fails --check: $(cat "$work/good.out")"
fi
"$script" --list --mutants "$work/good.txt" >"$work/good-list.out" 2>&1
grep -q '^fake-two-lines  *io  *src/a.cpp  *mpi 2 \[fake\];ctest ^fake\$$' "$work/good-list.out" &&
  pass "--list shows a mutant's area, file and tests" || fail "unexpected --list: $(cat "$work/good-list.out")"
grep -q '^fake-same .*(equivalent: a made-up reason)' "$work/good-list.out" &&
  pass "--list shows why a mutant is equivalent" || fail "unexpected --list: $(cat "$work/good-list.out")"

# --show: the diff of each mutant against the file (the file itself untouched).
before=$(md5sum <"$tree/src/a.cpp")
"$script" --show --source "$tree" --mutants "$work/good.txt" --id fake-flip >"$work/flip.out" 2>&1
expect_equal "--show, one line: the changed lines" "$(grep '^[-+][^-+]' "$work/flip.out")" \
  "-int f(int x) { return x < 3 ? 1 : 0; }
+int f(int x) { return x <= 3 ? 1 : 0; }"
grep -q '^== fake-flip (sampling) at src/a.cpp:1$' "$work/flip.out" &&
  pass "--show names the mutant and its line" || fail "unexpected --show: $(cat "$work/flip.out")"
"$script" --show --source "$tree" --mutants "$work/good.txt" --id fake-two-lines >"$work/two.out" 2>&1
expect_equal "--show, two lines: the changed lines" "$(grep '^[-+][^-+]' "$work/two.out")" \
  "-int g(int y) { return y + 1; }
-int h(int y) { return y + 1; }
+int g(int y) { return y; }
+int h(int y) { return y + 2; }"
grep -q '^== fake-two-lines (io) at src/a.cpp:2$' "$work/two.out" &&
  pass "--show names the line a multi-line mutant starts at" || fail "unexpected --show: $(cat "$work/two.out")"
expect_equal "--show leaves the file as it was" "$(md5sum <"$tree/src/a.cpp")" "$before"

# --check: stale, ambiguous and missing-file mutants, each named.
cat >"$work/stale.txt" <<'EOF'
id: fake-stale
area: train
file: src/a.cpp
find: x > 3
replace: x >= 3
test: unit [fake]

id: fake-twice
area: train
file: src/a.cpp
find: return y + 1;
replace: return y - 1;
test: unit [fake]

id: fake-no-file
area: device
file: src/gone.cpp
find: anything
replace: nothing
test: unit [fake]

id: fake-fine
area: comm
file: src/a.cpp
find: x < 3
replace: x > 3
test: unit [fake]
EOF
status=0
"$script" --check --source "$tree" --mutants "$work/stale.txt" >"$work/stale.out" 2>&1 || status=$?
expect_equal "a stale list fails --check with status 2" "$status" 2
grep -q "stale mutant fake-stale ($work/stale.txt:1): its text is no longer in src/a.cpp" "$work/stale.out" &&
  pass "the stale mutant is named with its line in the list and its file" || fail "stale: $(cat "$work/stale.out")"
grep -q '| x > 3$' "$work/stale.out" && pass "the stale text is shown" || fail "stale text: $(cat "$work/stale.out")"
grep -q "ambiguous mutant fake-twice ($work/stale.txt:8): its text occurs 2 times in src/a.cpp" "$work/stale.out" &&
  pass "a text found twice is named" || fail "ambiguous: $(cat "$work/stale.out")"
grep -q "stale mutant fake-no-file ($work/stale.txt:15): src/gone.cpp does not exist" "$work/stale.out" &&
  pass "a missing file is named" || fail "missing file: $(cat "$work/stale.out")"
grep -q "fake-fine" "$work/stale.out" && fail "a good mutant was named: $(cat "$work/stale.out")" ||
  pass "the good mutant of the list is not named"
status=0
"$script" --check --source "$tree" --mutants "$work/stale.txt" --id fake-fine >"$work/fine.out" 2>&1 || status=$?
expect_equal "--id selects the one good mutant, which passes" "$status" 0

# A malformed list: every problem named with its line.
cat >"$work/bad.txt" <<'EOF'
id: bad-key
area: io
file: src/a.cpp
find: x < 3
replace: x > 3
test: unit [fake]
colour: blue

id: bad-area
area: gpu
file: src/a.cpp
find: x < 3
replace: x > 3
test: unit [fake]

id: bad-no-test
area: io
file: src/a.cpp
find: x < 3
replace: x > 3

id: bad-key
area: io
file: src/a.cpp
find: x < 3
replace: x > 3
test: mpi 9 [fake]

id: bad-continuation
area: io
file: src/a.cpp
find+: x < 3
replace: x > 3
test: unit [fake]

id: bad-same
area: io
file: src/a.cpp
find: x < 3
replace: x < 3
test: unit [fake]
EOF
status=0
"$script" --list --mutants "$work/bad.txt" >"$work/bad.out" 2>&1 || status=$?
expect_equal "a malformed list is refused with status 2" "$status" 2
for expected in "bad.txt:7: unknown key 'colour'" "bad.txt:9: bad-area: area 'gpu' is none of" \
  "bad.txt:16: bad-no-test: no test covers it" "bad.txt:22: bad-key: the id is used already (line 1)" \
  "bad.txt:22: bad-key: bad test 'mpi 9 [fake]'" "bad.txt:32: find+ must follow find" \
  "bad.txt:29: bad-continuation: no find text" "bad.txt:36: bad-same: the replacement equals the text"; do
  grep -qF "$expected" "$work/bad.out" && pass "named: $expected" || fail "not named: $expected in $(cat "$work/bad.out")"
done

# Usage errors.
status=0
"$script" --list --area gpu >"$work/usage.out" 2>&1 || status=$?
expect_equal "an unknown area is a usage error" "$status" 2
grep -q "unknown area 'gpu'" "$work/usage.out" && pass "the unknown area is named" || fail "$(cat "$work/usage.out")"
status=0
"$script" --list --id no-such-mutant >"$work/usage.out" 2>&1 || status=$?
expect_equal "an unknown mutant is a usage error" "$status" 2
grep -q "no mutant 'no-such-mutant'" "$work/usage.out" && pass "the unknown mutant is named" ||
  fail "$(cat "$work/usage.out")"
finish
