"""duration_spread.py: how much the same computation's, and the same collective's, time varies from
one run of it to the next, from executor traces (tools/train --trace): the planner's compute_cv and
comm_cv (scheduler/simulator.h, CostModel::compute_cv), which ./zpp calibrate sets from its gather
pair jobs (tools/calibrate_pairs.sh).

In one trace (one rank's last step), the computations of one chunk in one direction (F3.0, F3.1, ...:
the forward of chunk 3 for each micro-batch) are one group; the collectives of one kind and size on
the rank's communication track (`all_gather ... 3159040B`) another. Each group of at least MIN_RUNS
runs has a coefficient of variation (standard deviation / mean); the result is their mean weighted
by each group's total time, so the long actions that make a step count most and a 50-us action's
jitter little.
  duration_spread.py TRACE.json...   prints compute_cv=X comm_cv=Y computations=N collectives=M
"""
import json
import re
import statistics
import sys

MIN_RUNS = 4
COMM_TRACK = 1000  # scheduler/trace.h kCommStreamTrack: a rank's communication thread
ACTION = re.compile(r"^([FB])(\d+)\.\d+$")


def groups(events):
    """(computation groups, collective groups) of one trace's events: lists of durations in seconds."""
    comp, comm = {}, {}
    for e in events:
        name, dur = e.get("name", ""), e.get("dur", 0) * 1e-6
        if e.get("ph") != "X" or dur <= 0:
            continue
        if e.get("tid", 0) >= COMM_TRACK:
            words = name.split()
            comm.setdefault((words[0], words[-1]), []).append(dur)
        else:
            m = ACTION.match(name)
            if m:
                comp.setdefault(m.groups(), []).append(dur)
    return list(comp.values()), list(comm.values())


def weighted_cv(runs_lists):
    """The time-weighted mean coefficient of variation over groups of at least MIN_RUNS runs, and
    how many runs they hold."""
    num = den = 0.0
    n = 0
    for runs in runs_lists:
        if len(runs) < MIN_RUNS:
            continue
        mean = statistics.mean(runs)
        if mean <= 0:
            continue
        num += statistics.stdev(runs) / mean * sum(runs)
        den += sum(runs)
        n += len(runs)
    return (num / den if den > 0 else 0.0), n


def spread(paths):
    comp, comm = [], []
    for path in paths:
        with open(path) as f:
            c, m = groups(json.load(f)["traceEvents"])
        comp += c
        comm += m
    compute_cv, n_comp = weighted_cv(comp)
    comm_cv, n_comm = weighted_cv(comm)
    if n_comp == 0 or n_comm == 0:
        raise ValueError("duration_spread: %d traces held %d computations and %d collectives in groups of >= %d runs, "
                         "expected both" % (len(paths), n_comp, n_comm, MIN_RUNS))
    return {"compute_cv": compute_cv, "comm_cv": comm_cv, "computations": n_comp, "collectives": n_comm}


def main(argv):
    if not argv:
        sys.exit("duration_spread: expected TRACE.json arguments (tools/train --trace output, one per rank)")
    try:
        s = spread(argv)
    except (OSError, ValueError, KeyError) as e:
        sys.exit(str(e))
    print("compute_cv=%.4f comm_cv=%.4f computations=%d collectives=%d" % (
        s["compute_cv"], s["comm_cv"], s["computations"], s["collectives"]))


if __name__ == "__main__":
    main(sys.argv[1:])
