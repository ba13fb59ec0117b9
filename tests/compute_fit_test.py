"""The calibration's compute fit (tools/compute_fit.py), as ./zpp bench planner-local --history redoes
it: times made from a known compute_overhead and layer_overhead_us over the current cost model are
fitted back to them, from the description's source text alone. The cost model the fit sees is the
one calibrate saw: the reference runs' gradient landing included (a fit without it puts ~10% less in
the fixed cost here), the fields calibrate writes after the fit left out (compute_cv moves compute_s
by ~1%). A description that records no times is refused with one line. `passes` (calibrate's fit
redone over a third pass of the reference runs) fits the runs' PROFILE lines of every pass and
rewrites the fit, the shape times and the run count in the source, and nothing else; a source without
the two-pass fit is refused. With a measured fixed cost per layer (layer_overhead_probe_us) the fit
keeps it and fits the factor alone: exact on a hand-worked case, the true factor where the probe is
right, and refit and passes both take it from the description. The oversubscription factor recovers a
known slowdown from sets measured in turn on a drifting box, one disturbed set left out by the median,
and never reads under 1. PROFILE lines that disagree in their fields, or none, are refused with one line."""
import json
import os
import sys

RUNFILES = os.environ["ZEROPP_RUNFILES"]
sys.path.insert(0, os.path.join(RUNFILES, "tools"))
import compute_fit  # noqa: E402
import hardware_json  # noqa: E402

compute_fit.PLAN = os.path.join(RUNFILES, "tools", "plan")
TMP = os.environ.get("TEST_TMPDIR", "/tmp")
FACTOR, FIXED_US = 1.25, 900.0


def committed():
    """The committed description without its measured fixed cost: the two-term fit is tested first."""
    hw = json.load(open(os.path.join(RUNFILES, "scheduler/planner/hardware/cpu-local.json")))
    hw.pop("layer_overhead_probe_us", None)
    return hw


def main():
    hw = committed()
    assert hw.get("compute_cv", 0) > 0, "the committed description should carry a post-fit field that moves compute_s"
    bare = {k: v for k, v in hw.items() if k not in compute_fit.WRITTEN_AT_OR_AFTER_FIT}
    for written_later in ("compute_overhead", "layer_overhead_us", "compute_cv", "comm_cv"):
        assert written_later not in bare, written_later  # each moves compute_s
    bare_path = os.path.join(TMP, "bare.json")
    hardware_json.write(bare_path, bare)
    model = [compute_fit.model_seconds(bare_path, ctx, mb) for ctx, mb in compute_fit.SHAPES]
    calls = compute_fit.DEPTH * compute_fit.M
    measured = [FACTOR * p + FIXED_US * 1e-6 * calls for p in model]
    times = ", ".join("%.4f s measured / %.4f s fitted" % (y, y) for y in measured)
    hw["source"] = ("...; forward + backward fitted as compute_overhead 9.999 x the cost model's + layer_overhead_us 1 "
                    "per layer per micro-batch (%s); at the first ..." % times)
    path = os.path.join(TMP, "hw.json")
    hardware_json.write(path, hw)
    compute_fit.refit(path)
    got = json.load(open(path))
    assert abs(got["compute_overhead"] - FACTOR) < 2e-3, got["compute_overhead"]
    assert abs(got["layer_overhead_us"] - FIXED_US) < 10, got["layer_overhead_us"]
    assert got["compute_cv"] == hw["compute_cv"] and got["source"] == hw["source"], "only the two fitted fields change"
    # Without the landing the fixed cost takes it in: the fit must see the sink's copy.
    fused = [compute_fit.model_seconds(bare_path, ctx, mb, "fused") for ctx, mb in compute_fit.SHAPES]
    assert all(f < p for f, p in zip(fused, model)), (fused, model)
    _, fixed_fused = compute_fit.fit(fused, measured)
    assert fixed_fused * 1e6 > 1.05 * FIXED_US, fixed_fused
    hw["source"] = "no fit recorded"
    hardware_json.write(path, hw)
    try:
        compute_fit.refit(path)
        raise AssertionError("a description without measured times was refitted")
    except SystemExit as e:
        want = f"compute_fit: {path}: source records 0 measured shape times, expected 3"
        assert str(e).startswith(want), str(e)
    check_passes(model, measured, committed())
    check_probe(model, measured)
    print("compute_fit_test: PASS")


