#!/usr/bin/env python3
"""The planner against every single-GPU training step measured on a lent GPU.

Reads the committed logs of gpu_checks.sh (benchmarks/results/gpu-*.txt): each `zeropp train:`
header (model shape, tokens per step), its `recompute:` line if any, and the `BENCH` line that
follows (step_s_mean over the timed steps); runs without a BENCH line (the op profile, the
offloaded runs, which report PROFILE instead) are skipped. The shape sweep (section 5) of the
2026-11-26 log printed no headers: its steps come from its RESULT lines' names (w, l, s, b, rc;
head dim 128, vocabulary 256, as that section runs them) and their reference= (the measured step);
later logs print both, and a RESULT line of the run just read from its BENCH line is skipped. Predicts each step with
`plan --predict --gpus 1 --design zero3` on the description given, by default the datasheet
description of the GPU each log's header names (one micro-batch of
tokens/context sequences, byte vocabulary, bf16) and prints, per step, predicted/measured, then

  RESULT planner-gpu steps_within_10pct=K count reference=N ratio=K/N target=1.0 MET|MISSED
  RESULT planner-gpu mean_abs_error=E fraction reference=0 ratio=E target=0.10 MET|MISSED

and the same two lines as planner-gpu-latest over the last log given alone (the glob's order: the
newest lease), which measured the runtime as it is now; earlier leases measured earlier runtimes
(until 2026-11-27's second lease, a step end that spent 9% of a 1.2B step on an fp64 norm).

Nothing is fitted here: the description is whatever the file holds (its "source" says which of
its numbers came from which measurement).

  python3 benchmarks/planner_gpu.py --plan bazel-bin/tools/plan [--hardware auto|DESCRIPTION] LOG...
"""
import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from planner_local import predict  # noqa: E402  (plan --predict, refusals reported in one line)

SWEEP = re.compile(r"RESULT planner-gpu-sweep-w(\d+)-l(\d+)-s(\d+)-b(\d+)(-rc)?-datasheet .*?reference=([0-9.]+)")
HEADER = re.compile(r"zeropp train: gpt\(vocab=(\d+), context=(\d+), width=(\d+), depth=(\d+), heads=(\d+)\).*?"
                    r"(\d+) tokens/step")


def steps(path):
    """(source line, shape dict, measured step seconds) per BENCH-reporting run of the log."""
    out, run = [], None
    for n, line in enumerate(open(path), 1):
        sweep = SWEEP.search(line)
        if sweep:
            width, depth, context, mb = map(int, sweep.groups()[:4])
            shape = {"vocab": 256, "seq": context, "hidden": width, "layers": depth, "heads": width // 128,
                     "micro_batch": mb, "recompute": bool(sweep.group(5))}
            # Later logs print the sweep's headers and BENCH lines too: that run is already counted.
            if not (out and {k: v for k, v in out[-1][0].items() if k != "line"} == shape):
                out.append((dict(shape, line=n), float(sweep.group(6))))
            continue
        m = HEADER.search(line)
        if m:
            vocab, context, width, depth, heads, tokens = map(int, m.groups())
            run = {"line": n, "vocab": vocab, "seq": context, "hidden": width, "layers": depth, "heads": heads,
                   "micro_batch": tokens // context, "recompute": False}
        elif run and "] recompute: " in line:
            run["recompute"] = "1" in line.split("recompute: ", 1)[1]
        elif run and "] BENCH " in line:
            out.append((run, float(re.search(r"step_s_mean=([0-9.]+)", line).group(1))))
            run = None
    return out


# The datasheet description of each GPU a lease has run on, by the name its log's header gives.
DESCRIPTIONS = (("H200", "h200-141gb-ib400x8"), ("H100", "h100-80gb-ib400x8"), ("A100", "a100-80gb-ib200x8"))


def gpu_description(log):
    """The description of the GPU a log's header names (its first lines: 'one NVIDIA H100 80GB ...')."""
    with open(log) as f:
        head = "".join(f.readline() for _ in range(3))
    for name, description in DESCRIPTIONS:
        if "NVIDIA " + name in head:
            return description
    sys.exit("planner_gpu: %s: its header names no GPU of %s; expected 'NVIDIA H100' or the like in its first "
             "3 lines (or pass --hardware)" % (log, ", ".join(n for n, _ in DESCRIPTIONS)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plan", required=True, help="the plan binary")
    ap.add_argument("--hardware", default="auto",
                    help="a description (a name or a path), or auto: each log's own GPU (its header's name)")
    ap.add_argument("logs", nargs="+")
    a = ap.parse_args()
    errors, latest = [], []
    print("%-24s %-22s %10s %11s %7s" % ("log:line", "shape", "measured_s", "predicted_s", "ratio"))
    for log in a.logs:
        hardware = a.hardware if a.hardware != "auto" else gpu_description(log)
        print("# %s: predicted from %s" % (log.split("/")[-1], hardware))
        for run, measured in steps(log):
            args = ["--gpus", "1", "--design", "zero3", "--global-batch", str(run["micro_batch"])]
            for k in ("hidden", "layers", "heads", "seq", "vocab", "micro_batch"):
                args += ["--" + k.replace("_", "-"), str(run[k])]
            if run["recompute"]:
                args.append("--recompute")
            predicted = float(predict(hardware, args, plan=a.plan, who="planner_gpu")["step_s"])
            shape = "h%d l%d s%d b%d%s" % (run["hidden"], run["layers"], run["seq"], run["micro_batch"],
                                          " rc" if run["recompute"] else "")
            print("%-24s %-22s %10.4f %11.4f %7.3f" % ("%s:%d" % (log.split("/")[-1], run["line"]), shape, measured,
                                                      predicted, predicted / measured))
            errors.append(abs(predicted / measured - 1))
            if log == a.logs[-1]:
                latest.append(errors[-1])
    if not errors:
        sys.exit("planner_gpu: no BENCH step in %s (expected gpu_checks.sh logs)" % " ".join(a.logs))
    for name, errs in (("planner-gpu", errors), ("planner-gpu-latest", latest)):
        if not errs:
            continue
        k, n = sum(e <= 0.10 for e in errs), len(errs)
        mean = sum(errs) / n
        print("RESULT %s steps_within_10pct=%d count reference=%d ratio=%.3f target=1.0 %s"
              % (name, k, n, k / n, "MET" if k == n else "MISSED"))
        print("RESULT %s mean_abs_error=%.3f fraction reference=0 ratio=%.3f target=0.10 %s"
              % (name, mean, mean, "MET" if mean <= 0.10 else "MISSED"))


if __name__ == "__main__":
    main()
