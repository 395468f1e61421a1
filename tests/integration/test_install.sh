#!/usr/bin/env bash
# cmake --install, then an outside project builds against the installed tree with find_package(strider).
source "$(dirname "$0")/common.sh"
prefix=$work/prefix
if ! cmake --install "$STRIDER_BUILD_DIR" --prefix "$prefix" >"$work/install.log" 2>&1; then
  cat "$work/install.log"
  fail "cmake --install"
  finish
fi
for installed in include/strider/pipeline/loader.hpp include/strider/config.hpp \
  lib/cmake/strider/striderConfig.cmake bin/strider-inspect; do
  [[ -e $prefix/$installed ]] && pass "installed $installed" || fail "missing $installed"
done
# A sanitizer build's library needs its runtime in the consumer too.
sanitize_flags=()
[[ -n ${STRIDER_SANITIZE:-} ]] && sanitize_flags=("-DCMAKE_CXX_FLAGS=-fsanitize=$STRIDER_SANITIZE")
if cmake -S "$STRIDER_SOURCE_DIR/tests/install_consumer" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$prefix" "${sanitize_flags[@]}" \
  >"$work/consumer.log" 2>&1 && cmake --build "$work/consumer" >>"$work/consumer.log" 2>&1; then
  pass "outside project configured and built with find_package(strider)"
  # One rank, batches of 4: torch's randperm(10) for seed 0 is 4 1 7 5 3 9 0 8 6 2 (DESIGN.md), so
  # the first batch is its first four; two epochs of 10 samples in batches of 4, 4 and 2.
  expect_equal "outside trainer runs through the Loader" "$(mpirun_n 1 "$work/consumer/consumer" "$work/consumer.h5")" \
    "first batch: 4 1 7 5
trained 20 samples in 6 steps"
else
  cat "$work/consumer.log"
  fail "outside project did not build"
fi
# The installed Python package imports from the prefix alone and finds the installed library (RPATH).
if [[ -n ${STRIDER_PYTHON:-} ]]; then
  package=$prefix/$STRIDER_PYTHON_INSTALL_DIR
  expect_equal "installed Python package: torch's golden order, and a Loader over the consumer's file" \
    "$(cd / && PYTHONPATH=$package "$STRIDER_PYTHON" -c "
import strider
assert strider.__file__.startswith('$package'), strider.__file__
s = strider.DistributedSampler(10, 3, 0, seed=0)
s.set_epoch(1)
with strider.Loader('$work/consumer.h5', batch_size=4, seed=0) as loader:
    print(list(s), len(loader))
" 2>&1)" "[5, 2, 9, 4] 3"
fi
# The installed app finds the installed library (RPATH).
expect_equal "installed app runs" "$("$prefix/bin/strider-inspect" plan --samples 10 --world 3 --rank 0 --seed 0 --epoch 1)" "5 2 9 4"
finish
