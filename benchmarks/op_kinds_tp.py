#!/usr/bin/env python3
"""What tensor parallelism adds to a rank's computation, measured and as the planner charges it.

Reads two logs of `./zpp bench op-kinds --tp T` (benchmarks/op-kinds.sh): ZeRO-3 over T ranks and the
3D baseline's tp T on the same T busy cores, each holding rank 0's OPS line (`--profile-ops`), the
planner's PREDICT and PREDICT_OPS lines and a `MEASURED step_s= tp_wait_s=` line. Both runs do the
same per-rank micro-batches, so a kind's seconds per matrix-product GFLOP compare the two layouts on
equal work; the 3D run's over ZeRO-3's is what tensor parallelism adds (its narrower GEMMs, its
replicated norms and residuals, its splits and copies). Printed per kind, measured and predicted,
with RESULT lines (target 0.9-1.1: the planner's ratio over the measured one). The step less the TP
collectives' wait is compared the same way; the wait itself is communication, not a compute kind.

  python3 benchmarks/op_kinds_tp.py ZERO3_LOG TP_LOG
"""
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import compare_ops  # noqa: E402  (the OPS and PREDICT lines' key=value parser)

KINDS = ("matmul", "attention", "elementwise", "copy")


def fields(line):
    """The line's numeric key=value fields (compare_ops.fields), as floats."""
    out = {}
    for k, v in compare_ops.fields(line).items():
        try:
            out[k] = float(v)
        except ValueError:
            pass  # layout=..., time=host
    return out


def read(path):
    ops = pred_ops = pred = meas = None
    with open(path) as f:
        for line in f:
            if re.search(r"\bOPS rank=0 ", line) and "PREDICT_OPS" not in line:
                ops = fields(line[line.index("OPS rank="):])
            elif line.startswith("PREDICT_OPS rank=0 "):
                pred_ops = fields(line)
            elif line.startswith("PREDICT "):
                pred = fields(line)
            elif line.startswith("MEASURED "):
                meas = fields(line)
    if None in (ops, pred_ops, pred, meas):
        sys.exit(f"op_kinds_tp: {path} lacks an OPS rank=0, PREDICT_OPS rank=0, PREDICT or MEASURED line")
    return ops, pred_ops, pred, meas


def per_gflop(run):
    """Seconds per matrix-product GFLOP per kind and for the step less its TP wait: (measured, predicted)."""
    ops, pred_ops, pred, meas = run  # OPS lines hold per-step means
    mg, pg = ops["matmul_gflop"], pred_ops["matmul_gflop"]
    out = {}
    for k in KINDS:
        out[k] = (ops[f"{k}_s"] / mg, pred_ops.get(f"{k}_s", float("nan")) / pg)
    out["rest"] = ((meas["step_s"] - meas.get("tp_wait_s", 0)) / mg,
                   (pred["step_s"] - pred.get("tp_collectives_s", 0)) / pg)
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.splitlines()[-1].strip())
    zero, tp = per_gflop(read(sys.argv[1])), per_gflop(read(sys.argv[2]))
    print("# seconds per matrix-product GFLOP of rank 0 (ZeRO-3 | 3D), and the 3D run's over ZeRO-3's")
    print(f"{'kind':<12} {'zero3_meas':>10} {'3d_meas':>10} {'added_meas':>10} {'zero3_pred':>10} {'3d_pred':>10} "
          f"{'added_pred':>10} {'pred/meas':>9}")
    rows = []
    for k in KINDS + ("rest",):
        (zm, zp), (tm, tpp) = zero[k], tp[k]
        am = tm / zm if zm > 0 else float("nan")
        ap = tpp / zp if zp > 0 else float("nan")
        r = ap / am if am > 0 else float("nan")
        print(f"{k:<12} {zm:>10.5f} {tm:>10.5f} {am:>10.3f} {zp:>10.5f} {tpp:>10.5f} {ap:>10.3f} {r:>9.3f}")
        if ap == ap:  # the planner charges no copies: nothing to compare
            rows.append((k, ap, am, r))
    for k, ap, am, r in rows:
        verdict = "MET" if 0.9 <= r <= 1.1 else "MISSED"
        print(f"RESULT op-kinds tp_added_{k}={ap:.3f} x reference={am:.3f} ratio={r:.3f} target=0.9-1.1 {verdict}")


if __name__ == "__main__":
    main()
