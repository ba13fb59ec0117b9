#!/usr/bin/env python3
"""compute_fit.py: the calibration's compute fit, in one place for ./zpp calibrate (tools/calibrate.sh)
and for re-predicting committed runs (./zpp bench planner-local --history).

The 1-rank reference runs (tools/reference_runs.sh: the zeropp-vs-3d GPT, DEPTH layers, M micro-batches)
at each of SHAPES take a measured forward + backward time per step; the planner's cost model gives
its own (plan --predict compute_s: the layout those runs are, 3D of one stage on zeropp's engine,
whose gradients land by a copy every micro-batch). The fit is measured = compute_overhead x model +
layer_overhead_us x (layer calls), least squares on relative error (relative_fit.py). Where the
description holds layer_overhead_probe_us (measured apart by tools/layer_cost.py; no calibration
writes it, a what-if sets it: planner-local --history --set), that is layer_overhead_us and the fit
keeps only the factor.
  compute_fit.py shapes                 the shapes, one "CONTEXT MICRO_BATCH" per line
  compute_fit.py model-s HW CTX MB      the cost model's forward + backward seconds per step
  compute_fit.py refit HW               HW's compute_overhead and layer_overhead_us fitted again by the
                                        current cost model to the measured times its source recorded
                                        ("(A s measured / B s fitted, ...)", one per shape), written back
  compute_fit.py passes HW ROWS         HW's compute fit redone on more passes of the reference runs
                                        (./zpp calibrate's third, after the pairs fits): ROWS a file of
                                        per-shape "MODEL_S|PROFILE;PROFILE..." lines, every pass's runs;
                                        the fit, its shape times and its count of runs in HW's source
                                        replaced, written back
"""
import json
import os
import re
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hardware_json  # noqa: E402
import relative_fit  # noqa: E402

SHAPES = [(128, 4), (128, 1), (64, 4)]  # context, micro-batch (benchmarks/matmul-grid.sh compares the table on these)
DEPTH = 4
M = 8
PLAN = "bazel-bin/tools/plan"  # from the checkout's root, as ./zpp runs it
# What ./zpp calibrate writes at the compute fit or after it (tools/calibrate.sh, calibrate_pairs.sh):
# the description the fit saw had none of these (compute_cv and comm_cv move compute_s).
WRITTEN_AT_OR_AFTER_FIT = ("idle_rss_mb", "compute_overhead", "layer_overhead_us", "oversubscribed_compute_factor",
                           "optimizer_mparams_per_s", "grad_handling_ns_per_param", "intra_node_oversubscribed",
                           "intra_node_tp_filled", "intra_node_oversubscribed_gather", "compute_cv", "comm_cv",
                           "intra_node_p2p")


def model_seconds(hw_path, ctx, mb, accumulation="sink", plan=None):
    """The cost model's forward + backward seconds per step of the reference runs at one shape (with
    `accumulation` fused: as if their gradients cost nothing to land); `plan`: tools/plan (PLAN)."""
    args = [plan or PLAN, "--hidden", "256", "--layers", str(DEPTH), "--heads", "4", "--vocab", "256", "--seq", str(ctx),
            "--cpu-attention", "--global-batch", str(M * mb), "--hardware", hw_path, "--gpus", "1", "--predict",
            "--design", "3d", "--micro-batch", str(mb), "--grad-accumulation", accumulation]
    out = subprocess.run(args, capture_output=True, text=True)
    found = re.search(r" compute_s=([0-9.e+-]+)", out.stdout)
    if out.returncode != 0 or not found:
        sys.exit(f"compute_fit: plan {' '.join(args[1:])}: {out.stderr.strip() or 'no compute_s in its output'}")
    return float(found.group(1))


def mean_profile(text):
    """The mean of concurrent runs' PROFILE lines (separated by ';' or newlines), field by field."""
    lines = [line for line in re.split(r"[;\n]", text) if line]
    runs = [{k: float(v) for k, v in re.findall(r"(\w+)=([0-9.]+)%?", line)} for line in lines]
    if not runs:
        sys.exit("compute_fit: PROFILE: no line in %r, expected one or more runs' PROFILE fields "
                 "('rank=0 step_s=... forward=...%%', ';' or newline between)" % text[:80])
    for k, run in enumerate(runs[1:], 1):
        if set(run) != set(runs[0]):
            sys.exit("compute_fit: PROFILE line %d has fields %s, expected the same as line 0's %s"
                     % (k, ",".join(sorted(run)), ",".join(sorted(runs[0]))))
    return {k: sum(r[k] for r in runs) / len(runs) for k in runs[0]}


