#!/usr/bin/env python3
"""link_fit.py: the two-node links' fits from their ring all-gather sweeps, in one place for
./zpp calibrate (tools/calibrate.sh) and for re-predicting committed runs (./zpp bench planner-local
--history).

A sweep is the ring all-gather over P = 4 ranks (2 per network namespace, tools/two_nodes.sh) at
sizes S from 1 KiB to 16 MiB; each size's median time over the kept passes is fitted by least
squares on absolute error (the sizes that take the time count most) in one of two forms:
- alpha-beta: t = (P-1) a + (P-1)/P S / bus, a the latency per hop;
- wire-bound, for a link measured loaded (one busy thread per rank) with its idle twin:
  t = (P-1) max(a, w + S/P / bus), w the idle twin's latency per hop. Where the link itself is the
  bottleneck (tc tbf drains its queue at a fixed rate, without the ranks' CPU), the loaded box's wait
  for a core passes while the bytes drain: a hop costs the idle latency plus its wire time, and no
  less than the loaded latency. Where the copies through the kernel are the bottleneck (the
  unshaped veth: loaded, it moves 0.4-0.8x its idle bytes per second), the wait adds to them.
A loaded link is wire-bound when the load leaves its bandwidth alone (its alpha-beta bandwidth at
least WIRE_BOUND_SHARE of the idle twin's: the 1gbit link 0.92-1.01 over r29-r115, the veth 0.38-0.83)
and that form fits its sweep with a smaller squared error; both forms have two free parameters (a
and bus), w is the idle fit's. On r113's 1gbit sweep, alpha-beta put 1833 us on every hop and
overestimated 1-4 MiB, the size of a layer's ZeRO-3 gather, by 11-40%.
  link_fit.py refit HW TXT   HW's four swept links fitted again from the sweep rows in TXT (a
                             planner-local --fresh output's calibration lines), written back
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hardware_json  # noqa: E402
import relative_fit  # noqa: E402
from link_sweeps import ROW  # noqa: E402  (a sweep's row: size, time in us)

P = 4
WIRE_BOUND_SHARE = 0.9  # set by hand between the two links' ranges above
# Each swept link: its key in a hardware description, the label calibrate's sweep lines carry, and
# its idle twin's key (None: the idle link itself).
LINKS = [("inter_node_idle", "tbf 1gbit, idle", None), ("inter_node", "tbf 1gbit, loaded", "inter_node_idle"),
         ("veth_unshaped_idle", "unshaped, idle", None), ("veth_unshaped", "unshaped, loaded", "veth_unshaped_idle")]


def medians(rows):
    """[(bytes, seconds)]: the median time of each size in sweep rows (collectives_bench's lines)."""
    by_size = {}
    for s, t in ROW.findall(rows):
        by_size.setdefault(int(s), []).append(float(t) * 1e-6)
    return [(s, sorted(ts)[len(ts) // 2]) for s, ts in sorted(by_size.items())]


def alpha_beta(points):
    """(latency per hop s, bus bytes/s, squared error) of t = (P-1) a + (P-1)/P S / bus."""
    if len(points) < 3:
        sys.exit("link_fit: a link sweep has %d sizes, expected at least 3" % len(points))
    rows = [(P - 1, (P - 1) / P * s, t) for s, t in points]
    a, inv = relative_fit.fit_link(rows, relative=False)
    return a, 1 / inv, sum((u * a + v * inv - t) ** 2 for u, v, t in rows)


def wire_bound(points, w):
    """(latency per hop s, bus bytes/s, squared error) of t = (P-1) max(a, w + S/P / bus), or None
    where no split of the sizes gives a positive bandwidth. Closed form per split: the k smallest
    sizes on the floor (a = their mean / (P-1)), the rest on the line through (P-1) w; the best split
    by the squared error of the whole max form."""
    best = None
    for k in range(1, len(points) - 1):
        floor = sum(t for _, t in points[:k]) / k / (P - 1)
        line = [((P - 1) / P * s, t - (P - 1) * w) for s, t in points[k:]]
        inv = sum(x * y for x, y in line) / sum(x * x for x, _ in line)
        if inv <= 0:
            continue
        err = sum(((P - 1) * max(floor, w + s / P * inv) - t) ** 2 for s, t in points)
        if best is None or err < best[2]:
            best = (floor, 1 / inv, err)
    return best


def fit(points, idle=None):
    """The link's description entry from its sweep: alpha-beta, or (a loaded link, given its idle
    twin's entry) the wire-bound form where the load leaves the bandwidth alone and that form fits
    better, with "wire_latency_us"."""
    a, bus, err = alpha_beta(points)
    entry = {"bandwidth_gbps": round(bus / 1e9, 4), "latency_us": round(a * 1e6, 1)}
    if idle is not None and bus >= WIRE_BOUND_SHARE * idle["bandwidth_gbps"] * 1e9:
        idle_latency_s = idle["latency_us"] * 1e-6
        wb = wire_bound(points, idle_latency_s)
        if wb and wb[2] < err and wb[0] > idle_latency_s:
            entry = {"bandwidth_gbps": round(wb[1] / 1e9, 4), "latency_us": round(wb[0] * 1e6, 1),
                     "wire_latency_us": round(idle_latency_s * 1e6, 1)}
    return entry


def fit_all(sweeps):
    """{key: entry} for the LINKS whose sweep rows `sweeps` ({key: rows text}) holds."""
    out = {}
    for key, _, twin in LINKS:
        if key not in sweeps:
            continue
        out[key] = fit(medians(sweeps[key]), out.get(twin))
    return out


def refit(hw_path, txt_path):
    hw = json.load(open(hw_path))
    lines = open(txt_path).read().splitlines()
    sweeps = {}
    for key, label, _ in LINKS:
        rows = "\n".join(ln for ln in lines if "two nodes, %s (" % label in ln and ROW.search(ln))
        if rows and key in hw:
            sweeps[key] = rows
    changed = []
    for key, entry in fit_all(sweeps).items():
        was = hw[key]
        hw[key] = dict(entry, **({"efficiency": was["efficiency"]} if "efficiency" in was else {}))
        if hw[key] != was:
            print("link_fit: %s: %s %s -> %s" % (os.path.basename(hw_path), key, json.dumps(was), json.dumps(hw[key])))
            changed.append("%s %s" % (key, json.dumps(hw[key])))
    if changed and "source" in hw:  # the description says what was fitted again, and how
        hw["source"] += "; refitted from the same sweeps by tools/link_fit.py: " + ", ".join(changed)
    hardware_json.write(hw_path, hw)


def main(argv):
    if argv[:1] == ["refit"] and len(argv) == 3:
        refit(argv[1], argv[2])
    else:
        sys.exit("link_fit: usage: link_fit.py refit HW TXT (got: %s)" % " ".join(argv))


if __name__ == "__main__":
    main(sys.argv[1:])
