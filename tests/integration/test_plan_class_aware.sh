#!/usr/bin/env bash
# strider-inspect plan --sampler balanced|weighted|stratified: histograms, JSON labels, bad options.
source "$(dirname "$0")/common.sh"
inspect=$STRIDER_BIN/strider-inspect

# spread COLUMN: max - min of a class's count over the ranks of a --histogram output (stdin).
spread() { awk -v c="$1" '{v = $(c + 3); if (NR == 1 || v < lo) lo = v; if (NR == 1 || v > hi) hi = v} END {print hi - lo}'; }
# least COLUMN: the smallest count of a class over the ranks.
least() { awk -v c="$1" '{v = $(c + 3); if (NR == 1 || v < lo) lo = v} END {print lo}'; }

# Balanced, the quickstart's classes: 10000/200/50 on 8 ranks; every rank within one of every class.
hist=$($inspect plan --sampler balanced --class-counts 10000,200,50 --world 8 --batch-size 32 --seed 7 --histogram)
expect_equal "balanced: 8 ranks" "$(wc -l <<<"$hist")" "8"
for class in 0 1 2; do
  expect_equal "balanced: class $class within one over ranks" "$((  $(spread $class <<<"$hist") <= 1 ))" "1"
  expect_equal "balanced: class $class on every rank (>= 1250)" "$(( $(least $class <<<"$hist") >= 1250 ))" "1"
done
expect_equal "balanced: deterministic" \
  "$($inspect plan --sampler balanced --class-counts 10000,200,50 --world 8 --batch-size 32 --seed 7 --histogram)" "$hist"
expect_equal "balanced: --samples agrees with --class-counts" \
  "$($inspect plan --sampler balanced --samples 10250 --class-counts 10000,200,50 --world 8 --batch-size 32 --seed 7 --histogram)" "$hist"
expect_equal "balanced: min undersamples" \
  "$($inspect plan --sampler balanced --class-counts 100,20,5 --balance min --world 1 --batch-size all --histogram)" "rank 0: 5 5 5"
expect_equal "balanced: a count per class" \
  "$($inspect plan --sampler balanced --class-counts 100,20,5 --balance 30 --world 1 --batch-size all --histogram)" "rank 0: 30 30 30"
# JSON: labels parallel to indices, class counts per rank.
expect_equal "balanced: json" "$($inspect plan --sampler balanced --class-counts 3,1 --world 2 --rank 1 --batch-size 2 --json)" \
  '{"rank":1,"world":2,"epoch":0,"indices":[0,3,0,3],"batches":[[0,3],[0,3]],"labels":[0,1,0,1],"class_counts":[2,2]}'
json=$($inspect plan --sampler weighted --class-counts 5,5 --world 2 --batch-size 3 --seed 4 --json --all-ranks)
indices=$(grep -o '"indices":\[[^]]*\]' <<<"$json" | head -1 | grep -o '[0-9]*' | awk '{printf "%d ", ($1 >= 5)}')
labels=$(grep -o '"labels":\[[^]]*\]' <<<"$json" | head -1 | grep -o '[0-9]*' | awk '{printf "%d ", $1}')
expect_equal "json labels are the indices' labels" "$labels" "$indices"
# Distributed plans are unchanged by labels, apart from the extra JSON fields.
expect_equal "distributed with class counts" "$($inspect plan --class-counts 6,4 --world 3 --seed 0 --epoch 1)" \
  "$($inspect plan --samples 10 --world 3 --seed 0 --epoch 1)"

# Weighted: a zero-weight class never appears; default weights make classes about equal.
hist=$($inspect plan --sampler weighted --class-counts 1000,200,50 --class-weights 1,0,3 --world 4 --batch-size 16 --histogram)
expect_equal "weighted: zero-weight class never drawn" "$(awk '{s += $4} END {print s}' <<<"$hist")" "0"
hist=$($inspect plan --sampler weighted --class-counts 10000,200,50 --world 8 --batch-size 32 --histogram)
total=$(awk '{for (c = 3; c <= 5; ++c) s += $c} END {print s}' <<<"$hist")
expect_equal "weighted: num_samples defaults to N (padded to R)" "$total" "10256"
for class in 0 1 2; do
  count=$(awk -v c=$((class + 3)) '{s += $c} END {print s}' <<<"$hist")
  expect_equal "weighted: class $class near a third ($count)" "$(( count > 3100 && count < 3750 ))" "1"
done
expect_equal "weighted: --num-samples" \
  "$($inspect plan --sampler weighted --class-counts 10,10 --num-samples 40 --world 2 --histogram | awk '{s += $3 + $4} END {print s}')" "40"

