"""relative_fit.py: the two-term least-squares fits ./zpp calibrate uses (tools/calibrate.sh,
tools/calibrate_pairs.sh).

Fits y ~ a*u + b*v to rows (u, v, y) minimising sum(((a*u + b*v) / y - 1)^2): relative error, so
that small and large points count alike; or, with relative=False, sum((a*u + b*v - y)^2): absolute
error, so that the points that take the most time count most. Closed form for two unknowns; numpy
is not needed.
"""


def fit(rows, relative=True):
    """Returns (a, b, a_alone, b_alone): the two-term fit, and the one-term fits with b = 0 and with a = 0."""
    x = [(u / y, v / y, 1.0) if relative else (u, v, y) for u, v, y in rows]
    a11 = sum(u * u for u, _, _ in x)
    a12 = sum(u * v for u, v, _ in x)
    a22 = sum(v * v for _, v, _ in x)
    b1 = sum(u * y for u, _, y in x)
    b2 = sum(v * y for _, v, y in x)
    det = a11 * a22 - a12 * a12
    return (b1 * a22 - b2 * a12) / det, (a11 * b2 - a12 * b1) / det, b1 / a11, b2 / a22


def fit_link(rows, relative=True):
    """fit() for a link, rows (hops, bytes factor, seconds): returns (latency, seconds per byte), neither
    negative: a negative latency falls back to bandwidth alone, then a non-positive per-byte cost to
    latency alone (the per-byte cost 1e-12: bandwidth unbounded)."""
    alpha, inv, alpha_alone, inv_alone = fit(rows, relative)
    if alpha <= 0:
        alpha, inv = 0.0, inv_alone
    if inv <= 0:
        alpha, inv = alpha_alone, 1e-12
    return alpha, inv
