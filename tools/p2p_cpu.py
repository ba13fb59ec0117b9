#!/usr/bin/env python3
"""p2p_cpu.py: the CPU a pipeline message costs on this box (the description's comm_cpu_us_per_message),
measured for ./zpp calibrate (tools/calibrate.sh).

A pipeline with more chunks per rank sends more messages per step. This runs a tiny GPT (width 16, 8
layers, context 8: its compute is almost nothing, its steps are the executor's calls and transfers) as a
2-rank pipeline, one rank per core, with 1 chunk per rank (1f1b) and with 4 (interleaved), each for a
short and a long run, and reads the CPU all their processes used (user + system, every thread: the
transport's included) from the kernel's accounting of waited-for children. The long run minus the
short one is the CPU of the extra steps, without the start-up; 4 chunks minus 1, per step, is the CPU
of the extra stage boundaries; over the extra messages the simulator charges for them (per micro-batch
and boundary: an activation, 2 messages on each side, and a gradient, 1 on each side; scheduler/
simulator.cc), the CPU of one message. It takes in the extra chunk calls (autograd's and the
executor's, a small part: user time grew 4-18 ms a step where system time grew 34-40 when this was
first measured), as a pipeline's messages come with them.

Why not the ping-pong (collectives_bench P2P_CPU, 43.5 us a message in planner-local r126's
calibration): two ranks bouncing a message back to back wake each other while hot. Between pipeline
computations each transfer sleeps and wakes a thread; measured this way the same box charged 152-183 us
a message (2026-11-29), and the planner, charging 43.5, put the schedules with more transfers per
step further under their measurements (benchmarks/results/planner-local-chronicle.md, thirty-eighth
session).

  p2p_cpu.py measure OUT.json   measure, print one line, write comm_cpu_us_per_message into OUT.json
                                (and a note to its source)
  p2p_cpu.py per-message V1_SHORT V1_LONG V4_SHORT V4_LONG
                                the arithmetic alone, on CPU seconds of the four runs
"""
import json
import os
import resource
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hardware_json  # noqa: E402

M = 8  # micro-batches per step
CHUNKS = (1, 4)
STEPS = (50, 250)  # short, long
REPEATS = 2
TIMEOUT_S = 600
MODEL = ["--width", "16", "--depth", "8", "--heads", "1", "--context", "8", "--microbatches", str(M),
         "--micro-batch", "1", "--pp", "2", "--log-every", "100000"]


def messages_per_step(chunks, m=M):
    """Messages the simulator charges per step of a 2-rank pipeline with `chunks` chunks per rank: 2 x chunks
    virtual stages, 2 x chunks - 1 boundaries, per micro-batch and boundary an activation (2 messages each
    side) and a gradient (1 each side)."""
    return m * (2 * chunks - 1) * (2 + 1) * 2


def per_message(v1_short, v1_long, v4_short, v4_long):
    """CPU seconds per message from the four runs' CPU seconds (STEPS short and long, CHUNKS 1 and 4)."""
    extra_steps = STEPS[1] - STEPS[0]
    v1 = (v1_long - v1_short) / extra_steps
    v4 = (v4_long - v4_short) / extra_steps
    return (v4 - v1) / (messages_per_step(CHUNKS[1]) - messages_per_step(CHUNKS[0]))


def cpu_of(commands, what, tool="p2p_cpu"):
    """Process CPU seconds (user + system, every thread of every descendant) of `commands` run at once, read
    from the kernel's accounting of waited-for children. On a timeout or a failure: one line naming `what`
    (and `tool`), and exit. Killed at the timeout, a launcher takes its ranks with it (PDEATHSIG)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for c in commands]
    for p in procs:
        try:
            out, _ = p.communicate(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            sys.exit("%s: %s did not finish in %d s (expected well under a minute)" % (tool, what, TIMEOUT_S))
        if p.returncode != 0:
            for q in procs:
                q.kill()
            tail = out.strip().splitlines()[-1:] or ["no output"]
            sys.exit("%s: %s failed (exit %d): %s" % (tool, what, p.returncode, tail[0]))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def cpu_of_run(chunks, steps, port):
    """Process CPU seconds of one 2-rank run (a run takes 2-20 s here)."""
    schedule = ["--schedule", "1f1b"] if chunks == 1 else ["--schedule", "interleaved", "--chunks", str(chunks)]
    return cpu_of([["bazel-bin/tools/launcher", "--nproc-per-node", "2", "--master-port", str(port), "--",
                    "bazel-bin/tools/train"] + MODEL + ["--steps", str(steps)] + schedule],
                  "the %d-chunk run of %d steps" % (chunks, steps))


def measure(out):
    estimates = []
    for rep in range(REPEATS):
        cpu = [cpu_of_run(v, s, 29870 + 4 * rep + k) for k, (v, s) in
               enumerate((v, s) for v in CHUNKS for s in STEPS)]
        estimates.append(per_message(*cpu))
    us = sum(estimates) / len(estimates) * 1e6
    if us <= 0:
        sys.exit("p2p_cpu: got %.1f us a message (%s), expected more than 0: the runs were disturbed; ./zpp calibrate "
                 "again" % (us, "/".join("%.1f" % (e * 1e6) for e in estimates)))
    hw = json.load(open(out))
    ping_pong = hw.get("comm_cpu_us_per_message")
    hw["comm_cpu_us_per_message"] = round(us, 1)
    hw["source"] += ("; comm_cpu_us_per_message %.1f from a tiny 2-rank pipeline (tools/p2p_cpu.py: width 16, 8 layers, "
                     "1 and 4 chunks per rank, %d and %d steps, the CPU of the extra steps' extra messages, %d repeats: "
                     "%s us), in place of the ping-pong's %s"
                     % (us, STEPS[0], STEPS[1], REPEATS, "/".join("%.1f" % (e * 1e6) for e in estimates), ping_pong))
    hardware_json.write(out, hw)
    print("p2p_cpu: comm_cpu_us_per_message %.1f (repeats %s us; the ping-pong's %s)"
          % (us, "/".join("%.1f" % (e * 1e6) for e in estimates), ping_pong))


def main(argv):
    if argv[:1] == ["measure"] and len(argv) == 2:
        measure(argv[1])
    elif argv[:1] == ["per-message"] and len(argv) == 5:
        try:
            values = [float(a) for a in argv[1:]]
        except ValueError:
            sys.exit("p2p_cpu: per-message: got %s, expected four CPU seconds" % " ".join(argv[1:]))
        print("%.1f" % (per_message(*values) * 1e6))
    else:
        sys.exit("p2p_cpu: usage: p2p_cpu.py measure OUT.json | per-message V1_SHORT V1_LONG V4_SHORT V4_LONG "
                 "(got: %s)" % " ".join(argv))


if __name__ == "__main__":
    main(sys.argv[1:])