# Stratified: every batch of every rank within one of the target (here 16 per rank: 8 4 4 uniform
# over classes 10/5/5 by frequency -> 8 4 4 exactly).
json=$($inspect plan --sampler stratified --class-counts 100,50,50 --world 2 --batch-size 16 --json --all-ranks)
expect_equal "stratified: every rank's batch 8/4/4" \
  "$(grep -o '"labels":\[[^]]*\]' <<<"$json" | grep -o '[0-9]*' | paste -sd' ' | awk '{
      ok = 1; for (i = 1; i <= NF; i += 16) { n0 = n1 = n2 = 0
        for (j = i; j < i + 16; ++j) { if ($j == 0) ++n0; else if ($j == 1) ++n1; else ++n2 }
        if (n0 != 8 || n1 != 4 || n2 != 4) ok = 0 } print ok}')" "1"
hist=$($inspect plan --sampler stratified --class-counts 10000,200,50 --stratify-target uniform --world 8 --batch-size 32 --histogram)
for class in 0 1 2; do
  expect_equal "stratified uniform: class $class within one over ranks" "$(( $(spread $class <<<"$hist") <= 1 ))" "1"
done

# --data: labels from a file strider-gen wrote in the same blocks give the same plan, at any rank count.
"$STRIDER_BIN/strider-gen" --kind features --class-counts 1000,200,50 --dim 2 --out "$work/c.h5" >/dev/null
for sampler in balanced weighted stratified; do
  expected=$($inspect plan --sampler $sampler --class-counts 1000,200,50 --world 4 --batch-size 8 --json --rank 3)
  expect_equal "$sampler: --data equals --class-counts"     "$($inspect plan --sampler $sampler --data "$work/c.h5" --world 4 --batch-size 8 --json --rank 3)" "$expected"
  expect_equal "$sampler: --data under 2 MPI ranks prints once"     "$(mpirun_n 2 "$inspect" plan --sampler $sampler --data "$work/c.h5" --world 4 --batch-size 8 --json --rank 3)" "$expected"
done
expect_error "data: missing file" "cannot open" 20 $inspect plan --sampler balanced --data "$work/none.h5"
# A file without labels gives N for the modes that need none (no --samples needed).
"$STRIDER_BIN/strider-gen" --kind features --samples 20 --dim 2 --label-key none --out "$work/u.h5" >/dev/null
expect_equal "data without labels: distributed plan of its 20 samples" \
  "$($inspect plan --data "$work/u.h5" --world 2 --batch-size 10 --no-shuffle --rank 1 2>/dev/null)" \
  "$($inspect plan --samples 20 --world 2 --batch-size 10 --no-shuffle --rank 1)"
expect_error "data without labels: the balanced sampler" "no labels dataset /labels, which the balanced sampler needs" 20 \
  $inspect plan --sampler balanced --data "$work/u.h5"
expect_error "data: samples disagree" "differs from the 1250 samples" 20 $inspect plan --data "$work/c.h5" --samples 5
expect_error "data: 2 ranks, bad weights" "2 class weights for 3 classes" 30 \
  "$STRIDER_MPIEXEC" --bind-to none -np 2 "$inspect" plan --sampler weighted --data "$work/c.h5" --class-weights 1,2

# Bad options: one clear line, exit 2.
counts="--class-counts 10,10"
expect_error "negative weight" "class weights must be finite and >= 0" 10 $inspect plan --sampler weighted $counts --class-weights=-1,1
expect_error "NaN weight" "class weights must be finite and >= 0" 10 $inspect plan --sampler weighted $counts --class-weights nan,1
expect_error "infinite weight" "class weights must be finite and >= 0" 10 $inspect plan --sampler weighted $counts --class-weights inf,1
expect_error "all-zero weights" "all zero" 10 $inspect plan --sampler weighted $counts --class-weights 0,0
expect_error "weights per class" "3 class weights for 2 classes" 10 $inspect plan --sampler weighted $counts --class-weights 1,1,1
expect_error "weights not numbers" "class-weights" 10 $inspect plan --sampler weighted $counts --class-weights 1,x
expect_error "negative num-samples" "--num-samples must be >= 0" 10 $inspect plan --sampler weighted $counts --num-samples -1
expect_error "stratified batch < K" "smaller than the 3 classes" 10 \
  $inspect plan --sampler stratified --class-counts 10,10,10 --batch-size 2
expect_error "stratified bad target" "--stratify-target must be" 10 $inspect plan --sampler stratified $counts --batch-size 4 --stratify-target often
expect_error "stratified negative target" "stratification weights must be finite" 10 \
  $inspect plan --sampler stratified $counts --batch-size 4 --stratify-target=-1,2
expect_error "bad balance" "--balance must be max, min or a positive count" 10 $inspect plan --sampler balanced $counts --balance 0
expect_error "no labels" "needs class labels" 10 $inspect plan --sampler balanced --samples 10
expect_error "negative class count" "negative count" 10 $inspect plan --sampler balanced --class-counts 10,-1
expect_error "samples disagree" "differs from the 20 samples" 10 $inspect plan --sampler balanced --samples 21 $counts
expect_error "histogram without labels" "--histogram needs labels" 10 $inspect plan --samples 10 --histogram
finish
