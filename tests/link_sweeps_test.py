"""tools/link_sweeps.py: which calibration passes are kept, against sweeps worked out by hand, and
r41's committed idle unshaped sweep (its three disturbed passes set aside)."""
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "..", "tools", "link_sweeps.py")
R41 = os.path.join(HERE, "..", "benchmarks", "results", "planner-local-2026-11-24-r41.txt")


def sweep(*times_us):  # one pass: the ring all-gather at 1 KiB, 4 KiB, ... with these times
    return "\n".join("all_gather(ring) %d %.1f 0.0 0.0 0 0" % (1024 * 4 ** i, t) for i, t in enumerate(times_us))


def run(passes, *args):
    text = "".join(p + "\n--\n" for p in passes)
    p = subprocess.run([sys.executable, TOOL, *args], input=text, capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def main():
    # Totals 100, 150, 190 (1.9x), 210 (2.1x) and 120 us: the 210 one is set aside.
    passes = [sweep(40, 60), sweep(50, 100), sweep(90, 100), sweep(10, 200), sweep(60, 60)]
    code, out, err = run(passes, "--keep", "4", "--spread", "2", "--label", "L")
    assert code == 0, err
    assert out.splitlines() == "\n".join(passes[i] for i in (0, 1, 2, 4)).splitlines(), out
    assert "L: set aside pass 4 (0.2 ms), over 2x the fastest pass (0.1 ms)" in err, err
    # Five needed, four kept: nothing printed, exit 1 (the caller measures another pass).
    code, out, err = run(passes, "--keep", "5", "--spread", "2")
    assert (code, out, err) == (1, "", ""), (code, out, err)
    # ... unless it is the last: every pass is fitted, and it says the link never settled.
    code, out, err = run(passes, "--keep", "5", "--spread", "2", "--last", "--label", "L")
    assert code == 0 and len(out.splitlines()) == 10, out
    assert "L: the link never settled: 4 of 5 passes within 2x" in err, err
    # All within the spread: all kept, nothing said.
    code, out, err = run(passes[:3], "--keep", "3", "--spread", "2")
    assert code == 0 and err == "" and len(out.splitlines()) == 6, (out, err)
    # Bad input: no rows, and a spread under 1.
    code, out, err = run([], "--keep", "1", "--spread", "2", "--label", "L")
    assert code != 0 and "L: no ring all-gather rows" in err, err
    code, out, err = run(passes, "--keep", "1", "--spread", "0.5")
    assert code == 2 and "--spread" in err, err
    # r41's idle unshaped sweep: passes of 84.9, 97.5, 89.0, 34.6 and 30.2 ms; the first three set aside.
    rows = [l.split("(every sweep):")[1] for l in open(R41) if "unshaped, idle (every sweep)" in l]
    r41, cur = [], []
    for r in rows:
        size = int(re.search(r"\)\s+(\d+)", r).group(1))
        if cur and size < int(re.search(r"\)\s+(\d+)", cur[-1]).group(1)):
            r41.append("\n".join(cur))
            cur = []
        cur.append(r.strip())
    r41.append("\n".join(cur))
    assert len(r41) == 5, len(r41)
    code, out, err = run(r41, "--keep", "2", "--spread", "2", "--label", "r41")
    assert code == 0, err
    assert "set aside pass 1 (84.9 ms), pass 2 (97.5 ms), pass 3 (89.0 ms)" in err, err
    assert out.splitlines() == (r41[3] + "\n" + r41[4]).splitlines()
    print("link_sweeps_test: all cases passed")


if __name__ == "__main__":
    main()
