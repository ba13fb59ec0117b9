"""benchmarks/planner_local_history.py: rows within 10% per run and in all, each layout's mean,
median, spread and misses over the runs, the expected misses from a normal spread, the diagnostic
with each run's median ratio divided out, and the benches' own noise from the rounds' times, against
values worked out by hand; --name renames the RESULT line; arguments that are not LABEL=TSV are
refused with a nonzero exit."""
import math
import os
import statistics
import subprocess
import sys
import tempfile

TOOL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks", "planner_local_history.py")


def run(*args):
    p = subprocess.run([sys.executable, TOOL, *args], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def main():
    with tempfile.TemporaryDirectory() as d:
        # Layout a: 0.95x, 0.85x and 0.93x (one miss; mean 0.91, median 0.93); layout b: 1.0x three times.
        runs = {"r1": [("a", 1.0, 0.95), ("b", 2.0, 2.0)], "r2": [("a", 1.0, 0.85), ("b", 4.0, 4.0)],
                "r3": [("a", 2.0, 1.86), ("b", 1.0, 1.0)]}
        args = []
        for label, rows in runs.items():
            path = os.path.join(d, label + ".tsv")
            with open(path, "w") as f:
                f.writelines(f"{n}\t{m}\t{p}\n" for n, m, p in rows)
            args.append(f"{label}={path}")
        code, out = run(*args)
        assert code == 0, out
        lines = out.splitlines()
        assert any(l.split()[:4] == ["r1", "2", "2", "0.025"] for l in lines), out  # |err| 0.05 and 0
        assert any(l.split()[:4] == ["r2", "2", "1", "0.075"] for l in lines), out  # 0.15 and 0
        assert any(l.split()[:4] == ["r3", "2", "2", "0.035"] for l in lines), out  # 0.07 and 0
        # a: deviations from 0.91 of +0.04, -0.06, +0.02: sd sqrt(0.0056 / 3) = 0.0432.
        sd = math.sqrt(0.0056 / 3)
        a = next(l.split() for l in lines if l.startswith("a "))
        # Each run's shift (its rows' median ratio; of two rows, their mean) divided out: r1 0.975,
        # r2 0.925, r3 0.965.
        shifts = [0.975, 0.925, 0.965]
        a_rel = [0.95 / 0.975, 0.85 / 0.925, 0.93 / 0.965]
        b_rel = [1 / s for s in shifts]
        assert a[1:8] == ["3", "0.910", "0.930", f"{sd:.3f}", "0.850", "0.950", "1"], a
        assert a[8:] == [f"{statistics.fmean(a_rel):.3f}", f"{statistics.pstdev(a_rel):.3f}"], a
        b = next(l.split() for l in lines if l.startswith("b "))
        assert b[1:] == ["3", "1.000", "1.000", "0.000", "1.000", "1.000", "0", f"{statistics.fmean(b_rel):.3f}",
                         f"{statistics.pstdev(b_rel):.3f}"], b
        # With the shift gone r2's a (0.919x) is within 10%: every row and run.
        assert (f"the runs' shifts sd {statistics.pstdev(shifts):.3f} (0.925-0.975); the rows around their run's "
                f"shift sd {statistics.pstdev(a_rel + b_rel):.3f}; 6 of 6 rows and 3 of 3 runs within 10%") in out, out
        # Spread alone: a's N(1, sd) falls outside +-0.1 with 2 * Phi(-0.1 / sd), b's never; around
        # its mean a's N(0.91, sd) does with Phi(-0.01 / sd) + 1 - Phi(0.19 / sd).
        phi = lambda z: 0.5 * (1 + math.erf(z / math.sqrt(2)))
        spread, bias = 2 * phi(-0.1 / sd), phi(-0.01 / sd) + 1 - phi(0.19 / sd)
        assert (f"observed 0.33; expected from each layout's spread alone (centred on 1.0) {spread:.2f}; "
                f"from its spread around its mean {bias:.2f}") in out, out
        assert "5 of 6 rows within 10%" in out, out
        assert "history_step_time_share_within_10pct=0.833 " in out and out.rstrip().endswith("MISSED"), out
        # The shift is the median, not the mean (0.93 here, which would leave z 1.17x out too).
        path = os.path.join(d, "r9.tsv")
        with open(path, "w") as f:
            f.write("x\t1.0\t0.70\ny\t1.0\t1.00\nz\t1.0\t1.09\n")
        code, one = run(f"r9={path}")
        assert code == 0 and "(1.000-1.000)" in one and "2 of 3 rows and 0 of 1 runs within 10%" in one, one
        # Rounds' times in a fourth column: u measured 1.0 and 1.1 s (reported 1.05), v 2.0 and 2.0 s:
        # ln(time) spread sqrt(2 * (ln(1.1) / 2)^2 / 2) = ln(1.1) / 2 one round, / sqrt(2) reported.
        path = os.path.join(d, "r8.tsv")
        with open(path, "w") as f:
            f.write("u\t1.05\t1.0\t1.0,1.1\nv\t2.0\t2.0\t2.0,2.0\nw\t3.0\t3.0\t\n")
        code, noisy = run(f"r8={path}")
        s = math.log(1.1) / 2
        share = phi(-math.log(0.9) / (s / math.sqrt(2))) - phi(-math.log(1.1) / (s / math.sqrt(2)))
        n = s / math.sqrt(2)
        assert code == 0 and (f"the benches' own noise (zeropp-vs-3d's rounds) in 1 runs: the reported times' noise "
                              f"in ln(step time) {n:.3f}-{n:.3f}, the median run's {n:.3f} (pooled over the runs "
                              f"{n:.3f}); a planner without error would put {share:.1%} of the median run's rows "
                              f"within 10% ({share:.1%} pooled)") in noisy, noisy
        assert any(l.split()[:5] == ["r8", "3", "3", "0.016", f"{n:.3f}"] for l in noisy.splitlines()), noisy
        assert any(l.split()[:5] == ["r1", "2", "2", "0.025", "-"] for l in lines), out  # no rounds
        assert "own noise" not in out, out  # no rounds, no line
        # --name renames the RESULT (planner-local.sh --cross), nothing else.
        code, named = run("--name", "cross_calibration", *args)
        assert code == 0 and named == out.replace("history_step", "cross_calibration_step"), named
        code, bad = run("--name", "two words", *args)
        assert code != 0 and "--name: got ['two words'], expected a word" in bad, bad
    code, out = run("no-label")
    assert code != 0 and "expected LABEL=TSV" in out, out
    print("ok")


if __name__ == "__main__":
    main()