def check_probe(model, measured):
    """The fit with a measured fixed cost per layer call: the factor alone beside it."""
    calls = compute_fit.DEPTH * compute_fit.M
    # By hand: model 1 and 2 s, measured 2 and 3 s, 1 s of fixed cost a shape: exactly factor 1.
    assert compute_fit.fit([1.0, 2.0], [2.0, 3.0], 1.0 / calls) == (1.0, 1.0 / calls)
    # By hand, not exact: model 1 and 2 s, measured 2 and 5 s, fixed 1 s: p/y 1/2 and 2/5, 1 - c/y 1/2 and 4/5:
    # (1/4 + 8/25) / (1/4 + 4/25) = 0.57 / 0.41.
    got, _ = compute_fit.fit([1.0, 2.0], [2.0, 5.0], 1.0 / calls)
    assert abs(got - 0.57 / 0.41) < 1e-12, got
    # The true fixed cost gives back the true factor; none, the factor alone takes the fixed cost in.
    factor, fixed = compute_fit.fit(model, measured, FIXED_US * 1e-6)
    assert abs(factor - FACTOR) < 1e-9 and fixed == FIXED_US * 1e-6, (factor, fixed)
    # Without it the factor is a weighted mean of the shapes' measured/model ratios, FACTOR + fixed/model
    # each: above FACTOR by at least the fixed cost's share of the longest shape, at most of the shortest
    # (how much depends on the committed box's speed: a 3x slower box's shapes leave it a third the share).
    factor0, fixed0 = compute_fit.fit(model, measured, 0.0)
    fixed_s = FIXED_US * 1e-6 * calls
    low, high = FACTOR + fixed_s / max(model), FACTOR + fixed_s / min(model)
    assert low * (1 - 1e-9) < factor0 < high * (1 + 1e-9) and fixed0 == 0.0, (factor0, low, high, fixed0)
    # A fixed cost longer than the runs: one line, no factor.
    try:
        compute_fit.fit(model, measured, max(measured))
        raise AssertionError("a fixed cost longer than the runs was fitted")
    except SystemExit as e:
        assert str(e).startswith("compute_fit: a fixed ") and "leaves no time for the work" in str(e), str(e)
    # refit takes the probe from the description: a wrong two-term fit recorded, the probe's value kept.
    hw = committed()
    times = ", ".join("%.4f s measured / %.4f s fitted" % (y, y) for y in measured)
    hw["source"] = ("...; forward + backward fitted as compute_overhead 9.999 x the cost model's + layer_overhead_us 1 "
                    "per layer per micro-batch (%s); at the first ..." % times)
    hw["layer_overhead_probe_us"] = 2 * FIXED_US
    path = os.path.join(TMP, "probe.json")
    hardware_json.write(path, hw)
    compute_fit.refit(path)
    got = json.load(open(path))
    want, _ = compute_fit.fit(model, measured, 2 * FIXED_US * 1e-6)
    assert got["layer_overhead_us"] == 2 * FIXED_US and abs(got["compute_overhead"] - want) < 1e-4, got
    assert want < FACTOR, want  # the probe's larger fixed cost leaves less to the factor
    # passes too: the six runs a shape (check_passes' rows) fitted beside the probe.
    before = ("from 4 1-rank runs at each of 3 micro-batch shapes (one per core at once; the shapes in turn, twice, "
              "each profiling the same tokens), forward + backward fitted as compute_overhead 9.000 x the cost "
              "model's + layer_overhead_us 1 per layer per micro-batch (1.0 s measured / 1.0 s fitted)")
    hardware_json.write(path, dict(hw, source=before))
    compute_fit.passes(path, os.path.join(TMP, "rows.txt"))
    got = json.load(open(path))
    assert got["layer_overhead_us"] == 2 * FIXED_US and abs(got["compute_overhead"] - want) < 1e-3, got


def profile(seconds, step_s):
    """A PROFILE line whose forward + backward take `seconds` of a `step_s` step (the rest optimizer)."""
    assert seconds < step_s, (seconds, step_s)  # a negative optimizer share would not parse
    fwd = 100 * seconds / step_s / 3
    return (f"rank=0 steps=8 step_s={step_s} forward={fwd:.6f}% backward={2 * fwd:.6f}% backward_input=0.0% "
            f"backward_weight=0.0% recompute=0.0% optimizer={100 - 3 * fwd:.6f}%")


