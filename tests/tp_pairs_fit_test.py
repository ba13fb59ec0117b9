"""tools/tp_pairs_fit.py, as ./zpp bench planner-local --history --set tp_peer_skew=1 uses it: waits made
from a known link over the current planner's coefficients are fitted back to it from the source text
alone; with tp_peer_skew, waits made from the link plus the skew the planner charges apart (E[max of
two compute_cv factors] - 1 of the pair's compute at half a core, oversubscribed_compute_factor slower)
fit back to the same link; a description without the pairs' record is refused with one line."""
import json
import os
import subprocess
import sys

RUNFILES = os.environ["ZEROPP_RUNFILES"]
sys.path.insert(0, os.path.join(RUNFILES, "tools"))
import hardware_json  # noqa: E402
import tp_pairs_fit  # noqa: E402

PLAN = os.path.join(RUNFILES, "tools", "plan")
TMP = os.environ.get("TEST_TMPDIR", "/tmp")
ALPHA, GBPS = 600e-6, 0.35
SHAPES = [(256, 96, 2), (256, 192, 2), (256, 128, 8)]


def waits(hw, skew):
    out = []
    for w, c, b in SHAPES:
        a = tp_pairs_fit.predict(PLAN, hw, {"bandwidth_gbps": 1e6, "latency_us": 1000, "efficiency": 1}, w, c, b,
                                 "tp_collectives_s") / 1e-3
        v = tp_pairs_fit.predict(PLAN, hw, {"bandwidth_gbps": 1, "latency_us": 0, "efficiency": 1}, w, c, b,
                                 "tp_collectives_s") * 1e9
        compute = tp_pairs_fit.predict(PLAN, hw, {"bandwidth_gbps": 1e6, "latency_us": 0, "efficiency": 1}, w, c, b,
                                       "compute_s")
        out.append(ALPHA * a + v / (GBPS * 1e9) + skew * compute * 2 * hw.get("oversubscribed_compute_factor", 1))
    return out


def described(hw, ws):
    shapes = ", ".join("width %d context %d x %d: %.6f s measured / 0 s fitted" % (w, c, b, t)
                       for (w, c, b), t in zip(SHAPES, ws))
    hw = dict(hw)
    hw["source"] = ("measured; intra_node_oversubscribed from two tp=2 jobs of the 3D baseline at once, their TP wait "
                    "per step fitted (tools/calibrate_pairs.sh): 1 GB/s bus, 1 us per hop (%s); compute_cv 0.2" % shapes)
    hw["intra_node_oversubscribed"] = {"bandwidth_gbps": 1, "latency_us": 1, "efficiency": 1}
    return hw


def fitted(hw):
    path = os.path.join(TMP, "pairs.json")
    hardware_json.write(path, hw)
    p = subprocess.run([sys.executable, os.path.join(RUNFILES, "tools", "tp_pairs_fit.py"), "refit", path, "--plan", PLAN],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return json.load(open(path))["intra_node_oversubscribed"], p.stdout


def main():
    base = json.load(open(os.path.join(RUNFILES, "scheduler/planner/hardware/cpu-local.json")))
    base["compute_cv"] = 0.2
    base.pop("tp_peer_skew", None)
    link, _ = fitted(described(base, waits(base, 0.0)))
    assert abs(link["latency_us"] - ALPHA * 1e6) < 0.2 and abs(link["bandwidth_gbps"] - GBPS) < 2e-4, link
    skewed = dict(base, tp_peer_skew=1)
    k = tp_pairs_fit.expected_max_minus_one(0.2)
    assert 0.09 < k < 0.13, k
    link, out = fitted(described(skewed, waits(base, k)))
    assert abs(link["latency_us"] - ALPHA * 1e6) < 0.2 and abs(link["bandwidth_gbps"] - GBPS) < 2e-4, (link, out)
    # No record of the pairs: one line, nonzero.
    path = os.path.join(TMP, "bare.json")
    hardware_json.write(path, dict(base, source="measured"))
    p = subprocess.run([sys.executable, os.path.join(RUNFILES, "tools", "tp_pairs_fit.py"), "refit", path, "--plan", PLAN],
                       capture_output=True, text=True)
    assert p.returncode != 0 and "records 0 TP pair shapes" in p.stderr and "Traceback" not in p.stderr, p.stderr
    print("tp_pairs_fit_test: ok")


if __name__ == "__main__":
    main()
