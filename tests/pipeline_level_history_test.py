"""tools/pipeline_level_history.py: a calibration's 2-rank pipeline level and its run's row means, on
small run files worked out by hand, and its one-line refusal."""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "..", "tools", "pipeline_level_history.py")


def run_file(measured1, predicted1, pp2_ratios):
    p2p = ("#| calibrate: intra_node_p2p from one 2-rank pipeline job: step %s and 1.0/1.0 s measured (growth 0 s), "
           "the planner's growth matched at 1 us per transfer (%.4f and 0.5000 s predicted; tools/p2p_fit.py)\n"
           % ("/".join("%.4f" % x for x in measured1), predicted1))
    rows = "".join("pipeline pp2 s%d  1.0000  %.4f  %.3f\n" % (i, r, r) for i, r in enumerate(pp2_ratios))
    rows += "zeropp_pp2_z2_u2 (unshaped)  1.0000  0.9000  0.900\n3d_tp2_dp2 (shaped)  1.0000  1.1000  1.100\n"
    return p2p + rows


def run(files):
    with tempfile.TemporaryDirectory() as d:
        for name, text in files.items():
            with open(os.path.join(d, name), "w") as f:
                f.write(text)
        p = subprocess.run([sys.executable, TOOL, d], capture_output=True, text=True)
        return p.returncode, p.stdout, p.stderr


def main():
    # Levels: mean(0.6, 0.8) / 0.5 = 1.4; 1.0 / 0.5 = 2.0; 0.55 / 0.5 = 1.1. Row means: 0.85, 0.55, 1.0.
    rc, out, err = run({
        "planner-local-2026-12-01-r5.txt": run_file([0.6, 0.8], 0.5, [0.8, 0.9]),
        "planner-local-2026-12-01-r12.txt": run_file([1.0, 1.0], 0.5, [0.55]),
        "planner-local-2026-12-01-r130.txt": run_file([0.55, 0.55], 0.5, [1.1, 0.9]),
    })
    assert rc == 0, err
    lines = out.splitlines()
    runs = [l.split() for l in lines[1:4]]
    assert [r[0] for r in runs] == ["r5", "r12", "r130"], out  # sorted by run number, not by name
    assert [float(r[1]) for r in runs] == [1.4, 2.0, 1.1], out
    assert [float(r[2]) for r in runs] == [2.0, 2.0, 2.0], out  # four chunks: 1.0 / 0.5
    assert [float(r[3]) for r in runs] == [0.85, 0.55, 1.0], out
    assert [float(r[5]) for r in runs] == [0.9] * 3 and [float(r[6]) for r in runs] == [1.1] * 3, out
    # The levels (1.4, 2.0, 1.1) against the pp2 means (0.85, 0.55, 1.0) fall on one line, 1.55 - 0.5 x level: -1; a constant column has no r.
    assert "since r5 (3 runs): corr(level1, mean pred/meas) pp2 -1.00, pp4 nan, zero nan, 3d nan" in out, out
    # Too few runs: one line naming what was found and what was expected.
    rc, out, err = run({"planner-local-2026-12-01-r5.txt": run_file([0.6], 0.5, [0.8])})
    assert rc != 0 and err.strip().count("\n") == 0 and "found 1 runs" in err and "expected 3" in err, err
    print("pipeline_level_history_test: OK")


if __name__ == "__main__":
    main()
