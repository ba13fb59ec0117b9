#!/usr/bin/env python3
"""planner_local.py: the planner's predictions beside the measurements taken on this machine.

Reads the output of `./zpp bench zeropp-vs-3d` (both link shapings) and `./zpp bench pipeline`
(pp=4 and pp=2), taken in the same invocation as the calibration (benchmarks/planner-local.sh keeps
them in its --fresh output), predicts every layout with
bazel-bin/tools/plan --predict on the calibrated description (scheduler/planner/hardware/
cpu-local.json, from ./zpp calibrate, which never looks at these runs), and prints
prediction/measurement per layout; RESULT lines give the share within 10% and the mean error, for
step time and (zeropp-vs-3d) peak memory, against the peak tensor bytes (what the memory model
predicts: what training holds, as a GPU's peak allocated bytes) and against peak RSS (that plus what
the allocators keep after a free).
With --speed FILE (its "speed_reference NAME fb_s=S" lines: the calibration's third shape run again
right after the calibration and after each bench, tools/reference_runs.sh), also how fast the box
computed during each bench against the calibration, and, as a diagnostic only, how many rows would
be within 10% if each prediction were scaled by that factor (the RESULT lines never are).
Where zeropp-vs-3d ran its layouts more than once (--rounds), each layout's time in every round too,
and how many layouts' rounds agree within 10% (a diagnostic of the measurement's repeatability).
With --rows-tsv FILE, also writes each step-time row (layout, measured_s, predicted_s, and its rounds'
times, comma-separated, where it was measured in rounds) there, tab-separated
(benchmarks/planner_local_history.py reads them).
  planner_local.py [--hardware JSON] --vs3d FILE --pipeline FILE [--speed FILE] [--rows-tsv FILE]
"""
import argparse
import json
import math
import re
import statistics
import subprocess
import sys

PLAN = "bazel-bin/tools/plan"
HW = "scheduler/planner/hardware/cpu-local.json"  # the default of --hardware


MIB = 1048576 / 1e6  # /proc's kB are KiB: RSS in MiB to MB


