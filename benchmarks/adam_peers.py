"""Peers for `./zpp bench adam`: torch.optim.AdamW (foreach, and fused where CPU supports it) and
DeepSpeed's DeepSpeedCPUAdam (DS_ACCELERATOR=cpu), on one flat fp32 tensor of N parameters, all
threads. Prints "PEER name=... mparams_per_s=..." lines. Runs in the benchmark's own venv."""
import os
import sys
import time

os.environ.setdefault("DS_ACCELERATOR", "cpu")
import torch

n = int(sys.argv[1]) if len(sys.argv) > 1 else 1 << 26
torch.set_num_threads(os.cpu_count())


def bench(name, make_opt, reps=4):
    p = torch.nn.Parameter(torch.full((n,), 0.5))
    p.grad = torch.full((n,), 0.01)
    opt = make_opt([p])
    best = 1e300
    for _ in range(reps):
        t0 = time.perf_counter()
        opt.step()
        best = min(best, time.perf_counter() - t0)
    print(f"PEER name={name} mparams_per_s={n / best / 1e6:.1f}", flush=True)


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
