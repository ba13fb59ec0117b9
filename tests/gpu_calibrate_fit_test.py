"""The GPU calibration's matmul fit (tools/gpu_bundle/gpu_calibrate.py) recovers the cost model's
curve, max_efficiency x prod(d / (d + half_dim)), from points made on it, and reports how far the
worst point lies off the curve it fitted; its measured table comes out in the planner's order."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools", "gpu_bundle"))
import gpu_calibrate  # noqa: E402


def curve(eff, half, m, n, k):
    return eff * m / (m + half) * n / (n + half) * k / (k + half)


def main():
    shapes = [(d, d, d) for d in (1024, 2048, 4096, 8192)] + [(8192, 3 * h, h) for h in (1024, 2048, 4096)]
    # Exact points: the grid holds half_dim 128 (a multiple of 4), so the fit must find it and 0.8.
    pts = [(m, n, k, curve(0.8, 128, m, n, k)) for m, n, k in shapes]
    eff, half, worst = gpu_calibrate.fit_matmul(pts)
    assert half == 128, half
    assert abs(eff - 0.8) < 1e-9, eff
    assert worst < 1e-9, worst
    # One mid-sized shape 10% slow (2048 cubed, which no curve of this family dips at alone): the fit
    # stays near the true curve and reports that point most of its 10% off (least squares over 7
    # points spreads a little of it onto the others).
    pts[1] = (pts[1][0], pts[1][1], pts[1][2], pts[1][3] * 0.9)
    eff, half, worst = gpu_calibrate.fit_matmul(pts)
    assert 0.75 < eff < 0.85 and 64 <= half <= 256, (eff, half)
    assert 0.06 < worst < 0.1, worst
    # An efficiency above the peak is capped at 1.
    pts = [(m, n, k, 1.3) for m, n, k in shapes]
    assert gpu_calibrate.fit_matmul(pts)[0] == 1.0
    # The measured table comes out in the order the planner reads it (tokens slowest, out fastest),
    # each entry a GEMM's FLOPs over its seconds over the peak (4 significant digits), per pass.
    peak = 100e12
    eff = {"forward": lambda t, i, o: t / 1000 + i / 1e6 + o / 1e9, "input_grad": lambda t, i, o: 0.5,
           "weight_grad": lambda t, i, o: 0.25 + o / 1e6}
    seconds = lambda p, t, i, o: 2.0 * t * i * o / (peak * eff[p](t, i, o))
    tokens, dims = [128, 512], [64, 256, 1024]
    table = gpu_calibrate.build_table(tokens, dims, seconds, peak)
    assert table["tokens"] == tokens and table["dims"] == dims
    for p in gpu_calibrate.PASSES:
        assert len(table[p]) == 2 * 3 * 3, (p, len(table[p]))
        for ti, t in enumerate(tokens):
            for ii, i in enumerate(dims):
                for oi, o in enumerate(dims):
                    got = table[p][(ti * len(dims) + ii) * len(dims) + oi]
                    assert abs(got / eff[p](t, i, o) - 1) < 1e-3, (p, t, i, o, got)
    # timed's batch length: a call of 0.1 ms on a fake clock, 2 ms a run asked, so 20 calls a run
    # (not the 3 given), after 2 warm-up calls and 1 probe; without min_batch_s the 3 stand.
    class Clock:
        now, calls = 0.0, 0

    def call():
        Clock.now += 1e-4
        Clock.calls += 1

    real = gpu_calibrate.time.perf_counter
    gpu_calibrate.time.perf_counter = lambda: Clock.now
    try:
        per_call = gpu_calibrate.timed(call, "cpu", 2, inner=3, min_batch_s=2e-3)
        assert Clock.calls == 2 + 1 + 2 * 20, Clock.calls
        assert abs(per_call - 1e-4) < 1e-12, per_call
        Clock.calls = 0
        gpu_calibrate.timed(call, "cpu", 2, inner=3)
        assert Clock.calls == 2 + 2 * 3, Clock.calls
    finally:
        gpu_calibrate.time.perf_counter = real
    print("gpu_calibrate_fit_test: ok")


if __name__ == "__main__":
    main()
