#!/usr/bin/env python3
"""PyTorch distributed checkpoint (DCP) as the checkpoint benchmark's peer.

  dcp_peer.py DIR NPROC WIDTH DEPTH VOCAB CONTEXT [REPEATS]

Holds the same training state as zeropp's checkpoint_bench on the same number of ranks (the GPT's
fp32 parameters, AdamW exp_avg and exp_avg_sq, each a Shard(0) DTensor over a gloo mesh), saves it
with torch.distributed.checkpoint.save (FileSystemWriter, its default format, fsync on) and loads
it back with torch.distributed.checkpoint.load, each timed between barriers on the slowest rank,
REPEATS times (default 3; the best counts, as for zeropp and fio). Prints one line:
PEER dcp ranks=N state_bytes=B repeats=R save_s=S save_gbs=G save_mean_s=S load_s=S load_gbs=G load_mean_s=S"""
import os
import shutil
import sys
import tempfile
import time


def gpt_shapes(w, depth, vocab, ctx):
    s = {"embed.wte.weight": (vocab, w), "embed.wpe.weight": (ctx, w), "ln_f.weight": (w,), "ln_f.bias": (w,)}
    for i in range(depth):
        b = f"block{i}."
        s.update({b + "ln1.weight": (w,), b + "ln1.bias": (w,), b + "ln2.weight": (w,), b + "ln2.bias": (w,),
                  b + "attn.qkv.weight": (3 * w, w), b + "attn.qkv.bias": (3 * w,),
                  b + "attn.proj.weight": (w, w), b + "attn.proj.bias": (w,),
                  b + "fc.weight": (4 * w, w), b + "fc.bias": (4 * w,),
                  b + "fc_out.weight": (w, 4 * w), b + "fc_out.bias": (w,)})
    return s


def worker(rank, nproc, init_file, out_dir, shapes, repeats, results):
    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=nproc)
    mesh = init_device_mesh("cpu", (nproc,))
    gen = torch.Generator().manual_seed(1)
    state = {}
    for name, shape in shapes.items():
        for prefix in ("", "optim.exp_avg.", "optim.exp_avg_sq."):
            state[prefix + name] = distribute_tensor(torch.randn(shape, generator=gen), mesh, [Shard(0)])
    local_bytes = sum(t.to_local().numel() * 4 for t in state.values())

    def timed(fn):
        dist.barrier()
        t0 = time.perf_counter()
        fn()
        dist.barrier()
        return time.perf_counter() - t0

    saves, loads, same = [], [], True
    for r in range(repeats):
        path = os.path.join(out_dir, f"r{r}")
        saves.append(timed(lambda: dcp.save(state, storage_writer=dcp.FileSystemWriter(path, sync_files=True))))
        target = {k: distribute_tensor(torch.zeros(v.shape), mesh, [Shard(0)]) for k, v in state.items()}
        loads.append(timed(lambda: dcp.load(target, storage_reader=dcp.FileSystemReader(path))))
        same = same and all(torch.equal(target[k].to_local(), v.to_local()) for k, v in state.items())
    results.put((rank, local_bytes, saves, loads, same))
    dist.destroy_process_group()


def main():
    out_dir, nproc = sys.argv[1], int(sys.argv[2])
    w, depth, vocab, ctx = (int(a) for a in sys.argv[3:7])
    repeats = int(sys.argv[7]) if len(sys.argv) > 7 else 3
    import torch.multiprocessing as mp
    shutil.rmtree(out_dir, ignore_errors=True)
    ctx_mp = mp.get_context("spawn")
    results = ctx_mp.Queue()
    with tempfile.TemporaryDirectory() as tmp:
        procs = [ctx_mp.Process(target=worker, args=(r, nproc, os.path.join(tmp, "init"), out_dir,
                                                     gpt_shapes(w, depth, vocab, ctx), repeats, results))
                 for r in range(nproc)]
        for p in procs:
            p.start()
        got = [results.get(timeout=600) for _ in procs]
        for p in procs:
            p.join(timeout=60)
    shutil.rmtree(out_dir, ignore_errors=True)
    if not all(g[4] for g in got):
        print("PEER dcp FAILED: loaded values differ from the saved ones", file=sys.stderr)
        return 1
    total = sum(g[1] for g in got)
    saves = [max(g[2][r] for g in got) for r in range(repeats)]  # the slowest rank of each repeat
    loads = [max(g[3][r] for g in got) for r in range(repeats)]
    save_s, load_s = min(saves), min(loads)
    print(f"PEER dcp ranks={nproc} state_bytes={total} repeats={repeats} save_s={save_s:.3f} "
          f"save_gbs={total / save_s / 1e9:.3f} save_mean_s={sum(saves) / repeats:.3f} load_s={load_s:.3f} "
          f"load_gbs={total / load_s / 1e9:.3f} load_mean_s={sum(loads) / repeats:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
