#!/usr/bin/env python3
"""Where the planner's charge for a step differs from the step measured, by kind of operator.

Reads a log holding a rank's OPS line (`train --profile-ops`, zeropp/cli/op_profile.h) and one or
more PREDICT_OPS lines for the same rank (`plan --predict`), and prints per kind the measured and
predicted seconds per step and their ratio (predicted / measured), the matrix products' TFLOP/s
both ways, and the values the element-wise work moved against the planner's count of them. The
FLOPs must agree (the same model on both sides); when they do not, it says so and exits 1.

  python3 tools/compare_ops.py [--rank R] [--plan-rank P] [--result NAME --step MEASURED_S PREDICTED_S] < log

With --result, the first prediction's comparison also as a table and as RESULT lines for ./zpp bench
NAME, the whole step's measured and predicted seconds (--step) among them; target 0.9-1.1 each.
"""
import argparse
import re
import sys

KINDS = ("matmul", "attention", "elementwise", "optimizer")


def fields(line):
    return {k: v for k, v in re.findall(r"(\w+)=(\S+)", line)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rank", type=int, default=0, help="the OPS line's rank")
    ap.add_argument("--plan-rank", type=int, default=None,
                    help="the PREDICT_OPS line's pipeline rank (default: --rank; 0 for ZeRO-3's data ranks)")
    ap.add_argument("--result", default=None, help="print a table and RESULT lines for ./zpp bench NAME")
    ap.add_argument("--step", type=float, nargs=2, metavar=("MEASURED_S", "PREDICTED_S"), default=None,
                    help="the whole step, a row of the --result table")
    args = ap.parse_args()
    if args.result and not args.step:
        ap.error("--result needs --step MEASURED_S PREDICTED_S")
    plan_rank = args.rank if args.plan_rank is None else args.plan_rank
    measured, predicted = None, []
    for line in sys.stdin:
        line = line.strip()
        m = re.search(r"\bOPS rank=(\d+) .*", line)
        if m and not re.search(r"PREDICT_OPS", line) and int(m.group(1)) == args.rank:
            measured = fields(m.group(0))
        p = re.search(r"PREDICT_OPS rank=(\d+) .*", line)
        if p and int(p.group(1)) == plan_rank:
            predicted.append(fields(p.group(0)))
    if measured is None or not predicted:
        print(f"compare_ops: no OPS line for rank {args.rank} and PREDICT_OPS line for pipeline rank {plan_rank} "
              "in the input")
        return 1
    code = 0
    rows, values = [], None  # the first prediction's (kind, measured, predicted), for --result
    for i, pr in enumerate(predicted):
        mg, pg = float(measured["matmul_gflop"]), float(pr["matmul_gflop"])
        if abs(mg - pg) > 1e-3 * max(mg, pg):
            print(f"compare_ops: prediction {i}: matmul_gflop={pg} but the run measured {mg}: not the same model")
            code = 1
            continue
        for kind in KINDS:
            ms, ps = float(measured[f"{kind}_s"]), float(pr[f"{kind}_s"])
            ratio = f"{ps / ms:.3f}" if ms > 0 else "n/a"
            print(f"OPS-VS-PLAN prediction={i} kind={kind} measured_s={ms:.6f} predicted_s={ps:.6f} ratio={ratio} "
                  f"time={measured['time']}")
            if i == 0:
                rows.append((kind, ms, ps))
        print(f"OPS-VS-PLAN prediction={i} kind=matmul_tflops measured={float(measured['matmul_tflops']):.3f} "
              f"predicted={float(pr['matmul_tflops']):.3f}")
        if "copy_s" in measured and "copy_s" in pr:  # a diagnostic: the planner charges only gradient landing's
            ms, ps = float(measured["copy_s"]), float(pr["copy_s"])
            print(f"OPS-VS-PLAN prediction={i} kind=copy measured_s={ms:.6f} predicted_s={ps:.6f} "
                  f"ratio={f'{ps / ms:.3f}' if ms > 0 else 'n/a'} (predicted: gradient landing's copies only)")
        if "elementwise_gvalues" in measured and "elementwise_gvalues" in pr:
            mv, pv = float(measured["elementwise_gvalues"]), float(pr["elementwise_gvalues"])
            ratio = f"{pv / mv:.3f}" if mv > 0 else "n/a"
            print(f"OPS-VS-PLAN prediction={i} kind=elementwise_gvalues measured={mv:.4f} predicted={pv:.4f} "
                  f"ratio={ratio}")
            if i == 0 and mv > 0:
                values = (mv, pv)
    if args.result and rows:
        report(args.result, rows + [("step", args.step[0], args.step[1])], values)
    return code


def report(name, rows, values):
    def ratio(meas, pred):
        return pred / meas if meas > 0 else float("nan")
    print(f"{'kind':<12} {'measured_s':>11} {'predicted_s':>11} {'pred/meas':>9}")
    for kind, meas, pred in rows:
        print(f"{kind:<12} {meas:>11.6f} {pred:>11.6f} {ratio(meas, pred):>9.3f}")
    if values:
        mv, pv = values
        print(f"element-wise values moved per step: measured {mv:.4f}e9, planner {pv:.4f}e9, ratio {pv / mv:.3f}")
    def verdict(r):
        return "MET" if 0.9 <= r <= 1.1 else "MISSED"
    for kind, meas, pred in rows:
        r = ratio(meas, pred)
        print(f"RESULT {name} {kind}_s={pred:.6f} s reference={meas:.6f} ratio={r:.3f} target=0.9-1.1 {verdict(r)}")
    if values:
        mv, pv = values
        print(f"RESULT {name} elementwise_gvalues={pv:.4f} 1e9 reference={mv:.4f} ratio={pv / mv:.3f} target=0.9-1.1 "
              f"{verdict(pv / mv)}")


if __name__ == "__main__":
    sys.exit(main())
