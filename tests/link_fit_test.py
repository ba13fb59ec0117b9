"""The link fits ./zpp calibrate uses (tools/relative_fit.py) on a ring all-gather sweep: both recover
latency and bandwidth from exact points; on a sweep whose small messages are noisy (a loaded box's
scheduling), the absolute-error fit keeps the large messages' times, which carry a run's bytes,
where the relative-error fit trades them for the small ones. Then tools/link_fit.py's choice of form
for a loaded link: wire-bound where the load leaves the bandwidth alone and that form fits better,
recovering its parameters; alpha-beta where the load slows the wire, or where alpha-beta fits; and
`refit` rewriting a description's links from calibrate's sweep lines."""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import link_fit  # noqa: E402
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
    wire_bound_forms(sizes)


def wire_bound_forms(sizes):
    idle = {"bandwidth_gbps": 0.125, "latency_us": 400.0}
    w, bus, floor = 400e-6, 0.125e9, 2.5e-3
    # A loaded link whose hop takes max(2.5 ms, 0.4 ms + its bytes' time), as tbf gives: by hand the
    # floor holds up to 1 MiB (a hop's 256 KiB drains in 2.1 ms) and the wire from 4 MiB (8.4 ms).
    tbf = [(s, (P - 1) * max(floor, w + s / P / bus)) for s in sizes]
    e = link_fit.fit(tbf, idle)
    assert e == {"bandwidth_gbps": 0.125, "latency_us": 2500.0, "wire_latency_us": 400.0}, e
    # Alpha-beta there would charge 16 MiB's hops their latency on top: its latency is over 2x the idle one.
    ab = link_fit.fit(tbf)
    assert "wire_latency_us" not in ab and ab["latency_us"] > 2 * idle["latency_us"], ab
    # The same times with the load halving the bandwidth (the unshaped veth, whose copies take the
    # CPU): alpha-beta, however the wire-bound form fits.
    slow = [(s, (P - 1) * max(floor, w + s / P / (bus / 2))) for s in sizes]
    assert "wire_latency_us" not in link_fit.fit(slow, idle)
    # An alpha-beta link: the wire-bound form fits worse, alpha-beta is kept.
    exact = [(s, ring(2.5e-3, bus, s)) for s in sizes]
    e = link_fit.fit(exact, idle)
    assert e == {"bandwidth_gbps": 0.125, "latency_us": 2500.0}, e
    # refit: calibrate's sweep lines (median per size over the passes) rewrite the loaded link; the
    # idle one's fit is unchanged; the efficiency the description held stays.
    with tempfile.TemporaryDirectory() as d:
        hw_path, txt_path = os.path.join(d, "hw.json"), os.path.join(d, "run.txt")
        json.dump({"inter_node": {"bandwidth_gbps": 0.11, "latency_us": 1800.0, "efficiency": 1.0},
                   "inter_node_idle": dict(idle, efficiency=1.0)}, open(hw_path, "w"))
        lines = []
        for label, times in (("loaded", tbf), ("idle", [(s, ring(w, bus, s)) for s in sizes])):
            for scale in (1.0, 1.3, 0.99):  # three passes; the median is the exact one
                lines += ["calibrate: two nodes, tbf 1gbit, %s (every kept sweep): all_gather(ring) %d %.3f 0 0"
                          % (label, s, t * scale * 1e6) for s, t in times]
        open(txt_path, "w").write("\n".join(lines) + "\n")
        link_fit.refit(hw_path, txt_path)
        hw = json.load(open(hw_path))
        assert hw["inter_node"] == {"bandwidth_gbps": 0.125, "latency_us": 2500.0, "wire_latency_us": 400.0,
                                    "efficiency": 1.0}, hw
        assert hw["inter_node_idle"] == dict(idle, efficiency=1.0), hw
    print("link_fit_test: wire-bound forms ok")


if __name__ == "__main__":
    main()
