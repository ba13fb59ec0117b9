"""Checks tools/link_search.py on predictions whose true link is known."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import link_search  # noqa: E402

failures = []


def check(name, ok, detail):
    print(("ok   " if ok else "FAIL ") + name + ": " + detail)
    if not ok:
        failures.append(name)


# A job of `hops` latencies and `gb` gigabytes a step, overlapping `compute` seconds: step =
# max(compute, comm) + a tenth of comm (the part that never overlaps). Three shapes whose mix of
# latency and bytes differs, as calibrate_veth.sh's widths.
shapes = [(400, 0.05, 0.20), (400, 0.20, 0.35), (400, 0.45, 0.60)]  # hops, GB, compute s


def predict(lat_us, gbps):
    out = []
    for hops, gb, compute in shapes:
        comm = hops * lat_us * 1e-6 + gb / gbps
        out.append(max(compute, comm) + 0.1 * comm)
    return out


true = (900.0, 0.3)
measured = predict(*true)
lat, g, e = link_search.search(measured, predict)
check("recovers latency", abs(lat / true[0] - 1) < 0.02, "%.1f us against %.1f" % (lat, true[0]))
check("recovers bandwidth", abs(g / true[1] - 1) < 0.02, "%.4f GB/s against %.4f" % (g, true[1]))
check("error near zero", e < 1e-4, "%.2e" % e)

# Measurements 5% above the true link's predictions at every shape: the fit moves, and its error is
# what it reports.
lat2, g2, e2 = link_search.search([1.05 * m for m in measured], predict)
rep = sum((p / (1.05 * m) - 1) ** 2 for p, m in zip(predict(lat2, g2), measured))
check("slower link for slower steps", lat2 > lat or g2 < g, "%.1f us, %.4f GB/s" % (lat2, g2))
check("reported error is the fit's", abs(rep - e2) < 1e-12, "%.3e vs %.3e" % (rep, e2))

try:
    link_search.search([1.0, 0.0, 2.0], predict)
    check("refuses a non-positive measurement", False, "no error raised")
except ValueError as ex:
    check("refuses a non-positive measurement", "positive" in str(ex), str(ex))

print("%d passed, %d failed" % (6 - len(failures), len(failures)))
sys.exit(1 if failures else 0)
