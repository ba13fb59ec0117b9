#!/usr/bin/env python3
"""layer_cost.py: the fixed time one layer's forward + backward of one micro-batch costs on this box
whatever its size (eager dispatch, autograd's bookkeeping per operator): layer_overhead_probe_us, which
the compute fit (tools/compute_fit.py) takes as layer_overhead_us where a description holds it.

The compute fit takes this cost as the intercept of a line through three shapes of one depth, beside
the factor compute_overhead. An intercept through three points whose times the box moves by several
percent trades against the slope: over planner-local r29-r128 it came out 0 to 8325 us a layer
(median 1083), and the factor moved with it.

Here it is measured where nothing else is: a tiny GPT (width 16, 1 head, context 8, micro-batch 1:
its arithmetic is some microseconds a layer) at two depths, one run per core at once as the reference
runs are, the depths in turn, several rounds. The deeper model's extra forward + backward time per step
(the runs' --profile), over its extra layer calls, is the cost of one. What a step pays per
micro-batch whatever its depth (embedding, head, loss, the executor's call of the chunk) is in both
and cancels.

No calibration writes it. It read 286-292 us on 2026-11-29, where the fit's intercept was 950, and in
the intercept's place it predicted the committed runs worse (`./zpp bench planner-local --history --set
layer_overhead_probe_us=292`: 2797 of 3434 rows within 10% against 2846; the chronicle, thirty-ninth
session): what the intercept takes in at width 256 is more than dispatch.

  layer_cost.py measure OUT.json   measure, print one line, write layer_overhead_probe_us into OUT.json
                                   (and a note to its source)
  layer_cost.py per-layer SHALLOW_S DEEP_S
                                   the arithmetic alone, on the two depths' forward + backward seconds
                                   per step
"""
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compute_fit  # noqa: E402
import hardware_json  # noqa: E402

DEPTHS = (2, 10)
M = 8  # micro-batches per step
ROUNDS = 5
STEPS = 100  # each run profiles the steps after its warm-up
TIMEOUT_S = 600
MODEL = ["--width", "16", "--heads", "1", "--context", "8", "--microbatches", str(M), "--micro-batch", "1",
         "--bench-warmup", "3", "--log-every", "100000", "--profile"]


def per_layer(shallow_s, deep_s, depths=DEPTHS, m=M):
    """Seconds one layer's forward + backward of one micro-batch costs, from the two depths' forward +
    backward seconds per step."""
    return (deep_s - shallow_s) / ((depths[1] - depths[0]) * m)


def fb_of_runs(depth, units, port):
    """The mean forward + backward seconds per step of `units` concurrent 1-rank runs at `depth`."""
    procs = [subprocess.Popen(["bazel-bin/tools/launcher", "--nproc-per-node", "1", "--master-port", str(port + i), "--",
                               "bazel-bin/tools/train", "--depth", str(depth), "--steps", str(STEPS)] + MODEL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for i in range(units)]
    outs = []
    for p in procs:
        try:  # a run takes some seconds here; killed at the timeout, the launcher takes its rank with it
            out, _ = p.communicate(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            sys.exit("layer_cost: a run at depth %d did not finish in %d s (expected well under a minute)"
                     % (depth, TIMEOUT_S))
        if p.returncode != 0:
            tail = out.strip().splitlines()[-1:] or ["no output"]
            sys.exit("layer_cost: a run at depth %d failed (exit %d): %s" % (depth, p.returncode, tail[0]))
        outs.append(out)
    lines = [line.split("PROFILE ", 1)[1] for out in outs for line in out.splitlines() if "PROFILE " in line]
    if len(lines) != units:
        sys.exit("layer_cost: %d PROFILE lines from %d runs at depth %d, expected one a run" % (len(lines), units, depth))
    return compute_fit.profile_seconds(compute_fit.mean_profile("\n".join(lines)))


def measure(out):
    hw = json.load(open(out))
    units = int(hw["shared_compute_units"])
    times = {d: [] for d in DEPTHS}
    for r in range(ROUNDS):
        for k, d in enumerate(DEPTHS):
            times[d].append(fb_of_runs(d, units, 29890 + 8 * r + 4 * k))
    shallow, deep = (statistics.median(times[d]) for d in DEPTHS)
    us = per_layer(shallow, deep) * 1e6
    if us <= 0:
        sys.exit("layer_cost: got %.1f us a layer (depth %d %.4f s, depth %d %.4f s a step), expected more than 0: the "
                 "runs were disturbed; ./zpp calibrate again" % (us, DEPTHS[0], shallow, DEPTHS[1], deep))
    per_round = "/".join("%.1f" % (per_layer(a, b) * 1e6) for a, b in zip(times[DEPTHS[0]], times[DEPTHS[1]]))
    hw["layer_overhead_probe_us"] = round(us, 1)
    hw["source"] += ("; layer_overhead_probe_us %.1f from a tiny GPT (tools/layer_cost.py: width 16, context 8, micro-batch "
                     "1, %d micro-batches) at depths %d and %d, %d runs at once, %d rounds: forward + backward %.4f and "
                     "%.4f s a step (medians), the extra layers' time over their calls (rounds: %s us); the compute fit "
                     "takes it as layer_overhead_us"
                     % (us, M, DEPTHS[0], DEPTHS[1], units, ROUNDS, shallow, deep, per_round))
    hardware_json.write(out, hw)
    print("layer_cost: layer_overhead_probe_us %.1f (depth %d %.4f s, depth %d %.4f s a step; rounds %s us)"
          % (us, DEPTHS[0], shallow, DEPTHS[1], deep, per_round))


def main(argv):
    if argv[:1] == ["measure"] and len(argv) == 2:
        measure(argv[1])
    elif argv[:1] == ["per-layer"] and len(argv) == 3:
        try:
            values = [float(a) for a in argv[1:]]
        except ValueError:
            sys.exit("layer_cost: per-layer: got %s, expected two seconds per step" % " ".join(argv[1:]))
        print("%.1f" % (per_layer(*values) * 1e6))
    else:
        sys.exit("layer_cost: usage: layer_cost.py measure OUT.json | per-layer SHALLOW_S DEEP_S (got: %s)"
                 % " ".join(argv))


if __name__ == "__main__":
    main(sys.argv[1:])