def profile_seconds(prof):
    """A PROFILE's forward + backward seconds per step."""
    parts = ("forward", "backward", "backward_input", "backward_weight", "recompute")
    return prof["step_s"] * sum(prof[k] for k in parts) / 100


def probe_s(hw):
    """The description's measured fixed cost per layer (layer_overhead_probe_us) in seconds, or None."""
    us = hw.get("layer_overhead_probe_us")
    return None if us is None else float(us) * 1e-6


def fit_rows(rows, fixed_s=None):
    """(factor, fixed_s, shapes, text) from per-shape "MODEL_S|PROFILE;..." rows: shapes as (model, layer calls,
    measured) and text as the source records them ("A s measured / B s fitted, ..."); `fixed_s`: as fit's."""
    shapes = []
    for row in rows.strip().splitlines():
        model_s, profiles = row.split("|")
        shapes.append((float(model_s), DEPTH * M, profile_seconds(mean_profile(profiles))))
    factor, fixed = fit([p for p, _, _ in shapes], [y for _, _, y in shapes], fixed_s)
    text = ", ".join("%.4f s measured / %.4f s fitted" % (y, factor * p + fixed * n) for p, n, y in shapes)
    return factor, fixed, shapes, text


def oversubscribed_factor(alone, over):
    """How much slower a core computes while twice as many 1-rank runs as cores share the box, from sets
    measured in turn: alone[k] and alone[k + 1] the PROFILE lines of one run per core just before and just
    after over[k], twice as many runs at once (each a text of PROFILE lines, ';' or newline between). Each
    set of over is timed against the mean of the two sets around it, so a box whose speed moves over the
    minutes they take cancels to first order (one set against the passes' mean, as calibrate did until
    2026-11-29, read 1.000-1.202 over planner-local r100-r125, and the pp4 rows' errors followed it;
    three sets bracketed on r125's box minutes later read 1.085, 1.126 and 0.908). Returns (the median of
    the sets' ratios, at least 1: half a core cannot compute faster than a whole one; the ratios)."""
    if len(alone) != len(over) + 1 or not over:
        raise ValueError("oversubscribed_factor: %d sets alone around %d oversubscribed, expected one more alone"
                         % (len(alone), len(over)))
    fb = [profile_seconds(mean_profile(text)) for text in alone]
    ratios = [profile_seconds(mean_profile(text)) / (fb[k] + fb[k + 1]) for k, text in enumerate(over)]
    return max(1.0, statistics.median(ratios)), ratios


def runs_a_shape(rows):
    return len(rows.strip().splitlines()[0].split("|")[1].split(";"))


def fit_sentence(rows, passes, factor, fixed_s, text):
    """How the source records the compute fit over ROWS measured in PASSES ("twice", ...)."""
    return ("from %d 1-rank runs at each of %d micro-batch shapes (one per core at once; the shapes in turn, %s, "
            "each profiling the same tokens), forward + backward fitted as compute_overhead %.3f x the cost model's + "
            "layer_overhead_us %.0f per layer per micro-batch (%s)"
            % (runs_a_shape(rows), len(rows.strip().splitlines()), passes, factor, fixed_s * 1e6, text))


# fit_sentence(..., "twice", ...) as calibrate first writes it, whatever its numbers.
FIT_SENTENCE_TWICE = (r"from \d+ 1-rank runs at each of \d+ micro-batch shapes \(one per core at once; the shapes in "
                      r"turn, twice, each profiling the same tokens\), forward \+ backward fitted as compute_overhead "
                      r"[0-9.]+ x the cost model's \+ layer_overhead_us [0-9.]+ per layer per micro-batch \([^)]*\)")


