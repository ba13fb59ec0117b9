#!/usr/bin/env python3
"""tools/tp_wait_skew.py: where a 3D job's tensor-parallel waits go, from train_3d --tp-wait-log.

Each rank of a TP group logs every TP wait (begin and end, one steady clock for the machine's
processes) in issue order, so the peers' i-th entries are one collective. A collective's waits
split in two: the transfer, which every peer waits out (the wait of the peer that arrived last),
and the arrival skew, which only the early peers wait out (their wait less the transfer). The
planner charges a TP collective as a transfer on its link (intra_node_oversubscribed, fitted on two
independent tp=2 jobs); skew it charges only as far as those jobs had it.

  python3 tools/tp_wait_skew.py PREFIX --world 4 --tp 2 --steps 9
    PREFIX: train_3d's --tp-wait-log path (files PREFIX.rank0 ...); --steps: the timed steps.
Prints per rank the wait per step (s) and its split, then the collectives of a step with the most
skew per step, each with the gap (s) its late and early peers spent since their previous TP wait.
"""
import argparse
import sys


def load(path):
    rows = []
    try:
        with open(path) as f:
            for n, line in enumerate(f, 1):
                parts = line.split()
                if len(parts) != 2 or not all(p.lstrip("-").isdigit() for p in parts):
                    sys.exit(f"tp_wait_skew: {path} line {n}: got {line.strip()!r}, expected 'begin_ns end_ns'")
                rows.append((int(parts[0]), int(parts[1])))
    except OSError as e:
        sys.exit(f"tp_wait_skew: cannot read {path}: {e.strerror} (train_3d --tp-wait-log writes PREFIX.rank<N>)")
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("prefix")
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--tp", type=int, required=True)
    ap.add_argument("--steps", type=int, required=True, help="timed steps the log covers")
    ap.add_argument("--top", type=int, default=8)
    a = ap.parse_args()
    if a.tp < 2 or a.world % a.tp:
        sys.exit(f"tp_wait_skew: --tp {a.tp} with --world {a.world}: expected tp >= 2 dividing world")
    logs = [load(f"{a.prefix}.rank{r}") for r in range(a.world)]
    print(f"{'rank':>4} {'calls':>6} {'wait_s':>8} {'transfer':>9} {'skew':>8}  (per step)")
    by_position = {}  # (group, position in step) -> [skew s, late gap s, early gap s, count]
    for g in range(0, a.world, a.tp):
        peers = list(range(g, g + a.tp))
        n = len(logs[g])
        for r in peers:
            if len(logs[r]) != n:
                sys.exit(f"tp_wait_skew: rank {r} logged {len(logs[r])} waits, rank {g} {n}: expected the same "
                         f"(one TP group issues the same collectives)")
        if n % a.steps:
            sys.exit(f"tp_wait_skew: group {g}: {n} waits over --steps {a.steps}: expected a multiple")
        per_step = n // a.steps
        totals = {r: [0.0, 0.0, 0.0] for r in peers}  # wait, transfer, skew
        for k in range(n):
            begins = [logs[r][k][0] for r in peers]
            waits = [(logs[r][k][1] - logs[r][k][0]) / 1e9 for r in peers]
            late = max(range(a.tp), key=lambda i: begins[i])
            early = min(range(a.tp), key=lambda i: begins[i])
            transfer = waits[late]
            for i, r in enumerate(peers):
                totals[r][0] += waits[i]
                totals[r][1] += min(waits[i], transfer)
                totals[r][2] += max(0.0, waits[i] - transfer)
            gap = lambda i: (logs[peers[i]][k][0] - logs[peers[i]][k - 1][1]) / 1e9 if k % per_step else 0.0
            e = by_position.setdefault((g, k % per_step), [0.0, 0.0, 0.0, 0])
            e[0] += sum(max(0.0, w - transfer) for w in waits)
            e[1] += gap(late)
            e[2] += gap(early)
            e[3] += 1
        for r in peers:
            w, t, s = (x / a.steps for x in totals[r])
            print(f"{r:>4} {per_step:>6} {w:>8.4f} {t:>9.4f} {s:>8.4f}")
    print(f"\ncollectives with the most skew (summed over the group's peers, per step); gaps: since the "
          f"peer's previous TP wait ended (0 for a step's first)")
    print(f"{'group':>5} {'position':>8} {'skew_s':>8} {'late_gap':>9} {'early_gap':>9}")
    ranked = sorted(by_position.items(), key=lambda kv: -kv[1][0])
    for (g, p), (s, lg, eg, c) in ranked[:a.top]:
        print(f"{g:>5} {p:>8} {s / c:>8.4f} {lg / c:>9.4f} {eg / c:>9.4f}")


if __name__ == "__main__":
    main()
