"""tools/attention_fit.py, the attention efficiency ./zpp calibrate fits to benchmarks/attention_bench:
its model of a shape's time against a hand-computed value; the fit recovering the efficiency from
times made by that model, exactly, and with each shape timed beside a slow reference GEMM (scaled
back to the box's typical speed); the `fit` command writing attention_efficiency into a description
and refusing a bench output without ATTENTION lines; and its copy of the cost model's formula pinned to the
cost model itself (tools/plan's PREDICT_OPS on a CPU description: the dense core at two efficiencies, the
scores' passes at two head counts), so a change to either that the other lacks fails here."""
import json
import os
import re
import subprocess
import sys
import tempfile

RUNFILES = os.environ["ZEROPP_RUNFILES"]
TOOLS = os.path.join(RUNFILES, "tools")
sys.path.insert(0, TOOLS)
import attention_fit  # noqa: E402

PEAK, BW = 90e9, 20e9  # FLOP/s, bytes/s
SHAPES = [(4, 4, 128, 64), (1, 4, 128, 64), (4, 4, 64, 64), (4, 8, 64, 32)]


def line(b, h, s, d, seconds, ref):
    return ("ATTENTION batch=%d heads=%d seq=%d head_dim=%d forward_s=%.9f backward_s=%.9f dense_gflops=1.00 "
            "reference_gflops=%.2f" % (b, h, s, d, seconds / 3, 2 * seconds / 3, ref))


LAYERS, MICRO_BATCH, MICRO_BATCHES, SEQ, WIDTH = 2, 4, 2, 1024, 256


def plan_ops(hw_path, heads):
    """tools/plan's PREDICT_OPS of one rank running the model (WIDTH wide, `heads` heads, dense CPU attention) at
    MICRO_BATCHES micro-batches of MICRO_BATCH: its attention seconds and element-wise values per step."""
    args = [os.path.join(TOOLS, "plan"), "--hidden", str(WIDTH), "--layers", str(LAYERS), "--heads", str(heads),
            "--vocab", "256", "--seq", str(SEQ), "--cpu-attention", "--global-batch", str(MICRO_BATCH * MICRO_BATCHES),
            "--hardware", hw_path, "--gpus", "1", "--predict", "--design", "3d", "--micro-batch", str(MICRO_BATCH)]
    out = subprocess.run(args, capture_output=True, text=True)
    found = re.search(r"PREDICT_OPS rank=0 .*attention_s=([0-9.]+) .*elementwise_gvalues=([0-9.]+)", out.stdout)
    assert out.returncode == 0 and found, (args, out.stdout, out.stderr)
    return float(found.group(1)), float(found.group(2)) * 1e9


