"""Bytes per step sent by rank 0 (the first pipeline stage) in its sharding group, from the
formulas, for ./zpp bench zeropp-vs-3d. Usage: zeropp_vs_3d_formula.py LAYOUT H DEPTH CONTEXT M G

ZeRO-3 / ZeroPP (the zero group, fp32, z ranks), the paper's closed form: each pass of a unit through a chunk gathers its
parameters for the forward and again for the backward and reduce-scatters its gradient: 3 P 4 (z-1)/z
bytes per pass for the P (padded) parameters the rank's stage holds; ZeroPP makes M/U passes per
step (the paper's 36 B h^2 / U per layer, with 12 h^2 parameters per layer), ZeRO-3 one per
micro-batch. Layouts without a zero group (z = 1) send nothing there.
TP (Megatron, t ranks, S = b s h fp32 per micro-batch): per layer 4 all-reduces, 8 S (t-1)/t
(10 S (t-1)/t with sequence parallelism: 4 all-gathers, 4 reduce-scatters, 2 backward re-gathers);
the vocabulary-parallel embedding adds 2 S (t-1)/t; a stage with the head adds 2 S (t-1)/t and the
cross-entropy (an all-gather of b s maxima, two all-reduces of b s values); with sequence
parallelism the replicated parameters' gradients are summed once per step; the global norm is one
all-reduce of a double per step.
"""
import sys

V = 256


def gpt_counts(h, depth, ctx):
    block = 12 * h * h + 13 * h
    return V * h + ctx * h, block, 2 * h  # embedding (wte + wpe), one block, final layer norm


def zero_bytes(name, h, depth, ctx, m, g):
    """The paper's closed form (3 collectives per unit pass): an upper bound; the schedule keeps a
    chunk gathered from its last forward to its first backward where they are adjacent, and the
    tied embedding is reduced once per step, so the exact count comes from the schedule
    (tools/train's predicted_zero_bytes_per_rank_step)."""
    emb, block, lnf = gpt_counts(h, depth, ctx)
    if name.startswith("zero3_z4"):
        z, p, passes = 4, emb + depth * block + lnf, m
    else:  # pp2 x zero2: stage 0 holds the embedding and half of the blocks
        z = 2
        u = int(name.rsplit("_u", 1)[1])
        p, passes = emb + depth // 2 * block, m // u
    return 3 * p * 4 * (z - 1) / z * passes + 2 * 8 * (z - 1) / z * 2  # + norm and loss all-reduces


def tp_bytes(name, h, depth, ctx, m, g):
    t = 2
    sp = name.endswith("_sp")
    pp = 2 if "_pp2" in name else 1
    dp = 2 if "_dp2" in name else 1
    b = g // m // dp
    s_bytes = b * ctx * h * 4
    layers = depth // pp
    per_layer = (10 if sp else 8) * s_bytes * (t - 1) / t
    per_micro = layers * per_layer + 2 * s_bytes * (t - 1) / t  # embedding
    if pp == 1:  # the head and the cross-entropy are on this rank too
        n = b * ctx
        per_micro += 2 * s_bytes * (t - 1) / t + n * 4 * (t - 1) + 2 * 2 * n * 4 * (t - 1) / t
    total = m * per_micro + 2 * 8 * (t - 1) / t  # the norm's all-reduce
    if sp:
        replicated = (6 * h) * layers + ctx * h + (2 * h if pp == 1 else 0)
        total += 2 * replicated * 4 * (t - 1) / t
    return total


def main():
    name = sys.argv[1]
    h, depth, ctx, m, g = (int(x) for x in sys.argv[2:7])
    if name.startswith("3d_"):
        print(f"{tp_bytes(name, h, depth, ctx, m, g):.0f}")
    elif name.startswith("zero3") or name.startswith("zeropp"):
        print(f"{zero_bytes(name, h, depth, ctx, m, g):.0f}")
    else:
        print("-")


if __name__ == "__main__":
    main()
