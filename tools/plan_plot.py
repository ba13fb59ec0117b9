#!/usr/bin/env python3
"""plan_plot.py: pictures of the planner's output (matplotlib).

  plan_plot.py rank  PLAN.csv  OUT.png   the ranked layouts: tokens/s bars coloured by design,
                                         stacked step-time parts beside them
  plan_plot.py sweep SWEEP.csv OUT.png   best ZeroPP / best 3D over (sequence, inter-node
                                         bandwidth), one line per sequence length, with the
                                         paper's 2sUb/9h condition marked
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLOURS = {"zero3": "#4c72b0", "zeropp": "#dd8452", "pipe-fsdp": "#55a868", "3d": "#c44e52"}


def rank(rows, out):
    rows = rows[:30]
    fig, (a, b) = plt.subplots(1, 2, figsize=(14, 0.32 * len(rows) + 1.5), sharey=True)
    names = [r["layout"] for r in rows][::-1]
    tok = [float(r["tokens_per_s"]) for r in rows][::-1]
    col = [COLOURS.get(r["design"], "grey") for r in rows][::-1]
    a.barh(names, tok, color=col)
    a.set_xlabel("predicted tokens/s")
    for d, c in COLOURS.items():
        a.bar(0, 0, color=c, label=d)
    a.legend(loc="lower right")
    left = [0.0] * len(rows)
    parts = [("compute", "compute_s", "#8172b2"), ("TP comm", "tp_comm_s", "#c44e52"), ("idle", "idle_s", "#bbbbbb"),
             ("dp reduce", "dp_reduce_s", "#937860"), ("optimizer", "optimizer_s", "#da8bc3")]
    for label, key, c in parts:
        vals = [float(r[key]) for r in rows][::-1]
        if key == "compute_s":
            vals = [v - float(r["tp_comm_s"]) for v, r in zip(vals, rows[::-1])]
        b.barh(names, vals, left=left, color=c, label=label)
        left = [x + y for x, y in zip(left, vals)]
    b.set_xlabel("predicted step time (s) by part")
    b.legend(loc="lower right")
    fig.suptitle("zeropp plan: layouts ranked by predicted step time")
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def sweep(rows, out):
    fig, ax = plt.subplots(figsize=(8, 5))
    seqs = sorted({float(r["seq"]) for r in rows})
    for s in seqs:
        sub = [r for r in rows if float(r["seq"]) == s]
        x = [float(r["inter_gbps"]) for r in sub]
        y = [float(r["ratio"]) for r in sub]
        ax.plot(x, y, marker="o", label=f"seq {int(s)}")
        for r, xi, yi in zip(sub, x, y):
            if float(r["condition"]) > 1:
                ax.annotate("*", (xi, yi), textcoords="offset points", xytext=(4, 4))
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("inter-node bandwidth per node (GB/s)")
    ax.set_ylabel("best ZeroPP / best 3D tokens/s (predicted)")
    model = rows[0]["model"] if rows else ""
    ax.set_title(f"{model}: where ZeroPP wins (>1); * = winning ZeroPP layout has 2sUb > 9h")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("rank", "sweep"):
        sys.exit("plan_plot.py: usage: plan_plot.py rank|sweep IN.csv OUT.png")
    with open(sys.argv[2]) as f:
        rows = list(csv.DictReader(f))
    (rank if sys.argv[1] == "rank" else sweep)(rows, sys.argv[3])


if __name__ == "__main__":
    main()
