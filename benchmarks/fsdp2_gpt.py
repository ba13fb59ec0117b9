"""The peer for `./zpp bench zero3-vs-fsdp2`: the same GPT as models/gpt.cc, trained with PyTorch
FSDP2 (fully_shard per block and at the root, gloo on CPU, one intra-op thread per rank).

Runs under ./zpp run (torchrun environment). Rank 0 prints one line:
  BENCH framework=fsdp2 ranks=N tokens_per_s=X wire_bytes_per_rank_step=W
Installed by the benchmark script into its own virtual environment; never a zeropp dependency.
"""
import argparse
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.fsdp import fully_shard


def lo_tx_bytes():
    with open("/proc/net/dev") as f:
        for line in f:
            if ":" in line and line.split(":")[0].strip() == "lo":
                return int(line.split(":")[1].split()[8])
    return -1


class Attention(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        h = lambda y: y.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        y = F.scaled_dot_product_attention(h(q), h(k), h(v), is_causal=True)
        return self.proj(y.transpose(1, 2).contiguous().view(b, t, c))


class Block(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attn = Attention(width, heads)
        self.fc, self.fc_out = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.fc_out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class Gpt(nn.Module):
    def __init__(self, vocab, context, width, depth, heads):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, width), nn.Embedding(context, width)
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(depth))
        self.ln_f = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.wte.weight  # tied, as in models/gpt.cc
        for name, prm in self.named_parameters():  # GPT-2 initialisation, as in models/gpt.cc
            if "ln" in name:
                continue
            if name.endswith("bias"):
                nn.init.zeros_(prm)
            else:
                nn.init.normal_(prm, 0.0, 0.02)

    def forward(self, ids):
        x = self.wte(ids) + self.wpe(torch.arange(ids.size(1)))
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln_f(x))


def main():
    p = argparse.ArgumentParser()
    for name, default in [("vocab", 256), ("context", 128), ("width", 768), ("depth", 8), ("heads", 12),
                          ("micro-batch", 2), ("steps", 6), ("bench-warmup", 1)]:
        p.add_argument("--" + name, type=int, default=default)
    p.add_argument("--lr", type=float, default=3e-4)
    a, _ = p.parse_known_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(1234)
    model = Gpt(a.vocab, a.context, a.width, a.depth, a.heads)
    for b in model.blocks:
        fully_shard(b)
    fully_shard(model)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=0.01)
    g = torch.Generator().manual_seed(rank)
    t0, lo0 = None, 0
    for step in range(a.steps):
        if step == a.bench_warmup:
            dist.barrier()
            lo0, t0 = lo_tx_bytes(), time.perf_counter()
        x = torch.randint(a.vocab, (a.micro_batch, a.context), generator=g)
        y = torch.randint(a.vocab, (a.micro_batch, a.context), generator=g)
        loss = F.cross_entropy(model(x).view(-1, a.vocab), y.view(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad()
    dist.barrier()
    secs = time.perf_counter() - t0
    lo1 = lo_tx_bytes()
    timed = a.steps - a.bench_warmup
    if rank == 0:
        tokens = a.micro_batch * a.context * world * timed
        print(f"BENCH framework=fsdp2 ranks={world} tokens_per_s={tokens / secs:.1f} "
              f"wire_bytes_per_rank_step={(lo1 - lo0) / timed / world:.0f}", flush=True)
    import resource
    rss = torch.tensor([resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0])
    dist.all_reduce(rss, op=dist.ReduceOp.MAX)
    if rank == 0:
        print(f"DONE steps={a.steps} first_loss=0 last_loss={loss.item():.4f} tokens_per_s={tokens / secs:.0f} "
              f"peak_rss_mb={rss.item():.0f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
