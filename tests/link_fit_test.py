"""The link fits ./zpp calibrate uses (tools/relative_fit.py) on a ring all-gather sweep: both recover
latency and bandwidth from exact points; on a sweep whose small messages are noisy (a loaded box's
scheduling), the absolute-error fit keeps the large messages' times, which carry a run's bytes,
where the relative-error fit trades them for the small ones."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import relative_fit  # noqa: E402

P = 4  # ranks in the ring


def rows(times):  # (hops, bytes factor, seconds) per size, as calibrate.sh builds them
    return [(P - 1, (P - 1) / P * s, t) for s, t in times]


def ring(alpha, bus, s):
    return (P - 1) * alpha + (P - 1) / P * s / bus


def main():
    sizes = [1024 * 4 ** k for k in range(8)]  # 1 KiB .. 16 MiB
    alpha, bus = 1e-3, 1.25e8
    exact = [(s, ring(alpha, bus, s)) for s in sizes]
    for relative in (True, False):
        a, inv = relative_fit.fit_link(rows(exact), relative)
        assert abs(a - alpha) < 1e-12 and abs(inv * bus - 1) < 1e-9, (relative, a, inv)
    # The same link with the messages up to 64 KiB taking 1.5x and 2x their time by turns: by hand,
    # the relative fit's error at 16 MiB exceeds the absolute fit's by far.
    noisy = [(s, t * (1.5 if k % 2 else 2.0) if s <= 65536 else t) for k, (s, t) in enumerate(exact)]
    big = sizes[-1]
    err = {}
    for relative in (True, False):
        a, inv = relative_fit.fit_link(rows(noisy), relative)
        err[relative] = abs(((P - 1) * a + (P - 1) / P * big * inv) / ring(alpha, bus, big) - 1)
    assert err[False] < 0.01, err
    assert err[True] > 5 * err[False], err
    # A link with no latency, each size 0% or 10% slow by turns: the absolute fit's bandwidth lies
    # within that band, and the latency it finds is under 1% of the 16 MiB time.
    flat = [(s, (P - 1) / P * s / bus * (1.0 if k % 2 else 1.1)) for k, s in enumerate(sizes)]
    a, inv = relative_fit.fit_link(rows(flat), False)
    assert 1.0 <= inv * bus <= 1.1, (a, inv)
    assert (P - 1) * a < 0.01 * ring(0, bus, big), (a, inv)
    print("link_fit_test: ok (16 MiB error: relative %.3f, absolute %.4f)" % (err[True], err[False]))


if __name__ == "__main__":
    main()
