#!/usr/bin/env python3
"""The planner's offload model against every offloaded step measured on a lent GPU.

Reads the committed logs of gpu_checks.sh (benchmarks/results/gpu-*.txt): in its `oversized`
section check 3 (AdamW and its moments offloaded to the host: plan's --offload cpu) and in its
`params-offload` section check 4 (parameters offloaded too: --offload cpu --offload-params cpu),
each run's `zeropp train:` header (model shape, tokens per step), its `recompute:` line and its
PROFILE step_s (the mean over the steps after the first). Each step is predicted by `plan
--predict --gpus 1 --design zero3` from the description its own lease measured
(`<gpu>-measured-<date>.json` beside the log: gpu_calibrate.py's device figures and, for the host,
its 1 GiB copy's bandwidth, the PCIe copies' and torch's fused AdamW rate on every core): an
offloaded step is mostly the host's work, and a datasheet description describes a DGX's two
56-core sockets, not the lent machine's 16 cores. The datasheet prediction is printed beside it
for information.

A run is compared only where its log says on how many threads its step end ran AdamW
(`offload: host AdamW and norm on N threads`) and N is the thread count the lease's AdamW rate was
measured on (`GPU_CALIBRATE host AdamW (torch fused, N threads)`); the runtimes before 2026-11-28
said neither (their step end took 5-20 s, an fp64 norm and a one-thread AdamW that have since
gone), and such runs are listed as not comparable, with that reason. Ends with

  RESULT planner-gpu-offload steps_within_10pct=K count reference=N ratio=K/N target=1.0 MET|MISSED
  RESULT planner-gpu-offload mean_abs_error=E fraction reference=0 ratio=E target=0.10 MET|MISSED

Nothing is fitted here: each description is the file its lease wrote.

  python3 benchmarks/planner_gpu_offload.py --plan bazel-bin/tools/plan LOG...
"""
import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from planner_gpu import HEADER, gpu_description  # noqa: E402
from planner_local import predict  # noqa: E402

# gpu_checks.sh's offloaded checks: section name -> the plan flags that check's step corresponds to.
CHECKS = {"oversized": ["--offload", "cpu"], "params-offload": ["--offload", "cpu", "--offload-params", "cpu"]}
SECTION = re.compile(r"^SECTION (\S+) starts at")
HOST_THREADS = re.compile(r"\] offload: host AdamW and norm on (\d+) threads")
CALIBRATED_THREADS = re.compile(r"GPU_CALIBRATE host AdamW \(torch fused, (\d+) threads\)")


def offloaded_runs(path):
    """(run dict, measured step seconds) per PROFILE-reporting run of an offloaded check, and the thread
    count the lease's AdamW rate was measured on (None where the log does not say)."""
    out, run, section, calibrated = [], None, "", None
    for n, line in enumerate(open(path), 1):
        m = SECTION.match(line)
        if m:
            section, run = m.group(1), None
            continue
        m = CALIBRATED_THREADS.search(line)
        if m:
            calibrated = int(m.group(1))
        if section not in CHECKS:
            continue
        m = HEADER.search(line)
        if m:
            vocab, context, width, depth, heads, tokens = map(int, m.groups())
            run = {"line": n, "check": section, "vocab": vocab, "seq": context, "hidden": width, "layers": depth,
                   "heads": heads, "micro_batch": tokens // context, "recompute": False, "threads": None}
        elif run and "] recompute: " in line:
            run["recompute"] = "1" in line.split("recompute: ", 1)[1]
        elif run and HOST_THREADS.search(line):
            run["threads"] = int(HOST_THREADS.search(line).group(1))
        elif run and "] PROFILE " in line:
            out.append((run, float(re.search(r"step_s=([0-9.]+)", line).group(1))))
            run = None
    return out, calibrated


def measured_description(log):
    """The description the log's lease measured: <gpu>-measured-<date>.json beside gpu-<date>.txt."""
    date = re.fullmatch(r"gpu-(.+)\.txt", os.path.basename(log))
    gpu = gpu_description(log).split("-")[0]
    path = os.path.join(os.path.dirname(log), "%s-measured-%s.json" % (gpu, date.group(1) if date else "?"))
    return path if date and os.path.exists(path) else None


def plan_args(run):
    args = ["--gpus", "1", "--design", "zero3", "--global-batch", str(run["micro_batch"])]
    for k in ("hidden", "layers", "heads", "seq", "vocab", "micro_batch"):
        args += ["--" + k.replace("_", "-"), str(run[k])]
    if run["recompute"]:
        args.append("--recompute")
    return args + CHECKS[run["check"]]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plan", required=True, help="the plan binary")
    ap.add_argument("logs", nargs="+")
    a = ap.parse_args()
    errors = []
    print("%-24s %-15s %-18s %10s %11s %7s %10s" % ("log:line", "check", "shape", "measured_s", "predicted_s", "ratio",
                                                   "datasheet"))
    for log in a.logs:
        runs, calibrated = offloaded_runs(log)
        if not runs:
            continue
        name = log.split("/")[-1]
        measured_hw = measured_description(log)
        print("# %s: predicted from %s (datasheet: %s)" % (name, measured_hw or "no description this lease measured",
                                                          gpu_description(log)))
        for run, measured in runs:
            where = "%s:%d" % (name, run["line"])
            shape = "h%d l%d s%d b%d%s" % (run["hidden"], run["layers"], run["seq"], run["micro_batch"],
                                          " rc" if run["recompute"] else "")
            datasheet = float(predict(gpu_description(log), plan_args(run), plan=a.plan, who="planner_gpu_offload")
                              ["step_s"])
            why = None
            if measured_hw is None:
                why = "its lease measured no description"
            elif run["threads"] is None or run["threads"] != calibrated:
                why = "its host AdamW ran on %s threads, the lease measured the rate on %s" % (
                    run["threads"] or "unstated", calibrated or "unstated")
            if why:
                print("%-24s %-15s %-18s %10.4f %11s %7s %10.4f   not comparable: %s" % (
                    where, run["check"], shape, measured, "-", "-", datasheet / measured, why))
                continue
            predicted = float(predict(measured_hw, plan_args(run), plan=a.plan, who="planner_gpu_offload")["step_s"])
            print("%-24s %-15s %-18s %10.4f %11.4f %7.3f %10.4f" % (where, run["check"], shape, measured, predicted,
                                                                 predicted / measured, datasheet / measured))
            errors.append(abs(predicted / measured - 1))
    if not errors:
        sys.exit("planner_gpu_offload: no comparable offloaded step in %s (expected gpu_checks.sh logs with the "
                 "oversized or params-offload section and the lease's measured description beside them)"
                 % " ".join(a.logs))
    k, n = sum(e <= 0.10 for e in errors), len(errors)
    mean = sum(errors) / n
    print("RESULT planner-gpu-offload steps_within_10pct=%d count reference=%d ratio=%.3f target=1.0 %s"
          % (k, n, k / n, "MET" if k == n else "MISSED"))
    print("RESULT planner-gpu-offload mean_abs_error=%.3f fraction reference=0 ratio=%.3f target=0.10 %s"
          % (mean, mean, "MET" if mean <= 0.10 else "MISSED"))


if __name__ == "__main__":
    main()
