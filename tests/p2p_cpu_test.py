"""tools/p2p_cpu.py: the messages the simulator charges a 2-rank pipeline per step, the CPU per message
from four runs' CPU seconds (by hand), and its command line refusing bad input with one line."""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = os.path.join(HERE, "..", "tools")
sys.path.insert(0, TOOLS)
import p2p_cpu  # noqa: E402


def main():
    failures = []

    def check(what, got, want, tol=1e-9):
        if abs(got - want) > tol:
            failures.append("%s: got %r, expected %r" % (what, got, want))

    # 1 chunk per rank: 2 virtual stages, 1 boundary; per micro-batch an activation (2 messages a side)
    # and a gradient (1 a side): 6; 8 micro-batches: 48. 4 chunks: 7 boundaries, 336.
    check("messages at 1 chunk", p2p_cpu.messages_per_step(1), 48)
    check("messages at 4 chunks", p2p_cpu.messages_per_step(4), 336)
    check("messages, 2 micro-batches", p2p_cpu.messages_per_step(2, m=2), 2 * 3 * 6)
    # 200 extra steps: 1 chunk 6 s (30 ms a step), 4 chunks 14 s (70 ms a step); 40 ms over 288 messages.
    check("per message", p2p_cpu.per_message(1, 7, 2, 16), 0.040 / 288)
    # The start-up (the short runs) cancels: the same long-minus-short differences, any offset.
    check("start-up cancels", p2p_cpu.per_message(11, 17, 52, 66), 0.040 / 288)
    # No growth: nothing a message.
    check("no growth", p2p_cpu.per_message(1, 7, 2, 8), 0.0)
    for args, needle in ((["per-message", "1", "2", "3"], "usage"), (["per-message", "1", "2", "3", "x"], "four CPU"),
                         (["measure"], "usage")):
        p = subprocess.run([sys.executable, os.path.join(TOOLS, "p2p_cpu.py")] + args, capture_output=True, text=True)
        if p.returncode == 0 or needle not in p.stderr or "Traceback" in p.stderr or len(p.stderr.splitlines()) != 1:
            failures.append("%s: rc %d, stderr %r" % (" ".join(args), p.returncode, p.stderr))
    p = subprocess.run([sys.executable, os.path.join(TOOLS, "p2p_cpu.py"), "per-message", "1", "7", "2", "16"],
                       capture_output=True, text=True)
    if p.stdout.strip() != "138.9":
        failures.append("per-message command: got %r, expected 138.9" % p.stdout)
    for f in failures:
        print("FAIL " + f)
    print("p2p_cpu_test: %d checks failed" % len(failures) if failures else "p2p_cpu_test: all passed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
