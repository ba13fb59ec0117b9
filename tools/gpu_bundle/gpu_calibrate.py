"""gpu_calibrate.py: measures one GPU for the planner's hardware description, as ./zpp calibrate
measures the CPU box: the description's datasheet peaks stay, the efficiencies the planner applies to
them are measured here instead of set by hand.

  python3 gpu_calibrate.py --base h100-80gb-ib400x8.json --out measured.json [--quick] [--device cuda]

Measured, each printed as a GPU_CALIBRATE line:
  - matmul: bf16 GEMMs at square (1k-8k) and transformer shapes (8192 tokens x N x K), each's
    throughput over the datasheet peak; fitted as max_efficiency x prod(d / (d + half_dim)) over
    M, N, K (the cost model's curve, scheduler/planner/cost_model.cc), half_dim by grid,
    max_efficiency by least squares, both on relative error;
  - matmul.table: a linear layer's three GEMMs (forward addmm(b, x, W^T), input gradient dy W,
    weight gradient dy^T x) on a grid of tokens x in x out, each over the datasheet peak, as ./zpp
    calibrate measures a CPU box (benchmarks/linear_grid); where present the cost model interpolates
    it instead of the curve (the curve stays in the file, and its fit is printed as a diagnostic);
  - attention_efficiency: causal scaled_dot_product_attention (PyTorch picks its flash kernel), forward
    and backward at head dim 128, counted as the planner counts it (forward 4*b*s^2*h/2 FLOPs,
    backward 2.5x the forward);
  - memory.efficiency: a 1 GiB device-to-device copy (read + write counted) over the datasheet bandwidth;
  - memory.elementwise_efficiency: a transformer layer's unfused element-wise kernels as eager PyTorch
    runs them (layer norm and its backward, GELU and its backward, the residual add, a dropout-style
    mask multiply) at 8192 tokens x hidden 1024-4096 (GELU over 4 x hidden), their values counted as
    the op profile counts them (inputs + the largest output, zeropp/cli/op_profile.cc ValuesMoved) at
    the dtype's bytes, over their summed time, over the datasheet bandwidth;
  - the host, for the offload model (this machine's, which need not be the base file's DGX):
    host.pcie_gbps from pinned 1 GiB copies each way (their harmonic mean: the step moves gradients
    down and parameters up), host.memory_bandwidth_gbps from a 1 GiB host copy on every core,
    host.adamw_mparams_per_s from torch's fused CPU AdamW over 2^26 parameters on every core (zeropp's
    own kernel ran within 5% of it on the 2-core box, benchmarks/results/adam-2026-11-22.txt), and
    host.capacity_gb from the machine's memory.
The rest of the description (links, device capacity, reserve) is the base file's. --device cpu with
--dtype fp32 runs the same code on a CPU (a smoke run: its numbers describe nothing the planner uses).
"""
import argparse
import json
import math
import os
import sys
import time


def timed(fn, device, repeats, inner=10, min_batch_s=0.0):
    """Seconds per call of fn: the best of `repeats` runs of `inner` back-to-back calls between two
    synchronisations (the host queues ahead as in training, so launch latency hides behind kernels
    that outlast it), after two warm-up calls. With min_batch_s, inner grows (up to 200) until one
    run lasts about that long, by one synchronised call's time: the synchronisations' own latency
    then weighs little even on short kernels."""
    if device == "cuda":
        import torch

    for _ in range(2):
        fn()
    if min_batch_s > 0:
        if device == "cuda":
            torch.cuda.synchronize()
        t = time.perf_counter()
        fn()
        if device == "cuda":
            torch.cuda.synchronize()
        inner = max(inner, min(200, math.ceil(min_batch_s / max(time.perf_counter() - t, 1e-9))))
    best = float("inf")
    for _ in range(repeats):
        if device == "cuda":
            torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(inner):
            fn()
        if device == "cuda":
            torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - t) / inner)
    return best


def sat(d, half):
    return d / (d + half)


def fit_matmul(points):
    """points: (m, n, k, measured efficiency). Returns (max_efficiency, half_dim, worst relative error)."""
    best = None
    for half in [x * 4.0 for x in range(0, 257)]:
        shape = [sat(m, half) * sat(n, half) * sat(k, half) for m, n, k, _ in points]
        # max_eff minimising sum((max_eff * s / e - 1)^2): closed form.
        num = sum(s / e for s, (_, _, _, e) in zip(shape, points))
        den = sum((s / e) ** 2 for s, (_, _, _, e) in zip(shape, points))
        eff = num / den
        err = sum((eff * s / e - 1) ** 2 for s, (_, _, _, e) in zip(shape, points))
        if best is None or err < best[0]:
            worst = max(abs(eff * s / e - 1) for s, (_, _, _, e) in zip(shape, points))
            best = (err, min(eff, 1.0), half, worst)
    return best[1], best[2], best[3]