def predict(hw_path, args, plan=PLAN, who="planner_local"):
    """plan --predict's key=value fields (its PREDICT line's last where lines share a key); a plan
    that fails ends the caller with one line naming it, the arguments and plan's own message."""
    out = subprocess.run([plan, "--predict", "--hardware", hw_path] + args, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{who}: plan {' '.join(args)}: {out.stderr.strip()}")
    return {k: v for k, v in re.findall(r"(\w+)=(\S+)", out.stdout)}


def hardware(hw_path):
    with open(hw_path) as f:
        return json.load(f)


# The zeropp-vs-3d bench's GPT on 4 ranks, global batch 32 (the planner flags every VS3D row adds to).
VS3D_MODEL = ("--hidden 256 --layers 4 --heads 4 --vocab 256 --seq 128 --cpu-attention --gpus 4 "
              "--global-batch 32").split()


def unshaped_link_flags(hw):
    """The plan flags for the unshaped runs' link between the two network namespaces (a veth pair),
    as ./zpp calibrate measured it, loaded and idle; older descriptions: the loopback's bandwidth."""
    veth = hw.get("veth_unshaped")
    if not veth:
        return ["--inter-gbps", str(hw["intra_node"]["bandwidth_gbps"])]
    flags = ["--inter-gbps", str(veth["bandwidth_gbps"]), "--inter-latency-us", str(veth["latency_us"])]
    if "wire_latency_us" in veth:  # wire-bound (tools/link_fit.py)
        flags += ["--inter-wire-latency-us", str(veth["wire_latency_us"])]
    veth_idle = hw.get("veth_unshaped_idle")  # measured idle too (descriptions from 2026-11-24 r29 on)
    if veth_idle:
        flags += ["--inter-idle-gbps", str(veth_idle["bandwidth_gbps"]),
                  "--inter-idle-latency-us", str(veth_idle["latency_us"])]
    return flags


VS3D = {  # bench row -> planner layout flags (global batch 32, 8 micro-batches)
    "zero3_z4": "--design zero3 --zero 4 --micro-batch 1",
    "fsdp_in_pp_1f1b_u1": "--design pipe-fsdp --schedule 1f1b --pp 2 --zero 2 --micro-batch 2",
    "zeropp_pp2_z2_u2": "--design zeropp --pp 2 --zero 2 --v 1 --u 2 --micro-batch 2 --recompute",
    "zeropp_pp2_z2_u4": "--design zeropp --pp 2 --zero 2 --v 1 --u 4 --micro-batch 2 --recompute",
    "zeropp_pp2_z2_u8": "--design zeropp --pp 2 --zero 2 --v 1 --u 8 --micro-batch 2 --recompute",
    # zeropp's engine runs these (tools/train; the tp rows benchmarks/baseline_3d on it): its rank
    # order puts the replicas outermost, its gradients land through its sink (grad_accumulation sink).
    "pp2_dp2": "--design 3d --pp 2 --dp 2 --dp-outer --micro-batch 2 --grad-accumulation sink",
    "pp2_dp2_zero1": "--design 3d --pp 2 --dp 2 --zero1 --dp-outer --micro-batch 2 --grad-accumulation sink",
    "3d_tp2_pp2": "--design 3d --tp 2 --pp 2 --micro-batch 4 --grad-accumulation sink",
    "3d_tp2_pp2_sp": "--design 3d --tp 2 --sp --pp 2 --micro-batch 4 --grad-accumulation sink",
    "3d_tp2_dp2": "--design 3d --tp 2 --dp 2 --micro-batch 2 --grad-accumulation sink",
    "3d_tp2_dp2_zero1": "--design 3d --tp 2 --dp 2 --zero1 --micro-batch 2 --grad-accumulation sink",
}
# ZeroPP rows run the executor's default recomputation (every chunk but the last rank's last).
PIPE = {  # pipeline bench schedule -> layout flags (m = 8 micro-batches of 4 sequences)
    "gpipe": "--design 3d --schedule gpipe --grad-accumulation sink",
    "1f1b": "--design 3d --schedule 1f1b --grad-accumulation sink",
    "interleaved": "--design 3d --schedule interleaved --v 2 --grad-accumulation sink",
    "zb-h1": "--design 3d --schedule zb-h1 --grad-accumulation sink",
    "zeropp-u4": "--design zeropp --v 2 --u 4 --recompute",
    "zeropp-u8": "--design zeropp --v 2 --u 8 --recompute",
}


def speed_drift(path, t_err, n_vs3d):
    """Prints the box's speed over the run (speed_reference lines) and the diagnostic rescaling."""
    ref = {k: float(v) for k, v in re.findall(r"speed_reference (\w+) fb_s=([0-9.]+)", open(path).read())}
    if not {"calibration", "after_vs3d", "after_pipeline"} <= ref.keys():
        print("# speed references: none in this output (--fresh runs before r22 did not take them)")
        return
    cal = ref["calibration"]
    # A bench's factor: the mean of the references before and after it, over the calibration's.
    vs3d = (cal + ref["after_vs3d"]) / 2 / cal
    pipe = (ref["after_vs3d"] + ref["after_pipeline"]) / 2 / cal
    print(f"# the box's speed (the calibration's third shape, forward + backward s): {cal:.4f} after the calibration, "
          f"{ref['after_vs3d']:.4f} after zeropp-vs-3d, {ref['after_pipeline']:.4f} after pipeline; the benches ran "
          f"{vs3d:.3f}x and {pipe:.3f}x the calibration's time")
    scaled = [(1 + e) * (vs3d if k < n_vs3d else pipe) - 1 for k, e in enumerate(t_err)]
    within = sum(abs(e) <= 0.10 for e in scaled)
    print(f"# diagnostic, not the RESULT: with each prediction scaled by its bench's factor, {within} of "
          f"{len(scaled)} within 10%, mean |error| {sum(abs(e) for e in scaled) / len(scaled):.3f}")


STEAL_FREE_PCT = 1.0  # a round with less of the box's CPU time stolen by the host counts as undisturbed
ROUND = re.compile(r"# round (\d+) of (\d+), run \d+ of \d+: (\S+) \((\w+)\) ([0-9.]+) tok/s(?:, steal ([0-9.]+)%)?")


def round_times(path):
    """zeropp-vs-3d --rounds N (its "# round" lines): each layout's step time (s) in each round, and the
    share of the box's CPU time (%) the host stole during each round where the lines carry it."""
    per, steal = {}, {}
    for line in open(path):
        m = ROUND.search(line)
        if m:
            per.setdefault(f"{m.group(3)} ({m.group(4)})", []).append(32 * 128 / float(m.group(5)))
            if m.group(6) is not None:
                steal.setdefault(f"{m.group(3)} ({m.group(4)})", []).append(float(m.group(6)))
    return per, steal


def noise_floor(groups):
    """The measurement's own noise, from layouts measured more than once (groups: each one's times):
    the pooled standard deviation s of ln(time) around each layout's mean over its rounds, the noise
    s / sqrt(k) of the mean of k rounds (the reported time is their median: for two, their mean; for
    three, its noise is about 1.16x that, so the figure is a lower bound), and the share of rows a
    planner without error would put within 10% with that noise alone (normal in ln(time)).
    None without a layout measured twice."""
    groups = [g for g in groups if len(g) > 1]
    if not groups:
        return None
    dev = sum((math.log(t) - statistics.fmean(map(math.log, g))) ** 2 for g in groups for t in g)
    s = math.sqrt(dev / sum(len(g) - 1 for g in groups))

    def within(sd):  # prediction/measurement = exp(-e) within [0.9, 1.1]: e within [-ln 1.1, -ln 0.9]
        e = statistics.NormalDist(0, sd) if sd > 0 else None
        return e.cdf(-math.log(0.9)) - e.cdf(-math.log(1.1)) if e else 1.0

    share = statistics.fmean(within(s / math.sqrt(len(g))) for g in groups)
    return s, s / math.sqrt(statistics.fmean(len(g) for g in groups)), share


def rounds_spread(path, predicted):
    """With zeropp-vs-3d --rounds N, N > 1: each layout's step time in each round beside the prediction.
    A diagnostic of the measurement's own repeatability: where a layout's rounds differ by more than
    10%, no prediction can be within 10% of every one of them; and noise_floor's line."""
    per, steal = round_times(path)
    per = {k: v for k, v in per.items() if len(v) > 1 and k in predicted}
    if not per:
        return
    print("# zeropp-vs-3d, every round: step time (s) per round, spread (slowest / fastest), prediction / each round")
    agree = every = some = 0
    for name, ts in per.items():
        ratios = [predicted[name] / t for t in ts]
        spread = max(ts) / min(ts)
        agree += spread <= 1.10
        every += all(abs(q - 1) <= 0.10 for q in ratios)
        some += any(abs(q - 1) <= 0.10 for q in ratios)
        stolen = f"  steal% {' '.join(f'{x:4.1f}' for x in steal[name])}" if len(steal.get(name, [])) == len(ts) else ""
        print(f"{name:38s} {' '.join(f'{t:7.4f}' for t in ts)}  spread {spread:5.3f}  "
              f"pred/meas {' '.join(f'{q:5.3f}' for q in ratios)}{stolen}")
    n = len(per)
    print(f"# diagnostic, not the RESULT: {agree} of {n} layouts' rounds within 10% of each other; the prediction "
          f"within 10% of every round's time for {every} of {n}, of at least one round's for {some} of {n}")
    # The rounds the host took (almost) no CPU from: under STEAL_FREE_PCT of the box's CPU time stolen.
    clean = {name: [t for t, x in zip(ts, steal[name]) if x < STEAL_FREE_PCT] for name, ts in per.items()
             if len(steal.get(name, [])) == len(ts)}
    clean = {name: ts for name, ts in clean.items() if ts}
    if clean:
        within = sum(abs(predicted[name] / (sum(ts) / len(ts)) - 1) <= 0.10 for name, ts in clean.items())
        print(f"# diagnostic, not the RESULT: {len(clean)} of {n} layouts had a round with under {STEAL_FREE_PCT:g}% "
              f"of the CPU stolen; the prediction within 10% of those rounds' mean time for {within} of {len(clean)}")
    s, noise, share = noise_floor(per.values())
    print(f"# diagnostic, not the RESULT: the rounds' own spread, sd {s:.3f} in ln(step time) around each layout's "
          f"mean; the reported times' noise {noise:.3f}: a planner without error would put {share:.1%} of these "
          f"{n} rows within 10%, and all {n} in {share ** n:.1%} of runs (noise alone, independent)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hardware", default=HW)
    ap.add_argument("--vs3d", required=True)
    ap.add_argument("--pipeline", required=True)
    ap.add_argument("--speed")
    ap.add_argument("--rows-tsv")
    args = ap.parse_args()
    hw = hardware(args.hardware)
    idle_rss_mb = hw["idle_rss_mb"]
    unshaped = unshaped_link_flags(hw)
    reserved_mb = hw["memory"]["reserved_gb"] * 1e3
    rows, tp_rows = [], []
    vs = args.vs3d
    cols = {}
    for line in open(vs):
        f = line.split()
        if f[:2] == ["layout", "link"]:
            cols = {name: k for k, name in enumerate(f)}  # the table's header (columns vary by version)
            continue
        if len(f) < 6 or f[0] not in VS3D or f[1] not in ("shaped", "unshaped"):
            continue
        extra = [] if f[1] == "shaped" else unshaped
        p = predict(args.hardware, VS3D_MODEL + VS3D[f[0]].split() + extra)
        measured_s = 32 * 128 / float(f[cols["tok/s"]])
        # The bench reports peak RSS (MiB, as /proc counts it) net of an idle process (libtorch
        # loaded, nothing run); add the idle RSS ./zpp calibrate measured to compare with the
        # predicted total (MB). Tensors: the most bytes CPU tensors held at once (MB; the host's
        # counterpart of a GPU's peak allocated bytes), plus the reserved baseline the prediction
        # carries too; RSS adds what the allocators keep after a free.
        rss = (float(f[cols["rssMB"]]) + idle_rss_mb) * MIB
        tensor = float(f[cols["tensorMB"]]) + reserved_mb if "tensorMB" in cols else None
        rows.append((f"{f[0]} ({f[1]})", measured_s, float(p["step_s"]), rss, float(p["mem_mb"]), tensor))
        if "tp_wait_s" in cols and f[cols["tp_wait_s"]] != "-":
            tp_rows.append((f"{f[0]} ({f[1]})", float(f[cols["tp_wait_s"]]), float(p["tp_collectives_s"]),
                            measured_s, float(p["step_s"])))
    pipe = args.pipeline
    pp = None
    for line in open(pipe):
        m = re.search(r"pipeline bench: .*pp=(\d+)", line)
        if m:
            pp = int(m.group(1))
            continue
        f = line.split()
        if pp and len(f) > 3 and f[0] in PIPE:
            flags = (f"--hidden 256 --layers 8 --heads 8 --vocab 256 --seq 64 --cpu-attention --gpus {pp} --pp {pp} "
                     f"--devices-per-node {pp} --global-batch 32 --micro-batch 4 "
                     + PIPE[f[0]]).split()
            p = predict(args.hardware, flags)
            rows.append((f"pipeline pp{pp} {f[0]}", float(f[2]), float(p["step_s"]), None, None, None))
    n_vs3d = len(rows) - sum(name.startswith("pipeline ") for name, *_ in rows)
    print(f"# measurements: {vs}, {pipe}; hardware: {args.hardware}")
    print(f"# memory in MB (1e6 B); rss_MB: peak RSS; tensor_MB: peak tensor bytes + the reserved {reserved_mb:.1f} MB")
    print(f"{'layout':38s} {'measured_s':>10s} {'predicted_s':>11s} {'pred/meas':>9s}  {'rss_MB':>7s} {'tensor_MB':>9s} "
          f"{'pred_MB':>8s} {'pred/rss':>8s} {'pred/tensor':>11s}")
    t_err, m_err, a_err = [], [], []
    for name, ms, ps, mm, pm, tm in rows:
        t_err.append(ps / ms - 1)
        mem = ""
        if mm is not None:
            m_err.append(pm / mm - 1)
            if tm is not None:
                a_err.append(pm / tm - 1)
            tcol = f"{tm:9.1f}" if tm is not None else f"{'-':>9s}"
            tr = f"{pm / tm:11.3f}" if tm is not None else f"{'-':>11s}"
            mem = f"{mm:7.1f} {tcol} {pm:8.1f} {pm / mm:8.3f} {tr}"
        print(f"{name:38s} {ms:10.4f} {ps:11.4f} {ps / ms:9.3f}  {mem}")
    if args.rows_tsv:
        with open(args.rows_tsv, "w") as out:
            per, _ = round_times(vs)
            out.writelines(f"{name}\t{ms:.6f}\t{ps:.6f}\t{','.join(f'{t:.6f}' for t in per.get(name, []))}\n"
                           for name, ms, ps, *_ in rows)
    if tp_rows:
        # Where a 3D row's step time goes wrong: its TP collectives (measured: the ranks' mean wall
        # time waiting in them) or the rest of the step.
        print("# 3D rows: TP collectives per step (s), measured wait and predicted; the rest of the step likewise")
        print(f"{'layout':38s} {'tp_meas':>8s} {'tp_pred':>8s} {'pred/meas':>9s} {'rest_meas':>9s} {'rest_pred':>9s} {'pred/meas':>9s}")
        for name, tm, tpred, ms, ps in tp_rows:
            print(f"{name:38s} {tm:8.4f} {tpred:8.4f} {tpred / tm:9.3f} {ms - tm:9.4f} {ps - tpred:9.4f} "
                  f"{(ps - tpred) / (ms - tm):9.3f}")
    if args.speed:
        speed_drift(args.speed, t_err, n_vs3d)
    rounds_spread(vs, {name: ps for name, _, ps, *_ in rows})
    for label, errs in (("step_time", t_err), ("peak_memory_tensors", a_err), ("peak_memory_rss", m_err)):
        if not errs:
            continue
        within = sum(abs(e) <= 0.10 for e in errs) / len(errs)
        mean = sum(abs(e) for e in errs) / len(errs)
        print(f"# {label}: {len(errs)} layouts, mean |error| {mean:.3f}, worst {max(abs(e) for e in errs):.3f}")
        print(f"RESULT planner-local {label}_share_within_10pct={within:.3f} fraction reference=1.0 "
              f"ratio={within:.3f} target=1.0 {'MET' if within >= 1.0 else 'MISSED'}")


if __name__ == "__main__":
    main()
