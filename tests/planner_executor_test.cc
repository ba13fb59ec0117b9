// planner_executor_test: how the planner costs the choices of the executors it models, against
// values computed by hand on small cases: the schedules a pipeline may name, DeepSpeed's pipeline
// engine (partitioned transfers), gradient accumulation outside the GEMM (autograd, fp32_add),
// ZeRO-1 by all-reduce, uneven pipeline chunks and the executor's own partition of the layers.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "scheduler/planner/cost_model.h"
#include "scheduler/planner/memory_model.h"
#include "scheduler/planner/planner.h"
#include "scheduler/planner/predictor.h"
#include "scheduler/simulator.h"
#include "tests/planner_layouts.h"

namespace zeropp {
namespace planner {
namespace {

using namespace fixtures;  // Small, Toy, SmallRequest, Tp2, Zero3Over4

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

// ZeRO-3 copies each micro-batch's gradients into the buffer the reduction reads: each unit's W
// carries its parameters read in the compute dtype (2 bytes) and written in the reduction's (2, or
// 4 with reduce_fp32), beside the embedding's and the head's own weight work.
TEST(Planner, Zero3LandsEachMicroBatchsGradientsWithOneCopy) {
  const ModelShape m = Small();
  const Hardware h = Toy();
  ASSERT_EQ(h.value_bytes, 2);
  Layout z = Zero3Over4();
  ComputeOptions co;
  co.micro_batch = z.micro_batch;
  co.compute_scale = h.compute_overhead;
  const double own = HeadCost(m, h, co).backward_weight_s + EmbeddingCost(m, h, co).backward_weight_s;
  const std::vector<ChunkShape> chunks = ChunkShapes(m, z);
  double params = 0;
  for (const ChunkShape& k : chunks) params += k.params;
  EXPECT_NEAR(params, StageParameters(m, z, 0), 1e-6);
  for (bool fp32 : {false, true}) {
    z.reduce_fp32 = fp32;
    const scheduler::CostModel c = BuildCostModel(m, z, h, 4);
    ASSERT_EQ(c.virtual_stage_extra.size(), chunks.size());
    double w = 0;
    for (const auto& e : c.virtual_stage_extra) w += e.backward_weight_s;
    const double landing = params * (fp32 ? 6 : 4) / h.ElementwiseBytesPerSecond() * h.compute_overhead;
    EXPECT_GT(landing, 0);
    EXPECT_NEAR(w - own, landing, 1e-12) << "reduce_fp32 " << fp32;
  }
  // A 3D layout's GEMMs accumulate themselves: nothing beside the head's and embedding's work.
  const Layout t = Tp2(1);
  ComputeOptions ct = co;
  ct.tp = 2;
  const scheduler::CostModel c3 = BuildCostModel(m, t, h, 2);
  EXPECT_NEAR(c3.virtual_stage_extra[0].backward_weight_s,
              HeadCost(m, h, ct).backward_weight_s + EmbeddingCost(m, h, ct).backward_weight_s, 1e-12);
}

// The pipelined ZeRO designs, and 3D on zeropp's engine (grad_accumulation sink), land what W does
// not write with the product into a compute-dtype buffer that a reduction empties: once a step for
// FSDP-in-pipeline and 3D, once a unit of u micro-batches for ZeroPP. The first gradient after a
// reduction is a copy (2 + 2 bytes), the others adds (2 + 2 + 2). Small over pp 2: chunk 0 holds 2
// layers (49152 GEMM weights, 576 biases, 256 norm values each), the 128 x 64 table, 32 x 64
// positions and the 128-value final norm; chunk 1 2 layers and the tied head's copy of the table.
// Megatron's 3D (fused) is charged none of it.
TEST(Planner, PipelinedZeroLandsWhatTheWeightGemmsDoNotWrite) {
  const ModelShape m = Small();
  const Hardware h = Toy();
  ASSERT_EQ(h.value_bytes, 2);
  const double layer = 49152 + 576 + 256, table = 128 * 64, positions = 32 * 64, norm = 128;
  const double all[2] = {2 * layer + table + positions + norm, 2 * layer + table};
  const double not_gemm[2] = {2 * (576 + 256) + table + positions + norm, 2 * (576 + 256)};
  struct Case {
    Design design;
    const char* schedule;
    int u;
    const double* landed;
    double bytes;  // per parameter per micro-batch, over 8 micro-batches
  };
  const Case cases[] = {
      {Design::kPipeFsdp, "1f1b", 0, all, (4 + 7 * 6) / 8.0},
      {Design::kPipeFsdp, "zb-h1", 0, not_gemm, (4 + 7 * 6) / 8.0},
      {Design::kZeroPP, "zeropp", 4, not_gemm, (2 * 4 + 6 * 6) / 8.0},
      {Design::kZeroPP, "zeropp", 8, not_gemm, (4 + 7 * 6) / 8.0},
      {Design::k3D, "1f1b", 0, all, (4 + 7 * 6) / 8.0},
      {Design::k3D, "zb-h1", 0, not_gemm, (4 + 7 * 6) / 8.0},
  };
  for (const Case& k : cases) {
    Layout z, t;
    z.design = k.design, z.schedule = k.schedule, z.u = k.u, z.pp = 2, z.zero = 2;
    if (k.design == Design::k3D) {
      z.zero = 1, z.dp = 2, z.grad_accumulation = Layout::GradAccumulation::kSink;
      EXPECT_EQ(z.Name(), std::string("3d_") + k.schedule + "_tp1_pp2_dp2_b1_gsink");
    }
    t.design = Design::k3D, t.schedule = k.design == Design::kZeroPP ? "zb-h1" : k.schedule, t.pp = 2, t.dp = 2;
    ASSERT_EQ(z.Check(m, 4, 4, 32), "") << k.schedule;
    const scheduler::CostModel cz = BuildCostModel(m, z, h, 4, 8), ct = BuildCostModel(m, t, h, 4, 8);
    ASSERT_EQ(cz.virtual_stage_extra.size(), 2u);
    for (int c = 0; c < 2; ++c) {
      const double landing = k.landed[c] * k.bytes / h.ElementwiseBytesPerSecond() * h.compute_overhead;
      EXPECT_GT(landing, 0);
      EXPECT_NEAR(cz.virtual_stage_extra[c].backward_weight_s - ct.virtual_stage_extra[c].backward_weight_s, landing,
                  1e-15)
          << DesignName(k.design) << " " << k.schedule << " u " << k.u << " chunk " << c;
    }
  }
  // One stage on zeropp's engine reduces every micro-batch: 8 copies. Tensor parallelism halves
  // each rank's share, and its linears (autograd Functions of their own) land under zb-h1 too.
  for (const char* schedule : {"1f1b", "zb-h1"}) {
    Layout z = Tp2(1), t = Tp2(1);
    z.schedule = t.schedule = schedule;
    z.grad_accumulation = Layout::GradAccumulation::kSink;
    const double landed = (4 * layer + table + positions + norm) / 2;  // tied: the table is the head
    const double landing = landed * 4 / h.ElementwiseBytesPerSecond() * h.compute_overhead;
    EXPECT_NEAR(BuildCostModel(m, z, h, 2, 8).virtual_stage_extra[0].backward_weight_s -
                    BuildCostModel(m, t, h, 2, 8).virtual_stage_extra[0].backward_weight_s,
                landing, 1e-15)
        << schedule;
  }
  // PREDICT_OPS reports it as the op profile counts it: FSDP-in-pipeline under 1f1b, global batch
  // 32 over zero 2, 16 micro-batches a step: one copy (4 bytes a parameter, the copy kind) and 15
  // adds (3 values, 6 bytes: element-wise work).
  Layout f, t;
  f.design = Design::kPipeFsdp, f.schedule = "1f1b", f.pp = 2, f.zero = 2;
  t.design = Design::k3D, t.schedule = "1f1b", t.pp = 2, t.dp = 2;
  const std::vector<OpTimes> of = PredictOpTimes(m, f, h, 32), ot = PredictOpTimes(m, t, h, 32);
  for (int r = 0; r < 2; ++r) {
    EXPECT_NEAR(of[r].elementwise_values - ot[r].elementwise_values, all[r] * 15 * 3, 1e-6) << r;
    EXPECT_NEAR(of[r].elementwise_s - ot[r].elementwise_s, all[r] * 15 * 6 / h.ElementwiseBytesPerSecond(), 1e-15)
        << r;
    EXPECT_NEAR(of[r].copy_s, all[r] * 4 / h.ElementwiseBytesPerSecond(), 1e-15) << r;
    EXPECT_EQ(ot[r].copy_s, 0) << r;
  }
  Layout p;
  p.design = Design::kZeroPP, p.schedule = "zeropp", p.u = 4, p.pp = 2, p.zero = 2;
  p.grad_accumulation = Layout::GradAccumulation::kSink;
  EXPECT_EQ(p.Check(m, 4, 4, 32),
            "grad_accumulation(sink) is a 3D executor's option (the ZeRO designs accumulate as zeropp's engine does)");
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

}  // namespace
}  // namespace planner
}  // namespace zeropp
