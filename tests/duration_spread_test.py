"""tools/duration_spread.py: the time-weighted coefficients of variation, against values worked out
by hand on small traces."""
import json
import math
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "..", "tools", "duration_spread.py")


def event(name, dur_ms, tid=0):
    return {"name": name, "cat": "x", "ph": "X", "pid": 0, "tid": tid, "ts": 0, "dur": dur_ms * 1000}


def run(*traces):
    with tempfile.TemporaryDirectory() as d:
        paths = []
        for i, events in enumerate(traces):
            paths.append(os.path.join(d, "t%d.json" % i))
            with open(paths[-1], "w") as f:
                json.dump({"traceEvents": events}, f)
        p = subprocess.run([sys.executable, TOOL, *paths], capture_output=True, text=True)
        return p.returncode, p.stdout, p.stderr


def main():
    # Computations: F1 over 4 micro-batches 1, 3, 1, 3 ms (mean 2, sample sd sqrt(4/3), total 8);
    # B1 4 x 6 ms (cv 0, total 24); F2 has 3 runs only (left out); waits and other events are not
    # computations. cv = (sqrt(4/3)/2 * 8 + 0 * 24) / 32.
    comp = [event("F1.%d" % i, t) for i, t in enumerate([1, 3, 1, 3])] + [event("B1.%d" % i, 6) for i in range(4)]
    comp += [event("F2.%d" % i, 9 * i + 1) for i in range(3)] + [event("wait-gather F1.%d" % i, 50 * i) for i in range(4)]
    # Collectives on the rank's communication track: 4 all-gathers of 100 B, 2, 2, 4, 4 ms (mean 3,
    # sd sqrt(4/3), total 12), 4 reduce-scatters of 100 B, 5 ms each (total 20): a separate group.
    comm = [event("all_gather zero #%d 100B" % i, t, tid=1000) for i, t in enumerate([2, 2, 4, 4])]
    comm += [event("reduce_scatter zero #%d 100B" % (4 + i), 5, tid=1001) for i in range(4)]
    code, out, err = run(comp, comm)
    assert code == 0, err
    vals = dict(kv.split("=") for kv in out.split())
    want_compute = math.sqrt(4 / 3) / 2 * 8 / 32
    want_comm = math.sqrt(4 / 3) / 3 * 12 / 32
    assert abs(float(vals["compute_cv"]) - want_compute) < 1e-4, (vals, want_compute)
    assert abs(float(vals["comm_cv"]) - want_comm) < 1e-4, (vals, want_comm)
    assert vals["computations"] == "8" and vals["collectives"] == "8", vals
    # No collectives on any communication track: refused, naming what was found.
    code, out, err = run(comp)
    assert code != 0 and "held 8 computations and 0 collectives" in err, (code, out, err)
    # No arguments: one line saying what is expected.
    code, out, err = run()
    assert code != 0 and "expected TRACE.json" in err, (code, err)
    print("duration_spread_test: ok")


if __name__ == "__main__":
    main()
