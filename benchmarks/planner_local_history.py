#!/usr/bin/env python3
"""planner_local_history.py: the current planner over every committed planner-local run.

Each argument is LABEL=TSV: one run's step-time rows (layout, measured_s, predicted_s, and optionally
the rounds' times, comma-separated), as
planner_local.py --rows-tsv writes them after predicting that run's measurements with that run's
own calibration (benchmarks/planner-local.sh --history). Prints, per run, the rows within 10% and
the mean |error|; per layout, its prediction/measurement over the runs (mean, median, spread, range,
misses); and how many misses per run the spread alone would give (each layout's ratio normal
around 1.0 with its observed spread) beside those the spread and the bias together give (around
its observed mean), against the misses observed. Then, as a diagnostic, each run's common shift (the
median of its rows' ratios) divided out: how far the runs' shifts spread, how far the rows spread
around their run's shift, and the rows and runs within 10% once the shift is gone, which tells the
box's drift between a calibration and its benches (one factor a run) from the cost model's error
between layouts. The shift is fitted to each run's own measurements, so it never enters a RESULT.
Where rows carry their rounds' times (zeropp-vs-3d --rounds), also each such run's own noise (the
noise column) and the share of rows a planner without error would put within 10% with it
(planner_local.noise_floor).
The last RESULT line is the share of all rows within 10%, named NAME_step_time_share_within_10pct
(--name NAME; default history).
  planner_local_history.py [--name NAME] LABEL=TSV [LABEL=TSV ...]
"""
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from planner_local import noise_floor  # noqa: E402

BOUND = 0.10


def outside(mu, sd):
    """P(|X - 1| > BOUND) for X ~ N(mu, sd)."""
    if sd <= 0:
        return float(abs(mu - 1) > BOUND)
    x = statistics.NormalDist(mu, sd)
    return x.cdf(1 - BOUND) + 1 - x.cdf(1 + BOUND)


def main(argv):
    result_name = "history"
    if argv[:1] == ["--name"]:
        if len(argv) < 2 or not argv[1].isidentifier():
            sys.exit(f"planner_local_history: --name: got {argv[1:2]}, expected a word (letters, digits, _)")
        result_name, argv = argv[1], argv[2:]
    if not argv or any("=" not in a for a in argv):
        sys.exit("planner_local_history: expected LABEL=TSV arguments (planner_local.py --rows-tsv output)")
    runs, by_layout, rounds = [], {}, {}
    for arg in argv:
        label, path = arg.split("=", 1)
        ratios = []
        for line in open(path):
            name, measured, predicted, *times = line.rstrip("\n").split("\t")
            if times and times[0]:
                rounds.setdefault(label, []).append([float(t) for t in times[0].split(",")])
            r = float(predicted) / float(measured)
            ratios.append((name, r))
            by_layout.setdefault(name, []).append(r)
        runs.append((label, ratios))
    # noise: the reported times' own noise where the run measured its rows in rounds (noise_floor).
    noise = {label: noise_floor(groups) for label, groups in rounds.items()}
    noise = {label: floor for label, floor in noise.items() if floor}
    print(f"{'run':8s} {'rows':>5s} {'within':>6s} {'mean|err|':>9s} {'noise':>6s}  worst")
    total = within = 0
    for label, ratios in runs:
        ok = sum(abs(r - 1) <= BOUND for _, r in ratios)
        worst = max(ratios, key=lambda x: abs(x[1] - 1))
        mean = statistics.fmean(abs(r - 1) for _, r in ratios)
        own = f"{noise[label][1]:6.3f}" if label in noise else f"{'-':>6s}"
        print(f"{label:8s} {len(ratios):5d} {ok:6d} {mean:9.3f} {own}  {worst[0]} {worst[1]:.3f}x")
        total, within = total + len(ratios), within + ok
    print()
    # The median beside the mean: one outlying calibration (r50's rows were 19-57% slow) moves every
    # layout's mean and spread, its median barely.
    # shifted: each row's ratio over its run's median ratio (the diagnostic below).
    shift = {label: statistics.median(r for _, r in ratios) for label, ratios in runs}
    shifted = {}
    for label, ratios in runs:
        for name, r in ratios:
            shifted.setdefault(name, []).append(r / shift[label])
    print(f"{'layout':38s} {'runs':>4s} {'mean':>6s} {'median':>6s} {'sd':>6s} {'min':>6s} {'max':>6s} {'misses':>6s}"
          f" {'shifted':>7s} {'sd':>6s}")
    spread_only = with_bias = 0.0
    for name, rs in sorted(by_layout.items(), key=lambda kv: statistics.fmean(kv[1])):
        mu = statistics.fmean(rs)
        sd = statistics.pstdev(rs)
        misses = sum(abs(r - 1) > BOUND for r in rs)
        rel = shifted[name]
        print(f"{name:38s} {len(rs):4d} {mu:6.3f} {statistics.median(rs):6.3f} {sd:6.3f} {min(rs):6.3f} "
              f"{max(rs):6.3f} {misses:6d} {statistics.fmean(rel):7.3f} {statistics.pstdev(rel):6.3f}")
        spread_only += outside(1.0, sd)
        with_bias += outside(mu, sd)
    n = len(runs)
    print(f"# misses per run: observed {(total - within) / n:.2f}; expected from each layout's spread alone "
          f"(centred on 1.0) {spread_only:.2f}; from its spread around its mean {with_bias:.2f}")
    rows_shifted = [r for rs in shifted.values() for r in rs]
    runs_shifted = sum(all(abs(r / shift[label] - 1) <= BOUND for _, r in ratios) for label, ratios in runs)
    print(f"# diagnostic, each run's median ratio divided out (one factor a run, fitted to its own rows): the runs' "
          f"shifts sd {statistics.pstdev(shift.values()):.3f} ({min(shift.values()):.3f}-{max(shift.values()):.3f}); "
          f"the rows around their run's shift sd {statistics.pstdev(rows_shifted):.3f}; "
          f"{sum(abs(r - 1) <= BOUND for r in rows_shifted)} of {total} rows and {runs_shifted} of {n} runs within 10%")
    if noise:
        # One disturbed run's rounds dominate a pooled figure: the median run's beside it.
        floor = noise_floor([g for groups in rounds.values() for g in groups])
        typical = sorted(noise.values(), key=lambda f: f[1])[(len(noise) - 1) // 2]
        print(f"# diagnostic, the benches' own noise (zeropp-vs-3d's rounds) in {len(noise)} runs: the reported "
              f"times' noise in ln(step time) {min(f[1] for f in noise.values()):.3f}-"
              f"{max(f[1] for f in noise.values()):.3f}, the median run's {typical[1]:.3f} (pooled over the runs "
              f"{floor[1]:.3f}); a planner without error would put {typical[2]:.1%} of the median run's rows "
              f"within 10% ({floor[2]:.1%} pooled)")
    share = within / total
    print(f"# {n} runs, {within} of {total} rows within 10%, mean |error| "
          f"{statistics.fmean(abs(r - 1) for _, rs in runs for _, r in rs):.3f}")
    print(f"RESULT planner-local {result_name}_step_time_share_within_10pct={share:.3f} fraction reference=1.0 "
          f"ratio={share:.3f} target=1.0 {'MET' if share >= 1.0 else 'MISSED'}")


if __name__ == "__main__":
    main(sys.argv[1:])
