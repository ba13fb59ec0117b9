#!/usr/bin/env python3
"""zpp timeline: the per-rank Gantt picture of Chrome trace JSON files (the executor's measured
traces or the simulator's predictions), drawn with matplotlib.

  ./zpp timeline trace.rank0.json trace.rank1.json ... -o timeline.png [--title T] [--xmax MS]
  ./zpp timeline a.rank*.json --vs b.rank*.json -o both.png --title "ZeroPP" --vs-title "1F1B"

One lane per rank (the trace's tid), time in ms from the first event. Compute on the upper band:
forward blue, recomputed forward light blue, backward (B and Bi) green, weight gradient W teal,
optimizer purple; communication on the lower band: gather/release orange, reduce-scatter red,
point-to-point gray; waits hatched. Blocks wide enough carry their micro-batch number. With --vs a
second set of traces is drawn below on the same time axis, so that two schedules (a ZeroPP and a
3D one, say) compare side by side; --xmax fixes the axis for pictures compared across files.
"""
import argparse
import json
import sys

COLORS = {
    "F": "#3465a4", "R": "#729fcf", "B": "#4e9a06", "Bi": "#4e9a06", "W": "#06989a", "OPT": "#75507b",
    "G": "#f57900", "X": "#fcaf3e", "RS": "#cc0000",
    "SA": "#888a85", "RA": "#babdb6", "SG": "#888a85", "RG": "#babdb6", "wait": "#ffffff",
}
LEGEND = [("forward", "F"), ("recompute", "R"), ("backward (B, Bi)", "B"), ("weight grad W", "W"),
          ("optimizer", "OPT"), ("gather", "G"), ("release", "X"), ("reduce-scatter", "RS"),
          ("point-to-point", "SA")]
LOWER = {"G", "X", "RS", "SA", "RA", "SG", "RG"}
COMM_TRACK = 1000  # scheduler/trace.h kCommStreamTrack


def kind(name):
    """An action prints as its kind's letters, then chunk.mb (schedule.h); waits as 'wait-... ACTION'."""
    if name.startswith("wait-"):
        return "wait"
    letters = ""
    for c in name:
        if not c.isalpha():
            break
        letters += c
    return letters if letters in COLORS else None


def micro_batch(name):
    """F0.3 -> '3' (the micro-batch), OPT -> ''."""
    tail = name.split(" ")[-1]
    return tail.split(".", 1)[1] if "." in tail else ""


def load(paths):
    events = []
    for path in paths:
        try:
            with open(path) as f:
                events += json.load(f)["traceEvents"]
        except (OSError, ValueError, KeyError) as e:
            sys.exit(f"zpp timeline: cannot read trace '{path}': {e}")
    # The communication threads' tracks (tid 1000 + rank, Trainer::TraceJson) open in Perfetto; the
    # picture keeps one lane per rank.
    events = [e for e in events if e.get("tid", 0) < COMM_TRACK]
    if not events:
        sys.exit("zpp timeline: the traces hold no events")
    return events


def draw(ax, events, title, xmax):
    ranks = sorted({e["tid"] for e in events})
    t0 = min(e["ts"] for e in events)
    span_ms = (max(e["ts"] + e["dur"] for e in events) - t0) / 1000.0
    for e in events:
        k = kind(e["name"])
        if k is None:
            continue
        lane = ranks.index(e["tid"])
        x, w = (e["ts"] - t0) / 1000.0, e["dur"] / 1000.0
        if k == "wait":  # a wait inside an action: hatched, on the band of what it waits for
            low = "gather" not in e["name"]
            y, h = (lane + 0.05, 0.3) if low else (lane + 0.4, 0.55)
            ax.broken_barh([(x, w)], (y, h), facecolors="none", edgecolors="#555753", hatch="////", linewidth=0)
            continue
        y, h = (lane + 0.05, 0.3) if k in LOWER else (lane + 0.4, 0.55)
        ax.broken_barh([(x, w)], (y, h), facecolors=COLORS[k], edgecolors="white", linewidth=0.3)
        mb = micro_batch(e["name"])
        if mb and k not in LOWER and w > span_ms / 120:
            ax.text(x + w / 2, y + h / 2, mb, ha="center", va="center", fontsize=6, color="white")
    ax.set_yticks([i + 0.5 for i in range(len(ranks))])
    ax.set_yticklabels([f"rank {r}" for r in ranks])
    ax.set_ylim(len(ranks), 0)
    ax.set_xlim(0, xmax if xmax else span_ms * 1.01)
    ax.set_xlabel("time (ms)")
    ax.set_title(f"{title}  ({span_ms:.1f} ms)" if title else f"{span_ms:.1f} ms", fontsize=10)
    ax.grid(axis="x", color="#dddddd", linewidth=0.5)
    ax.set_axisbelow(True)
    return len(ranks), span_ms


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="+")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--title", default="")
    ap.add_argument("--vs", nargs="+", default=[], help="a second set of traces, drawn below on the same axis")
    ap.add_argument("--vs-title", default="")
    ap.add_argument("--xmax", type=float, default=0, help="the time axis' end in ms (0: the traces' span)")
    ap.add_argument("--width", type=float, default=14, help="inches")
    a = ap.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import Patch
    except ImportError:
        sys.exit("zpp timeline: matplotlib is not installed (./zpp timeline installs it; or: pip install matplotlib)")
    sets = [(load(a.traces), a.title)] + ([(load(a.vs), a.vs_title)] if a.vs else [])
    lanes = [len({e["tid"] for e in ev}) for ev, _ in sets]
    xmax = a.xmax or max((max(e["ts"] + e["dur"] for e in ev) - min(e["ts"] for e in ev)) / 1000.0 for ev, _ in sets) * 1.01
    fig, axes = plt.subplots(len(sets), 1, figsize=(a.width, 0.9 + sum(0.55 * n + 0.6 for n in lanes)),
                             gridspec_kw={"height_ratios": lanes}, squeeze=False, sharex=True)
    total = 0
    for ax, (ev, title) in zip(axes[:, 0], sets):
        draw(ax, ev, title, xmax)
        total += len(ev)
    handles = [Patch(facecolor=COLORS[k], label=label) for label, k in LEGEND]
    handles.append(Patch(facecolor="none", edgecolor="#555753", hatch="////", label="waiting"))
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.savefig(a.output, dpi=110)
    print(f"zpp timeline: {total} events, {sum(lanes)} lanes -> {a.output}")


if __name__ == "__main__":
    main()
