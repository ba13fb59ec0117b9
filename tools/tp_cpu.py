#!/usr/bin/env python3
"""tp_cpu.py: the CPU a tensor-parallel collective costs on this box, all threads counted (a diagnostic;
nothing is written).

Runs a tiny GPT (width 16, 2 heads, context 8: its compute is almost nothing, its steps are the executors'
calls and transfers) as one 3D-baseline job of tp 2 (benchmarks/baseline_3d/train_3d, 2 ranks), and as two
1-rank jobs of zeropp's engine at once (tools/train), each at depth 2 and 8 for a short and a long run. It
reads the CPU all their processes used (user + system, every thread: the transport's included) from the
kernel's accounting of waited-for children, as tools/p2p_cpu.py does. The long run minus the short one
is the CPU of the extra steps, without the start-up; depth 8 minus depth 2, over 6 layers x 8 micro-batches
x 2 ranks, the CPU of one layer's forward and backward a micro-batch on one rank. The 3D layer's over the
engine's is what tensor parallelism adds: its 4 collectives a layer (2 forward, 2 backward) and the
operators around them (the autograd Functions, the copies, the separate bias adds).

What it tells: how much CPU a collective takes in all, against the CPU the planner could charge outside
its wait (Hardware::comm_cpu_messages_per_tp_collective, in comm_cpu_us_per_message units; default 0).
Most of it runs inside the wait, where both ranks of the pair block, so it is not all extra time.

  tools/tp_cpu.py [REPEATS]     (default 2; about 2 minutes each on a 2-core box)
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import p2p_cpu  # noqa: E402  (its cpu_of: the CPU of commands run at once)

MODEL = ["--width", "16", "--heads", "2", "--context", "8", "--microbatches", "8", "--micro-batch", "1",
         "--log-every", "100000"]
STEPS = (50, 250)  # short, long
DEPTHS = (2, 8)
COLLECTIVES_PER_LAYER = 4


def tp_job(depth, steps):
    return [["bazel-bin/tools/launcher", "--nproc-per-node", "2", "--master-port", "29801", "--",
             "bazel-bin/benchmarks/baseline_3d/train_3d", "--tp", "2", "--depth", str(depth),
             "--steps", str(steps)] + MODEL]


def engine_jobs(depth, steps):
    return [["bazel-bin/tools/launcher", "--nproc-per-node", "1", "--master-port", str(29811 + j), "--",
             "bazel-bin/tools/train", "--depth", str(depth), "--steps", str(steps)] + MODEL for j in range(2)]


def per_layer_cpu(cpu):
    """CPU seconds of one layer's forward + backward a micro-batch on one rank, from the 2 ranks' CPU
    seconds of each run, cpu[(depth, steps)] for DEPTHS x STEPS: the long run minus the short one per
    extra step, the deeper model minus the shallower per extra layer, over 8 micro-batches and 2 ranks."""
    per_step = {d: (cpu[d, STEPS[1]] - cpu[d, STEPS[0]]) / (STEPS[1] - STEPS[0]) for d in DEPTHS}
    return (per_step[DEPTHS[1]] - per_step[DEPTHS[0]]) / ((DEPTHS[1] - DEPTHS[0]) * 8 * 2)


def per_layer(jobs):
    return per_layer_cpu({(d, s): p2p_cpu.cpu_of(jobs(d, s), "the depth-%d run of %d steps" % (d, s), tool="tp_cpu")
                          for d in DEPTHS for s in STEPS})


def main(argv):
    try:
        repeats = int(argv[0]) if argv else 2
    except ValueError:
        repeats = 0
    if len(argv) > 1 or repeats < 1:
        sys.exit("tp_cpu: got '%s', expected [REPEATS] (a positive whole number)" % " ".join(argv))
    print("# tools/tp_cpu.py %d: width 16, 2 heads, context 8, 8 micro-batches of 1, depth %d and %d, %d and %d steps"
          % (repeats, DEPTHS[0], DEPTHS[1], STEPS[0], STEPS[1]), flush=True)
    for rep in range(repeats):
        tp, engine = per_layer(tp_job), per_layer(engine_jobs)
        added = tp - engine
        print("repeat %d: CPU per layer forward + backward a micro-batch on one rank: 3D tp 2 %.1f us, engine %.1f us; "
              "tensor parallelism adds %.1f us, %.1f us per collective (%d a layer)"
              % (rep + 1, tp * 1e6, engine * 1e6, added * 1e6, added / COLLECTIVES_PER_LAYER * 1e6,
                 COLLECTIVES_PER_LAYER), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
