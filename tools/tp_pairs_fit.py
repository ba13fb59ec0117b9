#!/usr/bin/env python3
"""tools/tp_pairs_fit.py: intra_node_oversubscribed fitted again from the TP waits a calibration
recorded (tools/calibrate_pairs.sh: two tp=2 jobs of the 3D baseline at once on a CPU box, their
wait per step at three shapes, "(width W context C x MB: S s measured / ...)" in the source), by the
current planner.

The fit is calibrate_pairs.sh's: wait = latency x A + B / bandwidth, A and B the planner's TP
collective time for the job on two unit links (tools/unit_links.py), least squares on
relative error (relative_fit.py). With tp_peer_skew set in the description, the part of the wait the
planner now charges as its peers' skew comes off first: E[max of 2 lognormal factors of compute_cv]
- 1 times the pair's compute per step, which on the box's cores, two jobs' 4 ranks on 2 cores, runs
at half speed and oversubscribed_compute_factor slower (the planner's compute_s for the job at a
null link, 2 ranks, times those).

  tp_pairs_fit.py refit HW [--plan PLAN]   HW's intra_node_oversubscribed refitted, written back
"""
import json
import math
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hardware_json  # noqa: E402
import relative_fit  # noqa: E402
import unit_links  # noqa: E402

PLAN = unit_links.PLAN
DEPTH, HEADS, M = 4, 4, 8  # calibrate_pairs.sh's jobs
NOTE = re.compile(r"intra_node_oversubscribed from two tp=2 jobs.*?per hop \(([^)]*)\)")
SHAPE = re.compile(r"width (\d+) context (\d+) x (\d+): ([0-9.]+) s measured")


def expected_max_minus_one(cv):
    """E[max of 2 lognormal factors of mean 1 and cv] - 1: 2 Phi(sigma / sqrt 2) - 1, sigma^2 = ln(1 + cv^2),
    the closed form for the pairs' two peers (the planner's ExpectedMaxLognormal integrates any tp)."""
    return math.erfc(-math.sqrt(math.log1p(cv * cv)) / 2) - 1 if cv > 0 else 0.0


def predict(plan, hw, link, width, ctx, mb, field):
    """The planner's `field` for one of the pairs' jobs, every intra-node link of `hw` set to `link`."""
    return unit_links.predict(plan, hw, link, "tp", (width, DEPTH, HEADS, ctx, M, mb), field)


def refit(hw_path, plan):
    hw = json.load(open(hw_path))
    note = NOTE.search(hw.get("source", ""))
    shapes = [(int(w), int(c), int(b), float(s)) for w, c, b, s in SHAPE.findall(note.group(1))] if note else []
    if len(shapes) < 2:
        sys.exit(f"tp_pairs_fit: {hw_path}: its source records {len(shapes)} TP pair shapes, expected 2 or more "
                 f"(a calibration by tools/calibrate_pairs.sh)")
    skew = hw.get("tp_peer_skew", 0) * expected_max_minus_one(hw.get("compute_cv", 0))
    slow = 2.0 * hw.get("oversubscribed_compute_factor", 1.0)  # two jobs' 4 ranks on the box's 2 cores
    rows, taken = [], []
    for width, ctx, mb, wait in shapes:
        a, b = unit_links.coefficients(plan, hw, "tp", (width, DEPTH, HEADS, ctx, M, mb))
        compute = predict(plan, hw, unit_links.NULL_LINK, width, ctx, mb, "compute_s") if skew > 0 else 0.0
        off = skew * compute * slow
        if wait - off <= 0:
            sys.exit(f"tp_pairs_fit: {hw_path}: width {width} context {ctx} x {mb}: the skew charged ({off:.4f} s) "
                     f"is not below the wait measured ({wait:.4f} s)")
        rows.append((a / 1e-3, b * 1e9, wait - off))
        taken.append(off)
    alpha, inv_bw = relative_fit.fit_link(rows)
    new = {"bandwidth_gbps": round(1 / inv_bw / 1e9, 4), "latency_us": round(alpha * 1e6, 1), "efficiency": 1.0}
    print(f"tp_pairs_fit: {os.path.basename(hw_path)}: intra_node_oversubscribed {json.dumps(hw.get('intra_node_oversubscribed'))}"
          f" -> {json.dumps(new)} (skew taken off the waits: {', '.join('%.4f' % t for t in taken)} s)")
    hw["intra_node_oversubscribed"] = new
    hardware_json.write(hw_path, hw)


def main(argv):
    if argv[:1] == ["refit"] and len(argv) in (2, 4) and (len(argv) == 2 or argv[2] == "--plan"):
        refit(argv[1], argv[3] if len(argv) == 4 else PLAN)
    else:
        sys.exit("usage: tp_pairs_fit.py refit HW [--plan PLAN]")


if __name__ == "__main__":
    main(sys.argv[1:])
