"""tools/grid_repeatability.py (./zpp bench matmul-grid) on a synthetic grid over cpu-local.json's
table: two passes at the description's own rates, the second with a slow spell (0.7x, the reference
beside each shape as slow) over its 512-token shapes. Scaled by the reference the two passes' tables
are equal, so the cost model's time for every calibration shape agrees (metric 0, MET); as timed the
second pass predicts the 128-token x 4 shape slower than the other two, and the RESULT's reference
says by how much beyond the level common to the three."""
import json
import os
import re
import subprocess
import sys

RUNFILES = os.environ["ZEROPP_RUNFILES"]
TOOL = os.path.join(RUNFILES, "tools", "grid_repeatability.py")
HW = os.path.join(RUNFILES, "scheduler", "planner", "hardware", "cpu-local.json")
PLAN = os.path.join(RUNFILES, "tools", "plan")
sys.path.insert(0, os.path.dirname(os.path.realpath(TOOL)))
import grid_table  # noqa: E402


def main():
    hw = json.load(open(HW))
    t = hw["matmul"]["table"]
    peak = hw["peak_tflops"]["fp32"] * 1e3
    out = []
    shapes = [(tok, i, o) for tok in t["tokens"] for i in t["dims"] for o in t["dims"]]  # the table's order
    for r in (0, 1):
        for n, (tok, i, o) in enumerate(shapes):
            for p in grid_table.PASSES:
                s = 0.7 if r == 1 and tok == 512 else 1.0
                out.append("GRID repeat=%d pass=%s tokens=%d in=%d out=%d gflops=%.4f reference_gflops=%.4f"
                           % (r, p, tok, i, o, t[p][n] * peak * s, 60.0 * s))
    grid = os.path.join(os.environ.get("TEST_TMPDIR", "/tmp"), "grid.txt")
    open(grid, "w").write("\n".join(out) + "\n")
    res = subprocess.run([sys.executable, TOOL, grid, HW, PLAN, "128x4,128x1,64x4"], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    m = re.search(r"RESULT matmul-grid repeat_disagreement metric=([0-9.]+) fraction reference=([0-9.]+) "
                  r"ratio=([0-9.]+) target=0.05 (MET|MISSED)", res.stdout)
    assert m, res.stdout
    metric, reference = float(m.group(1)), float(m.group(2))
    assert metric < 5e-4 and m.group(4) == "MET", res.stdout
    # As timed, the 512-token GEMMs of the 128 x 4 shape run at 0.7x in the second pass: its time
    # grows by their share, somewhere between none and 1 / 0.7 - 1, and the other two shapes' not at
    # all (they run 128 and 256 tokens a micro-batch), so beyond the three's common level it stands
    # out by some of that.
    assert 0.05 < reference < 1 / 0.7 - 1, res.stdout
    assert re.search(r"128x4 +[0-9.]+ +[0-9.]+ +1\.[1-4][0-9]{2} ", res.stdout), res.stdout
    bad = subprocess.run([sys.executable, TOOL, grid, HW, PLAN, "128x4,0x1"], capture_output=True, text=True)
    assert bad.returncode != 0 and "SHAPES: got '128x4,0x1'" in bad.stderr, bad.stderr
    one = os.path.join(os.environ.get("TEST_TMPDIR", "/tmp"), "one.txt")
    open(one, "w").write("\n".join(l for l in out if l.startswith("GRID repeat=0")) + "\n")
    bad = subprocess.run([sys.executable, TOOL, one, HW, PLAN, "128x4"], capture_output=True, text=True)
    assert bad.returncode != 0 and "no GRID lines of repeat 1" in bad.stderr, bad.stderr
    print("grid_repeatability_test: ok (as timed: %.3f)" % reference)


if __name__ == "__main__":
    main()
