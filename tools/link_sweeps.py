"""Which of a link's calibration sweeps tools/calibrate.sh fits: the undisturbed ones.

A pass is one sweep of the ring all-gather over every message size (the rows collectives_bench
prints); passes are separated by a line "--" on standard input. A pass's total is the sum of its
times. A pass whose total is over SPREAD times the fastest pass's was disturbed (something else ran
on the box) and is set aside. In the 41 committed calibrations (benchmarks/results/planner-local-*,
r3-r43; 112 sweeps of 3 or 5 passes) every sweep's passes were within 1.8x of each other but one:
r41's idle unshaped sweep, whose first three passes took 2.8-3.2x its fastest. They put the fitted
link at half its bandwidth (0.50 GB/s, 1642 us; the last two passes alone: 1.01 GB/s, 841 us) and
ZeRO-3's predicted step at 1.33x the measured one.

Exit 0 and print the kept passes' rows when at least KEEP passes are kept; exit 1, printing nothing,
when fewer are (the caller measures another pass); with --last, print every pass's rows and say on
standard error that the link never settled. What was set aside is said on standard error, with
LABEL.
"""
import argparse
import re
import sys

ROW = re.compile(r"all_gather\(ring\)\s+(\d+)\s+([0-9.]+)")


def split_passes(text):
    """The passes in TEXT: each a list of its rows (lines with a ring all-gather time)."""
    passes, cur = [], []
    for line in text.splitlines():
        if line.strip() == "--":
            if cur:
                passes.append(cur)
            cur = []
        elif ROW.search(line):
            cur.append(line)
    if cur:
        passes.append(cur)
    return passes


def total_us(rows):
    return sum(float(ROW.search(r).group(2)) for r in rows)


def select(totals, spread):
    """(kept, set_aside): the indices of the pass totals within SPREAD x the fastest, and the rest."""
    fastest = min(totals)
    kept = [i for i, t in enumerate(totals) if t <= spread * fastest]
    return kept, [i for i in range(len(totals)) if i not in kept]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keep", type=int, required=True, help="passes the fit needs")
    ap.add_argument("--spread", type=float, required=True, help="a pass over SPREAD x the fastest is set aside")
    ap.add_argument("--label", default="link", help="names the sweep in what is said on standard error")
    ap.add_argument("--last", action="store_true", help="no more passes will come: print them all if too few kept")
    a = ap.parse_args(argv)
    if a.keep < 1 or a.spread < 1:
        ap.error("--keep: expected >= 1 and --spread: expected >= 1, got %d and %g" % (a.keep, a.spread))
    passes = split_passes(sys.stdin.read())
    if not passes:
        sys.exit("link_sweeps: %s: no ring all-gather rows on standard input, expected passes separated by '--'" % a.label)
    totals = [total_us(p) for p in passes]
    fastest = min(totals)
    kept, aside = select(totals, a.spread)
    if len(kept) < a.keep and not a.last:
        return 1
    if aside:
        what = ", ".join("pass %d (%.1f ms)" % (i + 1, totals[i] / 1e3) for i in aside)
        if len(kept) < a.keep:
            print("calibrate: %s: the link never settled: %d of %d passes within %gx of the fastest (%.1f ms); "
                  "fitting all of them (%s over)" % (a.label, len(kept), len(passes), a.spread, fastest / 1e3, what),
                  file=sys.stderr)
            kept = list(range(len(passes)))
        else:
            print("calibrate: %s: set aside %s, over %gx the fastest pass (%.1f ms): disturbed; fitting the other %d"
                  % (a.label, what, a.spread, fastest / 1e3, len(kept)), file=sys.stderr)
    for i in kept:
        print("\n".join(passes[i]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
