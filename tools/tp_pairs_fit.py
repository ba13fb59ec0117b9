#!/usr/bin/env python3
"""tools/tp_pairs_fit.py: intra_node_oversubscribed fitted again from the TP waits a calibration
recorded (tools/calibrate_pairs.sh: two tp=2 jobs of the 3D baseline at once on a CPU box, their
wait per step at three shapes, "(width W context C x MB: S s measured / ...)" in the source), by the
current planner.

The fit is calibrate_pairs.sh's: wait = latency x A + B / bandwidth, A and B the planner's TP
collective time for the job on two unit links (1000 us alone; 1 GB/s alone), least squares on
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
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hardware_json  # noqa: E402
import relative_fit  # noqa: E402

PLAN = "bazel-bin/tools/plan"
DEPTH, HEADS, M = 4, 4, 8  # calibrate_pairs.sh's jobs
NOTE = re.compile(r"intra_node_oversubscribed from two tp=2 jobs.*?per hop \(([^)]*)\)")
SHAPE = re.compile(r"width (\d+) context (\d+) x (\d+): ([0-9.]+) s measured")


def expected_max_minus_one(cv):
    """E[max of 2 lognormal factors of mean 1 and cv] - 1: 2 Phi(sigma / sqrt 2) - 1, sigma^2 = ln(1 + cv^2),
    the closed form for the pairs' two peers (the planner's ExpectedMaxLognormal integrates any tp)."""
    return math.erfc(-math.sqrt(math.log1p(cv * cv)) / 2) - 1 if cv > 0 else 0.0


def predict(plan, hw, link, width, ctx, mb, field):
    """The planner's `field` for one of the pairs' jobs, every intra-node link of `hw` set to `link`."""
    unit = dict(hw)
    for key in ("intra_node", "intra_node_oversubscribed", "intra_node_tp_filled"):
        unit[key] = link
    for key in ("intra_node_oversubscribed_gather", "intra_node_p2p", "tp_peer_skew"):
        unit.pop(key, None)
    fd, path = tempfile.mkstemp(prefix="tp_pairs_fit.", suffix=".json")
    os.close(fd)
    hardware_json.write(path, unit)
    try:
        args = [plan, "--predict", "--hardware", path, "--hidden", str(width), "--layers", str(DEPTH), "--heads",
                str(HEADS), "--vocab", "256", "--seq", str(ctx), "--cpu-attention", "--gpus", "2", "--micro-batch",
                str(mb), "--design", "3d", "--tp", "2", "--global-batch", str(M * mb)]
        out = subprocess.run(args, capture_output=True, text=True)
    finally:
        os.remove(path)
    found = re.search(r" %s=([0-9.e+-]+)" % field, out.stdout)
    if out.returncode != 0 or not found:
        sys.exit(f"tp_pairs_fit: plan {' '.join(args[1:])}: {out.stderr.strip() or 'no ' + field + ' in its output'}")
    return float(found.group(1))


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
        a = predict(plan, hw, {"bandwidth_gbps": 1e6, "latency_us": 1000, "efficiency": 1}, width, ctx, mb,
                    "tp_collectives_s")
        b = predict(plan, hw, {"bandwidth_gbps": 1, "latency_us": 0, "efficiency": 1}, width, ctx, mb,
                    "tp_collectives_s")
        compute = predict(plan, hw, {"bandwidth_gbps": 1e6, "latency_us": 0, "efficiency": 1}, width, ctx, mb,
                          "compute_s") if skew > 0 else 0.0
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