def pin_to_plan():
    """attention_fit.model_seconds against the cost model, on the committed CPU description at two attention
    efficiencies: PREDICT_OPS's attention_s is the dense core, per layer and micro-batch
    model_seconds(eff) - model_seconds(inf); the scores' passes are the element-wise values that a head count
    adds (the core's FLOPs and every other pass depend on the width alone), whose bytes at the description's
    element-wise bandwidth are model_seconds(inf, heads) - model_seconds(inf, heads / 2)."""
    hw = json.load(open(os.path.join(RUNFILES, "scheduler/planner/hardware/cpu-local.json")))
    peak, bandwidth = attention_fit.rates(hw)
    calls = LAYERS * MICRO_BATCHES
    with tempfile.TemporaryDirectory() as tmp:
        for eff in (hw["attention_efficiency"], 0.3):
            hw["attention_efficiency"] = eff
            hw_path = os.path.join(tmp, "hw.json")
            json.dump(hw, open(hw_path, "w"))
            attention_s, values8 = plan_ops(hw_path, 8)
            _, values4 = plan_ops(hw_path, 4)
            core = (attention_fit.model_seconds(eff, MICRO_BATCH, 8, SEQ, WIDTH // 8, peak, bandwidth)
                    - attention_fit.model_seconds(float("inf"), MICRO_BATCH, 8, SEQ, WIDTH // 8, peak, bandwidth))
            assert abs(attention_s / calls - core) <= 1e-4 * core, (eff, attention_s / calls, core)
            scores = (attention_fit.model_seconds(float("inf"), MICRO_BATCH, 8, SEQ, WIDTH // 8, peak, bandwidth)
                      - attention_fit.model_seconds(float("inf"), MICRO_BATCH, 4, SEQ, WIDTH // 4, peak, bandwidth))
            planned = (values8 - values4) / calls * 4 / bandwidth  # fp32 values
            assert abs(planned - scores) <= 1e-3 * scores, (eff, planned, scores)


def main():
    # By hand: 4 x 4 x 128 x 64 at 0.5: core 4 * 4 * 128^2 * 4 * 64 = 67,108,864 FLOPs, forward and backward
    # 3x that over 45 GFLOP/s = 4.4739 ms; scores 3 * 4 passes * 4 * 4 * 128^2 values * 4 bytes over 20 GB/s
    # = 0.6291 ms; 5.1030 ms in all.
    t = attention_fit.model_seconds(0.5, 4, 4, 128, 64, PEAK, BW)
    assert abs(t - (3 * 67108864 / 45e9 + 3 * 4 * 4 * 4 * 128 * 128 * 4 / 20e9)) < 1e-12, t
    assert abs(t * 1e3 - 5.1030) < 1e-4, t
    # Exact times at 0.37, every reference at the median: 0.37 back.
    exact = [(b, h, s, d, attention_fit.model_seconds(0.37, b, h, s, d, PEAK, BW), 60.0) for b, h, s, d in SHAPES]
    eff, _ = attention_fit.fit(exact, PEAK, BW, 60.0)
    assert abs(eff - 0.37) < 1e-9, eff
    # One shape timed while the box ran at half speed (its reference GEMM at 30 against the median 60):
    # its time doubled, and scaled back by 30 / 60, the fit is unmoved.
    slow = list(exact)
    b, h, s, d, t0, _ = slow[1]
    slow[1] = (b, h, s, d, 2 * t0, 30.0)
    eff, scaled = attention_fit.fit(slow, PEAK, BW, 60.0)
    assert abs(eff - 0.37) < 1e-9 and abs(scaled[1][4] - t0) < 1e-15, (eff, scaled[1])
    # Left unscaled (the median taken as 30 too), the doubled shape pulls the fit down.
    eff_unscaled, _ = attention_fit.fit([r[:5] + (60.0,) for r in slow], PEAK, BW, 60.0)
    assert eff_unscaled < 0.36, eff_unscaled
    # The command: writes attention_efficiency and a sentence in the source; refuses a file without lines.
    with tempfile.TemporaryDirectory() as tmp:
        hw = {"source": "test", "compute_dtype": "fp32", "peak_tflops": {"fp32": PEAK / 1e12, "bf16": PEAK / 1e12},
              "memory": {"bandwidth_gbps": BW / 1e9, "efficiency": 1.0}, "attention_efficiency": 0.5}
        hw_path, bench = os.path.join(tmp, "hw.json"), os.path.join(tmp, "bench.txt")
        json.dump(hw, open(hw_path, "w"))
        open(bench, "w").write("\n".join(line(*r) for r in exact) + "\n")
        out = subprocess.run([sys.executable, os.path.join(TOOLS, "attention_fit.py"), "fit", hw_path, bench, "60"],
                             capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        written = json.load(open(hw_path))
        # Written to 3 decimals' worth of times: the line's rounding moves the fit by under 0.001.
        assert abs(written["attention_efficiency"] - 0.37) <= 0.001, written
        assert "attention_efficiency 0.37" in written["source"], written["source"]
        open(bench, "w").write("no lines here\n")
        out = subprocess.run([sys.executable, os.path.join(TOOLS, "attention_fit.py"), "fit", hw_path, bench, "60"],
                             capture_output=True, text=True)
        assert out.returncode != 0 and "no ATTENTION line" in out.stderr and "Traceback" not in out.stderr, out
        out = subprocess.run([sys.executable, os.path.join(TOOLS, "attention_fit.py"), "fit", hw_path, bench, "-1"],
                             capture_output=True, text=True)
        assert out.returncode != 0 and "REFERENCE_GFLOPS: got '-1'" in out.stderr, out
    pin_to_plan()
    print("attention_fit_test: ok")


if __name__ == "__main__":
    main()
