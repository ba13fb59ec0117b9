"""tools/tp_wait_skew.py: the split of TP waits into transfer and arrival skew, and of the process CPU
into inside and between the waits, and its bins of the waits (by the gap before each, the rank's own
operations beside each, and the phases), against values worked out by hand on small logs, and its
one-line refusals."""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "..", "tools", "tp_wait_skew.py")
MS = 1_000_000  # ns


def run(logs, *args, ops=None):
    """ops: per rank, train_3d's .ops rows (group, kind, bytes, peer, start_ms, end_ms), None for none."""
    with tempfile.TemporaryDirectory() as d:
        prefix = os.path.join(d, "log")
        for r, rows in enumerate(logs):
            with open("%s.rank%d" % (prefix, r), "w") as f:
                # a 5th column, the phase, is written as it is (0 or 1), the times in ms
                f.writelines(" ".join(["%d" % (x * MS) for x in row[:4]] + ["%d" % x for x in row[4:]]) + "\n"
                             for row in rows)
        for r, rows in enumerate(ops or []):
            if rows is None:  # this rank's file left out
                continue
            with open("%s.rank%d.ops" % (prefix, r), "w") as f:
                f.writelines("%s %s %d %d %d %d\n" % (g, k, n, p, b * MS, e * MS) for g, k, n, p, b, e in rows)
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

    # The waits by the CPU share of the gap before each (ms; 2 steps of 2 waits, a step's first wait in
    # 'first'). Rank 0: step 1's second wait (10-12, CPU 2 -> 3) follows 2-10 with 1 of CPU (0.125: bin
    # 0.00-0.25); step 2's (26-28, 9 -> 10) follows 24-26 with 3 (1.5: >0.75). Rank 1: 6-10 (2 -> 4)
    # follows 2-6 with 2 (0.5, an edge: the bin above, 0.50-0.75); 30-32 (14 -> 15) follows 24-30 with
    # 2 (0.333: 0.25-0.50). 'first': 4 waits of (2 + 4 + 2 + 4) / 4 = 3 ms with (1 + 1 + 0 + 2) / 4 = 1
    # of CPU (share 0.333), 2 a step; every other bin one wait, 0.5 a step.
    g0 = [(0, 2, 0, 1), (10, 12, 2, 3), (20, 24, 5, 6), (26, 28, 9, 10)]
    g1 = [(0, 2, 0, 0), (6, 10, 2, 4), (20, 24, 10, 12), (30, 32, 14, 15)]
    code, out, err = run([g0, g1], "--world", "2", "--tp", "2", "--steps", "2")
    assert code == 0, err
    lines = out.splitlines()
    at = next(i for i, l in enumerate(lines) if "gap before each" in l)
    assert [l.split() for l in lines[at + 2:at + 7]] == [
        ["first", "2.0", "3000.0", "1000.0", "0.333"],
        ["0.00-0.25", "0.5", "2000.0", "1000.0", "0.500"],
        ["0.25-0.50", "0.5", "2000.0", "1000.0", "0.500"],
        ["0.50-0.75", "0.5", "4000.0", "2000.0", "0.500"],
        [">0.75", "0.5", "2000.0", "1000.0", "0.500"]], lines[at:at + 7]

    assert "other groups' ranks" not in out, out  # one TP group: no other group to overlap with
    assert "own operations" not in out, out  # no .ops files

    # The same waits with each rank's own operations on its other groups (ms; the two ranks stand in
    # for two pipeline stages). Rank 0 sends 1 MiB to rank 1, issued at 1 and waited at 20; rank 1's
    # receive of it was posted at 0 and returned at 2: the transfer ran within 1-2, on both. Rank 1
    # sends 1 MiB back, 9-30; rank 0's receive ran 5-12: the transfer, 9-12. Rank 0's 2 MiB data
    # all-reduce ran 1.5-3 on another thread. Rank 0: 1-3 covers 2 of its first wait's 4 ms (0.5: bin
    # 0-0.5), 9-12 all of its second (1: bin 0.5-1). Rank 1: its first wait (2-4) only touches 1-2
    # (none); 9-12 covers 3 of its second's 4 ms (0.75: 0.5-1). Per bin: none, one wait of 2 ms with 0
    # of CPU; 0-0.5, one of 4 with 1 (0.25); 0.5-1, two of (2 + 4) / 2 = 3 with (2 + 2) / 2 = 2
    # (0.667). By kind, per step: dp all_reduce 1 op, 2 MiB, 1500 us; pp recv 2 ops, 2 MiB, (2 + 7) / 2
    # = 4500 us; pp send 2, 2 MiB, (19 + 21) / 2 = 20000 ("pp.dp0.z0" and "pp.dp1.z0" are one kind).
    mine = [[("pp.dp0.z0", "send", 2**20, 1, 1, 20), ("dp.pp0.z0", "all_reduce", 2**21, -1, 1.5, 3),
             ("pp.dp0.z0", "recv", 2**20, 1, 5, 12)],
            [("pp.dp1.z0", "recv", 2**20, 0, 0, 2), ("pp.dp1.z0", "send", 2**20, 0, 9, 30)]]
    code, out, err = run([c0, c1], "--world", "2", "--tp", "2", "--steps", "1", ops=mine)
    assert code == 0, err
    lines = out.splitlines()
    at = next(i for i, l in enumerate(lines) if "own operations on their other groups" in l)
    assert [l.split() for l in lines[at + 2:at + 5]] == [
        ["dp", "all_reduce", "1.0", "2.00", "1500.0"],
        ["pp", "recv", "2.0", "2.00", "4500.0"],
        ["pp", "send", "2.0", "2.00", "20000.0"]], lines[at:at + 5]
    assert [l.split() for l in lines[at + 7:at + 10]] == [
        ["none", "1.0", "2000.0", "0.0", "0.000"],
        ["0-0.5", "1.0", "4000.0", "1000.0", "0.250"],
        ["0.5-1", "2.0", "3000.0", "2000.0", "0.667"]], lines[at + 5:at + 10]
    code, out, err = run([c0, c1], "--world", "2", "--tp", "2", "--steps", "1", ops=[mine[0], None])
    assert code != 0 and "log.rank1.ops is missing" in err and "Traceback" not in err, err
    code, out, err = run([c0, c1], "--world", "2", "--tp", "2", "--steps", "1", ops=[mine[0], mine[1][1:]])
    assert code != 0 and "rank 0 logged 1 sends of 1048576 bytes to rank 1, which logged 0 receives" in err, err
    code, out, err = run([c0, c1], "--world", "2", "--tp", "2", "--steps", "1",
                         ops=[mine[0], [("pp.dp1.z0", "recv", 1, 0, 5, 4)]])
    assert code != 0 and "rank1.ops line 1" in err and "start_ns <= end_ns" in err, err

    # The waits by phase (ms, a 5th column: 0 forward, 1 backward), with two TP groups whose ranks log
    # alike: A = ranks 0-1, B = ranks 2-3, each beside the rank at its TP index in the other group, at
    # its wait's middle. A's forward 0-2 (middle 1: B's last wait begun by then is 1-3, F) and
    # backward 10-12 (11: B's 11-13, B); B's forward 1-3 (2: A's 0-2, F) and backward 11-13 (12:
    # A's 10-12, B). F|F: 4 waits of 2 ms with (1 + 1 + 0 + 0) / 4 = 0.5 of CPU; B|B: 4 of 2 with 1.
    a = [(0, 2, 0, 1, 0), (10, 12, 5, 6, 1)]
    b = [(1, 3, 0, 0, 0), (11, 13, 1, 2, 1)]
    code, out, err = run([a, a, b, b], "--world", "4", "--tp", "2", "--steps", "1")
    assert code == 0, err
    lines = out.splitlines()
    at = next(i for i, l in enumerate(lines) if l.startswith("TP waits by phase"))
    assert [l.split() for l in lines[at + 2:at + 8]] == [
        ["F|F", "4.0", "2000.0", "500.0", "0.250"], ["F|B", "0.0", "-", "-", "-"], ["F|m", "0.0", "-", "-", "-"],
        ["B|F", "0.0", "-", "-", "-"], ["B|B", "4.0", "2000.0", "1000.0", "0.500"],
        ["B|m", "0.0", "-", "-", "-"]], lines[at:at + 8]
    # Three groups, A, B and C (ranks 0-1, 2-3, 4-5); 'm' where the two other groups differ. A waits
    # F 1-3 (middle 2: B's 0-1 F, C's 2-4 B: m), B 10-12 (11: B's 5-7 B, C's 8-9 F: m), B 20-24 (22:
    # B's 22-26 F, C's 21-23 B: m). B waits F 0-1 (0.5, before any wait of A or C: their first, F
    # and B: m), B 5-7 (6: A's 1-3 F, C's 2-4 B: m), F 22-26 (24: A's 20-24 B, C's 21-23 B: F|B).
    # C waits B 2-4 (3: A's 1-3 F, B's 0-1 F: B|F), F 8-9 (8.5: A's F, B's 5-7 B: m), B 21-23 (22:
    # A's 20-24 B, B's 22-26 F: m). Two ranks each: F|B 2 waits of 4 ms with 1 of CPU; F|m 6 of (2 +
    # 1 + 1) / 3 ms with (1 + 0 + 0) / 3; B|F 2 of 2 with 2; B|m 8 of (2 + 4 + 2 + 2) / 4 = 2.5 with
    # (1 + 2 + 1 + 1) / 4 = 1.25.
    a = [(1, 3, 0, 1, 0), (10, 12, 5, 6, 1), (20, 24, 10, 12, 1)]
    b = [(0, 1, 0, 0, 0), (5, 7, 1, 2, 1), (22, 26, 5, 6, 0)]
    c = [(2, 4, 0, 2, 1), (8, 9, 3, 3, 0), (21, 23, 4, 5, 1)]
    code, out, err = run([a, a, b, b, c, c], "--world", "6", "--tp", "2", "--steps", "1")
    assert code == 0, err
    lines = out.splitlines()
    at = next(i for i, l in enumerate(lines) if l.startswith("TP waits by phase"))
    assert [l.split() for l in lines[at + 2:at + 8]] == [
        ["F|F", "0.0", "-", "-", "-"], ["F|B", "2.0", "4000.0", "1000.0", "0.250"],
        ["F|m", "6.0", "1333.3", "333.3", "0.250"], ["B|F", "2.0", "2000.0", "2000.0", "1.000"],
        ["B|B", "0.0", "-", "-", "-"], ["B|m", "8.0", "2500.0", "1250.0", "0.500"]], lines[at:at + 8]
    code, out, err = run([c0, c1, c0, c1], "--world", "4", "--tp", "2", "--steps", "1")
    assert code == 0 and "other groups' ranks" in out and "TP waits by phase" not in out, out  # 4 columns: no phase

    # Refusals: one line, nonzero, naming what is wrong.
    code, out, err = run([[(0, 4, 0, 1, 2)], [(0, 4, 0, 1, 0)]], "--world", "2", "--tp", "2", "--steps", "1")
    assert code != 0 and "rank0 line 1" in err and "a phase 0 or 1" in err and "Traceback" not in err, err
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
