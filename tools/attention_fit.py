#!/usr/bin/env python3
"""attention_fit.py: a CPU box's attention efficiency from benchmarks/attention_bench's ATTENTION lines,
for ./zpp calibrate (tools/calibrate.sh), in place of the attention_efficiency set by hand.

The cost model prices a CPU box's attention core (scheduler/planner/cost_model.cc, plan --cpu-attention)
as dense: forward 4 b s^2 (H D) FLOPs at attention_efficiency of the matmul peak, backward twice the
forward, plus the scores' element-wise passes (kElementwisePassesScores per b H s^2 value, forward, and
twice that backward) at the memory bandwidth. So a shape's forward + backward is
    t(eff) = 3 x 4 b s^2 H D / (peak x eff) + 3 x 4 b H s^2 x value_bytes / bandwidth
and attention_efficiency is the eff whose t fits the measured times best (least squares on relative
error, in closed form: the time is linear in 1 / eff). Each measured time is first scaled to the box's typical speed by
the reference GEMM timed beside it (attention_bench's reference_gflops) over REFERENCE_GFLOPS (the GEMM
grid's median reference rate, tools/grid_table.py), as the GEMM table's rates are.
  attention_fit.py fit HW BENCH REFERENCE_GFLOPS   HW's attention_efficiency fitted to the ATTENTION lines
                                                   in the file BENCH, written back; prints one line
"""
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hardware_json  # noqa: E402

SCORES_PASSES = 4  # scheduler/planner/cost_model.h kElementwisePassesScores
LINE = re.compile(r"ATTENTION batch=(\d+) heads=(\d+) seq=(\d+) head_dim=(\d+) forward_s=([0-9.e+-]+) "
                  r"backward_s=([0-9.e+-]+) dense_gflops=[0-9.]+ reference_gflops=([0-9.]+)")


def parse(text):
    """The ATTENTION lines of `text`: (batch, heads, seq, head_dim, forward + backward s, reference GFLOP/s)."""
    rows = [(int(b), int(h), int(s), int(d), float(f) + float(g), float(r))
            for b, h, s, d, f, g, r in LINE.findall(text)]
    if not rows:
        sys.exit("attention_fit: no ATTENTION line in the bench's output, expected one per shape "
                 "('ATTENTION batch=B heads=H seq=S head_dim=D forward_s=... backward_s=... dense_gflops=... "
                 "reference_gflops=...')")
    return rows


def model_seconds(eff, b, h, s, d, peak_flops, bandwidth, value_bytes=4):
    """The cost model's forward + backward seconds of one attention core at efficiency `eff`."""
    core = 4.0 * b * s * s * h * d
    return 3 * core / (peak_flops * eff) + 3 * SCORES_PASSES * b * h * s * s * value_bytes / bandwidth


def fit(rows, peak_flops, bandwidth, reference_gflops):
    """The efficiency minimising the squared relative error of model_seconds against the rows' times, each
    scaled by its reference rate over `reference_gflops` (within 0.001-1, the range a description takes; to 4
    decimals, as ./zpp calibrate and the `fit` command both write it);
    and each row's scaled time. model_seconds is a_i / eff + c_i, linear in 1 / eff, so the fit is closed:
    1 / eff = sum(x_i (1 - c_i / t_i)) / sum(x_i^2) with x_i = a_i / t_i."""
    scaled = [(b, h, s, d, t * r / reference_gflops) for b, h, s, d, t, r in rows]
    num = den = 0.0
    for b, h, s, d, t in scaled:
        c = model_seconds(float("inf"), b, h, s, d, peak_flops, bandwidth)  # the scores' passes alone
        x = (model_seconds(1.0, b, h, s, d, peak_flops, bandwidth) - c) / t
        num += x * (1 - c / t)
        den += x * x
    inverse = num / den
    eff = min(1.0, max(0.001, 1 / inverse)) if inverse > 0 else 1.0
    return round(eff, 4), scaled  # the fit's own precision, not a float's 16 digits


def rates(hw):
    """A description's (matmul peak FLOP/s, element-wise bytes/s) as the cost model reads them: the peak of its
    compute dtype (Hardware::ComputeFlops), the memory bandwidth times its element-wise efficiency, which is
    its efficiency unless set apart (Hardware::ElementwiseBytesPerSecond)."""
    peak = hw["peak_tflops"][hw.get("compute_dtype", "fp32")] * 1e12
    memory = hw["memory"]
    return peak, memory["bandwidth_gbps"] * 1e9 * memory.get("elementwise_efficiency", memory.get("efficiency", 1.0))


def describe(eff, scaled, peak_flops, bandwidth):
    """The description's sentence on the fit: the efficiency, then each shape's scaled and fitted times."""
    shapes = ", ".join("%dx%dx%dx%d %.2f ms (fitted %.2f)" % (b, h, s, d, t * 1e3,
                                                           model_seconds(eff, b, h, s, d, peak_flops, bandwidth) * 1e3)
                       for b, h, s, d, t in scaled)
    return ("attention_efficiency %.3f: PyTorch's CPU attention (causal, forward + backward, benchmarks/attention_bench) "
            "fitted as the cost model prices it, a dense core plus the scores' passes (tools/attention_fit.py), at "
            "batch x heads x seq x head_dim %s" % (eff, shapes))


def main(argv):
    if len(argv) != 5 or argv[1] != "fit":
        sys.exit("attention_fit: usage: attention_fit.py fit HW BENCH REFERENCE_GFLOPS (got: %s)" % " ".join(argv[1:]))
    hw_path, bench, ref = argv[2], argv[3], argv[4]
    try:
        reference_gflops = float(ref)
    except ValueError:
        reference_gflops = 0
    if reference_gflops <= 0:
        sys.exit("attention_fit: REFERENCE_GFLOPS: got '%s', expected a positive number (the GEMM grid's median "
                 "reference rate)" % ref)
    hw = json.load(open(hw_path))
    peak, bandwidth = rates(hw)
    rows = parse(open(bench).read())
    eff, scaled = fit(rows, peak, bandwidth, reference_gflops)
    hw["attention_efficiency"] = eff
    sentence = describe(eff, scaled, peak, bandwidth)
    hw["source"] += "; " + sentence
    hardware_json.write(hw_path, hw)
    print(sentence)


if __name__ == "__main__":
    main(sys.argv)
