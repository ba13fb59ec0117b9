"""tools/tp_cpu.py: the CPU of one layer a micro-batch from the four runs' CPU seconds (by hand), and its
command line refusing bad input with one line."""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = os.path.join(HERE, "..", "tools")
sys.path.insert(0, TOOLS)
import tp_cpu  # noqa: E402


def main():
    failures = []

    def check(what, got, want, tol=1e-12):
        if abs(got - want) > tol:
            failures.append("%s: got %r, expected %r" % (what, got, want))

    # 200 extra steps: depth 2 takes 4 s more (20 ms a step), depth 8 16 s more (80 ms a step); 60 ms
    # a step over 6 extra layers x 8 micro-batches x 2 ranks = 96: 625 us a layer a micro-batch.
    check("per layer", tp_cpu.per_layer_cpu({(2, 50): 1, (2, 250): 5, (8, 50): 3, (8, 250): 19}), 0.060 / 96)
    # The start-up (the short runs) cancels: any offset per depth.
    check("start-up cancels", tp_cpu.per_layer_cpu({(2, 50): 10, (2, 250): 14, (8, 50): 30, (8, 250): 46}), 0.060 / 96)
    # No growth with depth: nothing a layer.
    check("no growth", tp_cpu.per_layer_cpu({(2, 50): 1, (2, 250): 5, (8, 50): 2, (8, 250): 6}), 0.0)
    for args in (["x"], ["0"], ["1", "2"]):
        p = subprocess.run([sys.executable, os.path.join(TOOLS, "tp_cpu.py")] + args, capture_output=True, text=True)
        if (p.returncode == 0 or "expected [REPEATS]" not in p.stderr or "Traceback" in p.stderr
                or len(p.stderr.splitlines()) != 1):
            failures.append("%s: rc %d, stderr %r" % (" ".join(args), p.returncode, p.stderr))
    for f in failures:
        print("FAIL", f)
    if failures:
        sys.exit(1)
    print("tp_cpu_test: all checks passed")


if __name__ == "__main__":
    main()
