"""Peers for `./zpp bench adam`: torch.optim.AdamW (foreach, and fused where the CPU supports it)
and DeepSpeed's DeepSpeedCPUAdam (DS_ACCELERATOR=cpu), on one flat fp32 tensor of N parameters,
with the same repetitions and thread count as zeropp's run (best and median of REPS steps).
Prints "PEER name=... mparams_per_s=... median=..." lines. Runs in the benchmark's own venv."""
import os
import statistics
import sys
import time

os.environ.setdefault("DS_ACCELERATOR", "cpu")
import torch

n = int(sys.argv[1]) if len(sys.argv) > 1 else 1 << 26
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 10
threads = int(sys.argv[3]) if len(sys.argv) > 3 else os.cpu_count()
torch.set_num_threads(threads)


def bench(name, make_opt):
    p = torch.nn.Parameter(torch.full((n,), 0.5))
    p.grad = torch.full((n,), 0.01)
    opt = make_opt([p])
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        opt.step()
        times.append(time.perf_counter() - t0)
    print(f"PEER name={name} mparams_per_s={n / min(times) / 1e6:.1f} "
          f"median={n / statistics.median(times) / 1e6:.1f} reps={reps} threads={threads}", flush=True)


bench("torch_adamw_foreach", lambda ps: torch.optim.AdamW(ps, lr=1e-3, foreach=True))
try:
    bench("torch_adamw_fused", lambda ps: torch.optim.AdamW(ps, lr=1e-3, fused=True))
except (RuntimeError, TypeError) as e:
    print(f"PEER name=torch_adamw_fused unavailable ({e})", flush=True)
try:
    from deepspeed.ops.adam import DeepSpeedCPUAdam
    bench("deepspeed_cpu_adam", lambda ps: DeepSpeedCPUAdam(ps, lr=1e-3, adamw_mode=True))
except Exception as e:  # the op is compiled on first use; report why if it cannot be
    print(f"PEER name=deepspeed_cpu_adam unavailable ({type(e).__name__}: {e})", flush=True)
