#!/usr/bin/env python3
"""p2p_fit.py: the latency of a pipeline transfer between two ranks of this box while both compute
(the description's intra_node_p2p), fitted for tools/calibrate_pairs.sh.

A pipeline with more chunks per rank crosses more stage boundaries per step: each chunk boundary is
one more activation and one more gradient transfer per micro-batch. calibrate_pairs.sh runs one
pipeline job of one rank per core (at a shape no validated layout runs) with 1 and with 4 chunks per
rank, in turn, and gives this tool the two mean steps. It finds the latency at which the planner
predicts the same growth from 1 to 4 chunks (the predicted growth rises with the latency: bisection),
the bandwidth kept at intra_node's. Where the planner already predicts that growth at intra_node's
own latency, the latency is intra_node's (the measurement shows no extra cost).

  p2p_fit.py HW.json STEP_V1_S STEP_V4_S WIDTH DEPTH HEADS CONTEXT MICRO_BATCH MICROBATCHES PP

prints one line: latency_us=L predicted_v1_s=A predicted_v4_s=B measured_growth_s=G
"""
import json
import os
import re
import subprocess
import sys
import tempfile

PLAN = "bazel-bin/tools/plan"
CHUNKS = (1, 4)


def bisect_increasing(f, target, lo, hi, iters=30):
    """The x in [lo, hi] where the increasing f reaches target: lo if f(lo) >= target, hi if f(hi) <
    target, else by bisection to (hi - lo) / 2**iters."""
    if f(lo) >= target:
        return lo
    if f(hi) < target:
        return hi
    for _ in range(iters):
        mid = (lo + hi) / 2
        if f(mid) < target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def predict_steps(hw, latency_us, shape):
    """The planner's step at 1 and 4 chunks per rank with intra_node_p2p at latency_us."""
    width, depth, heads, context, mb, m, pp = shape
    h = dict(hw)
    h["intra_node_p2p"] = {"bandwidth_gbps": hw["intra_node"]["bandwidth_gbps"], "latency_us": latency_us,
                           "efficiency": hw["intra_node"].get("efficiency", 1.0)}
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(h, f)
    try:
        steps = []
        for v in CHUNKS:
            schedule = ["--schedule", "1f1b"] if v == 1 else ["--schedule", "interleaved", "--v", str(v)]
            args = [PLAN, "--predict", "--hardware", f.name, "--hidden", str(width), "--layers", str(depth),
                    "--heads", str(heads), "--vocab", "256", "--seq", str(context), "--cpu-attention",
                    "--gpus", str(pp), "--pp", str(pp), "--devices-per-node", str(pp), "--global-batch", str(m * mb),
                    "--micro-batch", str(mb), "--design", "3d", "--grad-accumulation", "sink"] + schedule
            out = subprocess.run(args, capture_output=True, text=True)
            if out.returncode != 0:
                sys.exit("p2p_fit: plan %s: %s" % (" ".join(args[1:]), out.stderr.strip()))
            steps.append(float(re.search(r"step_s=([0-9.e+-]+)", out.stdout).group(1)))
        return steps
    finally:
        os.unlink(f.name)


def main():
    if len(sys.argv) != 11:
        sys.exit("p2p_fit: usage: p2p_fit.py HW.json STEP_V1_S STEP_V4_S WIDTH DEPTH HEADS CONTEXT MICRO_BATCH "
                 "MICROBATCHES PP (got %d arguments)" % (len(sys.argv) - 1))
    hw = json.load(open(sys.argv[1]))
    v1, v4 = float(sys.argv[2]), float(sys.argv[3])
    shape = tuple(int(a) for a in sys.argv[4:11])
    floor_us = hw["intra_node"]["latency_us"]
    growth = v4 - v1
    latency = bisect_increasing(lambda us: (lambda s: s[1] - s[0])(predict_steps(hw, us, shape)), growth,
                                floor_us, 50000.0, iters=20)
    p1, p4 = predict_steps(hw, latency, shape)
    print("latency_us=%.1f predicted_v1_s=%.4f predicted_v4_s=%.4f measured_growth_s=%.4f" % (latency, p1, p4, growth))


if __name__ == "__main__":
    main()
