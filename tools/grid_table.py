"""The matmul table ./zpp calibrate writes into a CPU box's description (matmul.table), from the GRID
lines of benchmarks/linear_grid.

Each line carries one shape's GFLOP/s and a reference GEMM's, timed in turns with it in the same
window. A shared box's speed moves for seconds at a time (a fixed GEMM's best rate over half a second
swung 58-86 GFLOP/s within 90 s here), so a shape's rate alone says as much about when it was timed
as about its shape. Each rate is therefore scaled by the run's median reference rate over the
reference rate beside it: the rate the shape would have had at the box's typical speed. A shape
timed more than once (linear_grid --repeats) takes the median of its scaled rates. Over the peak
(matmul_bench's square), that is the table's efficiency.
"""
import re
import statistics

PASSES = ("forward", "input_grad", "weight_grad")
LINE = re.compile(r"GRID repeat=(\d+) pass=(\w+) tokens=(\d+) in=(\d+) out=(\d+) gflops=([0-9.]+) "
                  r"reference_gflops=([0-9.]+)")


class GridError(ValueError):
    pass


def build(grid_text, tokens, dims, peak, repeat=None, scaled=True):
    """Returns (table, summary): table as hardware.h's matmul.table (each pass's list flat, tokens
    slowest, out fastest); summary {repeats, reference_median, reference_min, reference_max,
    largest_scale (the furthest any rate was scaled, as a factor), spread (the median, over shapes
    timed more than once, of their scaled rates' max/min - 1)}. repeat: read that repeat's lines
    alone; scaled=False: the rates as timed (what the table was before the reference, for
    comparison: tools/grid_repeatability.py)."""
    if peak <= 0:
        raise GridError("grid_table: peak: got %r GFLOP/s, expected a positive rate" % peak)
    rows = []
    for line in grid_text.splitlines():
        if not line.startswith("GRID"):
            continue
        m = LINE.fullmatch(line.strip())
        if not m:
            raise GridError("grid_table: GRID line: got '%s', expected 'GRID repeat=R pass=P tokens=T in=I out=O "
                            "gflops=G reference_gflops=F'" % line.strip())
        rep, name, t, i, o, g, ref = m.groups()
        if float(g) <= 0 or float(ref) <= 0:
            raise GridError("grid_table: GRID line: got '%s', expected positive rates" % line.strip())
        if repeat is None or int(rep) == repeat:
            rows.append((int(rep), name, int(t), int(i), int(o), float(g), float(ref) if scaled else 1.0))
    if not rows:
        raise GridError("grid_table: got no GRID lines%s, expected linear_grid's output"
                        % ("" if repeat is None else " of repeat %d" % repeat))
    refs = [r[6] for r in rows]
    median_ref = statistics.median(refs)
    rates = {}  # per shape, its rates at the median reference rate
    for _, name, t, i, o, g, ref in rows:
        rates.setdefault((name, t, i, o), []).append(g * median_ref / ref)
    table = {"tokens": list(tokens), "dims": list(dims)}
    for p in PASSES:
        keys = [(p, t, i, o) for t in tokens for i in dims for o in dims]
        missing = [k for k in keys if k not in rates]
        if missing:
            raise GridError("grid_table: linear_grid printed no rate for %s tokens=%d in=%d out=%d" % missing[0])
        table[p] = [round(statistics.median(rates[k]) / peak, 4) for k in keys]
    spreads = [max(v) / min(v) - 1 for v in rates.values() if len(v) > 1]
    summary = {
        "repeats": len({r[0] for r in rows}),
        "reference_median": median_ref,
        "reference_min": min(refs),
        "reference_max": max(refs),
        "largest_scale": max(max(median_ref / r, r / median_ref) for r in refs),
        "spread": statistics.median(spreads) if spreads else 0.0,
    }
    return table, summary
