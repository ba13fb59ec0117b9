#!/usr/bin/env python3
"""Measured step times of two `./zpp bench planner-local --fresh` outputs, layout by layout.

  python3 tools/compare_fresh_runs.py A.txt B.txt

For each layout both tables hold: A's and B's measured seconds, their ratio A/B, and the ratio with
each bench's times divided by that run's own speed probe (the reference shape's fb_s, averaged over
the probes before and after the bench), so a box that ran faster or slower in one sitting is taken
out; then the speed-scaled ratio per group (4-rank zeropp-vs-3d layouts without TP, the 3D layouts,
pipeline pp4, pipeline pp2). Made for two runs on one box that differ in one condition (pinned or
not); it says nothing about the planner, whose predictions are printed only for reference.
"""
import re
import sys

HEADER = "layout                                 measured_s"
SPEED = (r"# the box's speed.*?: ([\d.]+) after the calibration, ([\d.]+) after zeropp-vs-3d, "
         r"([\d.]+) after pipeline")


def read(path):
    try:
        text = open(path).read()
    except OSError as e:
        sys.exit(f"compare_fresh_runs: {path}: {e.strerror}")
    if HEADER not in text:
        sys.exit(f"compare_fresh_runs: {path}: no planner-local table (expected a --fresh output)")
    speed = re.search(SPEED, text)
    if not speed:
        sys.exit(f"compare_fresh_runs: {path}: no '# the box's speed' line (expected a --fresh output, r150 on)")
    table = text[text.index(HEADER):]
    rows = re.findall(r"^(\S.*?)\s{2,}([\d.]+)\s+([\d.]+)\s+([\d.]+)", table, re.M)
    rows = [r for r in rows if "measured_s" not in r[0]][:34]
    return {n: (float(m), float(q)) for n, m, _, q in rows}, [float(s) for s in speed.groups()]


def group(name):
    if name.startswith("pipeline pp4"):
        return "pipeline pp4"
    if name.startswith("pipeline pp2"):
        return "pipeline pp2"
    return "3d" if name.startswith("3d_") else "4-rank, no TP"


def main(argv):
    if len(argv) != 3:
        sys.exit("usage: compare_fresh_runs.py A.txt B.txt (two planner-local --fresh outputs)")
    (a, sa), (b, sb) = read(argv[1]), read(argv[2])
    print(f"# A {argv[1]}: speed probes {sa}\n# B {argv[2]}: speed probes {sb}")
    print(f"{'layout':40s} {'A_s':>7s} {'B_s':>7s} {'A/B':>6s} {'scaled':>6s} {'A_pred/meas':>11s} {'B_pred/meas':>11s}")
    groups = {}
    for name, (ma, qa) in a.items():
        if name not in b:
            continue
        mb, qb = b[name]
        i = (1, 2) if name.startswith("pipeline") else (0, 1)
        ka, kb = (sa[i[0]] + sa[i[1]]) / 2, (sb[i[0]] + sb[i[1]]) / 2
        scaled = (ma / ka) / (mb / kb)
        groups.setdefault(group(name), []).append(scaled)
        print(f"{name:40s} {ma:7.3f} {mb:7.3f} {ma / mb:6.3f} {scaled:6.3f} {qa:11.3f} {qb:11.3f}")
    for g, v in groups.items():
        print(f"# {g}: {len(v)} layouts, A/B scaled {min(v):.3f}-{max(v):.3f}, mean {sum(v) / len(v):.3f}")


if __name__ == "__main__":
    main(sys.argv)
