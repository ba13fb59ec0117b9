"""tools/layer_cost.py: the fixed cost of one layer call from two depths' step times (by hand), and its
command line refusing bad input with one line."""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = os.path.join(HERE, "..", "tools")
sys.path.insert(0, TOOLS)
import layer_cost  # noqa: E402


def main():
    failures = []

    def check(what, got, want, tol=1e-12):
        if abs(got - want) > tol:
            failures.append("%s: got %r, expected %r" % (what, got, want))

    # Depths 2 and 10, 8 micro-batches: 64 extra layer calls a step. 20 ms and 84 ms a step: 1 ms a call.
    check("depths 2 and 10", layer_cost.per_layer(0.020, 0.084), 0.001)
    # What both depths pay alike (embedding, head, loss, the chunk's call) cancels: any offset.
    check("a per-step offset cancels", layer_cost.per_layer(0.520, 0.584), 0.001)
    # Other depths and micro-batches: 4 and 6 layers, 2 micro-batches: 4 extra calls, 2 ms: 0.5 ms.
    check("depths 4 and 6, 2 micro-batches", layer_cost.per_layer(0.010, 0.012, depths=(4, 6), m=2), 0.0005)
    check("no growth", layer_cost.per_layer(0.02, 0.02), 0.0)
    for args, needle in ((["per-layer", "1"], "usage"), (["per-layer", "1", "x"], "two seconds"), (["measure"], "usage")):
        p = subprocess.run([sys.executable, os.path.join(TOOLS, "layer_cost.py")] + args, capture_output=True, text=True)
        if p.returncode == 0 or needle not in p.stderr or "Traceback" in p.stderr or len(p.stderr.splitlines()) != 1:
            failures.append("%s: rc %d, stderr %r" % (" ".join(args), p.returncode, p.stderr))
    p = subprocess.run([sys.executable, os.path.join(TOOLS, "layer_cost.py"), "per-layer", "0.020", "0.084"],
                       capture_output=True, text=True)
    if p.stdout.strip() != "1000.0":
        failures.append("per-layer command: got %r, expected 1000.0" % p.stdout)
    for f in failures:
        print("FAIL:", f)
    print("layer_cost_test: %s" % ("FAIL" if failures else "PASS"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
