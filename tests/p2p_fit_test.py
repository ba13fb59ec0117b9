"""tools/p2p_fit.py: the bisection that finds intra_node_p2p's latency, on functions whose crossing is
known, and its command line refusing a wrong argument count."""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = os.path.join(HERE, "..", "tools")
sys.path.insert(0, TOOLS)
import p2p_fit  # noqa: E402


def main():
    failures = []

    def check(what, got, want, tol=1e-6):
        if abs(got - want) > tol:
            failures.append("%s: got %r, expected %r" % (what, got, want))

    # f(x) = 2x + 1 reaches 7 at x = 3.
    check("linear crossing", p2p_fit.bisect_increasing(lambda x: 2 * x + 1, 7, 0, 10, iters=40), 3.0)
    # A step's growth that rises with a floor: 0.01 + 0.004 * (latency in ms) reaches 0.03 at 5 ms.
    check("growth crossing", p2p_fit.bisect_increasing(lambda us: 0.01 + 4e-6 * us, 0.03, 200, 50000, iters=40),
          5000.0, tol=1e-3)
    # Already reached at the floor (the measurement shows no extra cost): the floor.
    check("reached at the floor", p2p_fit.bisect_increasing(lambda us: 0.01 + 4e-6 * us, -0.02, 200, 50000), 200)
    # Never reached below the ceiling: the ceiling.
    check("beyond the ceiling", p2p_fit.bisect_increasing(lambda us: 0.01 + 4e-6 * us, 1.0, 200, 50000), 50000)
    # The command line: ten arguments, else one line naming the usage and what it got.
    p = subprocess.run([sys.executable, os.path.join(TOOLS, "p2p_fit.py"), "hw.json", "0.5"],
                       capture_output=True, text=True)
    if p.returncode == 0 or "got 2 arguments" not in p.stderr or "Traceback" in p.stderr:
        failures.append("wrong argument count: rc %d, stderr %r" % (p.returncode, p.stderr))
    for f in failures:
        print("FAIL " + f)
    print("p2p_fit_test: %d checks failed" % len(failures) if failures else "p2p_fit_test: all passed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