def passes(hw_path, rows_path):
    """The compute fit of HW redone on every pass's runs in ROWS (see the module's usage)."""
    hw = json.load(open(hw_path))
    rows = open(rows_path).read()
    factor, fixed, _, text = fit_rows(rows, probe_s(hw))
    sentence = fit_sentence(rows, "twice, and once more after the pairs fits", factor, fixed, text)
    source, n = re.subn(FIT_SENTENCE_TWICE, lambda _: sentence, hw.get("source", ""))
    if n != 1:
        sys.exit(f"compute_fit: passes: {hw_path}'s source holds no two-pass compute fit to replace")
    print(f"compute_fit: over every pass ({runs_a_shape(rows)} runs a shape): compute_overhead "
          f"{hw.get('compute_overhead')} -> {factor:.4f}, layer_overhead_us {hw.get('layer_overhead_us')} -> "
          f"{fixed * 1e6:.1f} ({text})")
    hw["source"] = source
    hw["compute_overhead"] = round(factor, 4)
    hw["layer_overhead_us"] = round(fixed * 1e6, 1)
    hardware_json.write(hw_path, hw)


def fit(model_s, measured_s, fixed_s=None):
    """(compute_overhead, layer_overhead_s) for per-shape model and measured seconds; a negative fixed
    cost falls back to the factor alone. With `fixed_s` (a measured cost per layer call), the factor
    alone is fitted beside it: the least-squares factor on relative error, sum((p / y)(1 - c / y)) /
    sum((p / y)^2) with c the shape's fixed seconds."""
    shapes = [(p, DEPTH * M, y) for p, y in zip(model_s, measured_s)]
    if fixed_s is not None:
        num = sum(p / y * (1 - fixed_s * n / y) for p, n, y in shapes)
        factor = num / sum((p / y) ** 2 for p, _, y in shapes)
        if factor <= 0:
            sys.exit("compute_fit: a fixed %.0f us a layer call leaves no time for the work (measured %s s)"
                     % (fixed_s * 1e6, "/".join("%.4f" % y for y in measured_s)))
        return factor, fixed_s
    factor, fixed, factor_alone, _ = relative_fit.fit(shapes)
    if fixed < 0:
        factor, fixed = factor_alone, 0.0
    return factor, fixed


def refit(hw_path):
    hw = json.load(open(hw_path))
    fitted = re.search(r"fitted as compute_overhead [0-9.]+ x the cost model's \+ layer_overhead_us [0-9.]+ per layer "
                       r"per micro-batch \(([^)]*)\)", hw.get("source", ""))
    measured = [float(x) for x in re.findall(r"([0-9.]+) s measured", fitted.group(1))] if fitted else []
    if len(measured) != len(SHAPES):
        sys.exit(f"compute_fit: {hw_path}: source records {len(measured)} measured shape times, expected "
                 f"{len(SHAPES)} (a calibration from ./zpp calibrate of 2026-11-23 on)")
    bare = {k: v for k, v in hw.items() if k not in WRITTEN_AT_OR_AFTER_FIT}
    tmp = hw_path + ".bare"
    hardware_json.write(tmp, bare)
    try:
        model = [model_seconds(tmp, ctx, mb) for ctx, mb in SHAPES]
    finally:
        os.remove(tmp)
    factor, fixed = fit(model, measured, probe_s(hw))
    print(f"compute_fit: {os.path.basename(hw_path)}: compute_overhead {hw.get('compute_overhead')} -> {factor:.4f}, "
          f"layer_overhead_us {hw.get('layer_overhead_us')} -> {fixed * 1e6:.1f}")
    hw["compute_overhead"] = round(factor, 4)
    hw["layer_overhead_us"] = round(fixed * 1e6, 1)
    hardware_json.write(hw_path, hw)


def main(argv):
    if argv[:1] == ["shapes"] and len(argv) == 1:
        for ctx, mb in SHAPES:
            print(ctx, mb)
    elif argv[:1] == ["model-s"] and len(argv) == 4:
        print(f"{model_seconds(argv[1], int(argv[2]), int(argv[3])):.6f}")
    elif argv[:1] == ["refit"] and len(argv) == 2:
        refit(argv[1])
    elif argv[:1] == ["passes"] and len(argv) == 3:
        passes(argv[1], argv[2])
    else:
        sys.exit("compute_fit: usage: compute_fit.py shapes | model-s HW CTX MB | refit HW | passes HW ROWS "
                 f"(got: {' '.join(argv)})")


if __name__ == "__main__":
    main(sys.argv[1:])
