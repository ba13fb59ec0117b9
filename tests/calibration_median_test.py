"""benchmarks/calibration_median.py: every number of the first description replaced by its median over
all the descriptions that have it (lists element-wise, over the lists as long), text, flags and the
first description's set of fields kept, against values worked out by hand; too few arguments are
refused with a nonzero exit."""
import json
import os
import subprocess
import sys
import tempfile

TOOL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks", "calibration_median.py")


def main():
    own = {"name": "cpu-local", "source": "today", "compute_overhead": 1.0, "flag": True,
           "inter_node": {"bandwidth_gbps": 0.1, "latency_us": 2000.0},
           "matmul": {"table": {"forward": [1.0, 2.0, 3.0]}}, "layer_overhead_us": 1000.0}
    older = [
        {"name": "x", "source": "yesterday", "compute_overhead": 1.4, "flag": False,
         "inter_node": {"bandwidth_gbps": 0.3, "latency_us": 1000.0},
         "matmul": {"table": {"forward": [3.0, 0.0, 5.0]}}, "only_old": 7.0},
        {"name": "y", "compute_overhead": 1.2, "inter_node": {"bandwidth_gbps": 0.2},
         "matmul": {"table": {"forward": [2.0, 9.0]}}},  # a shorter table: left out of the element-wise median
    ]
    with tempfile.TemporaryDirectory() as d:
        paths = []
        for i, desc in enumerate([own] + older):
            paths.append(os.path.join(d, f"{i}.json"))
            with open(paths[-1], "w") as f:
                json.dump(desc, f)
        out = os.path.join(d, "out.json")
        p = subprocess.run([sys.executable, TOOL, out, *paths], capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        got = json.load(open(out))
        want = {"name": "cpu-local", "source": "today", "compute_overhead": 1.2, "flag": True,
                "inter_node": {"bandwidth_gbps": 0.2, "latency_us": 1500.0},
                "matmul": {"table": {"forward": [2.0, 1.0, 4.0]}}, "layer_overhead_us": 1000.0}
        assert got == want, got
        # One description alone is its own median.
        p = subprocess.run([sys.executable, TOOL, out, paths[0]], capture_output=True, text=True)
        assert p.returncode == 0 and json.load(open(out)) == own, p.stderr
        p = subprocess.run([sys.executable, TOOL, out], capture_output=True, text=True)
        assert p.returncode != 0 and "expected OUT OWN" in p.stderr, p.stderr
    print("calibration_median_test: OK")


if __name__ == "__main__":
    main()
