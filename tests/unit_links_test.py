"""tools/unit_links.py, the unit-link times calibrate_pairs.sh fits its links from: the planner's time
for each kind of job is linear in the link (latency x A / 1 ms + B / bandwidth in GB/s, the form the
fit assumes), at a link the units were not read at; the fields the units replace or drop (the fitted
gather and p2p links, tp_peer_skew) do not move them; the command prints the same two numbers; bad
input is refused with one line naming the field."""
import json
import os
import subprocess
import sys

RUNFILES = os.environ["ZEROPP_RUNFILES"]
sys.path.insert(0, os.path.join(RUNFILES, "tools"))
import hardware_json  # noqa: E402
import unit_links  # noqa: E402

PLAN = os.path.join(RUNFILES, "tools", "plan")
SCRIPT = os.path.join(RUNFILES, "tools", "unit_links.py")
TMP = os.environ.get("TEST_TMPDIR", "/tmp")
JOBS = [("tp", (256, 4, 4, 96, 8, 2)), ("tp-filled", (256, 4, 4, 192, 8, 5)), ("gather", (192, 4, 4, 128, 8, 4))]


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args, "--plan", PLAN], capture_output=True, text=True)


def main():
    hw_path = os.path.join(RUNFILES, "scheduler/planner/hardware/cpu-local.json")
    hw = json.load(open(hw_path))
    wild = dict(hw, tp_peer_skew=1, intra_node_p2p={"bandwidth_gbps": 0.001, "latency_us": 1e5, "efficiency": 1},
                intra_node_oversubscribed_gather={"bandwidth_gbps": 0.001, "latency_us": 1e5, "efficiency": 1})
    for kind, shape in JOBS:
        a, b = unit_links.coefficients(PLAN, hw, kind, shape)
        assert a > 0 and b > 0, (kind, a, b)
        for us, gbps in ((600, 0.35), (2500, 4.0)):
            t = unit_links.predict(PLAN, hw, {"bandwidth_gbps": gbps, "latency_us": us, "efficiency": 1}, kind, shape)
            linear = us / 1000 * a + b / gbps
            assert abs(t - linear) <= 1e-5 + 1e-4 * linear, (kind, us, gbps, t, linear)
        assert unit_links.coefficients(PLAN, wild, kind, shape) == (a, b), kind
        p = run(hw_path, kind, *map(str, shape))
        assert p.returncode == 0 and [float(x) for x in p.stdout.split()] == [a, b], (p.stdout, p.stderr)
    # A counts the tp job's hops at 1 ms: 4 more layers add, per micro-batch (8), 2 all-reduces forward and
    # 2 backward, each 2 hops on a ring of 2 (2 (n - 1)): 4 x 8 x 4 x 2 = 256 hops.
    a4, _ = unit_links.coefficients(PLAN, hw, "tp", (256, 4, 4, 96, 8, 2))
    a8, _ = unit_links.coefficients(PLAN, hw, "tp", (256, 8, 4, 96, 8, 2))
    assert abs((a8 - a4) - 0.256) < 1e-6, (a4, a8)
    for args, words in (((hw_path, "ring", "256", "4", "4", "96", "8", "2"), "KIND: got 'ring'"),
                        ((hw_path, "tp", "256", "4", "4", "0", "8", "2"), "CONTEXT: got '0'"),
                        ((os.path.join(TMP, "missing.json"), "tp", "256", "4", "4", "96", "8", "2"), "HW: '")):
        p = run(*args)
        assert p.returncode != 0 and words in p.stderr and "Traceback" not in p.stderr, (args, p.stderr)
        assert len(p.stderr.strip().splitlines()) == 1, p.stderr
    print("unit_links_test: ok")


if __name__ == "__main__":
    main()
