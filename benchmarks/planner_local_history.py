#!/usr/bin/env python3
"""planner_local_history.py: the current planner over every committed planner-local run.

Each argument is LABEL=TSV: one run's step-time rows (layout, measured_s, predicted_s), as
planner_local.py --rows-tsv writes them after predicting that run's measurements with that run's
own calibration (benchmarks/planner-local.sh --history). Prints, per run, the rows within 10% and
the mean |error|; per layout, its prediction/measurement over the runs (mean, median, spread, range,
misses); and how many misses per run the spread alone would give (each layout's ratio normal
around 1.0 with its observed spread) beside those the spread and the bias together give (around
its observed mean), against the misses observed. The last RESULT line is the share of all rows
within 10%, named NAME_step_time_share_within_10pct (--name NAME; default history).
  planner_local_history.py [--name NAME] LABEL=TSV [LABEL=TSV ...]
"""
import math
import statistics
import sys

BOUND = 0.10


def outside(mu, sd):
    """P(|X - 1| > BOUND) for X ~ N(mu, sd)."""
    if sd <= 0:
        return float(abs(mu - 1) > BOUND)
    cdf = lambda x: 0.5 * (1 + math.erf((x - mu) / (sd * math.sqrt(2))))
    return cdf(1 - BOUND) + 1 - cdf(1 + BOUND)


def main(argv):
    result_name = "history"
    if argv[:1] == ["--name"]:
        if len(argv) < 2 or not argv[1].isidentifier():
            sys.exit(f"planner_local_history: --name: got {argv[1:2]}, expected a word (letters, digits, _)")
        result_name, argv = argv[1], argv[2:]
    if not argv or any("=" not in a for a in argv):
        sys.exit("planner_local_history: expected LABEL=TSV arguments (planner_local.py --rows-tsv output)")
    runs, by_layout = [], {}
    for arg in argv:
        label, path = arg.split("=", 1)
        ratios = []
        for line in open(path):
            name, measured, predicted = line.rstrip("\n").split("\t")
            r = float(predicted) / float(measured)
            ratios.append((name, r))
            by_layout.setdefault(name, []).append(r)
        runs.append((label, ratios))
    print(f"{'run':8s} {'rows':>5s} {'within':>6s} {'mean|err|':>9s}  worst")
    total = within = 0
    for label, ratios in runs:
        ok = sum(abs(r - 1) <= BOUND for _, r in ratios)
        worst = max(ratios, key=lambda x: abs(x[1] - 1))
        mean = statistics.fmean(abs(r - 1) for _, r in ratios)
        print(f"{label:8s} {len(ratios):5d} {ok:6d} {mean:9.3f}  {worst[0]} {worst[1]:.3f}x")
        total, within = total + len(ratios), within + ok
    print()
    # The median beside the mean: one outlying calibration (r50's rows were 19-57% slow) moves every
    # layout's mean and spread, its median barely.
    print(f"{'layout':38s} {'runs':>4s} {'mean':>6s} {'median':>6s} {'sd':>6s} {'min':>6s} {'max':>6s} {'misses':>6s}")
    spread_only = with_bias = 0.0
    for name, rs in sorted(by_layout.items(), key=lambda kv: statistics.fmean(kv[1])):
        mu = statistics.fmean(rs)
        sd = statistics.pstdev(rs)
        misses = sum(abs(r - 1) > BOUND for r in rs)
        print(f"{name:38s} {len(rs):4d} {mu:6.3f} {statistics.median(rs):6.3f} {sd:6.3f} {min(rs):6.3f} "
              f"{max(rs):6.3f} {misses:6d}")
        spread_only += outside(1.0, sd)
        with_bias += outside(mu, sd)
    n = len(runs)
    print(f"# misses per run: observed {(total - within) / n:.2f}; expected from each layout's spread alone "
          f"(centred on 1.0) {spread_only:.2f}; from its spread around its mean {with_bias:.2f}")
    share = within / total
    print(f"# {n} runs, {within} of {total} rows within 10%, mean |error| "
          f"{statistics.fmean(abs(r - 1) for _, rs in runs for _, r in rs):.3f}")
    print(f"RESULT planner-local {result_name}_step_time_share_within_10pct={share:.3f} fraction reference=1.0 "
          f"ratio={share:.3f} target=1.0 {'MET' if share >= 1.0 else 'MISSED'}")


if __name__ == "__main__":
    main(sys.argv[1:])
