"""tools/tp_wait_skew.py: the split of TP waits into transfer and arrival skew, and of the process CPU
into inside and between the waits, against values worked out by hand on small logs, and its one-line
refusals."""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "..", "tools", "tp_wait_skew.py")
MS = 1_000_000  # ns


def run(logs, *args):
    with tempfile.TemporaryDirectory() as d:
        prefix = os.path.join(d, "log")
        for r, rows in enumerate(logs):
            with open("%s.rank%d" % (prefix, r), "w") as f:
                f.writelines(" ".join("%d" % (x * MS) for x in row) + "\n" for row in rows)
        p = subprocess.run([sys.executable, TOOL, prefix, *args], capture_output=True, text=True)
        return p.returncode, p.stdout, p.stderr


def per_rank(out):
    rows = {}
    for line in out.splitlines()[1:]:
        if not line.strip():
            break
        r, calls, wait, transfer, skew = line.split()
        rows[int(r)] = (int(calls), float(wait), float(transfer), float(skew))
    return rows


def main():
    # One TP group of 2 over 2 steps of 2 collectives each, times in ms.
    # Collective 0: rank 0 arrives at 0, rank 1 at 3, both done at 5: rank 0 waits 5 (transfer 2,
    #   the late rank's wait, + skew 3), rank 1 waits 2 (transfer 2).
    # Collective 1: rank 1 arrives at 10, rank 0 at 11, done at 12: rank 1 waits 2 (1 + 1 skew),
    #   rank 0 waits 1.
    # Collectives 2 and 3 (step 2): both arrive together and wait 4; then rank 0 at 30, rank 1 at 34,
    #   done at 35: rank 0 waits 5 (1 + 4 skew), rank 1 1.
    r0 = [(0, 5), (11, 12), (20, 24), (30, 35)]
    r1 = [(3, 5), (10, 12), (20, 24), (34, 35)]
    code, out, err = run([r0, r1], "--world", "2", "--tp", "2", "--steps", "2")
    assert code == 0, err
    rows = per_rank(out)
    # Per step: rank 0 waits (5 + 1 + 4 + 5) / 2 = 7.5 ms, transfer (2 + 1 + 4 + 1) / 2 = 4, skew
    # (3 + 0 + 0 + 4) / 2 = 3.5; rank 1 waits (2 + 2 + 4 + 1) / 2 = 4.5, transfer 4, skew 0.5.
    assert rows[0] == (2, 0.0075, 0.0040, 0.0035), rows
    assert rows[1] == (2, 0.0045, 0.0040, 0.0005), rows
    # Position 0 of a step has skew (3 + 0) / 2 steps = 1.5 ms a step, position 1 (1 + 4) / 2 = 2.5:
    # position 1 ranks first; its late peer's gap since its previous wait: step 1 rank 0, 11 - 5 = 6;
    # step 2 rank 1, 34 - 24 = 10: 8 ms on average; the early peer's (10 - 5, 30 - 24) 5.5.
    tail = out.splitlines()[-2:]
    assert tail[0].split() == ["0", "1", "0.0025", "0.0080", "0.0055"], tail
    assert tail[1].split() == ["0", "0", "0.0015", "0.0000", "0.0000"], tail

    assert "process CPU" not in out, out  # 2-column logs carry no CPU clock

    # With the process CPU clock (ms): rank 0 waits 0-4 (CPU 10 -> 11) and 10-12 (17 -> 19): 6 ms of
    # waits with 3 of CPU (share 0.5, 1500 us a call), 6 ms between them with 17 - 11 = 6 of CPU
    # (share 1.0). Rank 1 waits 2-4 (20 -> 20) and 8-12 (26 -> 28): 6 ms with 2 of CPU (0.333, 1000
    # us a call), 4 ms between with 6 of CPU (1.5: two threads busy).
    c0 = [(0, 4, 10, 11), (10, 12, 17, 19)]
    c1 = [(2, 4, 20, 20), (8, 12, 26, 28)]
    code, out, err = run([c0, c1], "--world", "2", "--tp", "2", "--steps", "1")
    assert code == 0, err
    lines = out.splitlines()
    at = next(i for i, l in enumerate(lines) if l.startswith("process CPU"))
    assert lines[at + 2].split() == ["0", "0.0030", "0.500", "1500.0", "0.0060", "0.0060", "1.000"], lines[at + 2]
    assert lines[at + 3].split() == ["1", "0.0020", "0.333", "1000.0", "0.0040", "0.0060", "1.500"], lines[at + 3]
    assert per_rank(out)[0] == (2, 0.006, 0.004, 0.002), out  # coll 0: r1 late (transfer 2); coll 1: r0

    assert "other groups' ranks" not in out, out  # one TP group: no other group to overlap with

    # Two TP groups (ranks 0-1 and 2-3) over one step, with the CPU clock (ms). Ranks 0 and 1 wait 0-4
    # (CPU 0 -> 1) and 10-12 (5 -> 5); ranks 2 and 3 wait 2-4 (0 -> 2) and 20-30 (3 -> 8).
    # Rank 0's first wait: the other group waits 2 of its 4 ms, so busy = 1 - 2/4 = 0.5 (bin
    # 0.50-0.75); its second: nobody else waits, busy 1 (bin 0.75-1.00). Rank 2's first: the other
    # group waits all of its 2 ms, busy 0 (bin 0.00-0.25); its second, busy 1. Per bin over the 4
    # ranks: 0.00-0.25 two waits of 2 ms with 2 ms of CPU (share 1); 0.50-0.75 two of 4 ms with 1
    # (0.25); 0.75-1.00 four of (2 + 2 + 10 + 10) / 4 = 6 ms with (0 + 0 + 5 + 5) / 4 = 2.5 (0.417).
    g0 = [(0, 4, 0, 1), (10, 12, 5, 5)]
    g1 = [(2, 4, 0, 2), (20, 30, 3, 8)]
    code, out, err = run([g0, g0, g1, g1], "--world", "4", "--tp", "2", "--steps", "1")
    assert code == 0, err
    lines = out.splitlines()
    at = next(i for i, l in enumerate(lines) if "other groups' ranks" in l)
    assert [l.split() for l in lines[at + 2:at + 6]] == [
        ["0.00-0.25", "2.0", "2000.0", "2000.0", "1.000"],
        ["0.25-0.50", "0.0", "-", "-", "-"],
        ["0.50-0.75", "2.0", "4000.0", "1000.0", "0.250"],
        ["0.75-1.00", "4.0", "6000.0", "2500.0", "0.417"]], lines[at:at + 6]

    # Refusals: one line, nonzero, naming what is wrong.
    code, out, err = run([[(0, 4), (10, 12, 17, 19)], c1], "--world", "2", "--tp", "2", "--steps", "1")
    assert code != 0 and "line 2" in err and "as every line before it" in err and "Traceback" not in err, err
    code, out, err = run([r0, r1[:3]], "--world", "2", "--tp", "2", "--steps", "2")
    assert code != 0 and "rank 1 logged 3 waits" in err and "Traceback" not in err, err
    code, out, err = run([r0, r1], "--world", "2", "--tp", "2", "--steps", "3")
    assert code != 0 and "over --steps 3" in err, err
    code, out, err = run([r0, r1], "--world", "3", "--tp", "2", "--steps", "2")
    assert code != 0 and "--tp 2 with --world 3" in err, err
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "x.rank0"), "w") as f:
            f.write("1 2 3\n")
        with open(os.path.join(d, "x.rank1"), "w") as f:
            f.write("1 2\n")
        p = subprocess.run([sys.executable, TOOL, os.path.join(d, "x"), "--world", "2", "--tp", "2", "--steps", "1"],
                           capture_output=True, text=True)
        assert p.returncode != 0 and "line 1" in p.stderr and "expected 'begin_ns end_ns'" in p.stderr, p.stderr
        p = subprocess.run([sys.executable, TOOL, os.path.join(d, "none"), "--world", "2", "--tp", "2", "--steps", "1"],
                           capture_output=True, text=True)
        assert p.returncode != 0 and "cannot read" in p.stderr and "Traceback" not in p.stderr, p.stderr
    print("tp_wait_skew_test: ok")


if __name__ == "__main__":
    main()
