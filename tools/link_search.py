"""link_search.py: a link's per-hop latency and bus bandwidth from whole-job measurements, for
./zpp calibrate (tools/calibrate_veth.sh).

Where the measured quantity is a training step, in which the link's transfers overlap computation,
time is not linear in latency and 1/bandwidth, so relative_fit.py's closed form does not apply.
search() minimises sum((predicted / measured - 1)^2) over (latency, bandwidth) with a log-spaced
grid, then refines around the best point three times. The predictions come from a callable, the
planner itself in calibrate_veth.sh.
"""
import math


def _grid(lo, hi, n):
    a, b = math.log(lo), math.log(hi)
    return [math.exp(a + (b - a) * i / (n - 1)) for i in range(n)]


def search(measured, predict, latency_us=(20.0, 20000.0), gbps=(0.01, 20.0), points=17, rounds=3):
    """measured: values, one per shape; predict(latency_us, gbps) -> predicted values in the same
    order. Returns (latency_us, gbps, error), error the sum of squared relative errors."""
    if not measured or any(m <= 0 for m in measured):
        raise ValueError("link_search: measured values must be positive, got %r" % (measured,))

    def err(lat, g):
        return sum((p / m - 1) ** 2 for p, m in zip(predict(lat, g), measured))

    lat_lo, lat_hi = latency_us
    g_lo, g_hi = gbps
    best = None
    n = points
    for _ in range(rounds + 1):
        lats, gs = _grid(lat_lo, lat_hi, n), _grid(g_lo, g_hi, n)
        for lat in lats:
            for g in gs:
                e = err(lat, g)
                if best is None or e < best[2]:
                    best = (lat, g, e)
        # The next round spans one step of this grid either side of the best point.
        lat_step = (lat_hi / lat_lo) ** (1.0 / (n - 1))
        g_step = (g_hi / g_lo) ** (1.0 / (n - 1))
        lat_lo, lat_hi = best[0] / lat_step, best[0] * lat_step
        g_lo, g_hi = best[1] / g_step, best[1] * g_step
        n = 9
    return best
