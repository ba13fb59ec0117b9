"""The peer for `./zpp bench zero3-vs-fsdp2`: the same GPT as models/gpt.cc, trained with PyTorch
FSDP2 (fully_shard per block and at the root, gloo on CPU, one intra-op thread per rank), on the
same data as zeropp's train CLI (models/byte_corpus.cc's sampling of /usr/share/common-licenses,
reproduced here), from the same initial weights (the same seed, drawn in the same order), with
fused AdamW and gradient clipping at 1.0: its losses can be compared with zeropp's step by step.

Runs under ./zpp run (torchrun environment). Rank 0 prints:
  BENCH framework=fsdp2 ranks=N tokens_per_s=X wire_bytes_per_rank_step=W step_s=S step_sd_s=D
  DONE steps=... first_loss=A last_loss=B tokens_per_s=C peak_rss_mb=D
Never a zeropp dependency.
"""
import argparse
import os
import statistics
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


MASK = (1 << 64) - 1


def mix(x):  # splitmix64 finaliser, as models/byte_corpus.cc
    x = (x + 0x9E3779B97F4A7C15) & MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


def corpus(directory="/usr/share/common-licenses"):
    names = sorted(os.path.join(directory, n) for n in os.listdir(directory))
    return torch.frombuffer(bytearray(b"".join(open(n, "rb").read() for n in names if os.path.isfile(n))),
                            dtype=torch.uint8).long()


def micro_batch(data, step, micro, dp_rank, dp_size, batch, num_micro, context, seed):
    """ByteCorpus::MicroBatch: the same sequences for the same (step, micro-batch, rank)."""
    glob = batch * dp_size * num_micro
    starts = []
    for i in range(batch):
        j = (micro * dp_size + dp_rank) * batch + i
        starts.append(mix(seed ^ mix(step * glob + j)) % (len(data) - context - 1))
    idx = torch.tensor(starts).unsqueeze(1) + torch.arange(context + 1)
    seq = data[idx]
    return seq[:, :-1], seq[:, 1:]


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
        # Tied, as in models/gpt.cc, and built on the meta device so that it draws no random
        # numbers: the initialisation below then sees the generator where models/gpt.cc's does.
        self.head = nn.Linear(width, vocab, bias=False, device="meta")
        self.head.weight = self.wte.weight
        for name, prm in self.named_parameters():  # GPT-2 initialisation, as in models/gpt.cc
            if "ln" in name:
                continue
            if name.endswith("bias"):
                nn.init.zeros_(prm)
            else:
                nn.init.normal_(prm, 0.0, 0.02)
        # models/gpt.cc walks LibTorch's parameter list, which names the tied tensor twice (as
        # head.weight last), so the shared table is drawn once more at the end.
        nn.init.normal_(self.wte.weight, 0.0, 0.02)

    def forward(self, ids):
        x = self.wte(ids) + self.wpe(torch.arange(ids.size(1)))
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln_f(x))


def main():
    p = argparse.ArgumentParser()
    for name, default in [("vocab", 256), ("context", 128), ("width", 768), ("depth", 8), ("heads", 12),
                          ("micro-batch", 2), ("steps", 6), ("bench-warmup", 1), ("seed", 1234)]:
        p.add_argument("--" + name, type=int, default=default)
    p.add_argument("--lr", type=float, default=3e-3)  # the train CLI's defaults
    p.add_argument("--weight-decay", type=float, default=0.01)
    a, _ = p.parse_known_args()
    torch.set_num_threads(1)
    import resource
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    with open("/proc/self/status") as f:  # the process before any training state
        idle_mb = next(int(l.split()[1]) for l in f if l.startswith("VmRSS:")) / 1024.0
    torch.manual_seed(a.seed)
    model = Gpt(a.vocab, a.context, a.width, a.depth, a.heads)
    for b in model.blocks:
        fully_shard(b)
    fully_shard(model)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=a.weight_decay, fused=True)
    data = corpus()
    t0, lo0, first, times = None, 0, None, []
    for step in range(a.steps):
        if step == a.bench_warmup:
            dist.barrier()
            lo0, t0 = lo_tx_bytes(), time.perf_counter()
        ts = time.perf_counter()
        x, y = micro_batch(data, step, 0, rank, world, a.micro_batch, 1, a.context, a.seed)
        loss = F.cross_entropy(model(x).reshape(-1, a.vocab), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad()
        mean_loss = loss.detach().clone()
        dist.all_reduce(mean_loss)
        if first is None:
            first = mean_loss.item() / world
        if os.environ.get("ZPP_PEER_LOSSES") and rank == 0:
            print(f"step {step + 1} loss {mean_loss.item() / world:.4f}", flush=True)
        if step >= a.bench_warmup:
            times.append(time.perf_counter() - ts)
    dist.barrier()
    secs = time.perf_counter() - t0
    lo1 = lo_tx_bytes()
    timed = a.steps - a.bench_warmup
    tokens = a.micro_batch * a.context * world * timed
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    rss = torch.tensor([peak_mb, peak_mb - idle_mb])
    dist.all_reduce(rss, op=dist.ReduceOp.MAX)
    if rank == 0:
        print(f"BENCH framework=fsdp2 ranks={world} tokens_per_s={tokens / secs:.1f} "
              f"wire_bytes_per_rank_step={(lo1 - lo0) / timed / world:.0f} step_s={statistics.mean(times):.4f} "
              f"step_sd_s={statistics.stdev(times) if len(times) > 1 else 0:.4f} peak_rss_net_mb={rss[1].item():.0f}",
              flush=True)
    if rank == 0:
        print(f"DONE steps={a.steps} first_loss={first:.4f} last_loss={mean_loss.item() / world:.4f} "
              f"tokens_per_s={tokens / secs:.0f} peak_rss_mb={rss[0].item():.0f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
