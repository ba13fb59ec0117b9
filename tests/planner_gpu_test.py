"""benchmarks/planner_gpu.py: the steps it reads from gpu_checks.sh logs (a run's header, its
recompute line and BENCH line; a run without BENCH skipped; the shape sweep's RESULT lines), the
arguments it gives plan, and its RESULT lines, against a stand-in plan whose prediction is worked out
by hand; by default the description of the GPU each log's header names; a log without steps, or
whose header names no GPU it knows, is refused with a nonzero exit."""
import os
import stat
import subprocess
import sys
import tempfile

TOOL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks", "planner_gpu.py")

LOG = """\
[rank 0] zeropp train: gpt(vocab=256, context=1024, width=2048, depth=24, heads=16), 1211224064 parameters, pp(1), 8192 tokens/step, corpus x
[rank 0] BENCH framework=zeropp ranks=1 step_s_mean=0.2000 step_s_sd=0.0040 steps_timed=15
[rank 0] zeropp train: gpt(vocab=256, context=1024, width=4096, depth=27, heads=32), 5442506752 parameters, pp(1), 2048 tokens/step, corpus x
[rank 0] recompute: 111111111111111111111111111111
[rank 0] PROFILE rank=0 steps=4 step_s=19.4949
[rank 0] zeropp train: gpt(vocab=256, context=512, width=1024, depth=4, heads=8), 1 parameters, pp(1), 2048 tokens/step, corpus x
[rank 0] recompute: 1111
[rank 0] BENCH framework=zeropp ranks=1 step_s_mean=0.0500 step_s_sd=0.0040 steps_timed=8
RESULT planner-gpu-sweep-w4096-l8-s2048-b4-datasheet predicted_step_s=0.1569 s reference=0.4 ratio=0.4 target=0.9-1.1 MISSED
RESULT planner-gpu-sweep-w4096-l8-s2048-b4-measured predicted_step_s=0.1543 s reference=0.4 ratio=0.4 target=0.9-1.1 MISSED
"""

# Predicts hidden / 10000 s a step (0.2048, 0.1024, 0.4096) and keeps its arguments.
PLAN = """#!/bin/sh
echo "$@" >> "$(dirname "$0")/calls"
for a in "$@"; do [ "$prev" = --hidden ] && h=$a; prev=$a; done
echo "PREDICT layout=x step_s=$(python3 -c "print($h / 10000)") tokens_per_s=1"
"""


def main():
    with tempfile.TemporaryDirectory() as d:
        log, plan = os.path.join(d, "gpu-x.txt"), os.path.join(d, "plan")
        with open(log, "w") as f:
            f.write(LOG)
        with open(plan, "w") as f:
            f.write(PLAN)
        os.chmod(plan, stat.S_IRWXU)
        p = subprocess.run([sys.executable, TOOL, "--plan", plan, "--hardware", "h", log], capture_output=True, text=True)
        assert p.returncode == 0, p.stdout + p.stderr
        calls = open(os.path.join(d, "calls")).read().splitlines()
        assert len(calls) == 3, calls  # the PROFILE run has no BENCH line: skipped
        assert "--hidden 2048 --layers 24 --heads 16 --seq 1024 --vocab 256 --micro-batch 8" in calls[0], calls[0]
        assert "--global-batch 8" in calls[0] and "--recompute" not in calls[0], calls[0]
        assert "--hidden 1024 --layers 4 --heads 8 --seq 512 --vocab 256 --micro-batch 4" in calls[1], calls[1]
        assert calls[1].endswith("--recompute"), calls[1]
        # The sweep's shape from its name (head dim 128), measured from reference=, one row for both RESULT lines.
        assert "--hidden 4096 --layers 8 --heads 32 --seq 2048 --vocab 256 --micro-batch 4" in calls[2], calls[2]
        assert all("--gpus 1 --design zero3" in c and "--hardware h" in c for c in calls), calls
        rows = [line.split() for line in p.stdout.splitlines() if line.startswith("gpu-x.txt:")]
        # 0.2048 / 0.2 = 1.024 (within 10%), 0.1024 / 0.05 = 2.048, 0.4096 / 0.4 = 1.024.
        assert [r[-1] for r in rows] == ["1.024", "2.048", "1.024"], rows
        assert "RESULT planner-gpu steps_within_10pct=2 count reference=3 ratio=0.667 target=1.0 MISSED" in p.stdout, p.stdout
        # Mean |error|: (0.024 + 1.048 + 0.024) / 3 = 0.365.
        assert "RESULT planner-gpu mean_abs_error=0.365 fraction" in p.stdout, p.stdout
        # The last log alone (here the only one) gets the same lines as planner-gpu-latest.
        assert "RESULT planner-gpu-latest steps_within_10pct=2 count reference=3 ratio=0.667" in p.stdout, p.stdout
        older = os.path.join(d, "gpu-w.txt")
        with open(older, "w") as f:
            f.write(LOG.split("RESULT planner-gpu-sweep")[0])  # its first two steps only
        p = subprocess.run([sys.executable, TOOL, "--plan", plan, "--hardware", "h", older, log], capture_output=True,
                           text=True)
        assert "RESULT planner-gpu steps_within_10pct=3 count reference=5 ratio=0.600" in p.stdout, p.stdout
        assert "RESULT planner-gpu-latest steps_within_10pct=2 count reference=3 ratio=0.667" in p.stdout, p.stdout
        # auto (the default): each log predicted from the datasheet description of the GPU its header names.
        h200, h100 = os.path.join(d, "gpu-y.txt"), os.path.join(d, "gpu-z.txt")
        with open(h200, "w") as f:
            f.write("# GPU checks, on a lent machine: one NVIDIA H200 (143771 MiB)\n" + LOG)
        with open(h100, "w") as f:
            f.write("# GPU checks, on a lent machine: one NVIDIA H100 80GB HBM3\n" + LOG)
        os.remove(os.path.join(d, "calls"))
        p = subprocess.run([sys.executable, TOOL, "--plan", plan, h100, h200], capture_output=True, text=True)
        assert p.returncode == 0, p.stdout + p.stderr
        calls = open(os.path.join(d, "calls")).read().splitlines()
        assert len(calls) == 6, calls
        assert all("--hardware h100-80gb-ib400x8" in c for c in calls[:3]), calls
        assert all("--hardware h200-141gb-ib400x8" in c for c in calls[3:]), calls
        assert "# gpu-y.txt: predicted from h200-141gb-ib400x8" in p.stdout, p.stdout
        # A log whose header names no known GPU is refused in one line naming the log.
        p = subprocess.run([sys.executable, TOOL, "--plan", plan, log], capture_output=True, text=True)
        assert p.returncode != 0 and "gpu-x.txt: its header names no GPU" in p.stderr, p.stdout + p.stderr
        assert "Traceback" not in p.stderr, p.stderr
        empty = os.path.join(d, "empty.txt")
        open(empty, "w").close()
        p = subprocess.run([sys.executable, TOOL, "--plan", plan, "--hardware", "h", empty], capture_output=True, text=True)
        assert p.returncode != 0 and "no BENCH step" in p.stderr, p.stdout + p.stderr
    print("planner_gpu_test: passed")


if __name__ == "__main__":
    main()
