#!/usr/bin/env python3
"""tools/unit_links.py: how the planner's time for one of calibrate_pairs.sh's jobs depends on the link,
read off predictions with unit links. The one place that builds those links, for
tools/calibrate_pairs.sh (which fits latency and bandwidth to the measured waits) and
tools/tp_pairs_fit.py (which refits them from a calibration's record).

A job's wait is latency x A + B / bandwidth: A the planner's time at a link of 1000 us and no
bandwidth limit (divided by 1e-3: seconds per second of latency), B its time at 1 GB/s and no latency
(times 1e9: seconds times bytes per second). The unit link goes in every intra-node field a 2-rank
job's TP collectives or gathers may take; the links fitted from it, and tp_peer_skew (the planner's
what-if that charges peers' skew apart from the link), are dropped: the link fitted from these times
takes the whole measured wait, so a description with tp_peer_skew set needs `tools/tp_pairs_fit.py refit`
after calibrate_pairs.sh, as `./zpp bench planner-local --history --set tp_peer_skew=...` does.

Kinds (calibrate_pairs.sh's): tp and tp-filled, a tp=2 job of the 3D baseline (its TP collectives,
tp_collectives_s); gather, a 2-rank ZeRO-3 job without prefetch (its blocking gathers, blocking_gather_s).

  unit_links.py HW KIND WIDTH DEPTH HEADS CONTEXT MICROBATCHES MICRO_BATCH [--plan PLAN]
      prints "A_S B_S": the planner's time for the job at the latency unit, then at the bandwidth unit
"""
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hardware_json  # noqa: E402

PLAN = "bazel-bin/tools/plan"
LATENCY_UNIT = {"bandwidth_gbps": 1e6, "latency_us": 1000, "efficiency": 1}
BANDWIDTH_UNIT = {"bandwidth_gbps": 1, "latency_us": 0, "efficiency": 1}
NULL_LINK = {"bandwidth_gbps": 1e6, "latency_us": 0, "efficiency": 1}
LINKS = ("intra_node", "intra_node_oversubscribed", "intra_node_tp_filled")
DROPPED = ("intra_node_oversubscribed_gather", "intra_node_p2p", "tp_peer_skew")
KINDS = {  # kind: the job's layout flags (its global batch in micro-batches of the job), its field
    "tp": (["--design", "3d", "--tp", "2"], 1, "tp_collectives_s"),
    "tp-filled": (["--design", "3d", "--tp", "2"], 1, "tp_collectives_s"),
    "gather": (["--design", "zero3", "--zero", "2", "--prefetch", "0"], 2, "blocking_gather_s"),
}


def predict(plan, hw, link, kind, shape, field=None):
    """The planner's `field` (the kind's own by default) for the job of `kind` at `shape` (width, depth,
    heads, context, micro-batches, micro-batch), every intra-node link of the description `hw` set to `link`."""
    width, depth, heads, ctx, m, mb = shape
    flags, replicas, own = KINDS[kind]
    field = field or own
    unit = {k: v for k, v in hw.items() if k not in DROPPED}
    unit.update({k: link for k in LINKS})
    fd, path = tempfile.mkstemp(prefix="unit_links.", suffix=".json")
    os.close(fd)
    hardware_json.write(path, unit)
    args = [plan, "--predict", "--hardware", path, "--hidden", str(width), "--layers", str(depth), "--heads",
            str(heads), "--vocab", "256", "--seq", str(ctx), "--cpu-attention", "--gpus", "2", "--micro-batch",
            str(mb), *flags, "--global-batch", str(replicas * m * mb)]
    try:
        out = subprocess.run(args, capture_output=True, text=True)
    finally:
        os.remove(path)
    found = re.search(r" %s=([0-9.e+-]+)" % field, out.stdout)
    if out.returncode != 0 or not found:
        sys.exit(f"unit_links: plan {' '.join(args[1:])}: {out.stderr.strip() or 'no ' + field + ' in its output'}")
    return float(found.group(1))


def coefficients(plan, hw, kind, shape):
    """(A, B) in seconds: the job's time at the latency unit and at the bandwidth unit."""
    return predict(plan, hw, LATENCY_UNIT, kind, shape), predict(plan, hw, BANDWIDTH_UNIT, kind, shape)


def main(argv):
    usage = ("usage: unit_links.py HW KIND WIDTH DEPTH HEADS CONTEXT MICROBATCHES MICRO_BATCH [--plan PLAN] "
             "(KIND: %s)" % "|".join(KINDS))
    plan = PLAN
    if len(argv) == 10 and argv[8] == "--plan":
        plan, argv = argv[9], argv[:8]
    if len(argv) != 8:
        sys.exit(usage)
    if argv[1] not in KINDS:
        sys.exit(f"unit_links: KIND: got '{argv[1]}', expected one of {', '.join(KINDS)}")
    names = ("WIDTH", "DEPTH", "HEADS", "CONTEXT", "MICROBATCHES", "MICRO_BATCH")
    shape = []
    for name, v in zip(names, argv[2:]):
        if not v.isdigit() or int(v) <= 0:
            sys.exit(f"unit_links: {name}: got '{v}', expected a positive integer")
        shape.append(int(v))
    try:
        hw = json.load(open(argv[0]))
    except (OSError, ValueError) as e:
        sys.exit(f"unit_links: HW: '{argv[0]}' is not a readable JSON hardware description ({e})")
    a, b = coefficients(plan, hw, argv[1], tuple(shape))
    print(f"{a!r} {b!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
