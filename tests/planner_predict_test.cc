// planner_predict_test: whole-layout predictions against values computed by hand on small cases:
// ZeRO-3's units, the ranking (on any thread count), rank order and link classes, a CPU box whose
// ranks outnumber its cores and the CPU its transport takes per link, ZeRO-3 without prefetch, and
// plan refusing impossible inputs (zero devices, a model that fits nowhere: the smallest memory any
// layout needs). Pipeline executors' choices: planner_executor_test.cc; offload:
// planner_offload_test.cc.
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
#include "tests/planner_layouts.h"

namespace zeropp {
namespace planner {
namespace {

using namespace fixtures;  // Small, Toy, SmallRequest, Tp2, Zero3Over4

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
  EXPECT_DOUBLE_EQ(c.gather_wait_core_share, 1.0);  // zero 1: no sharding group to wait in
  // A ZeRO group waiting on a gather holds one core, its last rank's: 1 / zero of its ranks.
  Layout fsdp;
  fsdp.design = Design::kPipeFsdp;
  fsdp.schedule = "1f1b";
  fsdp.pp = 2, fsdp.zero = 2, fsdp.micro_batch = 2;
  const scheduler::CostModel f = BuildCostModel(m, fsdp, box, 4);
  EXPECT_TRUE(f.waits_hold_cores);
  EXPECT_DOUBLE_EQ(f.gather_wait_core_share, 0.5);
  Hardware loaded = box;
  loaded.intra = box.intra_oversubscribed;
  const double act = 2.0 * m.seq * m.hidden * box.value_bytes;
  const double ar = CollectiveSeconds(loaded, CollectiveKind::kAllReduce, act, 2, 2);
  EXPECT_DOUBLE_EQ(c.forward_wait_s, m.layers * 2 * ar);
  EXPECT_DOUBLE_EQ(c.backward_input_wait_s, m.layers * 2 * ar);
  // With as many cores as ranks nothing is shared, but a TP collective still waits for a partner
  // that computes on the other core: the same fitted link. With cores to spare, the measured idle one.
  const scheduler::CostModel two = BuildCostModel(m, l, box, 2);
  EXPECT_EQ(two.shared_cores, 0);
  EXPECT_FALSE(two.waits_hold_cores);
  EXPECT_DOUBLE_EQ(two.forward_wait_s, m.layers * 2 * ar);
  Hardware roomy = box;
  roomy.shared_compute_units = 4;
  EXPECT_DOUBLE_EQ(BuildCostModel(m, l, roomy, 2).forward_wait_s,
                   m.layers * 2 * CollectiveSeconds(box, CollectiveKind::kAllReduce, act, 2, 2));
  // A box that fitted a TP link of its own for ranks that just fill its cores: that link at 2 ranks
  // (the layers' all-reduces, and at the step's end the sequence-parallel group's all-reduces of its
  // replicated tensors' gradients: 6 a layer and the final norm's 2, hidden fp32 values each), the
  // oversubscribed one still at 4.
  Hardware filled = box;
  filled.intra_tp_filled = {0.5e9, 400e-6, 1};
  Hardware filled_ring = box;
  filled_ring.intra = filled.intra_tp_filled;
  EXPECT_DOUBLE_EQ(BuildCostModel(m, l, filled, 2).forward_wait_s,
                   m.layers * 2 * CollectiveSeconds(filled_ring, CollectiveKind::kAllReduce, act, 2, 2));
  EXPECT_DOUBLE_EQ(BuildCostModel(m, l, filled, 4).forward_wait_s, m.layers * 2 * ar);
  Layout sp = Tp2(1);
  sp.micro_batch = 2, sp.sequence_parallel = true;
  const double replicated_grads = (kReplicatedTensorsPerLayer * m.layers + 2) *
                                  CollectiveSeconds(filled_ring, CollectiveKind::kAllReduce, m.hidden * 4.0, 2, 2);
  EXPECT_DOUBLE_EQ(Predict(m, sp, filled, 8).dp_reduce_s, replicated_grads);
  EXPECT_DOUBLE_EQ(Predict(m, sp, box, 8).dp_reduce_s,  // without it: the oversubscribed link's
                   (kReplicatedTensorsPerLayer * m.layers + 2) *
                       CollectiveSeconds(loaded, CollectiveKind::kAllReduce, m.hidden * 4.0, 2, 2));
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

// A fixed cost per chunk action (action_overhead_us): added once to each chunk's F and B, and with a
// split backward (zb-h1, zeropp) to Bi and W each; an interleaved stage's two chunks pay it twice
// as often as one chunk of the same layers, which is all that tells it from layer_overhead_us.
TEST(Planner, ActionOverheadIsPaidPerChunkAction) {
  const ModelShape m = Small();
  Hardware with = Toy();
  with.action_overhead_s = 400e-6;
  const Hardware plain = Toy();
  for (const char* schedule : {"1f1b", "interleaved", "zb-h1"}) {
    Layout l;
    l.design = Design::k3D;
    l.schedule = schedule;
    l.pp = 2, l.micro_batch = 2;
    l.v = std::string(schedule) == "interleaved" ? 2 : 1;
    const scheduler::CostModel a = BuildCostModel(m, l, with, 4), b = BuildCostModel(m, l, plain, 4);
    ASSERT_EQ(a.virtual_stage_extra.size(), static_cast<size_t>(2 * l.v)) << schedule;
    const double w = std::string(schedule) == "zb-h1" ? 400e-6 : 0.0;
    for (size_t i = 0; i < a.virtual_stage_extra.size(); ++i) {
      EXPECT_NEAR(a.virtual_stage_extra[i].forward_s - b.virtual_stage_extra[i].forward_s, 400e-6, 1e-15) << schedule;
      EXPECT_NEAR(a.virtual_stage_extra[i].backward_input_s - b.virtual_stage_extra[i].backward_input_s, 400e-6, 1e-15);
      EXPECT_NEAR(a.virtual_stage_extra[i].backward_weight_s - b.virtual_stage_extra[i].backward_weight_s, w, 1e-15);
    }
    EXPECT_DOUBLE_EQ(a.forward_s, b.forward_s);  // the per-layer costs are untouched
  }
  // One rank, one chunk, 4 micro-batches: its busy time grows by 2 actions a micro-batch.
  Layout one;
  one.design = Design::k3D;
  one.micro_batch = 2;
  EXPECT_NEAR(Predict(m, one, with, 8).compute_s - Predict(m, one, plain, 8).compute_s, 4 * 2 * 400e-6, 1e-9);
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
// A tensor-parallel collective's CPU outside its wait (Hardware::comm_cpu_messages_per_tp_collective,
// in comm_cpu_us_per_message units) is compute on a CPU box, in the pass that issues it: per
// micro-batch a layer's 2 forward and 2 backward (with sequence parallelism 4 and 6: the backward
// gathers each column-parallel input again), the embedding's 1 forward, the head's 3 forward (the
// loss's gather and two all-reduces; 4 with sequence parallelism) and 1 backward. The waits keep
// their time; on a GPU nothing is charged.
TEST(Planner, TensorParallelCollectivesTakeCpuOnACpuBox) {
  Hardware box = Toy();
  box.shared_compute_units = 2;
  box.comm_cpu_s_per_message = 100e-6;
  Hardware charged = box;
  charged.comm_cpu_messages_per_tp_collective = 0.5;
  const double each = 50e-6;
  const ModelShape m = Small();
  for (const bool sp : {false, true}) {
    Layout l = Tp2(1);
    l.micro_batch = 2, l.sequence_parallel = sp;
    const scheduler::CostModel a = BuildCostModel(m, l, charged, 2), b = BuildCostModel(m, l, box, 2);
    EXPECT_NEAR(a.forward_s - b.forward_s, m.layers * (sp ? 4 : 2) * each, 1e-15) << sp;
    EXPECT_NEAR(a.backward_input_s - b.backward_input_s, m.layers * (sp ? 6 : 2) * each, 1e-15) << sp;
    EXPECT_DOUBLE_EQ(a.backward_weight_s, b.backward_weight_s);
    EXPECT_DOUBLE_EQ(a.forward_wait_s, b.forward_wait_s);
    EXPECT_DOUBLE_EQ(a.backward_input_wait_s, b.backward_input_wait_s);
    ASSERT_EQ(a.virtual_stage_extra.size(), 1u);  // one stage: the embedding and the head
    EXPECT_NEAR(a.virtual_stage_extra[0].forward_s - b.virtual_stage_extra[0].forward_s, (1 + (sp ? 4 : 3)) * each,
                1e-15) << sp;
    EXPECT_NEAR(a.virtual_stage_extra[0].backward_input_s - b.virtual_stage_extra[0].backward_input_s, each, 1e-15);
    Hardware gpu = charged;
    gpu.shared_compute_units = 0;
    Hardware gpu_plain = box;
    gpu_plain.shared_compute_units = 0;
    EXPECT_DOUBLE_EQ(BuildCostModel(m, l, gpu, 2).forward_s, BuildCostModel(m, l, gpu_plain, 2).forward_s);
  }
  Layout one;  // no tensor parallelism: nothing to charge
  one.design = Design::k3D;
  one.micro_batch = 2;
  EXPECT_DOUBLE_EQ(BuildCostModel(m, one, charged, 1).forward_s, BuildCostModel(m, one, box, 1).forward_s);
}
// E[max of n lognormal factors of mean 1]: 1 alone or without spread; for two, 2 Phi(sigma / sqrt 2),
// sigma^2 = ln(1 + cv^2); more peers wait longer.
TEST(CostModel, ExpectedMaxOfLognormalFactors) {
  EXPECT_DOUBLE_EQ(ExpectedMaxLognormal(1, 0.3), 1.0);
  EXPECT_DOUBLE_EQ(ExpectedMaxLognormal(4, 0.0), 1.0);
  for (const double cv : {0.1, 0.193, 0.5}) {
    const double sigma = std::sqrt(std::log(1 + cv * cv));
    EXPECT_NEAR(ExpectedMaxLognormal(2, cv), std::erfc(-sigma / 2), 1e-9) << cv;
    EXPECT_GT(ExpectedMaxLognormal(4, cv), ExpectedMaxLognormal(2, cv));
  }
}

// Hardware::tp_peer_skew (a what-if, off by default): on a CPU box a TP group's compute, its
// collectives' waits aside, lasts E[max of tp factors of compute_cv] of itself; the waits keep their
// time; no TP group, a GPU or no spread: nothing changes.
TEST(Planner, TensorParallelPeersSkewStretchesTheirCompute) {
  Hardware box = Toy();
  box.shared_compute_units = 2;
  box.compute_cv = 0.2;
  Hardware skewed = box;
  skewed.tp_peer_skew = 1;
  const double k = ExpectedMaxLognormal(2, 0.2) - 1;
  const ModelShape m = Small();
  Layout l = Tp2(1);
  l.micro_batch = 2;
  const scheduler::CostModel a = BuildCostModel(m, l, skewed, 2), b = BuildCostModel(m, l, box, 2);
  EXPECT_NEAR(a.forward_s - a.forward_wait_s, (1 + k) * (b.forward_s - b.forward_wait_s), 1e-12);
  EXPECT_NEAR(a.backward_input_s - a.backward_input_wait_s, (1 + k) * (b.backward_input_s - b.backward_input_wait_s),
              1e-12);
  EXPECT_NEAR(a.backward_weight_s, (1 + k) * b.backward_weight_s, 1e-12);
  EXPECT_DOUBLE_EQ(a.forward_wait_s, b.forward_wait_s);
  EXPECT_DOUBLE_EQ(a.backward_input_wait_s, b.backward_input_wait_s);
  const auto& ea = a.virtual_stage_extra[0];
  const auto& eb = b.virtual_stage_extra[0];
  EXPECT_NEAR(ea.forward_s - ea.forward_wait_s, (1 + k) * (eb.forward_s - eb.forward_wait_s), 1e-12);
  Hardware gpu = skewed;
  gpu.shared_compute_units = 0;
  Hardware gpu_plain = box;
  gpu_plain.shared_compute_units = 0;
  EXPECT_DOUBLE_EQ(BuildCostModel(m, l, gpu, 2).forward_s, BuildCostModel(m, l, gpu_plain, 2).forward_s);
  Layout one;
  one.design = Design::k3D;
  one.micro_batch = 2;
  EXPECT_DOUBLE_EQ(BuildCostModel(m, one, skewed, 1).forward_s, BuildCostModel(m, one, box, 1).forward_s);
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
