"""tools/compare_ops.py: per kind, the planner's seconds over the measured ones, from a log's OPS and
PREDICT_OPS lines of the rank asked for (copies, which the planner charges only for gradient landing, as a
diagnostic line); a prediction of another model (other matmul FLOPs) and a
log without the lines are refused with exit 1."""
import os
import subprocess
import sys

TOOL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools", "compare_ops.py")
OPS = ("[rank {r}] OPS rank={r} steps=3 matmul_s=0.2 attention_s=0.05 elementwise_s=0.04 copy_s=0.01 comm_s=0 "
       "optimizer_s=0.02 other_s=0.01 matmul_gflop={g} matmul_tflops=0.05 elementwise_gvalues=0.4 time=host")
PRED = ("PREDICT_OPS rank={r} matmul_s=0.1 attention_s=0.05 elementwise_s=0.06 optimizer_s=0.01 matmul_gflop={g} "
        "matmul_tflops=0.1 elementwise_gvalues=0.3 copy_s=0.004")


def run(text, *args):
    p = subprocess.run([sys.executable, TOOL, *args], input=text, capture_output=True, text=True)
    return p.returncode, p.stdout


def main():
    log = "\n".join([OPS.format(r=0, g=10.0), OPS.format(r=1, g=99.0), PRED.format(r=0, g=10.0),
                     PRED.format(r=1, g=5.0)])
    code, out = run(log)
    assert code == 0, out
    want = {"matmul": "0.500", "attention": "1.000", "elementwise": "1.500", "optimizer": "0.500"}
    for kind, ratio in want.items():
        assert f"kind={kind} measured_s=" in out and f"ratio={ratio}" in out.split(f"kind={kind} ")[1].split("\n")[0], out
    assert "measured=0.050 predicted=0.100" in out, out
    assert "kind=elementwise_gvalues measured=0.4000 predicted=0.3000 ratio=0.750" in out, out
    # Copies: a diagnostic line (the planner charges only gradient landing's), never a RESULT.
    assert "kind=copy measured_s=0.010000 predicted_s=0.004000 ratio=0.400" in out, out
    code, out = run(log, "--rank", "1")  # rank 1's prediction is of another model
    assert code == 1 and "not the same model" in out, out
    code, out = run(log, "--rank", "1", "--plan-rank", "0")  # a data rank of pipeline rank 0
    assert code == 1 and "not the same model" in out, out  # rank 1's OPS has other FLOPs than rank 0's plan
    code, out = run(OPS.format(r=1, g=10.0) + "\n" + PRED.format(r=0, g=10.0), "--rank", "1", "--plan-rank", "0")
    assert code == 0 and "ratio=0.500" in out, out
    # --result: the table and RESULT lines a bench ends with, the whole step among them.
    code, out = run(log, "--result", "op-kinds", "--step", "0.5", "0.55")
    assert code == 0, out
    assert "RESULT op-kinds matmul_s=0.100000 s reference=0.200000 ratio=0.500 target=0.9-1.1 MISSED" in out, out
    assert "RESULT op-kinds step_s=0.550000 s reference=0.500000 ratio=1.100 target=0.9-1.1 MET" in out, out
    assert "RESULT op-kinds elementwise_gvalues=0.3000 1e9 reference=0.4000 ratio=0.750" in out, out
    assert "RESULT op-kinds copy" not in out, out
    code, out = run("nothing here\n")
    assert code == 1 and "no OPS line" in out, out
    print("compare_ops_test: ok")


if __name__ == "__main__":
    main()
