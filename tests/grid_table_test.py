"""The matmul table from linear_grid's GRID lines (tools/grid_table.py): on a synthetic box whose
speed drops by 30% while one token count's shapes are timed, the table recovers each shape's rate at
the box's typical speed (the rates alone would put that row 30% low); a shape timed three times
takes the median of its scaled rates (one disturbed turn is left out); a missing shape, a malformed
line, no lines or a zero peak are refused, naming what was expected."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import grid_table  # noqa: E402

TOKENS, DIMS, PEAK, REF = [32, 64, 512], [128, 256], 80.0, 70.0


def true_rate(p, t, i, o):  # GFLOP/s at the box's typical speed: differs by pass and shape
    return 20.0 + t / 16 + i / 32 + o / 64 + 3 * grid_table.PASSES.index(p)


def lines(speed, repeats=1, disturb=None):
    """GRID lines as linear_grid prints them; speed(repeat, tokens) scales both rates of a window,
    disturb(repeat, shape) the shape's rate alone (noise the reference does not share)."""
    out = ["# other output is ignored"]
    for r in range(repeats):
        for t in TOKENS:
            for i in DIMS:
                for o in DIMS:
                    for p in grid_table.PASSES:
                        s = speed(r, t)
                        g = true_rate(p, t, i, o) * s * (disturb(r, (p, t, i, o)) if disturb else 1.0)
                        out.append("GRID repeat=%d pass=%s tokens=%d in=%d out=%d gflops=%.4f reference_gflops=%.4f"
                                   % (r, p, t, i, o, g, REF * s))
    return "\n".join(out)


def expect_error(text, peak, fragment, repeat=None):
    try:
        grid_table.build(text, TOKENS, DIMS, peak, repeat)
    except grid_table.GridError as e:
        assert fragment in str(e), (fragment, str(e))
        return
    raise AssertionError("expected an error naming '%s'" % fragment)


def check_table(table):
    for p in grid_table.PASSES:
        want = [round(true_rate(p, t, i, o) / PEAK, 4) for t in TOKENS for i in DIMS for o in DIMS]
        got = table[p]
        assert len(got) == len(want), (p, len(got))
        worst = max(abs(g - w) for g, w in zip(got, want))
        assert worst <= 2e-4, (p, worst, got, want)


def main():
    # The 512-token shapes timed during a slow spell (0.7x): the reference beside them ran as slow.
    slow = lines(lambda r, t: 0.7 if t == 512 else 1.0)
    table, summary = grid_table.build(slow, TOKENS, DIMS, PEAK)
    assert table["tokens"] == TOKENS and table["dims"] == DIMS, table
    check_table(table)
    assert abs(summary["reference_median"] - REF) < 1e-6, summary
    assert abs(summary["largest_scale"] - 1 / 0.7) < 1e-3, summary
    assert summary["repeats"] == 1 and summary["spread"] == 0.0, summary
    # Without the scaling (the rates over the peak as they were read) that row is 30% low: the
    # correction above is what the check measures.
    raw = true_rate("forward", 512, 128, 128) * 0.7 / PEAK
    k = TOKENS.index(512) * len(DIMS) * len(DIMS)
    assert abs(table["forward"][k] - raw) > 0.25 * raw, (table["forward"][k], raw)

    # Three repeats, the box slower on the second, and one shape's own turn disturbed (0.5x) on the
    # third: the median keeps the two undisturbed, scaled rates.
    def disturb(r, key):
        return 0.5 if r == 2 and key == ("input_grad", 64, 256, 128) else 1.0
    table, summary = grid_table.build(lines(lambda r, t: 0.8 if r == 1 else 1.0, 3, disturb), TOKENS, DIMS, PEAK)
    check_table(table)
    assert summary["repeats"] == 3, summary
    assert summary["spread"] < 1e-3, summary  # every other shape agrees across the repeats once scaled
    # One repeat alone, scaled and as timed: the slow spell over the 512-token shapes fell on the
    # second repeat only; its table is exact scaled, and that row 0.7x as timed.
    three = lines(lambda r, t: 0.7 if r == 1 and t == 512 else 1.0, 3, disturb)
    check_table(grid_table.build(three, TOKENS, DIMS, PEAK, repeat=1)[0])
    alone, summary = grid_table.build(three, TOKENS, DIMS, PEAK, repeat=1, scaled=False)
    assert summary["repeats"] == 1, summary
    assert alone["weight_grad"][k] == round(0.7 * true_rate("weight_grad", 512, 128, 128) / PEAK, 4), alone
    assert alone["weight_grad"][0] == round(true_rate("weight_grad", 32, 128, 128) / PEAK, 4), alone
    expect_error(three, PEAK, "got no GRID lines of repeat 3", repeat=3)

    # Refusals.
    whole = lines(lambda r, t: 1.0)
    expect_error("\n".join(l for l in whole.splitlines() if "tokens=64 in=256 out=128" not in l), PEAK,
                 "no rate for forward tokens=64 in=256 out=128")
    expect_error(whole + "\nGRID pass=forward tokens=32 in=128 out=128 gflops=1.0", PEAK, "expected 'GRID repeat=R")
    expect_error(whole.replace("reference_gflops=70.0000", "reference_gflops=0.0", 1), PEAK, "expected positive")
    expect_error("# nothing", PEAK, "got no GRID lines")
    expect_error(whole, 0.0, "peak: got 0.0")
    print("grid_table_test: ok")


if __name__ == "__main__":
    main()
