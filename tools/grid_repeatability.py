"""How far two measurements of calibrate's GEMM table disagree, with and without the reference GEMM's
scaling (tools/grid_table.py), where it matters: the cost model's forward + backward time of the
shapes calibrate fits compute_overhead and layer_overhead_us on.

  grid_repeatability.py GRID_FILE HARDWARE PLAN SHAPES
GRID_FILE: linear_grid --repeats 2 (or more) output; HARDWARE: a description whose matmul.table is
replaced by each repeat's own table in turn; PLAN: tools/plan; SHAPES: CONTEXTxMICRO,... (as in
calibrate.sh: width 256, depth 4, 4 heads, vocab 256, 8 micro-batches a step). Prints, per way of
reading the rates, each repeat's predicted seconds per shape and the cells' disagreement, then a
RESULT line. Calibrate fits compute_overhead, a factor on the cost model's compute, to measured
runs, so a level common to every shape (a table uniformly faster or slower) goes into that factor:
exactly where matrix products are all of the compute, and for the shape of the GPT here, where they
are most of it, nearly so. What the factor cannot take up is how the shapes' times differ from
that common level (the geometric mean of the second pass's times over the first's). The RESULT is the
largest such difference over the shapes, scaled, with the rates as timed as reference (target:
within 5%)."""
import json
import os
import statistics
import sys
import tempfile

import compute_fit
import grid_table

TARGET = 0.05


def predict(plan, hw, table, ctx, mb):
    """The cost model's forward + backward seconds of calibrate's reference runs (compute_fit.py) with `table`."""
    hw = dict(hw, matmul=dict(hw["matmul"], table=table))
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(hw, f)
    try:
        return compute_fit.model_seconds(f.name, ctx, mb, plan=plan)
    finally:
        os.unlink(f.name)


def main():
    if len(sys.argv) != 5:
        sys.exit("usage: grid_repeatability.py GRID_FILE HARDWARE PLAN CONTEXTxMICRO,...")
    grid_file, hw_file, plan, shapes_arg = sys.argv[1:]
    text = open(grid_file).read()
    hw = json.load(open(hw_file))
    tokens, dims = hw["matmul"]["table"]["tokens"], hw["matmul"]["table"]["dims"]
    peak = hw["peak_tflops"]["fp32"] * 1e3
    try:
        shapes = [tuple(int(v) for v in s.split("x")) for s in shapes_arg.split(",")]
        assert shapes and all(len(s) == 2 and min(s) > 0 for s in shapes)
    except (ValueError, AssertionError):
        sys.exit("grid_repeatability: SHAPES: got '%s', expected CONTEXTxMICRO,... (positive integers)" % shapes_arg)
    worst = {}
    for scaled in (True, False):
        label = "scaled by the reference" if scaled else "rates as timed"
        try:
            tables = [grid_table.build(text, tokens, dims, peak, repeat=r, scaled=scaled)[0] for r in (0, 1)]
        except grid_table.GridError as e:
            sys.exit("grid_repeatability: %s (linear_grid --repeats 2 or more)" % e)
        dev = sorted(abs(b / a - 1) for p in grid_table.PASSES for a, b in zip(tables[0][p], tables[1][p]))
        print("# %s: cells, repeat 1 over repeat 0: median |difference| %.3f, 90th percentile %.3f, largest %.3f"
              % (label, statistics.median(dev), dev[int(0.9 * len(dev))], dev[-1]))
        times = [[predict(plan, hw, t, ctx, mb) for t in tables] for ctx, mb in shapes]
        level = statistics.geometric_mean([b / a for a, b in times])
        print("# %-10s %12s %12s %10s %14s" % ("shape", "repeat0_s", "repeat1_s", "rep1/rep0", "over_common"))
        for (ctx, mb), (a, b) in zip(shapes, times):
            print("  %-10s %12.4f %12.4f %10.3f %14.3f" % ("%dx%d" % (ctx, mb), a, b, b / a, b / a / level))
        worst[scaled] = max(abs(b / a / level - 1) for a, b in times)
        print("# %s: the two passes' common level differs by %.3f (compute_overhead's fit takes it up); each "
              "shape beyond it at most %.3f" % (label, level - 1, worst[scaled]))
    ratio = worst[True] / worst[False] if worst[False] > 0 else float("inf")
    print("RESULT matmul-grid repeat_disagreement metric=%.4f fraction reference=%.4f ratio=%.3f target=%.2f %s"
          % (worst[True], worst[False], ratio, TARGET, "MET" if worst[True] <= TARGET else "MISSED"))


if __name__ == "__main__":
    main()
