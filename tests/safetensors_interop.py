#!/usr/bin/env python3
"""Interoperability with Python's reference safetensors library and PyTorch's distributed checkpoint.

  write OUT                 write a GPT-2-named file for the train CLI's tiny GPT (width 32, depth 2,
                            context 16, vocab 256) with seeded random values
  check ORIG EXPORT CKPT    the export equals ORIG tensor for tensor; and ORIG's values are
                            rebuilt from the sharded checkpoint's files the way PyTorch DCP's
                            safetensors reader does (global size = max(saved_offsets + shape))
  dcp ORIG CKPT NPROC       torch.distributed.checkpoint.load (HuggingFaceStorageReader, unchanged)
                            reads the checkpoint into NPROC processes that each hold a Shard(0)
                            DTensor of every parameter (a world size the checkpoint was not saved
                            with), and every local shard equals ORIG's rows
  llama|gpt2 EXPORT CORPUS CONTEXT WIDTH DEPTH HEADS KV_HEADS ZEROPP_EVAL_LOSS
                            transformers' LlamaForCausalLM (or GPT2LMHeadModel) takes the exported
                            file with load_state_dict (every name and shape; GPT-2's causal-mask
                            buffers aside), and its loss on the
                            held-out tail of the byte corpus (the last 5%, as the train CLI holds
                            out) is within 5% of zeropp's own held-out loss: the arithmetic
                            (rotary, grouped heads, RMSNorm, SwiGLU; GPT-2's Conv1D layout and
                            tied head) is the same
Prints "N passed, N failed"."""
import glob
import json
import os
import sys

import numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file, save_file

W, DEPTH, CTX, VOCAB = 32, 2, 16, 256


def gpt2_shapes():
    s = {"wte.weight": (VOCAB, W), "wpe.weight": (CTX, W), "ln_f.weight": (W,), "ln_f.bias": (W,)}
    for i in range(DEPTH):
        h = f"h.{i}."
        s.update({h + "ln_1.weight": (W,), h + "ln_1.bias": (W,), h + "ln_2.weight": (W,), h + "ln_2.bias": (W,),
                  h + "attn.c_attn.weight": (W, 3 * W), h + "attn.c_attn.bias": (3 * W,),
                  h + "attn.c_proj.weight": (W, W), h + "attn.c_proj.bias": (W,),
                  h + "mlp.c_fc.weight": (W, 4 * W), h + "mlp.c_fc.bias": (4 * W,),
                  h + "mlp.c_proj.weight": (4 * W, W), h + "mlp.c_proj.bias": (W,)})
    return s


def zeropp_name(n):
    """GPT-2 name -> (zeropp name, transposed)."""
    if n == "wte.weight":
        return "embed.wte.weight", False
    if n == "wpe.weight":
        return "embed.wpe.weight", False
    if n.startswith("ln_f"):
        return n, False
    _, i, rest = n.split(".", 2)
    table = {"ln_1": "ln1", "ln_2": "ln2", "attn.c_attn": "attn.qkv", "attn.c_proj": "attn.proj",
             "mlp.c_fc": "fc", "mlp.c_proj": "fc_out"}
    mod, kind = rest.rsplit(".", 1)
    return f"block{i}.{table[mod]}.{kind}", kind == "weight" and not mod.startswith("ln")


def rebuild(ckpt):
    """Every saved tensor, assembled from its chunks as DCP's HF reader does."""
    chunks = {}
    for path in sorted(glob.glob(os.path.join(ckpt, "*.safetensors"))):
        with safe_open(path, framework="numpy") as f:
            info = json.loads(f.metadata()["DCP_SHARDING_INFO"])
            for key in f.keys():
                chunks.setdefault(key, []).append((info[key]["saved_offsets"], f.get_tensor(key)))
    out = {}
    for key, parts in chunks.items():
        size = [max(o[d] + t.shape[d] for o, t in parts) for d in range(parts[0][1].ndim)]
        full = np.full(size, np.nan, dtype=np.float32)
        for o, t in parts:
            full[tuple(slice(o[d], o[d] + t.shape[d]) for d in range(t.ndim))] = t
        out[key] = full
    return out