PASSES = ("forward", "input_grad", "weight_grad")


def build_table(tokens, dims, seconds, peak):
    """matmul.table from seconds(pass, tokens, in, out) of one GEMM: each pass's achieved/peak, in the
    order the planner reads (scheduler/planner/hardware.h): tokens slowest, then in, then out."""
    table = {"tokens": list(tokens), "dims": list(dims)}
    for p in PASSES:
        table[p] = [float("%.4g" % (2.0 * t * i * o / seconds(p, t, i, o) / peak))
                    for t in tokens for i in dims for o in dims]
    return table


def measure_table(torch, dev, dtype, peak, reps, quick):
    """The three GEMMs of a linear layer on the grid (see the module's docstring), timed as training
    runs them (torch.nn.functional.linear's addmm, then autograd's two products)."""
    tokens = [512, 1024, 2048, 4096, 8192, 16384] if not quick else [32, 128]
    dims = [512, 1024, 2048, 4096, 8192, 16384, 32768] if not quick else [64, 256]
    cache = {}

    def seconds(p, t, i, o):
        if (t, i, o) not in cache:
            x = torch.randn(t, i, device=dev, dtype=dtype)
            w = torch.randn(o, i, device=dev, dtype=dtype)
            b = torch.randn(o, device=dev, dtype=dtype)
            dy = torch.randn(t, o, device=dev, dtype=dtype)
            runs = {"forward": lambda: torch.addmm(b, x, w.t()), "input_grad": lambda: dy @ w,
                    "weight_grad": lambda: dy.t() @ x}
            # At least 3 calls and about 2 ms a run: on 2026-11-28's lease 3 calls a run (before this)
            # gave a 1.2B step's GEMM shapes 0.70-0.75 of peak where its training step's GEMMs ran at
            # 0.81 by the op profile (gpu-2026-11-28.txt); how much of that the sync latency was, the
            # next lease measures.
            cache[(t, i, o)] = {q: timed(fn, dev, reps, inner=3, min_batch_s=2e-3) for q, fn in runs.items()}
            del x, w, b, dy
        return cache[(t, i, o)][p]

    table = build_table(tokens, dims, seconds, peak)
    effs = sorted(e for p in PASSES for e in table[p])
    print("GPU_CALIBRATE matmul.table: %d GEMMs (tokens %s x in, out %s, 3 passes), %.3f-%.3f of peak, median %.3f"
          % (len(effs), tokens, dims, effs[0], effs[-1], effs[len(effs) // 2]))
    return table


def measure_elementwise(torch, dev, dtype, reps, quick):
    """Achieved bytes per second of a layer's unfused element-wise kernels (see the module's docstring):
    returns (bytes, seconds) summed over the kernels and hidden sizes."""
    aten = torch.ops.aten
    tokens = 8192 if not quick else 256
    total_bytes = total_s = 0.0
    for h in ((1024, 2048, 4096) if not quick else (64, 128)):
        x = torch.randn(tokens, h, device=dev, dtype=dtype)
        r = torch.randn(tokens, h, device=dev, dtype=dtype)
        w = torch.randn(h, device=dev, dtype=dtype)
        b = torch.randn(h, device=dev, dtype=dtype)
        u = torch.randn(tokens, 4 * h, device=dev, dtype=dtype)
        gu = torch.randn(tokens, 4 * h, device=dev, dtype=dtype)
        _, mean, rstd = aten.native_layer_norm(x, [h], w, b, 1e-5)
        n, f, t = float(tokens * h), float(tokens * 4 * h), float(tokens)
        # (name, call, values moved: every input's elements + the largest output's)
        kernels = [
            ("layer_norm", lambda: aten.native_layer_norm(x, [h], w, b, 1e-5), n + 2 * h + n),
            ("layer_norm_backward", lambda: aten.native_layer_norm_backward(r, x, [h], mean, rstd, w, b,
                                                                           [True, True, True]), 2 * n + 2 * t + 2 * h + n),
            ("gelu", lambda: aten.gelu(u), 2 * f),
            ("gelu_backward", lambda: aten.gelu_backward(gu, u), 3 * f),
            ("add", lambda: torch.add(x, r), 3 * n),
            ("mul", lambda: torch.mul(x, r), 3 * n),
        ]
        for name, fn, values in kernels:
            sec = timed(fn, dev, reps)
            total_bytes += values * x.element_size()
            total_s += sec
            print("GPU_CALIBRATE elementwise %s %d x %d: %.0f GB/s" % (name, tokens, h, values * x.element_size() / sec / 1e9))
        del x, r, w, b, u, gu, mean, rstd
    return total_bytes, total_s


def measure_host(torch, dev, reps, quick):
    """The host's numbers for the offload model (see the module's docstring), as host.* fields."""
    cores = os.cpu_count() or 1
    torch.set_num_threads(cores)
    out = {"capacity_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9, 1)}
    n = (1 << 30) // 4 if not quick else (1 << 24)
    src = torch.empty(n, dtype=torch.float32).fill_(1)
    dst = torch.empty_like(src)
    t = timed(lambda: dst.copy_(src), "cpu", reps, inner=2)
    out["memory_bandwidth_gbps"] = round(2 * n * 4 / t / 1e9, 2)
    print("GPU_CALIBRATE host copy %d MiB on %d threads: %.1f GB/s (read + write)" % (n * 4 >> 20, cores,
                                                                                 out["memory_bandwidth_gbps"]))
    if dev == "cuda":
        pinned = src.pin_memory()
        on_dev = torch.empty(n, dtype=torch.float32, device="cuda")
        down = n * 4 / timed(lambda: pinned.copy_(on_dev, non_blocking=True), dev, reps, inner=2)
        up = n * 4 / timed(lambda: on_dev.copy_(pinned, non_blocking=True), dev, reps, inner=2)
        out["pcie_gbps"] = round(2 / (1 / down + 1 / up) / 1e9, 2)
        print("GPU_CALIBRATE pinned copies %d MiB: device-to-host %.1f GB/s, host-to-device %.1f GB/s"
              % (n * 4 >> 20, down / 1e9, up / 1e9))
        del pinned, on_dev
    del src, dst
    p = (1 << 26) if not quick else (1 << 20)
    w = torch.nn.Parameter(torch.zeros(p))
    w.grad = torch.full((p,), 1e-3)
    opt = torch.optim.AdamW([w], lr=1e-3, fused=True)
    t = timed(opt.step, "cpu", reps, inner=2)
    out["adamw_mparams_per_s"] = round(p / t / 1e6, 1)
    print("GPU_CALIBRATE host AdamW (torch fused, %d threads) over %d parameters: %.0f Mparam/s"
          % (cores, p, out["adamw_mparams_per_s"]))
    return out


def main():
    import torch  # here, so that the fit above is testable where torch is absent

    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True, help="the datasheet description to start from")
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "fp32"])
    ap.add_argument("--quick", action="store_true", help="small shapes, few repeats")
    a = ap.parse_args()
    if a.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("gpu_calibrate: --device cuda, but torch sees no CUDA device (expected a GPU)")
    with open(a.base) as f:
        hw = json.load(f)
    dtype = torch.bfloat16 if a.dtype == "bf16" else torch.float32
    peak = hw["peak_tflops"][a.dtype] * 1e12
    dev = a.device
    reps = 3 if a.quick else 10
    scale = 8 if a.quick else 1  # --quick: every dimension / 8

    points = []
    dims = [1024, 2048, 4096, 8192]  # transformer-sized: the planner's GEMMs are tokens x width
    model = [(8192, 3 * h, h) for h in (1024, 2048, 4096, 8192)] + [(8192, h, 4 * h) for h in (1024, 2048, 4096, 8192)]
    shapes = [(d, d, d) for d in dims] + model
    for m, n, k in shapes:
        m, n, k = max(16, m // scale), max(16, n // scale), max(16, k // scale)
        x = torch.randn(m, k, device=dev, dtype=dtype)
        w = torch.randn(k, n, device=dev, dtype=dtype)
        t = timed(lambda: x @ w, dev, reps)
        e = 2.0 * m * n * k / t / peak
        points.append((m, n, k, e))
        print("GPU_CALIBRATE gemm [%d x %d] x [%d x %d]: %.1f TFLOP/s, %.3f of peak" % (m, k, k, n, e * peak / 1e12, e))
        del x, w
    max_eff, half, worst = fit_matmul(points)
    print("GPU_CALIBRATE matmul max_efficiency=%.3f half_dim=%.0f (worst shape off the curve by %.1f%%)"
          % (max_eff, half, 100 * worst))
    table = measure_table(torch, dev, dtype, peak, 3 if not a.quick else 2, a.quick)

    attn = []
    heads, hd = (16, 128) if not a.quick else (2, 64)
    for s in ((2048, 4096, 8192) if not a.quick else (256, 512)):
        b = max(1, 16384 // s) if not a.quick else 1
        q, k, v = (torch.randn(b, heads, s, hd, device=dev, dtype=dtype, requires_grad=True) for _ in range(3))
        fwd = lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        g = torch.randn(b, heads, s, hd, device=dev, dtype=dtype)

        def both():  # input gradients only, nothing accumulated
            torch.autograd.grad(fwd(), (q, k, v), g)

        t_f, t_fb = timed(fwd, dev, reps), timed(both, dev, reps)
        flops_f = 4.0 * b * s * s * heads * hd * 0.5  # the planner's count: causal halves the product
        e = 3.5 * flops_f / t_fb / peak
        attn.append(e)
        print("GPU_CALIBRATE attention causal b=%d heads=%d s=%d d=%d: forward %.1f TFLOP/s, "
              "forward+backward %.3f of peak" % (b, heads, s, hd, flops_f / t_f / 1e12, e))
        del q, k, v, g
    attention_eff = sorted(attn)[len(attn) // 2]

    n = (1 << 30) // 4 if not a.quick else (1 << 24)
    src = torch.empty(n, device=dev, dtype=torch.float32)
    dst = torch.empty_like(src)
    t = timed(lambda: dst.copy_(src), dev, reps)
    bw = 2 * src.numel() * 4 / t
    mem_eff = bw / (hw["memory"]["bandwidth_gbps"] * 1e9)
    print("GPU_CALIBRATE copy %d MiB: %.0f GB/s (read + write), %.3f of the datasheet's %.0f GB/s"
          % (src.numel() * 4 >> 20, bw / 1e9, mem_eff, hw["memory"]["bandwidth_gbps"]))

    ew_bytes, ew_s = measure_elementwise(torch, dev, dtype, reps, a.quick)
    ew_eff = ew_bytes / ew_s / (hw["memory"]["bandwidth_gbps"] * 1e9)
    print("GPU_CALIBRATE elementwise kernels: %.0f GB/s, %.3f of the datasheet's %.0f GB/s"
          % (ew_bytes / ew_s / 1e9, ew_eff, hw["memory"]["bandwidth_gbps"]))

    host = measure_host(torch, dev, reps, a.quick)
    hw["host"].update(host)

    name = torch.cuda.get_device_name(0) if dev == "cuda" else "cpu"
    hw["name"] = hw["name"] + "-measured"
    hw["matmul"] = {"max_efficiency": round(max_eff, 4), "half_dim": half, "table": table}
    hw["attention_efficiency"] = round(min(attention_eff, 1.0), 4)
    hw["memory"]["efficiency"] = round(min(mem_eff, 1.0), 4)
    hw["memory"]["elementwise_efficiency"] = round(min(max(ew_eff, 1e-3), 1.0), 4)
    hw["source"] = (hw["source"] + " Efficiencies measured by gpu_calibrate.py on %s (%s, %s): matmul %.3f x "
                    "d/(d+%.0f) per dimension over %d GEMM shapes; causal flash attention %.3f of peak (median of %d "
                    "lengths); copy %.3f of the datasheet bandwidth; element-wise kernels %.3f of it; matmul.table: a linear layer's three GEMMs on "
                    "%d x %d x %d shapes (the cost model uses it in place of the curve); host (this machine's): %s."
                    % (name, time.strftime("%Y-%m-%d"), a.dtype, max_eff, half, len(points), attention_eff, len(attn),
                       mem_eff, ew_eff, len(table["tokens"]), len(table["dims"]), len(table["dims"]),
                       ", ".join("%s %s" % kv for kv in sorted(host.items()))))
    # hardware_json.py: beside this file in the bundle (pack.sh), in tools/ in the repository.
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:0] = [here, os.path.dirname(here)]
    import hardware_json

    hardware_json.write(a.out, hw)
    print("GPU_CALIBRATE wrote %s" % a.out)


if __name__ == "__main__":
    main()