def check_passes(model, measured, base):
    # Two runs a pass, three passes; each shape's six runs average to `measured`. The step is longer than
    # any run's forward + backward whatever the box's speed (a fixed 2 s step broke with r141's calibration).
    step_s = 2.0 * max(measured)
    spread = (-0.1, 0.1, -0.05, 0.05, 0.02, -0.02)
    rows = "".join(f"{p}|" + ";".join(profile(y * (1 + d), step_s) for d in spread) + "\n"
                   for p, y in zip(model, measured))
    rows_path = os.path.join(TMP, "rows.txt")
    with open(rows_path, "w") as f:
        f.write(rows)
    before = ("measured by ./zpp calibrate; from 4 1-rank runs at each of 3 micro-batch shapes (one per core at "
              "once; the shapes in turn, twice, each profiling the same tokens), forward + backward fitted as "
              "compute_overhead 9.000 x the cost model's + layer_overhead_us 1 per layer per micro-batch (1.0 s "
              "measured / 1.0 s fitted); at the first (mean 1 tokens/s)")
    hw = dict(base, source=before, compute_overhead=9.0, layer_overhead_us=1.0)
    path = os.path.join(TMP, "passes.json")
    hardware_json.write(path, hw)
    compute_fit.passes(path, rows_path)
    got = json.load(open(path))
    assert abs(got["compute_overhead"] - FACTOR) < 2e-3, got["compute_overhead"]
    assert abs(got["layer_overhead_us"] - FIXED_US) < 10, got["layer_overhead_us"]
    assert {k: v for k, v in got.items() if k not in ("source", "compute_overhead", "layer_overhead_us")} == \
        {k: v for k, v in hw.items() if k not in ("source", "compute_overhead", "layer_overhead_us")}
    src = got["source"]
    assert src.startswith("measured by ./zpp calibrate; from 6 1-rank runs at each of 3 micro-batch shapes (one per "
                          "core at once; the shapes in turn, twice, and once more after the pairs fits"), src
    assert src.endswith("at the first (mean 1 tokens/s)"), src
    assert "compute_overhead %.3f x the cost model's + layer_overhead_us %.0f" % (FACTOR, FIXED_US) in src, src
    # What --history reads back: the three shapes' measured times, now the six runs' means.
    hardware_json.write(path, dict(got, source=src))
    compute_fit.refit(path)  # the times it recorded give the same fit again
    again = json.load(open(path))
    assert abs(again["compute_overhead"] - FACTOR) < 2e-3 and abs(again["layer_overhead_us"] - FIXED_US) < 10, again
    hardware_json.write(path, dict(hw, source="no fit recorded"))
    try:
        compute_fit.passes(path, rows_path)
        raise AssertionError("a description without a two-pass fit was rewritten")
    except SystemExit as e:
        assert str(e) == f"compute_fit: passes: {path}'s source holds no two-pass compute fit to replace", str(e)
    oversubscribed()


def oversubscribed():
    """compute_fit.oversubscribed_factor: each set of twice as many runs against the sets around it."""
    def sets(times):  # one PROFILE line per run; forward + backward 95% of the step
        return ";".join("rank=0 step_s=%.6f forward=35.0%% backward=60.0%% backward_input=0.0%% backward_weight=0.0%% "
                        "recompute=0.0%% optimizer=5.0%%" % t for t in times)
    slow = 1.12
    # A box slowing 3% a set (sets alone at positions 0, 2, 4, 6; oversubscribed at 1, 3, 5): a set against
    # its neighbours' mean is exact under a linear drift; against the first set alone they would read 1.14-1.20.
    speed = [1 + 0.015 * pos for pos in range(7)]
    alone = [sets([0.5 * speed[pos]] * 2) for pos in (0, 2, 4, 6)]
    over = [sets([2 * slow * 0.5 * speed[pos]] * 4) for pos in (1, 3, 5)]
    factor, ratios = compute_fit.oversubscribed_factor(alone, over)
    assert abs(factor - slow) < 1e-9 and all(abs(r - slow) < 1e-9 for r in ratios), (factor, ratios)
    # One disturbed set (its runs 30% slower) does not move the median.
    factor, ratios = compute_fit.oversubscribed_factor(alone, over[:2] + [sets([1.3 * 2 * slow * 0.5 * speed[5]] * 4)])
    assert abs(factor - slow) < 1e-9 and abs(ratios[2] - 1.3 * slow) < 1e-9, (factor, ratios)
    # Half a core cannot compute faster than a whole one: ratios under 1 read 1.
    assert compute_fit.oversubscribed_factor([sets([1.0])] * 2, [sets([1.8])])[0] == 1.0
    try:
        compute_fit.oversubscribed_factor(alone[:3], over)
        raise AssertionError("three sets alone around three oversubscribed were accepted")
    except ValueError as e:
        assert "3 sets alone around 3 oversubscribed" in str(e), str(e)
    # PROFILE lines that disagree in their fields (a run without the split backward): one line naming both.
    try:
        compute_fit.mean_profile("rank=0 step_s=1.0 forward=30.0% backward=60.0%;rank=1 step_s=1.0 forward=30.0%")
        raise AssertionError("PROFILE lines with different fields were averaged")
    except SystemExit as e:
        assert str(e) == ("compute_fit: PROFILE line 1 has fields forward,rank,step_s, expected the same as line 0's "
                          "backward,forward,rank,step_s"), str(e)
    try:
        compute_fit.mean_profile(";\n")
        raise AssertionError("an empty PROFILE text was averaged")
    except SystemExit as e:
        assert str(e).startswith("compute_fit: PROFILE: no line in"), str(e)


if __name__ == "__main__":
    main()