def dcp_worker(rank, nproc, init_file, orig_path, ckpt, results):
    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=nproc)
    mesh = init_device_mesh("cpu", (nproc,))
    orig = load_file(orig_path)
    state, expect = {}, {}
    for n, v in orig.items():
        z, t = zeropp_name(n)
        full = np.ascontiguousarray(v.T if t else v)
        state[z] = distribute_tensor(torch.full(full.shape, float("nan")), mesh, [Shard(0)])
        expect[z] = full
    dcp.load(state, storage_reader=dcp.HuggingFaceStorageReader(ckpt))
    bad = []
    for z, d in state.items():
        local = d.to_local().numpy()
        rows = d.to_local().shape[0]
        start = min(rank * -(-expect[z].shape[0] // nproc), expect[z].shape[0])  # DTensor's even split
        if not np.array_equal(local, expect[z][start:start + rows]):
            bad.append(z)
    dist.barrier()
    results.put((rank, len(state), bad))
    dist.destroy_process_group()


def dcp_check(orig_path, ckpt, nproc):
    import tempfile
    import torch.multiprocessing as mp
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    with tempfile.TemporaryDirectory() as tmp:
        procs = [ctx.Process(target=dcp_worker, args=(r, nproc, os.path.join(tmp, "init"), orig_path, ckpt, results))
                 for r in range(nproc)]
        for p in procs:
            p.start()
        got = []
        for _ in procs:
            try:
                got.append(results.get(timeout=120))
            except Exception:
                break
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    ok = len(got) == nproc and all(not bad for _, _, bad in got)
    n = got[0][1] if got else 0
    for rank, _, bad in sorted(got):
        if bad:
            print(f"  rank {rank} of {nproc}: values differ for {', '.join(bad[:5])}")
    if len(got) != nproc:
        print(f"  only {len(got)} of {nproc} DCP processes reported (the others failed or timed out)")
    print(("PASS: " if ok else "FAIL: ") + f"torch.distributed.checkpoint.load reads the checkpoint unchanged into "
          f"{nproc} processes (Shard(0) DTensors of {n} parameters), every shard equal to the original")
    print(f"{int(ok)} passed, {int(not ok)} failed")
    return 0 if ok else 1


def hf_check(family, export, corpus, ctx, width, depth, heads, kv_heads, zeropp_loss):
    import torch
    torch.set_num_threads(1)
    torch.manual_seed(0)
    if family == "llama":
        from transformers import LlamaConfig, LlamaForCausalLM
        cfg = LlamaConfig(vocab_size=256, hidden_size=width, num_hidden_layers=depth, num_attention_heads=heads,
                          num_key_value_heads=kv_heads, intermediate_size=(8 * width // 3 + 7) // 8 * 8,
                          max_position_embeddings=ctx, rms_norm_eps=1e-6, rope_theta=10000.0,
                          tie_word_embeddings=False, attention_bias=False, mlp_bias=False, hidden_act="silu")
        model = LlamaForCausalLM(cfg).eval()
        target, name = model, "LlamaForCausalLM"
    else:
        from transformers import GPT2Config, GPT2LMHeadModel
        cfg = GPT2Config(vocab_size=256, n_positions=ctx, n_embd=width, n_layer=depth, n_head=heads,
                         activation_function="gelu_new", layer_norm_epsilon=1e-5, resid_pdrop=0.0, embd_pdrop=0.0,
                         attn_pdrop=0.0, tie_word_embeddings=True)
        model = GPT2LMHeadModel(cfg).eval()
        target, name = model.transformer, "GPT2LMHeadModel"  # GPT-2 files name the base model's tensors
    state = {k: torch.from_numpy(v) for k, v in load_file(export).items()}
    try:
        missing, unexpected = target.load_state_dict(state, strict=False)
        missing = [k for k in missing if not k.endswith(("attn.bias", "attn.masked_bias"))]  # causal-mask buffers
        loaded = not missing and not unexpected
        if not loaded:
            print(f"  load_state_dict: missing {missing[:4]}, unexpected {unexpected[:4]}")
    except RuntimeError as e:
        print(f"  load_state_dict: {str(e).splitlines()[0]}")
        loaded = False
    if family != "llama":
        model.tie_weights()
    names = sorted(f for f in glob.glob(os.path.join(corpus, "*")) if os.path.isfile(f))
    data = b"".join(open(f, "rb").read() for f in names)
    tail = np.frombuffer(data[len(data) - len(data) // 20:], dtype=np.uint8).astype(np.int64)
    n = (len(tail) - 1) // ctx
    ids = torch.from_numpy(tail[: n * ctx + 1].copy())
    x = ids[:-1].view(n, ctx)[:256]
    y = ids[1:].view(n, ctx)[:256]
    with torch.no_grad():
        logits = model(input_ids=x).logits
        hf = torch.nn.functional.cross_entropy(logits.reshape(-1, 256), y.reshape(-1)).item()
    ok = loaded and abs(hf - zeropp_loss) <= 0.05 * zeropp_loss and hf < 0.8 * np.log(256)
    print(("PASS: " if ok else "FAIL: ") + f"transformers' {name} loads the export (every tensor, no extra) and "
          f"its held-out loss {hf:.4f} is within 5% of zeropp's {zeropp_loss:.4f} (untrained: {np.log(256):.2f})")
    print(f"{int(ok)} passed, {int(not ok)} failed")
    return 0 if ok else 1


def main():
    if sys.argv[1] in ("llama", "gpt2"):
        a = sys.argv
        return hf_check(a[1], a[2], a[3], *(int(v) for v in a[4:9]), float(a[9]))
    if sys.argv[1] == "dcp":
        return dcp_check(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    if sys.argv[1] == "write":
        rng = np.random.default_rng(7)
        save_file({n: (rng.standard_normal(s) * 0.02).astype(np.float32) for n, s in gpt2_shapes().items()},
                  sys.argv[2], metadata={"format": "pt"})
        return 0
    orig, export, ckpt = load_file(sys.argv[2]), load_file(sys.argv[3]), rebuild(sys.argv[4])
    passed = failed = 0

    def check(ok, what):
        nonlocal passed, failed
        print(("PASS: " if ok else "FAIL: ") + what)
        passed, failed = passed + ok, failed + (not ok)

    check(sorted(export) == sorted(orig), f"the export holds the {len(orig)} GPT-2 tensors")
    check(all(np.array_equal(export[n], orig[n]) for n in orig if n in export), "export values equal the written file")
    ok = True
    for n, v in orig.items():
        z, t = zeropp_name(n)
        got = ckpt.get(z)
        if got is None or not np.array_equal(got, v.T if t else v):
            print(f"  mismatch: {n} -> {z}")
            ok = False
    check(ok, "the sharded checkpoint, rebuilt from DCP_SHARDING_INFO chunks, holds the imported values")
    check(all(k in ckpt for k in ("optim.exp_avg.embed.wte.weight", "optim.exp_avg_sq.block1.fc.bias")),
          "optimizer moments are saved as their own keys")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
