"""benchmarks/planner_gpu_offload.py: the offloaded steps it reads from gpu_checks.sh logs (check 3
in the oversized section, check 4 in params-offload; a PROFILE run of any other section skipped),
the plan flags each check gets, the lease's own measured description beside the log, the rule that
leaves out runs whose host AdamW ran on another thread count than the lease measured its rate on,
and its RESULT lines, against a stand-in plan whose prediction is worked out by hand; a log with no
comparable step is refused with one line and a nonzero exit."""
import json
import os
import stat
import subprocess
import sys
import tempfile

TOOL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks", "planner_gpu_offload.py")

HEAD = """\
# GPU checks, on a lent machine: one NVIDIA H200 (143771 MiB)
GPU_CALIBRATE host AdamW (torch fused, 16 threads) over 67108864 parameters: 4208 Mparam/s
SECTION op-profile starts at 1 s
[rank 0] zeropp train: gpt(vocab=256, context=1024, width=2048, depth=24, heads=16), 1 parameters, pp(1), 8192 tokens/step, corpus x
[rank 0] PROFILE rank=0 steps=3 step_s=0.3881
"""
OVERSIZED = """\
SECTION oversized starts at 2 s
[rank 0] zeropp train: gpt(vocab=256, context=1024, width=4096, depth=27, heads=32), 1 parameters, pp(1), 2048 tokens/step, corpus x
[rank 0] recompute: 1111111110
[rank 0] offload: host AdamW and norm on 16 threads (--host-threads)
[rank 0] PROFILE rank=0 steps=4 step_s=0.4000
"""
PARAMS = """\
SECTION params-offload starts at 3 s
[rank 0] zeropp train: gpt(vocab=256, context=512, width=2000, depth=14, heads=16), 1 parameters, pp(1), 2048 tokens/step, corpus x
[rank 0] offload: host AdamW and norm on THREADS threads (--host-threads)
[rank 0] PROFILE rank=0 steps=2 step_s=0.1000
"""

# Predicts hidden / 10000 s a step from a measured description, hidden / 20000 from any other, and
# keeps its arguments.
PLAN = """#!/bin/sh
echo "$@" >> "$(dirname "$0")/calls"
for a in "$@"; do [ "$prev" = --hidden ] && h=$a; [ "$prev" = --hardware ] && hw=$a; prev=$a; done
case "$hw" in *measured*) d=10000 ;; *) d=20000 ;; esac
echo "PREDICT layout=x step_s=$(python3 -c "print($h / $d)") tokens_per_s=1"
"""


def run(plan, *logs):
    return subprocess.run([sys.executable, TOOL, "--plan", plan] + list(logs), capture_output=True, text=True)


def main():
    with tempfile.TemporaryDirectory() as d:
        plan = os.path.join(d, "plan")
        with open(plan, "w") as f:
            f.write(PLAN)
        os.chmod(plan, stat.S_IRWXU)
        log = os.path.join(d, "gpu-2026-12-04.txt")
        with open(log, "w") as f:
            f.write(HEAD + OVERSIZED + PARAMS.replace("THREADS", "16"))
        measured = os.path.join(d, "h200-measured-2026-12-04.json")
        with open(measured, "w") as f:
            json.dump({"name": "x"}, f)
        p = run(plan, log)
        assert p.returncode == 0, p.stdout + p.stderr
        calls = open(os.path.join(d, "calls")).read().splitlines()
        # Two offloaded runs (the op-profile PROFILE is skipped), each predicted from the datasheet and the
        # lease's measured description.
        assert len(calls) == 4, calls
        assert "--hardware h200-141gb-ib400x8" in calls[0] and "--hardware " + measured in calls[1], calls
        assert "--hidden 4096 --layers 27 --heads 32 --seq 1024 --vocab 256 --micro-batch 2" in calls[1], calls[1]
        assert "--gpus 1 --design zero3 --global-batch 2" in calls[1], calls[1]
        assert calls[1].endswith("--recompute --offload cpu"), calls[1]
        assert "--hidden 2000 --layers 14 --heads 16 --seq 512 --vocab 256 --micro-batch 4" in calls[3], calls[3]
        assert calls[3].endswith("--global-batch 4 --hidden 2000 --layers 14 --heads 16 --seq 512 --vocab 256 "
                                 "--micro-batch 4 --offload cpu --offload-params cpu"), calls[3]
        rows = [line.split() for line in p.stdout.splitlines() if line.startswith("gpu-2026-12-04.txt:")]
        # 0.4096 / 0.4 = 1.024 and 0.2 / 0.1 = 2.000 (measured); datasheet 0.2048 / 0.4 and 0.1 / 0.1.
        assert [(r[0], r[1], r[-2], r[-1]) for r in rows] == [
            ("gpu-2026-12-04.txt:7", "oversized", "1.024", "0.5120"),
            ("gpu-2026-12-04.txt:12", "params-offload", "2.000", "1.0000")], rows
        assert "RESULT planner-gpu-offload steps_within_10pct=1 count reference=2 ratio=0.500 target=1.0 MISSED" \
            in p.stdout, p.stdout
        # Mean |error|: (0.024 + 1.000) / 2 = 0.512.
        assert "RESULT planner-gpu-offload mean_abs_error=0.512 fraction reference=0 ratio=0.512 target=0.10 MISSED" \
            in p.stdout, p.stdout

        # A run on another thread count than the lease's AdamW rate, and a log whose lease measured no
        # description: listed with the reason, not counted.
        other = os.path.join(d, "gpu-2026-12-05.txt")
        with open(other, "w") as f:
            f.write(HEAD + PARAMS.replace("THREADS", "1"))
        with open(os.path.join(d, "h200-measured-2026-12-05.json"), "w") as f:
            json.dump({"name": "y"}, f)
        lone = os.path.join(d, "gpu-2026-12-06.txt")
        with open(lone, "w") as f:
            f.write(HEAD + OVERSIZED)
        p = run(plan, log, other, lone)
        assert p.returncode == 0, p.stdout + p.stderr
        assert "its host AdamW ran on 1 threads, the lease measured the rate on 16" in p.stdout, p.stdout
        assert "not comparable: its lease measured no description" in p.stdout, p.stdout
        assert "RESULT planner-gpu-offload steps_within_10pct=1 count reference=2 ratio=0.500" in p.stdout, p.stdout

        # Nothing comparable: one line, nonzero, no traceback.
        p = run(plan, other)
        assert p.returncode != 0, p.stdout
        assert p.stderr.startswith("planner_gpu_offload: no comparable offloaded step in ") and \
            len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr, p.stderr
    print("planner_gpu_offload_test: passed")


if __name__ == "__main__":
    main()
