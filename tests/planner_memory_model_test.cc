// planner_memory_model_test: the planner's memory model against values computed by hand on small
// cases (activations and state per rank, the replayed peak of one moment, a split backward's stash).
// Split from planner_test.cc, which holds the cost model's and the simulator's hand-computed cases.
#include <algorithm>
#include <string>

#include "gtest/gtest.h"
#include "scheduler/generators.h"
#include "scheduler/planner/memory_model.h"
#include "scheduler/planner/predictor.h"
#include "scheduler/simulator.h"
#include "tests/planner_fixtures.h"

namespace zeropp {
namespace planner {
namespace {

using fixtures::Small;
using fixtures::Toy;

TEST(MemoryModel, ActivationAndStateFormulas) {
  const Hardware h = Toy();
  const ModelShape m = Small();
  Layout l;
  l.design = Design::k3D;
  l.micro_batch = 2;
  // t = 1, GeLU with ffn = 4h: s*b*h*34 + 5*a*s^2*b (Korthikanti et al.).
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m, l, 2), 32.0 * 2 * 64 * 34 + 5.0 * 4 * 32 * 32 * 2);
  l.tp = 2;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m, l, 2), 32.0 * 2 * 64 * (10 + 24.0 / 2) + 5.0 * 4 * 32 * 32 * 2 / 2);
  l.sequence_parallel = true;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m, l, 2), 32.0 * 2 * 64 * 34 / 2 + 5.0 * 4 * 32 * 32 * 2 / 2);
  // Without dropout: no hidden dropout masks (2 sbh, sequence-parallel) and a dense core keeps only
  // the softmax output (2 as^2 b): 32 sbh + 2 as^2 b; flash attention keeps no s^2 at all.
  ModelShape n = m;
  n.dropout = false;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(n, l, 2), 32.0 * 2 * 64 * 32 / 2 + 2.0 * 4 * 32 * 32 * 2 / 2);
  l.sequence_parallel = false, l.tp = 1;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(n, l, 2), 32.0 * 2 * 64 * 32 + 2.0 * 4 * 32 * 32 * 2);
  n.flash_attention = true;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(n, l, 4), 32.0 * 2 * 64 * 32 * 2);
  // PyTorch's CPU attention (plan --cpu-attention): priced dense, keeps no s^2 either.
  n.flash_attention = false, n.keeps_scores = false;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(n, l, 4), 32.0 * 2 * 64 * 32 * 2);
  l.tp = 2, l.sequence_parallel = true;
  // A deferred W's hold per layer: the linears' inputs and output gradients, 8h + 2 ffn values a
  // token for a GeLU MLP (qkv h + 3h, proj h + h, fc h + ffn, fc_out ffn + h), / t.
  l.sequence_parallel = false;
  EXPECT_DOUBLE_EQ(LayerWeightPassBytes(m, l, 2), 32.0 * 2 * (8 * 64 + 2 * 256) * 2 / 2);
  // SwiGLU with 2 key/value heads of 4: qkv h + (h + h), proj 2h, gate and up h + 2 ffn, down ffn + h.
  ModelShape g = m;
  g.swiglu = true, g.kv_heads = 2;
  l.tp = 1;
  EXPECT_DOUBLE_EQ(LayerWeightPassBytes(g, l, 4), 32.0 * 2 * (64 + 128 + 128 + 64 + 3 * 256 + 64) * 4);
  // Model state: 3D pp=2 tp=2 dp=2: 2 + 4 + 12 bytes per own parameter (ZeRO-1: 12 / dp).
  Layout d;
  d.design = Design::k3D;
  d.tp = 2, d.pp = 2, d.dp = 2, d.zero1 = true;
  const MemoryBreakdown mb = PredictMemory(m, d, h, 8);
  const double own = StageParameters(m, d, mb.rank) / 2;
  EXPECT_DOUBLE_EQ(mb.params, 2 * own);
  EXPECT_DOUBLE_EQ(mb.grads, 4 * own);
  EXPECT_DOUBLE_EQ(mb.optimizer, 12 * own / 2);
  // ZeRO-3 over 4: 16 bytes per parameter / 4 (bf16 shard 2, grad 2, master 4, moments 8).
  Layout z;
  z.design = Design::kZero3;
  z.schedule = "zero3";
  z.zero = 4;
  const MemoryBreakdown zb = PredictMemory(m, z, h, 8);
  EXPECT_DOUBLE_EQ(zb.ModelState(), 16 * m.Parameters() / 4);
  EXPECT_DOUBLE_EQ(zb.reserved, 1e9);
}
// The memory model replays the schedule and takes the peak of what is live at one moment. A
// hand-written one-rank schedule of two chunks (2 layers each), chunk 1 recomputed, split backward
// on chunk 1, every step traced by hand below: C0, C1 the chunks' unsharded bytes, A a kept
// chunk's stash per micro-batch, I a recomputed one's (its input), Wh a W's hold, Rw the
// recomputed activations during its backward, L the logits on the last virtual stage.
TEST(MemoryModel, ReplayTakesThePeakOfOneMoment) {
  const Hardware h = Toy();
  const ModelShape m = Small();
  Layout l;  // FSDP chunks as a pipeline's rank holds them: the embedding on the first, the head on the last
  l.design = Design::kPipeFsdp;
  l.pp = 1, l.v = 2;
  l.zero = 2, l.micro_batch = 2, l.recompute = true;
  const scheduler::Schedule s = scheduler::Schedule::Parse(
      "schedule t pp=1 v=2 m=2 u=0\n"
      "recompute: 01\n"
      "rank 0: G0 F0.0 F0.1 X0 G1 F1.0 F1.1 Bi1.0 Bi1.1 W1.1 W1.0 RS1 X1 G0 B0.0 B0.1 RS0 X0 OPT\n");
  const double vb = h.value_bytes, table = 128.0 * 64;
  const double c0 = vb * (2 * m.LayerParameters() + m.EmbeddingParameters());  // table, positions, norm
  const double c1 = vb * (2 * m.LayerParameters() + table);                     // the head (tied: as big)
  const double act = LayerActivationBytes(m, l, h.value_bytes), a = 2 * act;
  const double in = 32.0 * 2 * 64 * vb, head = 32.0 * 2 * (64 + 128) * vb;  // the head's W: input, logits' grad
  const double wh = 2 * LayerWeightPassBytes(m, l, h.value_bytes) + head;
  const double rw = 2 * act, lg = 32.0 * 2 * 128 * (vb + 4);
  const double bt = 32.0 * 2 * (64 + 2 * 256) * vb, last = std::max(lg, bt);  // a layer's backward: h + 2 ffn
  EXPECT_DOUBLE_EQ(LayerBackwardTransientBytes(m, l, h.value_bytes), bt);
  // F1.1 (2 kept stashes, 2 inputs, logits); Bi1.0 (gradient C1 allocated, recompute + the larger of logits and
  // a layer's backward); Bi1.1 (one input left, one W held); B0.0 (C1's gradient reducing, C0 gathered, backward).
  const double f11 = c1 + 2 * a + 2 * in + lg;
  const double bi10 = 2 * c1 + 2 * a + 2 * in + rw + last;
  const double bi11 = 2 * c1 + 2 * a + in + wh + rw + last;
  const double b00 = c1 + 2 * c0 + 2 * a + bt;
  const MemoryBreakdown b = EstimateRankMemory(m, l, h, s, 0);
  const double peak = std::max({f11, bi10, bi11, b00});
  EXPECT_DOUBLE_EQ(b.unsharded + b.activations + b.working, peak);
  ASSERT_DOUBLE_EQ(peak, b00 > bi11 ? b00 : bi11);  // which moment wins depends on the sizes
  if (peak == bi11) {
    EXPECT_DOUBLE_EQ(b.unsharded, 2 * c1);
    EXPECT_DOUBLE_EQ(b.activations, 2 * a + in + wh);
    EXPECT_DOUBLE_EQ(b.working, rw + last);
  } else {
    EXPECT_DOUBLE_EQ(b.unsharded, c1 + 2 * c0);
    EXPECT_DOUBLE_EQ(b.activations, 2 * a);
    EXPECT_DOUBLE_EQ(b.working, bt);
  }
  // Reductions in flight are capped at two (the engine waits for the oldest beyond that): three
  // chunks reduced back to back leave the last two, and the forwards after them (a replay, not a
  // valid step) peak with those two, not three.
  const scheduler::Schedule three = scheduler::Schedule::Parse(
      "schedule t pp=1 v=3 m=1 u=0\n"
      "rank 0: G0 G1 G2 F0.0 F1.0 F2.0 B2.0 B1.0 B0.0 X0 X1 X2 RS2 RS1 RS0 G0 G1 G2 F0.0 F1.0 F2.0 OPT\n");
  Layout l3 = l;
  l3.recompute = false;
  l3.v = 3;
  ModelShape m3 = m;
  m3.layers = 3;
  const MemoryBreakdown t = EstimateRankMemory(m3, l3, h, three, 0);
  const double d0 = vb * (m3.LayerParameters() + m3.EmbeddingParameters()), d1 = vb * m3.LayerParameters();
  const double d2 = vb * (m3.LayerParameters() + table), ka = LayerActivationBytes(m3, l3, h.value_bytes);
  const double g = d0 + d1 + d2;
  const double at_b20 = g + d2 + 3 * ka + last, at_b10 = g + d2 + d1 + 2 * ka + bt;
  const double at_b00 = g + d2 + d1 + d0 + ka + bt;
  const double at_end = g + d1 + d0 + 3 * ka + lg;  // C2's reduction has landed
  EXPECT_DOUBLE_EQ(t.unsharded + t.activations + t.working, std::max({at_b20, at_b10, at_b00, at_end}));
  EXPECT_GT(at_end, std::max({at_b20, at_b10, at_b00}));  // so the cap is what this checks
}
// A chunk that keeps its activations and splits its backward holds only W's inputs and output
// gradients after Bi (the executor frees the rest of its graph), and the first virtual stage's Bi
// is its whole backward: nothing is left to its W. Replayed by hand: C0, C1 gathered, A a chunk's
// stash, Wh chunk 1's W hold, L the logits.
TEST(MemoryModel, SplitBackwardOfAKeptChunkHoldsOnlyWhatWReads) {
  const Hardware h = Toy();
  const ModelShape m = Small();
  Layout l;
  l.design = Design::kPipeFsdp;
  l.pp = 1, l.v = 2;
  l.zero = 2, l.micro_batch = 2;
  const scheduler::Schedule s = scheduler::Schedule::Parse(
      "schedule t pp=1 v=2 m=1 u=0\n"
      "rank 0: G0 G1 F0.0 F1.0 Bi1.0 Bi0.0 W0.0 W1.0 RS1 RS0 X0 X1 OPT\n");
  const double vb = h.value_bytes, table = 128.0 * 64;
  const double c0 = vb * (2 * m.LayerParameters() + m.EmbeddingParameters());
  const double c1 = vb * (2 * m.LayerParameters() + table);
  const double a = 2 * LayerActivationBytes(m, l, h.value_bytes);
  const double head = 32.0 * 2 * (64 + 128) * vb, bt = LayerBackwardTransientBytes(m, l, h.value_bytes);
  const double wh = 2 * LayerWeightPassBytes(m, l, h.value_bytes) + head, lg = 32.0 * 2 * 128 * (vb + 4);
  ASSERT_LT(wh, a);  // so a hold that kept the stash too would show
  // Bi1.0 (C1's gradient, both stashes, the larger of the logits and a layer's backward); Bi0.0
  // (C0's gradient, chunk 0's stash, Wh, a layer's backward).
  const double bi1 = c0 + 2 * c1 + 2 * a + std::max(lg, bt), bi0 = 2 * c0 + 2 * c1 + a + wh + bt;
  const MemoryBreakdown b = EstimateRankMemory(m, l, h, s, 0);
  EXPECT_DOUBLE_EQ(b.unsharded + b.activations + b.working, std::max(bi1, bi0));
  // Keeping chunk 1's stash to its W would have made Bi0.0 the peak, larger by A.
  EXPECT_GT(2 * c0 + 2 * c1 + 2 * a + wh + bt, bi1);
}

}  // namespace
}  // namespace planner
}  // namespace zeropp
