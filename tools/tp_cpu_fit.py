#!/usr/bin/env python3
"""tp_cpu_fit.py: Hardware::comm_cpu_messages_per_tp_collective, the CPU a tensor-parallel collective
takes its rank outside its wait while the box's cores are oversubscribed, from one coupled job measured
at two densities of collectives (tools/calibrate_tp_cpu.sh runs it).

The job is the 3D baseline's tp2 x dp2 on 4 ranks in two network namespaces (as ./zpp bench
zeropp-vs-3d runs its 3D rows), at a shape no validated layout runs (context 96), with the same 32
sequences a step in micro-batches of 2 (8 a step: 168 TP collectives a rank) and of 8 (2 a step: 42).
The FLOPs are the same; what differs is the number of collectives (and of layer calls, which the planner
charges). Its rest of the step (the step less the ranks' wall time in TP collectives) is read at both.
The planner's rest is linear in the field (each collective adds k messages of CPU to its rank's
compute, which the simulator shares among the box's ranks), so with its rest at k = 0 and k = 1:

  k = ((rest_2 - rest_8) measured - (rest_2 - rest_8) at k = 0) / (the same difference's growth per unit k)

Differences between the two densities, measured minutes apart, cancel the box's level (its speed) and
the compute both share; a negative k (the planner already charges more than the runs grew) is set to 0.
./zpp bench tp-rest-density (benchmarks/results/tp-rest-density-2026-12-06*.txt) read this cost at
215-990 us a collective on an Intel box, in this job and in pairs of independent tp=2 jobs, and the
planner charges none of it without this field.

  tp_cpu_fit.py fit HW.json RUNS.txt [--plan PLAN]
      RUNS.txt: one line per run, "MICRO_BATCH STEP_S TP_WAIT_S" (micro-batch 2 and 8, each at least
      once); writes comm_cpu_messages_per_tp_collective into HW.json (and a note to its source) and
      prints one line
"""
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "benchmarks"))
import hardware_json  # noqa: E402
import planner_local  # noqa: E402  (plan --predict's fields; the unshaped veth link of the zeropp-vs-3d rows)

FIELD = "comm_cpu_messages_per_tp_collective"
DENSE, SPARSE = 2, 8  # micro-batch sizes: 168 and 42 TP collectives a rank a step
COLLECTIVES = {DENSE: 168, SPARSE: 42}
MODEL = ["--hidden", "256", "--layers", "4", "--heads", "4", "--seq", "96", "--vocab", "256", "--cpu-attention",
         "--gpus", "4", "--global-batch", "32", "--design", "3d", "--tp", "2", "--dp", "2",
         "--grad-accumulation", "sink"]


def fit_k(measured, pred0, pred1):
    """measured, pred0, pred1: {micro_batch: rest of the step (s)}, measured and predicted at k = 0 and
    k = 1. Returns k (>= 0)."""
    grown = (measured[DENSE] - measured[SPARSE]) - (pred0[DENSE] - pred0[SPARSE])
    per_unit = (pred1[DENSE] - pred1[SPARSE]) - (pred0[DENSE] - pred0[SPARSE])
    if per_unit <= 0:
        raise ValueError("the planner's rest does not grow with the collectives at k = 1 (is comm_cpu_us_per_message "
                         "set in the description?)")
    return max(0.0, grown / per_unit)


def read_runs(path):
    """{micro_batch: (mean step s, mean TP wait s, runs)} from RUNS.txt; one line naming the problem on bad input."""
    runs = {}
    for n, line in enumerate(open(path), 1):
        f = line.split()
        if not f:
            continue
        try:
            mb, step, wait = int(f[0]), float(f[1]), float(f[2])
        except (ValueError, IndexError):
            raise ValueError(f"{path}:{n}: got '{line.strip()}', expected 'MICRO_BATCH STEP_S TP_WAIT_S'")
        if mb not in COLLECTIVES or not step > 0 or not 0 <= wait < step:
            raise ValueError(f"{path}:{n}: got '{line.strip()}', expected micro-batch 2 or 8 and 0 <= TP wait < step")
        runs.setdefault(mb, []).append((step, wait))
    for mb in COLLECTIVES:
        if mb not in runs:
            raise ValueError(f"{path}: no run at micro-batch {mb} (expected both 2 and 8)")
    return {mb: (sum(s for s, _ in r) / len(r), sum(w for _, w in r) / len(r), len(r)) for mb, r in runs.items()}


def predicted_rest(plan, hw, k, link_flags):
    """{micro_batch: the planner's step less its TP collectives} with the field at k."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(dict(hw, **{FIELD: k}), f)
        path = f.name
    try:
        rest = {}
        for mb in COLLECTIVES:
            p = planner_local.predict(path, ["--micro-batch", str(mb)] + MODEL + link_flags, plan, who="tp_cpu_fit")
            rest[mb] = float(p["step_s"]) - float(p["tp_collectives_s"])
        return rest
    finally:
        os.unlink(path)


def fit(hw_path, runs_path, plan):
    hw = json.load(open(hw_path))
    runs = read_runs(runs_path)
    link = planner_local.unshaped_link_flags(hw)
    measured = {mb: step - wait for mb, (step, wait, _) in runs.items()}
    pred0, pred1 = predicted_rest(plan, hw, 0, link), predicted_rest(plan, hw, 1, link)
    k = fit_k(measured, pred0, pred1)
    msg_us = hw.get("comm_cpu_us_per_message", 0)
    per_collective_us = k * msg_us
    hw[FIELD] = round(k, 3)
    note = ("%s %.3f from tp2 x dp2 on two nodes of 2 ranks (tools/calibrate_tp_cpu.sh: width 256, 4 layers, context 96, "
            "32 sequences a step in micro-batches of 2 and 8, %d and %d runs): its rest of the step (step less TP waits) "
            "%.4f and %.4f s, the planner's at k = 0 %.4f and %.4f: %.0f us of CPU a collective (k x comm_cpu_us_per_message)"
            % (FIELD, k, runs[DENSE][2], runs[SPARSE][2], measured[DENSE], measured[SPARSE], pred0[DENSE],
               pred0[SPARSE], per_collective_us))
    hw["source"] = hw.get("source", "") + "; " + note
    hardware_json.write(hw_path, hw)
    print("calibrate: " + note)


def main(argv):
    plan = "bazel-bin/tools/plan"
    if "--plan" in argv:
        i = argv.index("--plan")
        if i + 1 >= len(argv):
            sys.exit("tp_cpu_fit: --plan: expected a path after it")
        plan = argv[i + 1]
        argv = argv[:i] + argv[i + 2:]
    if len(argv) != 3 or argv[0] != "fit":
        sys.exit("usage: tp_cpu_fit.py fit HW.json RUNS.txt [--plan PLAN]")
    try:
        fit(argv[1], argv[2], plan)
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"tp_cpu_fit: {e}")


if __name__ == "__main__":
    main(sys.argv[1:])
