"""bench/scripts/summarize.py's and summarize_pairs.py's pairing of repeats: each ratio the goals
read is the median of the repeats' own ratios (compare.sh runs a repeat's runs back to back), never
one series' median over another's."""

import importlib.util
import json
import os
import subprocess
import sys

from conftest import SOURCE_DIR


def load_summarize():
    spec = importlib.util.spec_from_file_location("summarize", os.path.join(SOURCE_DIR, "bench", "scripts", "summarize.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_runs(out, kind, tag, values, key):
    runs = out / "runs"
    runs.mkdir(exist_ok=True)
    for k, value in values.items():
        (runs / f"{kind}-{tag}.{k}.json").write_text(json.dumps({key: value}))


def bench(rate, ranks):
    """A strider-bench --json result of `rate` samples/s at `ranks` ranks."""
    return {"samples_per_s": rate, "bytes_per_s": rate * 300, "stall_fraction": 0.5,
            "time_to_first_batch_s": 0.01, "peak_rss_bytes": 1 << 20, "read_amplification": 1.0,
            "ranks": [{"rank": r, "samples_per_s": rate / ranks} for r in range(ranks)]}


def test_ratios_pair_repeats_by_number(tmp_path):
    summarize = load_summarize()
    # Repeat 1 in a fast phase, 2 and 3 in slow ones: every pair reads 0.9, 0.5 or 0.8 of its
    # gathers, while the medians of the two series (60 / 100) would read 0.6.
    write_runs(tmp_path, "strider", "w1-r2", {1: 90.0, 2: 30.0, 3: 60.0}, "samples_per_s")
    write_runs(tmp_path, "gather", "w1-r2", {1: 100.0, 2: 60.0, 3: 75.0}, "rows_per_s")
    write_runs(tmp_path, "strider", "w1-r1", {1: 10.0}, "samples_per_s")  # another tag: not paired with these
    ratios = summarize.paired_ratios(str(tmp_path), "w1-r2", "strider", "samples_per_s", "gather", "rows_per_s")
    assert ratios == [0.5, 0.8, 0.9]
    row = {"strider_over_gather_ranks": 0.6}
    summarize.set_paired(row, "strider_over_gather_ranks", ratios)
    assert row["strider_over_gather_ranks"] == 0.8
    assert row["strider_over_gather_ranks_pairs"] == [0.5, 0.8, 0.9]
    assert summarize.pairs_text(row, "strider_over_gather_ranks") == " (median of 3 pairs, 50%-90%)"


def test_a_repeat_without_its_pair_is_left_out(tmp_path):
    summarize = load_summarize()
    write_runs(tmp_path, "python", "w1-r1", {1: 8.0, 2: 9.0}, "samples_per_s")  # repeat 3's Python run failed
    write_runs(tmp_path, "strider", "w1-r1", {1: 10.0, 2: 10.0, 3: 1.0}, "samples_per_s")
    ratios = summarize.paired_ratios(str(tmp_path), "w1-r1", "python", "samples_per_s", "strider", "samples_per_s")
    assert ratios == [0.8, 0.9]
    row = {"python_over_strider": 0.5}
    summarize.set_paired(row, "python_over_strider", [])
    assert row == {"python_over_strider": 0.5}  # no pairs: the ratio of the kept runs stays
    assert summarize.pairs_text(row, "python_over_strider") == ""


def test_pairs_on_both_sides_of_the_goal_are_said(tmp_path):
    summarize = load_summarize()
    row = {}
    summarize.set_paired(row, "strider_cpu_over_gather", [0.49, 0.9, 1.18])
    assert summarize.pairs_text(row, "strider_cpu_over_gather", 0.8) == \
        " (median of 3 pairs, 49%-118%; the pairs fall on both sides of the goal)"
    summarize.set_paired(row, "strider_cpu_over_gather", [0.55, 0.6, 0.7])
    assert summarize.pairs_text(row, "strider_cpu_over_gather", 0.8) == " (median of 3 pairs, 55%-70%)"


def test_paired_kinds_ratio_is_the_median_of_the_pairs(tmp_path):
    # summarize_pairs.py (compare.sh's BENCH_ONLY=baseline and short): pairs made back to back in
    # drifting phases; the ratio is the median of each pair's own, and each kind's figures are its
    # medians.
    runs = tmp_path / "runs"
    runs.mkdir()
    for k, (a, b) in enumerate([(100.0, 90.0), (50.0, 50.0), (80.0, 96.0)], start=1):
        (runs / f"epochs3-w1-r2.{k}.json").write_text(json.dumps({"samples_per_s": a, "time_to_first_batch_s": 0.001 * k}))
        (runs / f"epochs1-w1-r2.{k}.json").write_text(json.dumps({"samples_per_s": b, "time_to_first_batch_s": 0.002 * k}))
    script = os.path.join(SOURCE_DIR, "bench", "scripts", "summarize_pairs.py")
    printed = subprocess.run([sys.executable, script, str(tmp_path), "3", "epochs3", "epochs1", "short", "2"],
                             check=True, stdout=subprocess.PIPE, text=True).stdout
    assert "epochs1 / epochs3 1.000" in printed
    result = json.loads((tmp_path / "short.json").read_text())
    run = result["runs"][0]
    assert run["ranks"] == 2
    assert run["pair_ratios"] == [0.9, 1.0, 1.2]
    assert run["ratio"] == 1.0  # the series' medians (80 against 90) would say 1.125
    assert run["epochs3_samples_per_s"] == 80.0 and run["epochs1_samples_per_s"] == 90.0
    assert run["epochs1_time_to_first_batch_s"] == 0.004


def test_compare_results_maps_one_run_for_the_performance_page(tmp_path):
    # bench/scripts/compare_results.py: one compare.sh run's table rows become the page's runs (the
    # slowest rank against one core's gather, the peers with their workers, ratios to two figures),
    # w1's repeats a range against the peer, the cold runs and the durations; the machine is
    # recorded with the peer's Python packages.
    row = {"workload": "w2", "title": "8192 x 64 KiB", "ranks": 2, "sequential_read_bytes_per_s": 7.92e9,
           "gather_rows_per_s_one_core": 141925.9, "strider_samples_per_s": 204712.4, "strider_bytes_per_s": 13.416e9,
           "strider_min_rank_samples_per_s": 102000.0, "strider_runs_samples_per_s": [200000.0, 204712.4, 220000.0],
           "peer_per_row_samples_per_s": 47105.2, "peer_per_row_num_workers": 0,
           "peer_batched_samples_per_s": 81188.0, "peer_batched_num_workers": 1, "peer_best_samples_per_s": 81188.0,
           "strider_over_peer": 204712.4 / 81188.0, "strider_over_sequential_read": 1.694,
           "strider_rank_over_gather": 102000.0 / 141925.9}
    w1 = {"workload": "w1", "title": "1M x 64", "ranks": 1, "sequential_read_bytes_per_s": 8e9,
          "gather_rows_per_s_one_core": 2e7, "strider_samples_per_s": 1.5e7, "strider_bytes_per_s": 3.84e9,
          "strider_runs_samples_per_s": [1.4e7, 1.5e7, 1.6e7], "peer_best_samples_per_s": 1e5,
          "strider_over_peer": 150.0, "strider_rank_over_gather": 0.75}
    extras = [{"tag": "w1-cold-r1", "world": 1, "samples_per_s": 3.51e6}, {"tag": "w1-compute-busy-r1", "world": 1,
                                                                          "samples_per_s": 1.0}]
    (tmp_path / "results.json").write_text(json.dumps({"table": [w1, row], "extras": extras}))
    script = os.path.join(SOURCE_DIR, "bench", "scripts", "compare_results.py")
    printed = subprocess.run([sys.executable, script, str(tmp_path), "--seconds", "300", "--python-only-seconds", "80"],
                             check=True, stdout=subprocess.PIPE, text=True).stdout
    result = json.loads(printed)
    assert [run["workload"] for run in result["runs"]] == ["w1", "w2"]
    w2 = result["runs"][1]
    assert w2["ranks"] == 2 and w2["samples_per_s"] == 204712 and w2["gb_per_s"] == 13.42
    assert w2["peer_per_row"] == {"samples_per_s": 47105, "workers": 0}
    assert w2["peer_batched"] == {"samples_per_s": 81188, "workers": 1}
    assert w2["ratio_to_peer"] == 2.5 and result["runs"][0]["ratio_to_peer"] == 150
    assert w2["slowest_rank_of_gather_percent"] == 72  # the slowest rank, not the total over two
    assert w2["sequential_read_gb_per_s"] == 7.92 and w2["ratio_to_sequential_read"] == 1.69
    assert result["workloads"] == {"w1": "1M x 64 f32", "w2": "64 KiB rows"}
    assert result["w1_repeats"]["ranks_1"] == {"million_samples_per_s": {"low": 14.0, "high": 16.0},
                                               "ratio_to_peer": {"low": 140, "high": 160}}
    assert result["repeat_spread_factor"] == 1.14  # w1's 16 / 14
    assert result["page_cache"] == {"w1_cold_ranks_1_million_samples_per_s": 3.51}
    assert result["durations_s"] == {"compare": 300, "python_only": 80}
    assert {"cpu", "cores", "memory_gib", "commit", "date"} <= set(result["machine"])


def test_compare_results_keeps_the_scaling_against_one_rank_and_one_core(tmp_path):
    # w3 at 2 ranks against its 1-rank run (the series' medians, and the pairs' median), and against
    # 1 rank held to one core (compare.sh's ONE_CORE run, set on the 2-rank row by summarize.py); a
    # workload without the paired runs keeps its 1-rank ratio alone.
    def row(workload, ranks, rate, **extra):
        return dict({"workload": workload, "title": workload, "ranks": ranks, "sequential_read_bytes_per_s": 8e9,
                     "gather_rows_per_s_one_core": 3e7, "strider_samples_per_s": rate,
                     "strider_bytes_per_s": rate * 300}, **extra)

    table = [row("w3", 1, 1.9e7), row("w3", 2, 2.2e7, strider_over_one_rank=2.2 / 1.9,
                                      strider_over_one_rank_paired=1.234,
                                      strider_over_one_rank_one_core=2.2 / 1.25,
                                      strider_one_rank_one_core_samples_per_s=1.25e7,
                                      strider_samples_per_cpu_s=1.3e7, strider_cpu_ceiling_over_one_rank=2.6 / 1.9,
                                      strider_one_rank_cpu_bound_over_one_rank=3.4 / 1.9),
             row("w4", 2, 3.6e7, strider_over_one_rank=2.27)]
    (tmp_path / "results.json").write_text(json.dumps({"table": table}))
    script = os.path.join(SOURCE_DIR, "bench", "scripts", "compare_results.py")
    printed = subprocess.run([sys.executable, script, str(tmp_path), "--seconds", "300"],
                             check=True, stdout=subprocess.PIPE, text=True).stdout
    scaling = json.loads(printed)["scaling"]
    assert scaling["w3"] == {"two_ranks_over_one": 1.16, "two_ranks_over_one_paired": 1.23,
                             "two_ranks_over_one_on_one_core": 1.76,
                             "one_rank_one_core_million_samples_per_s": 12.5, "cpu_ceiling_over_one": 1.37,
                             "two_ranks_million_samples_per_cpu_s": 13.0, "one_rank_cpu_bound_over_one": 1.79}
    assert scaling["w4"] == {"two_ranks_over_one": 2.27, "two_ranks_over_one_paired": None,
                             "two_ranks_over_one_on_one_core": None,
                             "one_rank_one_core_million_samples_per_s": None, "cpu_ceiling_over_one": None,
                             "two_ranks_million_samples_per_cpu_s": None, "one_rank_cpu_bound_over_one": None}


def test_sampler_results_maps_the_microbenchmarks_for_the_performance_page(tmp_path):
    # bench/scripts/sampler_results.py: each mode's batch() rate in M indices/s and its set_epoch
    # time in ms to two figures (O(1) modes by their cost), the Feistel permutation's slowest domain
    # with and without cycle walking; a mode missing from the output is an error, not a gap.
    modes = ("distributed", "streaming", "bucketed", "block", "balanced", "weighted", "stratified")
    benchmarks = []
    for k, mode in enumerate(modes):
        benchmarks.append({"name": f"batches/{mode}", "real_time": 300.0, "time_unit": "ns",
                           "indices_per_s": (k + 1) * 1.0e8 + 4.0e5})
        benchmarks.append({"name": f"set_epoch/{mode}", "real_time": 3.339 + 10 * k, "time_unit": "ms"})
    benchmarks += [{"name": "feistel_permutation/20/0", "indices_per_s": 6.3e7, "real_time": 1, "time_unit": "ns"},
                   {"name": "feistel_permutation/20/1", "indices_per_s": 1.25e8, "real_time": 1, "time_unit": "ns"},
                   {"name": "feistel_permutation/40/0", "indices_per_s": 6.1e7, "real_time": 1, "time_unit": "ns"},
                   {"name": "feistel_single_index/20", "indices_per_s": 2e7, "real_time": 1, "time_unit": "ns"}]
    path = tmp_path / "sampler-bench.json"
    path.write_text(json.dumps({"benchmarks": benchmarks}))
    script = os.path.join(SOURCE_DIR, "bench", "scripts", "sampler_results.py")
    result = json.loads(subprocess.run([sys.executable, script, str(path)], check=True, stdout=subprocess.PIPE,
                                       text=True).stdout)
    runs = {run["mode"]: run for run in result["runs"]}
    assert [run["mode"] for run in result["runs"]] == list(modes)
    assert runs["distributed"] == {"mode": "distributed", "million_indices_per_s": 100, "set_epoch_ms": 3.3,
                                   "set_epoch_note": "torch's permutation"}
    assert runs["bucketed"]["set_epoch_ms"] == 23 and runs["bucketed"]["million_indices_per_s"] == 300
    assert runs["stratified"]["set_epoch_ms"] == 63  # 63.339
    assert runs["streaming"]["set_epoch_ms"] is None and runs["streaming"]["set_epoch_cost"] == "O(1)"
    assert result["feistel"] == {"domains_log2": [20, 40], "million_indices_per_s_each": 61,
                                 "million_indices_per_s_without_cycle_walking": 125}
    assert {"cpu", "cores", "commit", "date"} <= set(result["machine"])

    path.write_text(json.dumps({"benchmarks": [b for b in benchmarks if b["name"] != "set_epoch/balanced"]}))
    missing = subprocess.run([sys.executable, script, str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert missing.returncode != 0 and "lacks set_epoch/balanced" in missing.stderr


def test_two_ranks_are_set_against_one_rank_on_one_core_pair_by_pair(tmp_path):
    # summarize.py: each 2-rank repeat of w3 against the 1-rank run held to one core just after it
    # (compare.sh's WITH_ONE_CORE, runs/onecore-w3-r2.K.json); the ratio is the median of the
    # pairs', the one-core figure the median of its runs, and the one-core runs make no table row.
    summarize = load_summarize()
    (tmp_path / "strider-w3-r1.json").write_text(json.dumps(dict(bench(20.0e6, 1), samples_per_cpu_s=17.0e6)))
    (tmp_path / "strider-w3-r2.json").write_text(json.dumps(dict(bench(26.0e6, 2), samples_per_cpu_s=14.0e6)))
    write_runs(tmp_path, "strider", "w3-r2", {1: 30.0e6, 2: 26.0e6, 3: 22.0e6}, "samples_per_s")
    # Pairs 30/20 = 1.5, 26/13 = 2.0, 22/16 = 1.375: median 1.5, where the medians' ratio would be 26/16.
    write_runs(tmp_path, "onecore", "w3-r2", {1: 20.0e6, 2: 13.0e6, 3: 16.0e6}, "samples_per_s")
    summarize.main(str(tmp_path))
    results = json.loads((tmp_path / "results.json").read_text())
    rows = {(row["workload"], row["ranks"]): row for row in results["table"]}
    assert set(rows) == {("w3", 1), ("w3", 2)}
    two = rows[("w3", 2)]
    assert two["strider_over_one_rank"] == 26.0e6 / 20.0e6
    assert two["strider_over_one_rank_one_core_pairs"] == [1.375, 1.5, 2.0]
    assert two["strider_over_one_rank_one_core"] == 1.5
    assert two["strider_one_rank_one_core_samples_per_s"] == 16.0e6
    scaling = [goal for goal in results["goals"] if goal["goal"].startswith("w3 at 2 ranks: >= 1.6x")]
    assert len(scaling) == 1 and not scaling[0]["met"] and "1.50x 1 rank held to one core" in scaling[0]["detail"]
    # What the CPU allows: the cores (at most 2 for 2 ranks) at the CPU the 2 ranks spent per sample.
    cores = min(2, len(os.sched_getaffinity(0)))
    assert two["strider_cpu_ceiling_over_one_rank"] == cores * 14.0e6 / 20.0e6
    assert f"{cores} fully busy cores would give {cores * 14.0e6 / 20.0e6:.2f}x" in scaling[0]["detail"]
    assert f"kept them {100 * (26.0 / 20.0) / (cores * 14.0 / 20.0):.0f}% busy" in scaling[0]["detail"]
    # And at the CPU the 1-rank run spent per sample: 2 ranks that split its work at no cost.
    assert two["strider_one_rank_cpu_bound_over_one_rank"] == cores * 17.0e6 / 20.0e6
    assert f"({cores * 17.0e6 / 20.0e6:.2f}x at the 1-rank run's CPU per sample)" in scaling[0]["detail"]


def test_the_scaling_goal_sets_each_2_rank_repeat_against_1_rank_run_just_after_it(tmp_path):
    # compare.sh's WITH_ONE_RANK: runs/onerank-w3-r2.K.json just after each 2-rank repeat. The
    # series' medians (26 against the 1-rank pass's 20: 1.3x) compare runs minutes apart; the
    # pairs read 30/17, 26/15 and 22/14, whose median, 26/15, is the goal's figure.
    summarize = load_summarize()
    (tmp_path / "strider-w3-r1.json").write_text(json.dumps(bench(20.0e6, 1)))
    (tmp_path / "strider-w3-r2.json").write_text(json.dumps(bench(26.0e6, 2)))
    write_runs(tmp_path, "strider", "w3-r2", {1: 30.0e6, 2: 26.0e6, 3: 22.0e6}, "samples_per_s")
    write_runs(tmp_path, "onerank", "w3-r2", {1: 17.0e6, 2: 15.0e6, 3: 14.0e6}, "samples_per_s")
    summarize.main(str(tmp_path))
    results = json.loads((tmp_path / "results.json").read_text())
    two = {(row["workload"], row["ranks"]): row for row in results["table"]}[("w3", 2)]
    assert two["strider_over_one_rank"] == 26.0e6 / 20.0e6
    assert two["strider_over_one_rank_paired_pairs"] == [22.0 / 14.0, 26.0 / 15.0, 30.0 / 17.0]
    assert two["strider_over_one_rank_paired"] == 26.0 / 15.0
    scaling = [goal for goal in results["goals"] if goal["goal"].startswith("w3 at 2 ranks: >= 1.6x")]
    assert len(scaling) == 1 and scaling[0]["met"]
    assert scaling[0]["detail"].startswith(
        "1.73x against 1 rank run just after each 2-rank repeat (median of 3 pairs, 157%-176%; the pairs fall on both"
        " sides of the goal); 1.30x the 1-rank series' median")
    # Without those runs the goal reads the series' medians, as before them.
    for path in (tmp_path / "runs").glob("onerank-*.json"):
        path.unlink()
    summarize.main(str(tmp_path))
    results = json.loads((tmp_path / "results.json").read_text())
    scaling = [goal for goal in results["goals"] if goal["goal"].startswith("w3 at 2 ranks: >= 1.6x")]
    assert not scaling[0]["met"] and scaling[0]["detail"].startswith("1.30x")
