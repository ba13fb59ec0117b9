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
Prints per rank the wait per step (s) and its split; where the log has the process CPU clock at each
wait's ends (4 columns, as train_3d writes since 2026-12-06), the CPU per step inside the waits and
between them (every thread of the rank's process: the transport's too), each over its wall time (the
cores the process kept busy) and inside the waits per collective, and the waits by the CPU share of
the gap before each (a rank that sat idle before a wait, as in a pipeline bubble, has a low one);
where there is more than one TP group, the waits by how much of each the other groups' ranks spent
outside their own TP waits (computing, or in transfers the log does not hold), to see whether a
collective takes longer and more CPU while the other groups compute beside it on the same cores, and,
where the log has each wait's phase too (5 columns, since the sixty-ninth session), the waits by their
own phase and the other groups' at their middle (a forward beside a backward, as 1f1b's stages run);
where train_3d wrote PREFIX.rank<N>.ops (the operations its pipeline, ZeRO and data groups ran over
the timed steps, since 2026-12-07), the waits by how much of each the rank's own operations on those
groups ran beside it (its pipeline transfers on the same process's transport), with those operations
per step; then the collectives of a step with the most skew per step, each with the gap (s) its late
and early peers spent since their previous TP wait.
"""
import argparse
import bisect
import os
import sys


def read_rows(path, parse, expected, hint=""):
    """The rows `parse` makes of each line's fields (None: the line is refused, naming `expected`)."""
    rows = []
    try:
        with open(path) as f:
            for n, line in enumerate(f, 1):
                row = parse(line.split(), rows)
                if row is None:
                    sys.exit(f"tp_wait_skew: {path} line {n}: got {line.strip()!r}, expected {expected}")
                rows.append(row)
    except OSError as e:
        sys.exit(f"tp_wait_skew: cannot read {path}: {e.strerror}{hint}")
    return rows


def load(path):
    """Rows (begin_ns, end_ns), (begin_ns, end_ns, cpu_begin_ns, cpu_end_ns) or those and the phase (0 a
    forward's collective, 1 a backward's), one width a file."""
    def parse(parts, rows):
        if (len(parts) not in (2, 4, 5) or (rows and len(parts) != len(rows[0]))
                or not all(p.lstrip("-").isdigit() for p in parts) or (len(parts) == 5 and parts[4] not in ("0", "1"))):
            return None
        return tuple(int(p) for p in parts)
    return read_rows(path, parse, "'begin_ns end_ns', 'begin_ns end_ns cpu_begin_ns cpu_end_ns' or those and a phase "
                     "0 or 1, as every line before it", " (train_3d --tp-wait-log writes PREFIX.rank<N>)")


def cpu_split(rows, steps):
    """Per step: wall and process CPU (s) inside the waits, and between one wait's end and the next's
    begin (over the whole log: the timed steps run back to back)."""
    wait = sum(row[1] - row[0] for row in rows)
    cpu_wait = sum(row[3] - row[2] for row in rows)
    between = sum(nxt[0] - row[1] for row, nxt in zip(rows, rows[1:]))
    cpu_between = sum(nxt[2] - row[3] for row, nxt in zip(rows, rows[1:]))
    return tuple(x / 1e9 / steps for x in (wait, cpu_wait, between, cpu_between))


def has_cpu_clock(logs):
    """Whether every rank logged the process CPU clock (4 or 5 columns); an empty log has no calls to split."""
    return all(log and len(log[0]) >= 4 for log in logs)


def has_phase(logs):
    """Whether every rank logged each wait's phase (5 columns: 0 a forward's collective, 1 a backward's)."""
    return all(log and len(log[0]) == 5 for log in logs)


def share(cpu, wall):
    return f"{cpu / wall:>6.3f}" if wall > 0 else f"{'-':>6}"


def print_cpu(logs, steps):
    print("\nprocess CPU (every thread) per step: inside the waits, and between them; share = CPU / wall")
    print(f"{'rank':>4} {'cpu_wait':>9} {'share':>6} {'us/call':>8} {'between':>8} {'cpu_betw':>9} {'share':>6}")
    for r, rows in enumerate(logs):
        wait, cpu_wait, between, cpu_between = cpu_split(rows, steps)
        calls = len(rows) / steps
        print(f"{r:>4} {cpu_wait:>9.4f} {share(cpu_wait, wait)} {cpu_wait / calls * 1e6:>8.1f} {between:>8.4f} "
              f"{cpu_between:>9.4f} {share(cpu_between, between)}")


BUSY_BINS = (0.25, 0.5, 0.75)  # upper edges; the last bin runs to 1


def overlap(begin, end, rows, begins):
    """The time (ns) within [begin, end) covered by `rows` (spans (begin, end, ...) sorted and disjoint:
    one rank's waits, or its merged operations); `begins` their begins."""
    total = 0
    for b, e, *_ in rows[max(0, bisect.bisect_right(begins, begin) - 1):]:
        if b >= end:
            break
        total += max(0, min(e, end) - max(b, begin))
    return total


def bin_waits(logs, nbins, bin_of):
    """Every rank's TP waits in `nbins` bins, bin_of(rank, index in its log) picking each one's: per bin
    [waits, wall ns, cpu ns or None]. A wait the clock did not see pass has no share to split."""
    bins = [[0, 0, 0] for _ in range(nbins)]
    has_cpu = has_cpu_clock(logs)
    for r, rows in enumerate(logs):
        for k, row in enumerate(rows):
            b, e = row[0], row[1]
            if e <= b:
                continue
            acc = bins[bin_of(r, k)]
            acc[0] += 1
            acc[1] += e - b
            acc[2] += row[3] - row[2] if has_cpu else 0
    return [(n, wall, cpu if has_cpu else None) for n, wall, cpu in bins]


def begin_times(logs):
    """Per rank, its waits' begins (sorted: a rank logs its waits in issue order), for bisect."""
    return [[row[0] for row in rows] for rows in logs]


def busy_split(logs, tp):
    """Per bin of 'busy' (the mean share of a wait that the other groups' ranks spent outside their own
    TP waits): [waits, wall ns, cpu ns or None]."""
    begins = begin_times(logs)
    others = [[o for o in range(len(logs)) if o // tp != r // tp] for r in range(len(logs))]

    def bin_of(r, k):
        b, e = logs[r][k][:2]
        busy = 1 - sum(overlap(b, e, logs[o], begins[o]) for o in others[r]) / (len(others[r]) * (e - b))
        return bisect.bisect_right(BUSY_BINS, busy)
    return bin_waits(logs, len(BUSY_BINS) + 1, bin_of)


def print_bins(name, labels, bins, steps):
    """A table of binned TP waits: per bin, waits per step and the mean wall and CPU (us) a wait."""
    print(f"{name:>9} {'waits':>6} {'wait_us':>8} {'cpu_us':>7} {'share':>6}  (waits per step; means per wait)")
    for label, (n, wall, cpu) in zip(labels, bins):
        if n == 0:
            print(f"{label:>9} {0:>6.1f} {'-':>8} {'-':>7} {'-':>6}")
            continue
        cpu_us = f"{cpu / n / 1e3:>7.1f}" if cpu is not None else f"{'-':>7}"
        cpu_share = share(cpu, wall) if cpu is not None else f"{'-':>6}"
        print(f"{label:>9} {n / steps:>6.1f} {wall / n / 1e3:>8.1f} {cpu_us} {cpu_share}")


def print_busy(logs, tp, steps):
    print("\nTP waits by what the other groups' ranks did meanwhile (busy: the share of the wait they spent "
          "outside their own TP waits), all ranks")
    edges = (0.0,) + BUSY_BINS + (1.0,)
    labels = [f"{edges[i]:.2f}-{edges[i + 1]:.2f}" for i in range(len(edges) - 1)]
    print_bins("busy", labels, busy_split(logs, tp), steps)


GAP_BINS = (0.25, 0.5, 0.75)  # upper edges of the CPU share of the gap before a wait; the last runs on


def gap_split(logs, steps):
    """Per bin of the gap before a wait (from the rank's previous TP wait's end; a step's first wait has
    none, bin 'first'): its process CPU over its wall time, low where the rank sat idle in it (blocked on
    a pipeline receive: a bubble) and high where it computed. [waits, wall ns, cpu ns]."""
    def bin_of(r, k):
        if k % (len(logs[r]) // steps) == 0:
            return 0
        (_, e, _, ce, *_), (b, _, cb, *_) = logs[r][k - 1], logs[r][k]
        return 1 + bisect.bisect_right(GAP_BINS, (cb - ce) / (b - e) if b > e else 1.0)
    return bin_waits(logs, len(GAP_BINS) + 2, bin_of)


def print_gap(logs, steps):
    print("\nTP waits by the rank's process CPU over the gap before each (since its previous TP wait ended; "
          "low: it sat idle, as in a pipeline bubble), all ranks")
    edges = (0.0,) + GAP_BINS + (float("inf"),)
    labels = ["first"] + [f"{edges[i]:.2f}-{edges[i + 1]:.2f}" if i < len(GAP_BINS) else f">{edges[i]:.2f}"
                          for i in range(len(edges) - 1)]
    print_bins("gap_cpu", labels, gap_split(logs, steps), steps)


PHASES = "FB"  # a wait's phase in the log: 0 a forward's collective, 1 a backward's
PHASE_BINS = tuple(f"{own}|{other}" for own in PHASES for other in PHASES + "m")


def phase_split(logs, tp):
    """Per PHASE_BINS bin (the wait's own phase | the other groups' at its midpoint, m where they differ;
    a rank's phase at a time is that of its last wait begun by then, or its first): [waits, wall ns, cpu
    ns]. In 1f1b one stage runs a forward beside the other's backward on the same cores; the groups of
    a tp x dp job run the same phase unless they drift apart."""
    begins = begin_times(logs)

    def phase_at(o, t):
        return logs[o][max(0, bisect.bisect_right(begins[o], t) - 1)][4]

    def bin_of(r, k):
        b, e, _, _, own = logs[r][k]
        # the rank at the same TP index in each other group
        others = {phase_at(o, (b + e) // 2) for o in range(r % tp, len(logs), tp) if o // tp != r // tp}
        return PHASE_BINS.index(PHASES[own] + "|" + (PHASES[others.pop()] if len(others) == 1 else "m"))
    return bin_waits(logs, len(PHASE_BINS), bin_of)


def print_phase(logs, tp, steps):
    print("\nTP waits by phase: the wait's own | the other groups' ranks' at its middle (F forward, B backward, "
          "m mixed), all ranks")
    print_bins("phase", PHASE_BINS, phase_split(logs, tp), steps)


def load_ops(path):
    """Rows (group, kind, bytes, peer, start_ns, end_ns) of train_3d's PREFIX.rank<N>.ops."""
    def parse(parts, rows):
        if len(parts) != 6 or not all(p.lstrip("-").isdigit() for p in parts[2:]) or int(parts[4]) > int(parts[5]):
            return None
        return (parts[0], parts[1], *(int(p) for p in parts[2:]))
    return read_rows(path, parse, "'group kind bytes peer start_ns end_ns' with start_ns <= end_ns")


def transfer_spans(ops):
    """Per rank, the spans in which its own operations on its other groups may have run: a collective's
    run on its communication thread; a transfer's, on both its ranks, from when both sides had issued it
    to when the first of them saw it done (a send issued early is waited at the step's end; the
    transfer cannot start before the peer's receive is posted nor end after the receive's Wait
    returns). A send pairs with its peer's receive of the same size from it, in issue order (the
    1f1b executor sends and receives each kind of tensor micro-batch by micro-batch)."""
    spans = [[] for _ in ops]
    sends, recvs = {}, {}
    for r, mine in enumerate(ops):
        for group, kind, nbytes, peer, b, e in sorted(mine, key=lambda o: o[4]):
            if kind == "send":
                sends.setdefault((r, peer, nbytes), []).append((b, e))
            elif kind == "recv":
                recvs.setdefault((peer, r, nbytes), []).append((b, e))
            else:
                spans[r].append((b, e))
    for key in set(sends) | set(recvs):
        s, v = sends.get(key, []), recvs.get(key, [])
        if len(s) != len(v):
            sys.exit(f"tp_wait_skew: rank {key[0]} logged {len(s)} sends of {key[2]} bytes to rank {key[1]}, which "
                     f"logged {len(v)} receives of them: expected as many (every transfer has two sides)")
        for (sb, se), (rb, re_) in zip(s, v):
            b = max(sb, rb)
            span = (b, max(b, min(se, re_)))
            spans[key[0]].append(span)
            spans[key[1]].append(span)
    return spans


def merged(intervals):
    """The union of [begin, end) intervals, sorted and disjoint (one group's operations run in turn, but
    two groups' threads may run theirs at once)."""
    out = []
    for b, e in sorted(intervals):
        if out and b <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([b, e])
    return out


OWN_BINS = ("none", "0-0.5", "0.5-1")  # the share of a wait the rank's own operations ran beside it


def own_split(logs, ops):
    """Per OWN_BINS bin: [waits, wall ns, cpu ns or None]."""
    spans = [merged(mine) for mine in transfer_spans(ops)]
    begins = [[b for b, _ in rank_spans] for rank_spans in spans]

    def bin_of(r, k):
        b, e = logs[r][k][:2]
        beside = overlap(b, e, spans[r], begins[r]) / (e - b)
        return 0 if beside == 0 else 1 if beside <= 0.5 else 2
    return bin_waits(logs, len(OWN_BINS), bin_of)


def print_own(logs, ops, steps):
    print("\nthe ranks' own operations on their other groups over the timed steps (all ranks, per step)")
    print(f"{'group':>8} {'kind':>14} {'ops':>6} {'MiB':>8} {'us/op':>8}  (us/op: issue to Wait for a send or receive)")
    kinds = {}
    for mine in ops:
        for group, kind, nbytes, _, b, e in mine:
            acc = kinds.setdefault((group.split(".")[0], kind), [0, 0, 0])  # "pp.dp0.z0" -> pp
            acc[0] += 1
            acc[1] += nbytes
            acc[2] += e - b
    for (group, kind), (n, nbytes, ns) in sorted(kinds.items()):
        print(f"{group:>8} {kind:>14} {n / steps:>6.1f} {nbytes / steps / 2**20:>8.2f} {ns / n / 1e3:>8.1f}")
    print("TP waits by the share of each that the rank's own operations on its other groups may have run beside "
          "(a transfer: from both sides' issue to the first side's done)")
    print_bins("beside", OWN_BINS, own_split(logs, ops), steps)


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
    have_ops = [os.path.exists(f"{a.prefix}.rank{r}.ops") for r in range(a.world)]
    if any(have_ops) and not all(have_ops):
        sys.exit(f"tp_wait_skew: {a.prefix}.rank{have_ops.index(False)}.ops is missing, rank "
                 f"{have_ops.index(True)}'s is there: expected every rank's or none (one train_3d run writes all)")
    ops = [load_ops(f"{a.prefix}.rank{r}.ops") for r in range(a.world)] if all(have_ops) else None
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
    if has_cpu_clock(logs):
        print_cpu(logs, a.steps)
        print_gap(logs, a.steps)
    if a.world > a.tp:
        print_busy(logs, a.tp, a.steps)
    if a.world > a.tp and has_phase(logs):
        print_phase(logs, a.tp, a.steps)
    if ops is not None:
        print_own(logs, ops, a.steps)
    print(f"\ncollectives with the most skew (summed over the group's peers, per step); gaps: since the "
          f"peer's previous TP wait ended (0 for a step's first)")
    print(f"{'group':>5} {'position':>8} {'skew_s':>8} {'late_gap':>9} {'early_gap':>9}")
    ranked = sorted(by_position.items(), key=lambda kv: -kv[1][0])
    for (g, p), (s, lg, eg, c) in ranked[:a.top]:
        print(f"{g:>5} {p:>8} {s / c:>8.4f} {lg / c:>9.4f} {eg / c:>9.4f}")


if __name__ == "__main__":
    main()
