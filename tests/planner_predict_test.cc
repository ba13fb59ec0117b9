// planner_predict_test: whole-layout predictions against values computed by hand on small cases:
// ZeRO-3's units, the ranking, rank order and link classes, a CPU box whose ranks outnumber its
// cores and the CPU its transport takes per link, ZeRO-3 without prefetch, optimizer offload, and
// plan refusing impossible inputs (zero devices, a model that fits nowhere: the smallest memory any
// layout needs).
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "gtest/gtest.h"
#include "scheduler/generators.h"
#include "scheduler/planner/cost_model.h"
#include "scheduler/planner/memory_model.h"
#include "scheduler/planner/planner.h"
#include "scheduler/planner/predictor.h"
#include "scheduler/simulator.h"
#include "scheduler/validator.h"
#include "tests/planner_fixtures.h"

namespace zeropp {
namespace planner {
namespace {

using fixtures::Small;
using fixtures::Toy;

// ZeRO-3 over 4 devices (one node of the toy description).
Layout Zero3Over4() {
  Layout l;
  l.design = Design::kZero3;
  l.schedule = "zero3";
  l.zero = 4;
  return l;
}

// 3D: tp 2 x pp `pp`, one replica.
Layout Tp2(int pp) {
  Layout l;
  l.design = Design::k3D;
  l.tp = 2, l.pp = pp, l.dp = 1;
  return l;
}

PlanRequest SmallRequest(int devices) {
  PlanRequest q;
  q.model = Small();
  q.hardware = Toy();
  q.devices = devices;
  q.global_batch = 32;
  return q;
}

// ZeRO-3 is predicted on zeropp's own units (one per child: embedding, each layer, final norm,
// tied head needing the embedding), so its traffic is the engine's. By hand, per micro-batch with
// prefetch 1 and resharding after forward: forward gathers the embedding E, the layers, the norm N,
// then E again with the head (E was freed after its forward); backward gathers N, the layers and
// E (the head's E is freed after the head's backward); E stays gathered from one micro-batch's
// end into the next forward. Every unit is reduced once per micro-batch.
TEST(Planner, Zero3UnitsAreTheEnginesPerChildUnits) {
  const Hardware h = Toy();
  const ModelShape m = Small();  // tied
  Layout l;
  l.design = Design::kZero3;
  l.schedule = "zero3";
  l.zero = 4, l.micro_batch = 1;
  const std::vector<ChunkShape> units = ChunkShapes(m, l);
  ASSERT_EQ(units.size(), static_cast<size_t>(m.layers + 3));
  double total = 0;
  for (const ChunkShape& u : units) total += u.params;
  EXPECT_DOUBLE_EQ(total, m.Parameters());
  const double e = 128.0 * 64 + 32.0 * 64, layer = m.LayerParameters(), n = 2.0 * 64;
  EXPECT_DOUBLE_EQ(units.front().params, e);
  EXPECT_DOUBLE_EQ(units[m.layers + 1].params, n);
  EXPECT_DOUBLE_EQ(units.back().params, 0);  // the tied head owns nothing
  for (const ChunkShape& u : units) EXPECT_EQ(u.units, 1);
  // A pipeline's chunks hold their layers' units, the first also the embedding's, the last the
  // final norm's and the head's (each gathered by its own collective).
  l.design = Design::kPipeFsdp;
  l.schedule = "1f1b";
  l.pp = 2, l.zero = 2;
  const std::vector<ChunkShape> chunks = ChunkShapes(m, l);
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_DOUBLE_EQ(chunks[0].units, m.layers / 2.0 + 1);
  EXPECT_DOUBLE_EQ(chunks[1].units, m.layers / 2.0 + 2);
  l.design = Design::kZero3;
  l.schedule = "zero3";
  l.pp = 1, l.zero = 4;
  const int mbs = 32 / 4;
  const Prediction p = Predict(m, l, h, 32);
  const double vb = h.value_bytes, out = 0.75;
  const double per_mb = (e + m.layers * layer + n + e) + (n + m.layers * layer + e);
  EXPECT_DOUBLE_EQ(p.gather_bytes, out * vb * (mbs * per_mb - (mbs - 1) * e));
  EXPECT_DOUBLE_EQ(p.reduce_bytes, out * vb * mbs * m.Parameters());
}
TEST(Planner, EnumeratesEveryDesignAndRanksByStepTime) {
  PlanRequest q = SmallRequest(8);
  const std::vector<Layout> all = EnumerateLayouts(q);
  int per_design[4] = {0, 0, 0, 0};
  for (const Layout& l : all) {
    EXPECT_EQ(l.Devices(), 8) << l.Name();
    per_design[static_cast<int>(l.design)]++;
  }
  for (int d = 0; d < 4; ++d) EXPECT_GT(per_design[d], 0) << DesignName(static_cast<Design>(d));
  const PlanResult r = Plan(q);
  ASSERT_FALSE(r.fitting.empty());
  for (size_t i = 1; i < r.fitting.size(); ++i) EXPECT_LE(r.fitting[i - 1].step_s, r.fitting[i].step_s);
  for (Design d : q.designs) EXPECT_NE(BestOf(r, d), nullptr) << DesignName(d);
}
// Plan evaluates layouts on several threads and merges them in enumeration order: the same result
// as one thread, whatever the count.
TEST(Planner, ThreadsDoNotChangeThePlan) {
  PlanRequest q = SmallRequest(8);
  q.threads = 1;
  const PlanResult one = Plan(q);
  q.threads = 3;
  const PlanResult three = Plan(q);
  EXPECT_EQ(three.considered, one.considered);
  EXPECT_EQ(three.over_memory, one.over_memory);
  EXPECT_EQ(three.smallest_memory, one.smallest_memory);
  EXPECT_EQ(three.smallest_layout, one.smallest_layout);
  ASSERT_EQ(three.fitting.size(), one.fitting.size());
  ASSERT_GT(one.fitting.size(), 3u);
  for (size_t i = 0; i < one.fitting.size(); ++i) {
    EXPECT_EQ(three.fitting[i].layout.Name(), one.fitting[i].layout.Name()) << i;
    EXPECT_EQ(three.fitting[i].step_s, one.fitting[i].step_s) << i;
  }
}
// Rank order decides the link class: tp, dp, pp keeps the 4 replicas of a stage on one node (their
// gradient all-reduce on the intra-node link, the stages on different nodes); tp, pp, dp
// (dp_outer) puts both stages on one node and spreads each stage's replicas over 2 nodes. The tied
// table's gradient is summed between the first and the last stage after the replicas' reduction:
// across nodes in the first order, inside one in the second.
TEST(Planner, RankOrderPicksTheReplicasLink) {
  const Hardware h = Toy();  // 4 devices per node
  const ModelShape m = Small();
  ASSERT_TRUE(m.tied_embedding);
  Layout l;
  l.design = Design::k3D;
  l.pp = 2, l.dp = 4, l.micro_batch = 1;
  const double grads = std::max(StageParameters(m, l, 0), StageParameters(m, l, 1)) * 4;  // fp32
  const double table = 4.0 * m.vocab * m.hidden;
  const double tied_inner = CollectiveSeconds(h, CollectiveKind::kAllReduce, table, 2, 1);
  const double tied_outer = CollectiveSeconds(h, CollectiveKind::kAllReduce, table, 2, 2);
  EXPECT_GT(tied_inner, tied_outer);
  const Prediction inner = Predict(m, l, h, 32);
  EXPECT_DOUBLE_EQ(inner.dp_reduce_s, CollectiveSeconds(h, CollectiveKind::kAllReduce, grads, 4, 4) + tied_inner);
  l.dp_outer = true;
  EXPECT_EQ(l.Name(), "3d_1f1b_tp1_pp2_dp4_dpouter_b1");
  const Prediction outer = Predict(m, l, h, 32);
  EXPECT_DOUBLE_EQ(outer.dp_reduce_s, CollectiveSeconds(h, CollectiveKind::kAllReduce, grads, 4, 2) + tied_outer);
  EXPECT_GT(outer.dp_reduce_s - tied_outer, inner.dp_reduce_s - tied_inner);
  // An untied head has nothing to exchange.
  ModelShape untied = m;
  untied.tied_embedding = false;
  const double untied_grads = std::max(StageParameters(untied, l, 0), StageParameters(untied, l, 1)) * 4;
  EXPECT_DOUBLE_EQ(Predict(untied, l, h, 32).dp_reduce_s,
                   CollectiveSeconds(h, CollectiveKind::kAllReduce, untied_grads, 4, 2));
  // The stages' transfers move from the inter-node link to the intra-node one.
  const scheduler::CostModel ci = BuildCostModel(m, [&] { Layout x = l; x.dp_outer = false; return x; }(), h, 8);
  const scheduler::CostModel co = BuildCostModel(m, l, h, 8);
  EXPECT_LT(ci.inter.bytes_per_s, co.inter.bytes_per_s);
  // Only 3D has a choice of order.
  Layout z;
  z.design = Design::kZeroPP;
  z.pp = 2, z.zero = 4, z.u = 2, z.dp_outer = true;
  EXPECT_NE(z.Check(m, 8, 4, 32).find("dp_outer is a 3D rank order"), std::string::npos);
  // ZeroPP over 2 nodes (a stage of zero 4 on each): every rank exchanges the whole table's
  // gradient, in the compute dtype, with its peer on the other node; no replicas to reduce.
  z.dp_outer = false;
  EXPECT_DOUBLE_EQ(Predict(m, z, h, 32).dp_reduce_s,
                   CollectiveSeconds(h, CollectiveKind::kAllReduce, table / 4 * h.value_bytes, 2, 1));
}
// A pipeline design's schedule is one the generators have, and only interleaved takes v > 1 (the
// others would build a v = 1 schedule while the layout's chunks assumed v).
TEST(Planner, PipelineLayoutsNameARealSchedule) {
  const ModelShape m = Small();
  Layout l;
  l.design = Design::k3D;
  l.pp = 2, l.dp = 2;
  for (const char* s : {"gpipe", "1f1b", "zb-h1", "interleaved", "deepspeed"}) {
    l.schedule = s;
    EXPECT_EQ(l.Check(m, 4, 4, 32), "") << s;
  }
  l.schedule = "1F1B";
  EXPECT_EQ(l.Check(m, 4, 4, 32), "schedule(1F1B): a pipeline of this design runs gpipe, 1f1b, interleaved, zb-h1 or deepspeed");
  l.design = Design::kPipeFsdp;
  l.schedule = "1f1b", l.v = 2;
  EXPECT_EQ(l.Check(m, 4, 4, 32), "v(2) > 1 needs the interleaved schedule (got 1f1b)");
  l.schedule = "interleaved";
  EXPECT_EQ(l.Check(m, 4, 4, 32), "");
}
// DeepSpeed's engine (schedule deepspeed): each tensor-parallel rank sends 1/tp of an activation
// or gradient and the receiver all-gathers it over the TP group, blocking, in each F and B.
TEST(Planner, DeepSpeedSendsATensorParallelSliceAndRegathersIt) {
  const ModelShape m = Small();
  const Hardware h = Toy();
  Layout l = Tp2(2);
  const Prediction one_f_one_b = Predict(m, l, h, 32);
  l.schedule = "deepspeed";
  const Prediction ds = Predict(m, l, h, 32);
  EXPECT_EQ(ds.layout.Name().rfind("3d_deepspeed_tp2_pp2", 0), 0u) << ds.layout.Name();
  EXPECT_DOUBLE_EQ(ds.p2p_bytes, one_f_one_b.p2p_bytes / 2);
  // 32 micro-batches, each F and B of the busiest rank one blocking re-gather more.
  const double regather = CollectiveSeconds(h, CollectiveKind::kAllGather, 32.0 * 64 * 2, 2, 2);
  EXPECT_GT(regather, 0);
  EXPECT_GE(ds.step_s, one_f_one_b.step_s + 2 * 32 * regather * (1 - 1e-9));
}

// Gradient accumulation outside the GEMM (Layout::grad_accumulation autograd, 2021's Megatron-LM and
// DeepSpeed): one stage of tp 2, 32 micro-batches in a row, so the step grows by exactly the adds
// of micro-batches 2..32: each reads the accumulated and the new 16-bit gradient of the rank's
// half of the parameters and writes the sum, at the description's element-wise bandwidth.
TEST(Planner, AutogradAccumulationAddsSixBytesAParameterFromTheSecondMicroBatch) {
  const ModelShape m = Small();
  const Hardware h = Toy();
  Layout l = Tp2(1);
  const Prediction fused = Predict(m, l, h, 32);
  l.grad_accumulation = Layout::GradAccumulation::kAutograd;
  const Prediction autograd = Predict(m, l, h, 32);
  EXPECT_EQ(autograd.layout.Name(), "3d_1f1b_tp2_pp1_dp1_b1_gaut");
  const std::vector<ChunkShape> chunks = ChunkShapes(m, l);
  ASSERT_EQ(chunks.size(), 1u);
  const double adds = 31 * chunks[0].params / 2 * 6 / h.ElementwiseBytesPerSecond() * h.compute_overhead;
  EXPECT_GT(adds, 0);
  EXPECT_NEAR(autograd.step_s - fused.step_s, adds, 1e-9 * fused.step_s);
  Layout z = Zero3Over4();
  z.grad_accumulation = Layout::GradAccumulation::kAutograd;
  EXPECT_NE(z.Check(m, 4, 4, 32).find("grad_accumulation(autograd) is a 3D executor's option"), std::string::npos);
}

// DeepSpeed's BF16_Optimizer (grad_accumulation fp32_add): every micro-batch, the 16-bit gradients
// are cast to fp32 and added into the fp32 ones: 2 + 4 bytes to cast, 4 + 4 + 4 to add, 18 bytes a
// parameter of the rank's half, in each of the 32 micro-batches; they also hold 2 bytes a
// parameter beside the fp32 gradients.
TEST(Planner, Fp32AddAccumulationMovesEighteenBytesAParameterEveryMicroBatch) {
  const ModelShape m = Small();
  Hardware h = Toy();
  ASSERT_EQ(h.value_bytes, 2);
  Layout l = Tp2(1);
  const Prediction fused = Predict(m, l, h, 32);
  l.grad_accumulation = Layout::GradAccumulation::kFp32Add;
  const Prediction added = Predict(m, l, h, 32);
  EXPECT_EQ(added.layout.Name(), "3d_1f1b_tp2_pp1_dp1_b1_gf32");
  const double params = ChunkShapes(m, l).at(0).params / 2;
  const double adds = 32 * params * 18 / h.ElementwiseBytesPerSecond() * h.compute_overhead;
  EXPECT_NEAR(added.step_s - fused.step_s, adds, 1e-9 * fused.step_s);
  EXPECT_NEAR(added.memory.grads - fused.memory.grads, 2 * StageParameters(m, l, 0) / 2, 1e-6);
  Layout z = Zero3Over4();
  z.grad_accumulation = Layout::GradAccumulation::kFp32Add;
  EXPECT_NE(z.Check(m, 4, 4, 32).find("grad_accumulation(fp32_add) is a 3D executor's option"), std::string::npos);
}

// zero1_allreduce (DeepSpeed's BF16_Optimizer): the replicas all-reduce the whole fp32 gradient
// instead of reduce-scattering it, then each steps its 1/dp and all-gathers the 16-bit parameters.
TEST(Planner, Zero1AllReduceSumsTheWholeGradientBeforeTheGather) {
  const ModelShape m = Small();
  const Hardware h = Toy();
  Layout l;
  l.design = Design::k3D;
  l.tp = 1, l.pp = 1, l.dp = 4, l.zero1 = true;
  const double own = StageParameters(m, l, 0);
  const double gather = CollectiveSeconds(h, CollectiveKind::kAllGather, own * h.value_bytes, 4, 4);
  EXPECT_DOUBLE_EQ(Predict(m, l, h, 32).dp_reduce_s,
                   CollectiveSeconds(h, CollectiveKind::kReduceScatter, own * 4, 4, 4) + gather);
  l.zero1_allreduce = true;
  const Prediction p = Predict(m, l, h, 32);
  EXPECT_EQ(p.layout.Name(), "3d_1f1b_tp1_pp1_dp4_b1_zero1_z1ar");
  EXPECT_DOUBLE_EQ(p.dp_reduce_s, CollectiveSeconds(h, CollectiveKind::kAllReduce, own * 4, 4, 4) + gather);
  l.zero1 = false;
  EXPECT_EQ(l.Check(m, 4, 4, 32), "zero1_allreduce is a 3D option of the distributed optimizer: it needs zero1");
}

// Uneven pipeline chunks (stage_layers, DeepSpeed's partition that counts an embedding as a layer):
// each chunk holds and computes its own layers, and the rest of the layout is unchanged.
TEST(Planner, StageLayersSetEachChunksLayersParametersAndCompute) {
  const ModelShape m = Small();
  const Hardware h = Toy();
  ASSERT_EQ(m.layers, 4);
  Layout l = Tp2(2);
  const Prediction even = Predict(m, l, h, 32);
  l.stage_layers = {2, 2};  // the even split, said explicitly
  const Prediction same = Predict(m, l, h, 32);
  EXPECT_DOUBLE_EQ(same.step_s, even.step_s);
  EXPECT_DOUBLE_EQ(same.memory.Total(), even.memory.Total());
  l.stage_layers = {1, 3};
  EXPECT_EQ(l.Name(), "3d_1f1b_tp2_pp2_dp1_b1_sl1-3");
  l.stage_layers = {1, 3, 3, 1};
  EXPECT_EQ(l.Name(), "3d_1f1b_tp2_pp2_dp1_b1_sl1-3x2-1");
  l.stage_layers = {1, 3};
  const std::vector<ChunkShape> chunks = ChunkShapes(m, l);
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_DOUBLE_EQ(chunks[0].layers, 1);
  EXPECT_DOUBLE_EQ(chunks[1].layers, 3);
  const double table = static_cast<double>(m.vocab) * m.hidden;
  const double rest = m.EmbeddingParameters() - table;  // positions and the final norm (tied head)
  EXPECT_DOUBLE_EQ(StageParameters(m, l, 0), 1 * m.LayerParameters() + table + rest);
  EXPECT_DOUBLE_EQ(StageParameters(m, l, 1), 3 * m.LayerParameters() + table);
  // The simulator scales each stage's per-layer cost by its layers over the mean (2).
  const scheduler::CostModel c = BuildCostModel(m, l, h, 4);
  ASSERT_EQ(c.chunk_compute_share.size(), 2u);
  EXPECT_DOUBLE_EQ(c.chunk_compute_share[0], 0.5);
  EXPECT_DOUBLE_EQ(c.chunk_compute_share[1], 1.5);
  EXPECT_GT(Predict(m, l, h, 32).step_s, even.step_s);  // the 3-layer stage sets the pace
  for (const std::vector<int>& bad : {std::vector<int>{1, 2}, std::vector<int>{4}, std::vector<int>{5, -1}}) {
    l.stage_layers = bad;
    const std::string why = l.Check(m, 4, 4, 32);
    EXPECT_NE(why.find("must give each of the pp(2)*v(1)=2 pipeline chunks 0 or more layers, 4 in all"),
              std::string::npos)
        << why;
  }
  l.stage_layers.clear();
  ModelShape odd = m;
  odd.layers = 5;
  EXPECT_EQ(l.Check(odd, 4, 4, 32), "pp(2)*v(1)=2 must divide layers(5) (or stage_layers must say each chunk's)");
}

// The executor's partition (scheduler::PartitionStages on each unit's multiplied parameters): a
// head worth 2.5 layers moves a layer off the last of 2 stages: [E L L L] [L N H] costs at most
// 3.5 layers, against 4.5 for [E L L] [L L N H] and 4 for [E L L L L] [N H].
TEST(Planner, PipelinesSplitTheirLayersAsTheExecutorDoes) {
  ModelShape big_head = Small();
  big_head.vocab = static_cast<int>(std::lround(2.5 * big_head.LayerParameters() / big_head.hidden));
  const double head = static_cast<double>(big_head.vocab) * big_head.hidden / big_head.LayerParameters();
  ASSERT_GT(head, 2.2);
  ASSERT_LT(head, 2.8);
  EXPECT_EQ(EngineStageLayers(big_head, 2), (std::vector<int>{3, 1}));
  EXPECT_EQ(EngineStageLayers(Small(), 2), (std::vector<int>{2, 2}));
  EXPECT_EQ(EngineStageLayers(Small(), 4), (std::vector<int>{1, 1, 1, 1}));
  EXPECT_TRUE(EngineStageLayers(Small(), 8).empty());  // 7 units, 8 stages
  // ZeRO designs take the engine's split; the even one stays implicit.
  Layout z;
  z.design = Design::kZeroPP;
  z.pp = 2, z.zero = 2, z.u = 2;
  Layout even = z;
  PartitionAsExecuted(Small(), &even);
  EXPECT_TRUE(even.stage_layers.empty());
  PartitionAsExecuted(big_head, &z);
  EXPECT_EQ(z.stage_layers, (std::vector<int>{3, 1}));
  EXPECT_EQ(z.Check(big_head, 4, 4, 32), "");
  // 3D splits evenly where it can (Megatron-LM), and as the executor does where it cannot.
  Layout d = Tp2(2);
  PartitionAsExecuted(big_head, &d);
  EXPECT_TRUE(d.stage_layers.empty());
  ModelShape five = Small();
  five.layers = 5;
  PartitionAsExecuted(five, &d);
  EXPECT_EQ(d.stage_layers, (std::vector<int>{3, 2}));
  EXPECT_EQ(d.Check(five, 4, 4, 32), "");
  // So plan enumerates pipelines whose depth does not divide the layers.
  PlanRequest q = SmallRequest(8);
  q.model = five;
  int uneven = 0;
  for (const Layout& l : EnumerateLayouts(q)) uneven += l.pp > 1 && !l.stage_layers.empty();
  EXPECT_GT(uneven, 0);
  EXPECT_FALSE(Plan(q).fitting.empty());
}

// A CPU box with more ranks than cores: the simulator shares the cores (each action costed at a
// whole core), tensor-parallel collectives are blocking waits on the oversubscribed intra-node link
// (2 forward all-reduces per layer, by hand), and prefetched ZeRO gathers keep the unloaded link.
TEST(Planner, OversubscribedBoxSharesCoresAndBlocksOnItsLoadedLink) {
  Hardware box = Toy();  // 4 devices per node
  box.shared_compute_units = 2;
  box.intra_oversubscribed = {0.3e9, 700e-6, 1};
  box.oversubscribed_compute_factor = 1.05;
  const ModelShape m = Small();
  Layout l;
  l.design = Design::k3D;
  l.tp = 2, l.dp = 2, l.micro_batch = 2;
  const scheduler::CostModel c = BuildCostModel(m, l, box, 4);
  EXPECT_EQ(c.shared_cores, 2);
  EXPECT_EQ(c.ranks_per_simulated_rank, 4);
  EXPECT_DOUBLE_EQ(c.shared_slowdown, 1.05);
  EXPECT_TRUE(c.waits_hold_cores);
  Hardware loaded = box;
  loaded.intra = box.intra_oversubscribed;
  const double act = 2.0 * m.seq * m.hidden * box.value_bytes;
  const double ar = CollectiveSeconds(loaded, CollectiveKind::kAllReduce, act, 2, 2);
  EXPECT_DOUBLE_EQ(c.forward_wait_s, m.layers * 2 * ar);
  EXPECT_DOUBLE_EQ(c.backward_input_wait_s, m.layers * 2 * ar);
  // With as many cores as ranks nothing is shared and the intra-node link is the measured one.
  const scheduler::CostModel two = BuildCostModel(m, l, box, 2);
  EXPECT_EQ(two.shared_cores, 0);
  EXPECT_FALSE(two.waits_hold_cores);
  EXPECT_DOUBLE_EQ(two.forward_wait_s, m.layers * 2 * CollectiveSeconds(box, CollectiveKind::kAllReduce, act, 2, 2));
  // ZeRO gathers are prefetched: the unloaded link.
  Layout z;
  z.design = Design::kZero3;
  z.schedule = "zero3";
  z.zero = 4, z.micro_batch = 1;
  const scheduler::CostModel zc = BuildCostModel(m, z, box, 4);
  EXPECT_DOUBLE_EQ(zc.intra.bytes_per_s, BusBytesPerSecond(box, 4, 4));
  EXPECT_DOUBLE_EQ(zc.intra.alpha_s, 3 * box.intra.latency_s);
  // A gather waited on at once (the simulator picks intra_blocking for it) pays the loaded link,
  // or the gathers' own fit where the box has one; TP collectives keep intra_node_oversubscribed.
  Hardware loaded_ring = box;
  loaded_ring.intra = box.intra_oversubscribed;
  EXPECT_TRUE(zc.has_intra_blocking);
  EXPECT_DOUBLE_EQ(zc.intra_blocking.bytes_per_s, BusBytesPerSecond(loaded_ring, 4, 4));
  EXPECT_DOUBLE_EQ(zc.intra_blocking.alpha_s, 3 * 700e-6);
  Hardware fitted = box;
  fitted.intra_oversubscribed_gather = {0.6e9, 2200e-6, 1};
  const scheduler::CostModel gc = BuildCostModel(m, z, fitted, 4);
  Hardware gather_ring = box;
  gather_ring.intra = fitted.intra_oversubscribed_gather;
  EXPECT_DOUBLE_EQ(gc.intra_blocking.bytes_per_s, BusBytesPerSecond(gather_ring, 4, 4));
  EXPECT_DOUBLE_EQ(gc.intra_blocking.alpha_s, 3 * 2200e-6);
  EXPECT_DOUBLE_EQ(gc.intra.bytes_per_s, zc.intra.bytes_per_s);
  EXPECT_DOUBLE_EQ(BuildCostModel(m, l, fitted, 4).forward_wait_s, c.forward_wait_s);
  // The inter-node link measured idle too: a ZeRO group across nodes (8 ranks, 4 per node) gets
  // it as its comm stream's idle link, by hand: 7 hops of the idle latency, the idle node link
  // over 4 ranks' share; a group inside a node is untouched; GPUs (no shared cores) never.
  EXPECT_FALSE(zc.has_intra_idle);
  Hardware idle = box;
  idle.inter_idle = {20e9, 9e-6, 1};
  Layout z8 = z;
  z8.zero = 8;
  const scheduler::CostModel ic = BuildCostModel(m, z8, idle, 8);
  EXPECT_TRUE(ic.has_intra_idle);
  EXPECT_DOUBLE_EQ(ic.intra_idle.alpha_s, 7 * 9e-6);
  EXPECT_DOUBLE_EQ(ic.intra_idle.bytes_per_s, 20e9);  // under the intra-node 50e9
  EXPECT_DOUBLE_EQ(ic.intra.bytes_per_s, 40e9);
  EXPECT_DOUBLE_EQ(ic.intra.alpha_s, 7 * box.inter.latency_s);
  EXPECT_FALSE(BuildCostModel(m, z, idle, 4).has_intra_idle);
  Hardware gpu = idle;
  gpu.shared_compute_units = 0;
  EXPECT_FALSE(BuildCostModel(m, z8, gpu, 8).has_intra_idle);
}
// A pipeline transfer between ranks of one CPU box takes the slower, in latency and in bandwidth, of
// the blocking link (intra_node, or intra_node_oversubscribed where the ranks outnumber the cores)
// and the measured intra_node_p2p; without intra_node_p2p, or on GPUs, the blocking link alone;
// between nodes, inter_node.
TEST(Planner, SameNodePipelineTransfersTakeTheMeasuredP2pLink) {
  Hardware box = Toy();  // 4 devices per node
  box.shared_compute_units = 2;
  box.intra_oversubscribed = {0.3e9, 700e-6, 1};
  const ModelShape m = Small();
  Layout l;
  l.design = Design::k3D;
  l.schedule = "1f1b";
  l.pp = 2, l.micro_batch = 2;
  scheduler::CostModel c = BuildCostModel(m, l, box, 2);
  EXPECT_DOUBLE_EQ(c.inter.alpha_s, box.intra.latency_s);
  EXPECT_DOUBLE_EQ(c.inter.bytes_per_s, box.intra.Effective());
  Hardware p2p = box;
  p2p.intra_p2p = {box.intra.bytes_per_s / 2, 1500e-6, 1};
  c = BuildCostModel(m, l, p2p, 2);  // a core per rank: against intra_node
  EXPECT_DOUBLE_EQ(c.inter.alpha_s, 1500e-6);
  EXPECT_DOUBLE_EQ(c.inter.bytes_per_s, box.intra.bytes_per_s / 2);
  l.pp = 4;  // 4 ranks on 2 cores: against intra_node_oversubscribed
  c = BuildCostModel(m, l, p2p, 4);
  EXPECT_DOUBLE_EQ(c.inter.alpha_s, 1500e-6);
  EXPECT_DOUBLE_EQ(c.inter.bytes_per_s, 0.3e9);
  p2p.intra_p2p.latency_s = 500e-6;
  c = BuildCostModel(m, l, p2p, 4);
  EXPECT_DOUBLE_EQ(c.inter.alpha_s, 700e-6);
  Hardware gpu = p2p;
  gpu.shared_compute_units = 0;
  c = BuildCostModel(m, l, gpu, 4);
  EXPECT_DOUBLE_EQ(c.inter.alpha_s, box.intra.latency_s);
  EXPECT_DOUBLE_EQ(c.inter.bytes_per_s, box.intra.Effective());
  // Stages on different nodes (8 stages, 4 devices a node): the inter-node link, per device.
  ModelShape deep = m;
  deep.layers = 8;
  l.pp = 8;
  c = BuildCostModel(deep, l, p2p, 4);
  EXPECT_DOUBLE_EQ(c.inter.alpha_s, box.inter.latency_s);
  EXPECT_DOUBLE_EQ(c.inter.bytes_per_s, box.inter.Effective() / 4);
}

// The executor's gradient bookkeeping (grad_handling_ns_per_param, measured per parameter of a unit
// per reduction at a whole core) is charged at each reduction in the program: ZeRO-3 reduces every
// unit every micro-batch, a pipeline without sharding each chunk once a step. By hand with Small():
// ZeRO-3 over 4 ranks on 2 cores (half a core each) with 4 micro-batches per rank, against 1F1B over
// 2 ranks on 2 cores with 16.
TEST(Planner, GradientBookkeepingFollowsTheReductions) {
  Hardware box = Toy();
  box.shared_compute_units = 2;
  Hardware kept = box;
  kept.grad_handling_s_per_param = 2e-9;
  const ModelShape m = Small();
  Layout z;
  z.design = Design::kZero3;
  z.schedule = "zero3";
  z.zero = 4, z.micro_batch = 1;
  const scheduler::CostModel zc = BuildCostModel(m, z, kept, 4);
  EXPECT_DOUBLE_EQ(zc.reduce_handling_s_per_byte, 2e-9 / box.value_bytes);
  EXPECT_DOUBLE_EQ(BuildCostModel(m, z, box, 4).reduce_handling_s_per_byte, 0);
  const double params = m.EmbeddingParameters() + m.layers * m.LayerParameters();
  const int global_batch = 16;  // 4 micro-batches on each of the 4 ranks
  const double zero3 = Predict(m, z, kept, global_batch).compute_s - Predict(m, z, box, global_batch).compute_s;
  EXPECT_NEAR(zero3, 4 * params * 2e-9 * 2, 1e-12);  // 4 reductions of every unit, at half a core
  Layout p;
  p.design = Design::k3D;
  p.schedule = "1f1b";
  p.pp = 2, p.micro_batch = 1;
  scheduler::SimResult with, without;
  Predict(m, p, kept, global_batch, &with);
  Predict(m, p, box, global_batch, &without);
  // Each stage reduces its chunk once: half the layers, plus the embedding (with the final norm,
  // which EmbeddingParameters counts) on the first and the head's table on the last.
  const double half = m.layers / 2 * m.LayerParameters();
  const double stage[2] = {half + m.EmbeddingParameters(), half + static_cast<double>(m.vocab) * m.hidden};
  for (int r = 0; r < 2; ++r) EXPECT_NEAR(with.busy_s[r] - without.busy_s[r], stage[r] * 2e-9, 1e-12) << r;
}
// On a CPU box a byte costs the CPU measured for the link it crosses: a sharding group's ring over
// 2 nodes of 2 crosses between nodes on 2 of its 4 hops, one inside a node on none; a transfer
// between pipeline stages on different nodes crosses with every byte, one inside a node with none.
TEST(Planner, CommunicationCpuFollowsTheLinkItCrosses) {
  Hardware box = Toy();
  box.shared_compute_units = 2;
  box.devices_per_node = 2;
  box.comm_cpu_bytes_per_s = 2e9;
  const ModelShape m = Small();
  Layout z = Zero3Over4();
  z.micro_batch = 1;
  EXPECT_DOUBLE_EQ(BuildCostModel(m, z, box, 4).comm_cpu_s_per_byte, 1 / 2e9);  // not measured: the same
  box.comm_cpu_inter_bytes_per_s = 0.5e9;
  EXPECT_DOUBLE_EQ(BuildCostModel(m, z, box, 4).comm_cpu_s_per_byte, 0.5 / 2e9 + 0.5 / 0.5e9);
  z.zero = 2;
  EXPECT_DOUBLE_EQ(BuildCostModel(m, z, box, 2).comm_cpu_s_per_byte, 1 / 2e9);
  Layout p;
  p.design = Design::k3D;
  p.schedule = "1f1b";
  p.pp = 2, p.micro_batch = 1;
  EXPECT_DOUBLE_EQ(BuildCostModel(m, p, box, 2).p2p_cpu_s_per_byte, 1 / 2e9);  // both stages on node 0
  p.dp = 2;  // replicas innermost: the stages 2 ranks apart, on different nodes
  EXPECT_DOUBLE_EQ(BuildCostModel(m, p, box, 4).p2p_cpu_s_per_byte, 1 / 0.5e9);
  EXPECT_DOUBLE_EQ(BuildCostModel(m, p, box, 4).comm_cpu_s_per_byte, 1 / 2e9);  // no sharding group
}
// ZeRO-3 without prefetch waits on every gather at once; the prediction reports those gathers' link
// time (what ./zpp calibrate fits the gathers' own link to, tools/calibrate_pairs.sh). With the
// default prefetch of one unit only each pass's first gather is waited on at once.
TEST(Planner, ZeroThreeWithoutPrefetchWaitsOnEveryGather) {
  const Hardware h = Toy();
  const ModelShape m = Small();
  Layout l = Zero3Over4();
  EXPECT_EQ(l.Name(), "zero3_z4_b1");
  l.prefetch = 0;
  EXPECT_EQ(l.Name(), "zero3_z4_b1_pf0");
  const Prediction none = Predict(m, l, h, 32);
  l.prefetch = 1;
  const Prediction one = Predict(m, l, h, 32);
  // Prefetching leaves only the first gather of each pass exposed: less waited-on link time, and
  // the same bytes moved.
  EXPECT_GT(none.blocking_gather_s, 0);
  EXPECT_LT(one.blocking_gather_s, none.blocking_gather_s / 2);
  EXPECT_DOUBLE_EQ(one.gather_bytes, none.gather_bytes);
  EXPECT_GE(none.step_s, one.step_s);
  // Other designs have no prefetch depth to set.
  Layout p;
  p.design = Design::kZeroPP;
  p.pp = 2, p.zero = 2, p.u = 2, p.prefetch = 0;
  EXPECT_NE(p.Check(m, 4, 4, 32).find("prefetch(0)"), std::string::npos);
}
// Gradients reduced in fp32 while parameters are gathered in the compute dtype (FSDP's
// reduce_dtype=float32): every reduction moves 4 / value_bytes times the bytes, the gathers the
// same; the reductions in flight hold their fp32 inputs. 3D refuses the option (it reduces fp32
// main gradients already).
TEST(Planner, Fp32ReductionMovesFp32GradientBytes) {
  const Hardware h = Toy();
  const ModelShape m = Small();
  Layout l = Zero3Over4();
  ASSERT_EQ(h.value_bytes, 2);  // bf16: fp32 reductions move twice the bytes
  const Prediction compute_dtype = Predict(m, l, h, 32);
  l.reduce_fp32 = true;
  EXPECT_EQ(l.Name(), "zero3_z4_b1_rf32");
  const Prediction fp32 = Predict(m, l, h, 32);
  EXPECT_GT(compute_dtype.reduce_bytes, 0);
  EXPECT_DOUBLE_EQ(fp32.reduce_bytes, 2 * compute_dtype.reduce_bytes);
  EXPECT_DOUBLE_EQ(fp32.gather_bytes, compute_dtype.gather_bytes);
  EXPECT_GE(fp32.step_s, compute_dtype.step_s);
  EXPECT_GT(fp32.memory.unsharded, compute_dtype.memory.unsharded);
  Layout t;  // 3D: tp 2 x pp 2
  t.tp = 2, t.pp = 2, t.reduce_fp32 = true;
  EXPECT_NE(t.Check(m, 4, 4, 32).find("reduce_fp32"), std::string::npos);
}

// Hardware::overlap_compute_slowdown reaches the simulator. ZeRO-3 on the toy description slowed to
// a ten-thousandth of its peak (compute-bound: every prefetched gather and reduction runs beside a
// computation): each second a collective overlaps computation, the computation does 1/1.25 s of
// work, so the step grows by at most 0.2 s per second of collectives and, compute-bound, by most of
// it. A 3D layout, whose tensor-parallel collectives block and whose step-end reduction overlaps
// nothing, is unchanged.
TEST(Planner, CollectivesSlowOnlyTheComputationTheyOverlap) {
  Hardware h = Toy();
  h.bf16_flops /= 1e4;
  const ModelShape m = Small();
  const Layout z = Zero3Over4();
  Layout t;  // 3D: tp 2 x pp 2
  t.tp = 2, t.pp = 2;
  scheduler::SimResult sim;
  const Prediction z0 = Predict(m, z, h, 32, &sim), t0 = Predict(m, t, h, 32);
  double comm_s = 0;
  for (const scheduler::SimEvent& e : sim.events) {
    if (e.cat == "comm") comm_s += e.end_s - e.start_s;
  }
  ASSERT_GT(comm_s, 0);
  ASSERT_GT(z0.compute_s, 2 * comm_s);  // compute-bound
  h.overlap_compute_slowdown = 0.25;
  const Prediction z1 = Predict(m, z, h, 32), t1 = Predict(m, t, h, 32);
  EXPECT_LE(z1.step_s - z0.step_s, 0.2 * comm_s * (1 + 1e-9));
  EXPECT_GT(z1.step_s - z0.step_s, 0.5 * 0.2 * comm_s);
  EXPECT_DOUBLE_EQ(t1.step_s, t0.step_s);
}

// Optimizer offload (ZeRO designs): master and moments leave the device for host memory (cpu) or
// NVMe files, and the step's tail is the slowest of three pipelined streams, by hand from the
// description's host numbers: gradients down and shards up in the compute dtype (bf16 here, each
// direction on its own copy engine), the CPU AdamW over the node's shards (its traffic plus the
// copies' through host memory), and the NVMe stream.
TEST(Planner, OffloadMovesTheOptimizerStateAndItsStep) {
  const Hardware h = Toy();  // host 50 GB/s per node (4 devices offloading), PCIe 20 GB/s, NVMe 5 GB/s, bf16
  const ModelShape m = Small();
  Layout l = Zero3Over4();
  const MemoryBreakdown none = PredictMemory(m, l, h, 32);
  const double shard = m.Parameters() / 4;
  EXPECT_DOUBLE_EQ(none.optimizer, 12 * shard);
  l.offload = Offload::kCpu;
  EXPECT_EQ(l.Name(), "zero3_z4_b1_offcpu");
  const MemoryBreakdown cpu = PredictMemory(m, l, h, 32);
  EXPECT_DOUBLE_EQ(cpu.optimizer, 0);
  EXPECT_DOUBLE_EQ(cpu.host, 12 * shard);
  EXPECT_DOUBLE_EQ(none.Total() - cpu.Total(), 12 * shard);
  const double update = shard * 4 * (30 + 2 * 2) / 50e9;  // the node's 4 shards, AdamW's 30 B + 2 x 2 B copied
  ASSERT_GT(update, shard * 2 / 20e9);                     // the CPU, not PCIe, sets the pace here
  EXPECT_DOUBLE_EQ(Predict(m, l, h, 32).optimizer_s, update);
  // NVMe takes the moments; the fp32 master stays in host memory, as the engine keeps it.
  l.offload = Offload::kNvme;
  const MemoryBreakdown nvme = PredictMemory(m, l, h, 32);
  EXPECT_DOUBLE_EQ(nvme.optimizer, 0);
  EXPECT_DOUBLE_EQ(nvme.host, 4 * shard);
  EXPECT_DOUBLE_EQ(nvme.nvme, 8 * shard);
  EXPECT_DOUBLE_EQ(Predict(m, l, h, 32).optimizer_s, std::max(update, 2 * shard * 8 / 5e9));
  // A host whose cores update slower than its memory moves: the measured AdamW rate bounds the
  // CPU's part (the node's 4 shards at 1 Mparam/s); a fast one leaves the memory bound.
  l.offload = Offload::kCpu;
  Hardware slow = h;
  slow.host_adamw_params_per_s = 1e6;
  EXPECT_DOUBLE_EQ(Predict(m, l, slow, 32).optimizer_s, shard * 4 / 1e6);
  slow.host_adamw_params_per_s = 1e15;
  EXPECT_DOUBLE_EQ(Predict(m, l, slow, 32).optimizer_s, update);
  // A slow link sets the pace instead: one direction's bytes, the other running beside it.
  Hardware narrow = h;
  narrow.pcie_bytes_per_s = 1e6;
  EXPECT_DOUBLE_EQ(Predict(m, l, narrow, 32).optimizer_s, shard * 2 / 1e6);
  // On a CPU box host memory is the device's: offloading to it frees nothing there.
  Hardware box = h;
  box.shared_compute_units = 2;
  l.offload = Offload::kCpu;
  EXPECT_DOUBLE_EQ(PredictMemory(m, l, box, 32).optimizer, 12 * shard);
  // The 3D baseline keeps its state on the device.
  Layout d;
  d.design = Design::k3D;
  d.pp = 2, d.dp = 2, d.offload = Offload::kCpu;
  EXPECT_NE(d.Check(m, 4, 4, 32).find("offload is zeropp's"), std::string::npos);
}
// Offloaded parameters (ZeRO-Infinity): the compute shard, the gradient shard and the master go to
// the tier with the moments; the device keeps only what a step gathers, plus the staged shard and
// the reduced gradient shard of its largest unit (a layer here). Every gather stages its shard over
// PCIe (and from NVMe), every reduction sends its gradient shard back (and, on NVMe, reads it back
// to accumulate); the optimizer step then moves nothing over PCIe.
TEST(Planner, OffloadedParametersLeaveTheDeviceAndAreStagedPerGather) {
  const Hardware h = Toy();  // bf16, PCIe 20 GB/s, NVMe 5 GB/s, host 50 GB/s per node
  const ModelShape m = Small();
  Layout l = Zero3Over4();
  const MemoryBreakdown none = PredictMemory(m, l, h, 32);
  const double shard = m.Parameters() / 4;
  l.params_offload = Offload::kCpu;
  EXPECT_NE(l.Check(m, 4, 4, 32).find("optimizer state offloaded too"), std::string::npos);
  l.offload = Offload::kCpu;
  EXPECT_EQ(l.Name(), "zero3_z4_b1_offcpu_poffcpu");
  const MemoryBreakdown cpu = PredictMemory(m, l, h, 32);
  EXPECT_DOUBLE_EQ(cpu.ModelState(), 0);
  EXPECT_DOUBLE_EQ(cpu.host, (2 + 2 + 4 + 8) * shard);
  EXPECT_DOUBLE_EQ(cpu.AllModelState(), none.ModelState());
  ASSERT_GT(m.LayerParameters(), m.EmbeddingParameters());
  EXPECT_DOUBLE_EQ(cpu.working - none.working, 2 * 2 * m.LayerParameters() / 4);
  EXPECT_DOUBLE_EQ(Predict(m, l, h, 32).optimizer_s, shard * 30 * 4 / 50e9);
  scheduler::CostModel c = BuildCostModel(m, l, h, 4);
  EXPECT_DOUBLE_EQ(c.gather_staging_s_per_byte, 1 / 20e9);
  EXPECT_DOUBLE_EQ(c.reduce_staging_s_per_byte, 1 / 20e9);
  EXPECT_DOUBLE_EQ(c.reduce_accumulate_s_per_byte, 0);
  l.offload = l.params_offload = Offload::kNvme;
  const MemoryBreakdown nvme = PredictMemory(m, l, h, 32);
  EXPECT_DOUBLE_EQ(nvme.ModelState() + nvme.host, 0);
  EXPECT_DOUBLE_EQ(nvme.nvme, 16 * shard);
  // NVMe per parameter at the step: moments read and written (16 B), master read and written (8),
  // the gradient shard read twice (4) and the compute shard written (2).
  EXPECT_DOUBLE_EQ(Predict(m, l, h, 32).optimizer_s, std::max(shard * 30 * 4 / 50e9, shard * 30 / 5e9));
  c = BuildCostModel(m, l, h, 4);
  EXPECT_DOUBLE_EQ(c.gather_staging_s_per_byte, 1 / 20e9 + 1 / 5e9);
  EXPECT_DOUBLE_EQ(c.reduce_staging_s_per_byte, 1 / 20e9 + 1 / 5e9);
  EXPECT_DOUBLE_EQ(c.reduce_accumulate_s_per_byte, 1 / 5e9);
  // Staging only adds time: the same layout with its parameters resident is faster.
  Layout resident = l;
  resident.params_offload = Offload::kNone;
  EXPECT_GT(Predict(m, l, h, 32).step_s - Predict(m, l, h, 32).optimizer_s,
            Predict(m, resident, h, 32).step_s - Predict(m, resident, h, 32).optimizer_s);
  // On a CPU box host memory is the device's: the cpu tier moves nothing and costs nothing; NVMe
  // takes the state out and costs its reads and writes.
  Hardware box = h;
  box.shared_compute_units = 2;
  l.offload = l.params_offload = Offload::kCpu;
  EXPECT_DOUBLE_EQ(PredictMemory(m, l, box, 32).ModelState(), none.ModelState());
  EXPECT_DOUBLE_EQ(BuildCostModel(m, l, box, 4).gather_staging_s_per_byte, 0);
  l.offload = l.params_offload = Offload::kNvme;
  EXPECT_DOUBLE_EQ(PredictMemory(m, l, box, 32).ModelState(), 0);
  EXPECT_DOUBLE_EQ(BuildCostModel(m, l, box, 4).gather_staging_s_per_byte, 1 / 5e9);
  // The 3D baseline keeps its parameters on the device.
  Layout d;
  d.design = Design::k3D;
  d.pp = 2, d.dp = 2, d.offload = d.params_offload = Offload::kCpu;
  EXPECT_NE(d.Check(m, 4, 4, 32).find("offload is zeropp's"), std::string::npos);
}
// plan tries offload only where nothing else fits: a device too small for the state on it, and
// host memory too small for the state in it, leave NVMe.
TEST(Planner, OffloadIsTriedOnlyWhereNothingElseFits) {
  PlanRequest q = SmallRequest(4);
  q.designs = {Design::kZero3, Design::kZeroPP, Design::kPipeFsdp};
  for (const Prediction& p : Plan(q).fitting) EXPECT_EQ(p.layout.offload, Offload::kNone) << p.layout.Name();
  // Device memory one byte short of the smallest layout that keeps its state (every variant of
  // every layout is considered when nothing fits).
  q.offload = false;
  q.hardware.memory_bytes = 1;
  q.hardware.memory_bytes = Plan(q).smallest_memory - 1;
  EXPECT_TRUE(Plan(q).fitting.empty());
  const double shard = q.model.Parameters() / 4;
  q.offload = true;
  const PlanResult r = Plan(q);
  ASSERT_FALSE(r.fitting.empty());
  for (const Prediction& p : r.fitting) EXPECT_EQ(p.layout.offload, Offload::kCpu) << p.layout.Name();
  // 4 devices per node, 11 * shard each: too little for the optimizer state (12), enough for the
  // master alone (4: NVMe takes the moments), too little for offloaded parameters (16).
  q.hardware.host_capacity_bytes = 4 * 11 * shard;
  const PlanResult n = Plan(q);
  ASSERT_FALSE(n.fitting.empty());
  for (const Prediction& p : n.fitting) {
    EXPECT_EQ(p.layout.offload, Offload::kNvme) << p.layout.Name();
    EXPECT_EQ(p.layout.params_offload, Offload::kNone) << p.layout.Name();
  }
  // A device one byte short of the lightest way any of them keeps its parameters (optimizer on
  // NVMe, recomputing): only layouts offloading their parameters fit, to NVMe (host memory cannot
  // take them).
  double lightest = 1e300;
  for (const Prediction& p : n.fitting) {
    Layout kept = p.layout;
    kept.recompute = true;
    lightest = std::min(lightest, PredictMemory(q.model, kept, q.hardware, q.global_batch).Total());
  }
  q.hardware.memory_bytes = lightest - 1;
  const PlanResult pr = Plan(q);
  ASSERT_FALSE(pr.fitting.empty());
  bool params = false;
  for (const Prediction& p : pr.fitting) {
    const Layout& f = p.layout;
    EXPECT_TRUE(f.params_offload == Offload::kNvme || f.activations_offload == Offload::kNvme) << f.Name();
    params = params || f.params_offload == Offload::kNvme;
  }
  EXPECT_TRUE(params);  // the pipelines fit only by offloading their parameters
}
// One device too small for a model whose parameters it would have to hold: plan offloads them too
// (ZeRO-Infinity on one rank, whose every use stages a whole unit from the tier), and that rank,
// alone on its node, has the node's whole host memory.
TEST(Planner, OneDeviceOffloadsItsParametersWhereNothingElseFits) {
  PlanRequest q = SmallRequest(1);
  q.designs = {Design::kZero3};
  Layout kept;
  kept.design = Design::kZero3;
  kept.schedule = "zero3";
  kept.recompute = true;
  kept.offload = kept.activations_offload = Offload::kNvme;
  q.hardware.memory_bytes = PredictMemory(q.model, kept, q.hardware, q.global_batch).Total() - 1;
  PlanResult r = Plan(q);
  ASSERT_FALSE(r.fitting.empty());
  for (const Prediction& p : r.fitting) {
    EXPECT_EQ(p.layout.zero, 1) << p.layout.Name();
    EXPECT_NE(p.layout.params_offload, Offload::kNone) << p.layout.Name();
  }
  // Host memory exactly what the first fitting layout, its parameters in host memory, keeps there:
  // a quarter of it per device on a node of 4 would refuse it, the one rank gets all of it.
  Layout cpu = r.fitting.front().layout;
  ASSERT_EQ(cpu.params_offload, Offload::kCpu) << cpu.Name();
  ASSERT_EQ(q.hardware.devices_per_node, 4);
  q.hardware.host_capacity_bytes = PredictMemory(q.model, cpu, q.hardware, q.global_batch).host;
  r = Plan(q);
  ASSERT_FALSE(r.fitting.empty());
  EXPECT_EQ(r.fitting.front().layout.Name(), cpu.Name());
  // One byte less: host memory cannot take that layout's parameters; NVMe does.
  q.hardware.host_capacity_bytes -= 1;
  r = Plan(q);
  bool found = false;
  for (const Prediction& p : r.fitting) {
    EXPECT_LE(p.memory.host, q.hardware.host_capacity_bytes) << p.layout.Name();
    if (p.layout.micro_batch != cpu.micro_batch) continue;
    found = true;
    EXPECT_EQ(p.layout.params_offload, Offload::kNvme) << p.layout.Name();
  }
  EXPECT_TRUE(found);
}
// Offloaded activations (ZeRO-3 recomputing): the recomputed units' saved inputs, one per layer
// unit here (the head's unit, last, keeps its own), leave the device for the tier; each costs a
// synchronous copy over PCIe after its forward and another before its backward.
TEST(Planner, OffloadedActivationsLeaveTheDeviceAndCostTwoCopiesPerUnit) {
  const Hardware h = Toy();  // bf16, PCIe 20 GB/s
  const ModelShape m = Small();
  Layout l = Zero3Over4();
  l.offload = Offload::kCpu;
  l.activations_offload = Offload::kCpu;
  EXPECT_NE(l.Check(m, 4, 4, 32).find("needs ZeRO-3"), std::string::npos);  // not recomputing
  l.recompute = true;
  EXPECT_EQ(l.Name(), "zero3_z4_b1_rc_offcpu_aoffcpu");
  Layout kept = l;
  kept.activations_offload = Offload::kNone;
  const double input = 32.0 * 64 * 2;  // tokens x hidden x 2 bytes
  const MemoryBreakdown a = PredictMemory(m, l, h, 32), k = PredictMemory(m, kept, h, 32);
  EXPECT_GT(k.activations, 0);  // some of the 4 inputs at the device's peak moment
  EXPECT_DOUBLE_EQ(a.activations, 0);
  EXPECT_LT(a.Total(), k.Total());
  EXPECT_DOUBLE_EQ(a.host - k.host, 4 * input);  // all 4 on the host at the end of a forward
  l.activations_offload = Offload::kNvme;
  EXPECT_DOUBLE_EQ(PredictMemory(m, l, h, 32).nvme, 4 * input);
  // 8 micro-batches (32 sequences over 4 ranks), 4 layer units, a copy each way.
  EXPECT_NEAR(Predict(m, l, h, 32).compute_s - Predict(m, kept, h, 32).compute_s, 8 * 4 * 2 * input / 20e9, 1e-12);
  // Pipelines run the executor's per-chunk policy: the engine refuses per-unit activation offload.
  Layout p;
  p.design = Design::kZeroPP;
  p.schedule = "zeropp";
  p.pp = 2, p.zero = 2, p.u = 2, p.recompute = true, p.offload = p.activations_offload = Offload::kCpu;
  EXPECT_NE(p.Check(m, 4, 4, 32).find("needs ZeRO-3"), std::string::npos);
}
TEST(Planner, RefusesImpossibleInputs) {
  PlanRequest q = SmallRequest(0);
  try {
    Plan(q);
    FAIL() << "planned for zero devices";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "--gpus: got 0, expected a whole number >= 1");
  }
  q.devices = 6;  // not whole nodes of 4
  EXPECT_THROW(Plan(q), std::invalid_argument);
  // A model that fits nowhere: GPT-3 175B six times as wide (65B parameters per layer) on 8
  // devices of 80 GB. With every state offloaded a layer must still be gathered whole on the
  // device, 2 bytes per parameter: more than the device holds. (175B itself fits, its parameters
  // offloaded to NVMe.)
  q.model = ModelPreset("gpt3-175b");
  q.hardware = LoadHardware("scheduler/planner/hardware/a100-80gb-ib400.json");
  q.devices = 8;
  q.global_batch = 64;
  EXPECT_FALSE(Plan(q).fitting.empty());
  q.model.hidden *= 6;
  q.model.ffn *= 6;
  ASSERT_GT(2 * q.model.LayerParameters(), q.hardware.memory_bytes);
  const PlanResult r = Plan(q);
  EXPECT_TRUE(r.fitting.empty());
  EXPECT_EQ(r.over_memory, r.considered);
  EXPECT_GE(r.smallest_memory, 2 * q.model.LayerParameters());  // one gathered layer
  EXPECT_FALSE(r.smallest_layout.empty());
}

}  // namespace
}  // namespace planner
}  // namespace zeropp
