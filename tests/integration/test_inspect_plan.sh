#!/usr/bin/env bash
# strider-inspect plan: the contract other tools and scripts rely on.
source "$(dirname "$0")/common.sh"
inspect=$STRIDER_BIN/strider-inspect

# The design's golden (PyTorch 1.13.1): N=10, R=3, seed 0, epoch 1.
expect_equal "rank 0 golden" "$($inspect plan --samples 10 --world 3 --rank 0 --seed 0 --epoch 1)" "5 2 9 4"
expect_equal "rank 2 golden" "$($inspect plan --samples 10 --world 3 --rank 2 --seed 0 --epoch 1)" "1 8 7 6"
expect_equal "all ranks" "$($inspect plan --samples 10 --world 3 --seed 0 --epoch 1 --all-ranks)" \
  "$(printf 'rank 0: 5 2 9 4\nrank 1: 6 0 3 5\nrank 2: 1 8 7 6')"
# Plans that must not change between versions (a checkpoint resumes into the same order): the
# class-aware and bucketed plans' digests, as strider first made them (MD5 of the printed indices).
plan_digest() { "$inspect" plan "$@" | md5sum | cut -d' ' -f1; }
expect_equal "bucketed plan, windows of 64 batches" \
  "$(plan_digest --samples 200000 --lengths lognormal:median=64,min=1,max=512 --sampler bucketed --max-tokens 16384 --world 2 --rank 1 --epoch 0)" \
  f2cd61d86ec99680c0d6ef97940f7d51
expect_equal "bucketed plan, one window" \
  "$(plan_digest --samples 30000 --lengths uniform:min=8,max=2048 --sampler bucketed --max-tokens 4096 --megabatch 0 --world 3 --rank 2 --epoch 5)" \
  7cf181ef9127dd0d4447957900bb8cd3
expect_equal "balanced plan" \
  "$(plan_digest --samples 5100 --class-counts 5000,37,63 --sampler balanced --world 2 --rank 1 --epoch 2 --batch-size 16)" \
  e9c3599c124f39a55190c7b612d07c23
expect_equal "stratified plan" \
  "$(plan_digest --samples 5100 --class-counts 5000,37,63 --sampler stratified --world 2 --rank 1 --epoch 2 --batch-size 16)" \
  a6097635683694b6e2322eb26409b270
expect_equal "weighted plan" \
  "$(plan_digest --samples 500 --class-counts 100,400 --sampler weighted --class-weights 0.3,7 --world 2 --rank 0)" \
  742df6aca974a30d677a292da2078d6d
expect_equal "no shuffle" "$($inspect plan --samples 10 --world 3 --rank 1 --no-shuffle)" "1 4 7 0"
expect_equal "drop last" "$($inspect plan --samples 10 --world 3 --rank 1 --no-shuffle --drop-last)" "1 4 7"
expect_equal "json" "$($inspect plan --samples 10 --world 3 --rank 0 --seed 0 --epoch 1 --batch-size 3 --json)" \
  '{"rank":0,"world":3,"epoch":1,"indices":[5,2,9,4],"batches":[[5,2,9],[4]]}'
expect_equal "drop last batch" "$($inspect plan --samples 10 --world 3 --rank 0 --seed 0 --epoch 1 --batch-size 3 --drop-last-batch --json)" \
  '{"rank":0,"world":3,"epoch":1,"indices":[5,2,9],"batches":[[5,2,9]]}'
expect_equal "steps window" "$($inspect plan --samples 100 --world 2 --rank 1 --batch-size 4 --first-step 3 --steps 2 --no-shuffle)" \
  "25 27 29 31 33 35 37 39"
expect_equal "json all ranks" "$($inspect plan --samples 2 --world 2 --all-ranks --json --no-shuffle)" \
  '[{"rank":0,"world":2,"epoch":0,"indices":[0],"batches":[[0]]},{"rank":1,"world":2,"epoch":0,"indices":[1],"batches":[[1]]}]'
# Printed batches concatenate to the whole epoch.
whole=$($inspect plan --samples 1000 --world 3 --rank 2 --seed -5 --epoch 4)
batched=$($inspect plan --samples 1000 --world 3 --rank 2 --seed -5 --epoch 4 --batch-size 7)
expect_equal "batching keeps the order" "$batched" "$whole"
# A config file gives the same result as options.
printf 'samples = 10\nworld = 3\nrank = 0\nseed = 0\nepoch = 1\n' >"$work/plan.cfg"
expect_equal "config file" "$($inspect plan --config "$work/plan.cfg")" "5 2 9 4"
$inspect plan --help | grep -q -- "--batch-size" && pass "help" || fail "help lacks --batch-size"

expect_error "world 0" "--world must be positive" 10 $inspect plan --samples 10 --world 0
expect_error "rank >= world" "--rank 3 is outside" 10 $inspect plan --samples 10 --world 3 --rank 3
expect_error "negative samples" "--samples must be >= 0" 10 $inspect plan --samples -1
expect_error "unknown mode" "unknown sampler 'nope'" 10 $inspect plan --samples 10 --sampler nope
expect_error "missing samples" "samples" 10 $inspect plan --world 2
expect_error "unknown option" "unrecognised|unrecognized" 10 $inspect plan --samples 10 --bogus
expect_error "not a number" "samples" 10 $inspect plan --samples ten
expect_error "unknown command" "unknown command" 10 $inspect frobnicate
finish
