// planner_test: the planner's formulas against values computed by hand on small cases (cost model),
// its hardware reader's refusals, and the simulator's per-stage extras. The memory model's cases:
// planner_memory_model_test.cc; whole-layout predictions and plan's refusals: planner_predict_test.cc.
#include <algorithm>
#include <cmath>
#include <set>
#include <stdexcept>
#include <string>

#include "gtest/gtest.h"
#include "scheduler/generators.h"
#include "scheduler/planner/cost_model.h"
#include "scheduler/planner/memory_model.h"
#include "scheduler/planner/predictor.h"
#include "scheduler/simulator.h"
#include "scheduler/validator.h"
#include "tests/planner_fixtures.h"

namespace zeropp {
namespace planner {
namespace {

using fixtures::kHw;
using fixtures::LinkField;
using fixtures::Small;
using fixtures::Toy;
using fixtures::WithField;

TEST(Hardware, ReadsEveryFieldAndRefusesBadOnes) {
  const Hardware h = Toy();
  EXPECT_EQ(h.devices_per_node, 4);
  EXPECT_DOUBLE_EQ(h.bf16_flops, 100e12);
  EXPECT_DOUBLE_EQ(h.intra.Effective(), 50e9);
  EXPECT_DOUBLE_EQ(h.inter.latency_s, 20e-6);
  EXPECT_DOUBLE_EQ(h.reserved_bytes, 1e9);
  std::string bad = kHw;
  bad.replace(bad.find("\"efficiency\": 0.5, \"reserved_gb\""), 17, "\"efficiency\": 1.5");
  try {
    ParseHardware(bad, "bad.json");
    FAIL() << "accepted an efficiency of 1.5";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("bad.json: field 'memory.efficiency': got 1.5, expected a number in [0.001, 1]"),
              std::string::npos)
        << e.what();
  }
  // The CPU cost of communication defaults to the intra-node link; a measured rate overrides it.
  EXPECT_DOUBLE_EQ(h.CommCpuBytesPerSecond(), 50e9);
  std::string cpu = WithField(kHw, "\"comm_cpu_gbps\": 2.5");
  EXPECT_DOUBLE_EQ(ParseHardware(cpu, "cpu.json").CommCpuBytesPerSecond(), 2.5e9);
  cpu.replace(cpu.find("2.5"), 3, "0");
  EXPECT_THROW(ParseHardware(cpu, "cpu.json"), std::invalid_argument);
  // A byte between nodes costs what one inside a node does unless measured.
  const std::string loopback = WithField(kHw, "\"comm_cpu_gbps\": 2.5");
  EXPECT_DOUBLE_EQ(ParseHardware(loopback, "c.json").CommCpuInterBytesPerSecond(), 2.5e9);
  const std::string both = WithField(loopback, "\"comm_cpu_inter_node_gbps\": 1.25");
  EXPECT_DOUBLE_EQ(ParseHardware(both, "c.json").CommCpuInterBytesPerSecond(), 1.25e9);
  EXPECT_THROW(ParseHardware(WithField(kHw, "\"comm_cpu_inter_node_gbps\": 0"), "c.json"), std::invalid_argument);
  // The CPU per point-to-point message: none unless measured.
  EXPECT_EQ(h.comm_cpu_s_per_message, 0);
  EXPECT_DOUBLE_EQ(ParseHardware(WithField(kHw, "\"comm_cpu_us_per_message\": 24"), "m.json").comm_cpu_s_per_message,
                   24e-6);
  EXPECT_THROW(ParseHardware(WithField(kHw, "\"comm_cpu_us_per_message\": -1"), "m.json"), std::invalid_argument);
  // A tensor-parallel collective's CPU outside its wait, in those units: none unless set.
  EXPECT_EQ(h.comm_cpu_messages_per_tp_collective, 0);
  EXPECT_DOUBLE_EQ(
      ParseHardware(WithField(kHw, "\"comm_cpu_messages_per_tp_collective\": 0.5"), "m.json").comm_cpu_messages_per_tp_collective,
      0.5);
  EXPECT_THROW(ParseHardware(WithField(kHw, "\"comm_cpu_messages_per_tp_collective\": -1"), "m.json"),
               std::invalid_argument);
  // GPUs' computation slowed by the collectives it overlaps: none unless the description says so.
  EXPECT_EQ(h.overlap_compute_slowdown, 0);
  EXPECT_DOUBLE_EQ(ParseHardware(WithField(kHw, "\"overlap_compute_slowdown\": 0.189"), "o.json").overlap_compute_slowdown,
                   0.189);
  EXPECT_THROW(ParseHardware(WithField(kHw, "\"overlap_compute_slowdown\": -0.1"), "o.json"), std::invalid_argument);
  // A CPU box's optional oversubscription measurements: absent, the blocking link is intra_node.
  EXPECT_EQ(h.intra_oversubscribed.bytes_per_s, 0);
  EXPECT_EQ(h.oversubscribed_compute_factor, 1);
  std::string over = WithField(kHw, LinkField("intra_node_oversubscribed", "0.3", 700) +
                                         ", \"oversubscribed_compute_factor\": 1.05");
  const Hardware o = ParseHardware(over, "over.json");
  EXPECT_DOUBLE_EQ(o.intra_oversubscribed.Effective(), 0.3e9);
  EXPECT_DOUBLE_EQ(o.intra_oversubscribed.latency_s, 700e-6);
  EXPECT_DOUBLE_EQ(o.oversubscribed_compute_factor, 1.05);
  EXPECT_EQ(o.intra_oversubscribed_gather.bytes_per_s, 0);  // absent: the gathers use the link above
  // An optional link added to `json` as `key` is read into `field`; a bandwidth of 0 is refused.
  auto optional_link = [](const std::string& json, const char* key, LinkSpec Hardware::*field) {
    std::string text = WithField(json, LinkField(key, "0.6", 2200));
    const Hardware read = ParseHardware(text, "link.json");
    EXPECT_DOUBLE_EQ((read.*field).Effective(), 0.6e9) << key;
    EXPECT_DOUBLE_EQ((read.*field).latency_s, 2200e-6) << key;
    text.replace(text.find("0.6"), 3, "0");
    EXPECT_THROW(ParseHardware(text, "link.json"), std::invalid_argument) << key;
  };
  optional_link(over, "intra_node_oversubscribed_gather", &Hardware::intra_oversubscribed_gather);
  // The inter-node link measured idle: absent, none.
  EXPECT_EQ(h.inter_idle.bytes_per_s, 0);
  optional_link(kHw, "inter_node_idle", &Hardware::inter_idle);
  // A pipeline transfer inside the box while its ranks compute: absent, none.
  EXPECT_EQ(h.intra_p2p.bytes_per_s, 0);
  optional_link(kHw, "intra_node_p2p", &Hardware::intra_p2p);
  // A tensor-parallel collective while the ranks just fill the cores: absent, none.
  EXPECT_EQ(h.intra_tp_filled.bytes_per_s, 0);
  optional_link(kHw, "intra_node_tp_filled", &Hardware::intra_tp_filled);
  over.replace(over.find("1.05"), 4, "0.5");
  EXPECT_THROW(ParseHardware(over, "over.json"), std::invalid_argument);
  EXPECT_THROW(ParseHardware("{", "x"), std::invalid_argument);
  EXPECT_THROW(LoadHardware("no-such-machine"), std::invalid_argument);
}
TEST(Hardware, ShippedDescriptionsLoad) {
  for (const char* name :
       {"a100-80gb-ib200x8", "a100-80gb-ib400", "h100-80gb-ib400x8", "h200-141gb-ib400x8", "cpu-local"}) {
    const Hardware h = LoadHardware(std::string("scheduler/planner/hardware/") + name + ".json");
    EXPECT_GT(h.ComputeFlops(), 0) << name;
  }
}
TEST(ModelShape, ParameterCountsMatchKnownModels) {
  // GPT-2 small (tied head, learned positions): 124,439,808; Llama-2-7B: 6,738,415,616.
  ModelShape gpt2;
  gpt2.hidden = 768, gpt2.layers = 12, gpt2.heads = 12, gpt2.kv_heads = 12, gpt2.ffn = 3072, gpt2.vocab = 50257;
  gpt2.seq = 1024, gpt2.tied_embedding = true;
  EXPECT_DOUBLE_EQ(gpt2.Parameters(), 124439808);
  EXPECT_DOUBLE_EQ(ModelPreset("llama2-7b").Parameters(), 6738415616);
  EXPECT_THROW(ModelPreset("gpt5"), std::invalid_argument);
}
TEST(CostModel, MatmulAndEfficiencyByHand) {
  Hardware h = Toy();
  for (const GemmPass p : {GemmPass::kForward, GemmPass::kInputGrad, GemmPass::kWeightGrad}) {
    EXPECT_DOUBLE_EQ(LinearGemmSeconds(h, p, 100, 200, 300), 2.0 * 100 * 200 * 300 / (100e12 * 0.5));
  }
  h.matmul_half_dim = 64;
  EXPECT_DOUBLE_EQ(MatmulEfficiency(h, 64, 64, 64), 0.5 * 0.125);
  EXPECT_DOUBLE_EQ(LinearEfficiency(h, GemmPass::kWeightGrad, 64, 64, 64), 0.5 * 0.125);
}
// A measured table (tokens {100, 400} x in {1000, 4000} x out {1000, 4000}, out fastest) replaces
// the formula: exact at its points, trilinear in log size of 1/efficiency between them, the edge's
// value beyond them, and one table per pass.
std::string WithTable(const std::string& forward, const std::string& input_grad, const std::string& weight_grad) {
  std::string text = fixtures::kHw;
  const std::string table = ", \"table\": {\"tokens\": [100, 400], \"dims\": [1000, 4000], \"forward\": [" + forward +
                            "], \"input_grad\": [" + input_grad + "], \"weight_grad\": [" + weight_grad + "]}";
  text.insert(text.find("\"half_dim\": 0") + std::string("\"half_dim\": 0").size(), table);
  return text;
}
TEST(CostModel, MeasuredMatmulTableInterpolatesByHand) {
  const std::string fwd = "0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1", flat = "0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5";
  const Hardware h = ParseHardware(WithTable(fwd, flat, "0.2, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2, 0.3"), "table.json");
  ASSERT_EQ(h.matmul_table.efficiency[0].size(), 8u);
  const GemmPass f = GemmPass::kForward;
  // Grid points: index (tokens * 2 + in) * 2 + out.
  EXPECT_DOUBLE_EQ(LinearEfficiency(h, f, 100, 1000, 1000), 0.4);
  EXPECT_DOUBLE_EQ(LinearEfficiency(h, f, 400, 1000, 4000), 0.9);
  EXPECT_DOUBLE_EQ(LinearEfficiency(h, f, 100, 4000, 1000), 0.6);
  // 200 tokens is halfway in log size: the mean of 1/0.4 and 1/0.8.
  EXPECT_DOUBLE_EQ(LinearEfficiency(h, f, 200, 1000, 1000), 1 / (0.5 / 0.4 + 0.5 / 0.8));
  // Halfway on all three axes: the mean of all eight.
  double inv = 0;
  for (const double e : {0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1}) inv += 1 / e / 8;
  EXPECT_NEAR(LinearEfficiency(h, f, 200, 2000, 2000), 1 / inv, 1e-12);
  // Beyond the grid: the nearest edge.
  EXPECT_DOUBLE_EQ(LinearEfficiency(h, f, 10, 100, 1e5), 0.5);
  EXPECT_DOUBLE_EQ(LinearEfficiency(h, f, 1e6, 1e6, 1e6), 1.1);
  // Each pass reads its own table; seconds follow.
  EXPECT_DOUBLE_EQ(LinearEfficiency(h, GemmPass::kInputGrad, 400, 4000, 4000), 0.5);
  EXPECT_DOUBLE_EQ(LinearEfficiency(h, GemmPass::kWeightGrad, 400, 4000, 4000), 0.3);
  EXPECT_DOUBLE_EQ(LinearGemmSeconds(h, GemmPass::kWeightGrad, 400, 4000, 4000),
                   2.0 * 400 * 4000 * 4000 / (100e12 * 0.3));
  // A flat table at the formula's own efficiency (0.5, half_dim 0) costs a layer exactly as the formula.
  const Hardware same = ParseHardware(WithTable(flat, flat, flat), "flat.json");
  const ModelShape m = Small();
  ComputeOptions o;
  o.micro_batch = 2;
  EXPECT_DOUBLE_EQ(LayerCost(m, same, o).matmul_s, LayerCost(m, Toy(), o).matmul_s);
  EXPECT_DOUBLE_EQ(HeadCost(m, same, o).backward_weight_s, HeadCost(m, Toy(), o).backward_weight_s);
  // Refusals name the field, the value and what was expected.
  auto refusal = [](const std::string& text) {
    try {
      ParseHardware(text, "t.json");
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(refusal(WithTable(fwd, flat, "0.2, 0.2")),
            "t.json: field 'matmul.table.weight_grad': got a list of 2, expected a list of 8 numbers in [1e-06, 10]");
  EXPECT_EQ(refusal(WithTable(fwd, "0.5, 0.5, 0.5, 0, 0.5, 0.5, 0.5, 0.5", flat)),
            "t.json: field 'matmul.table.input_grad[3]': got 0, expected a number in [1e-06, 10]");
  std::string unsorted = WithTable(fwd, flat, flat);
  unsorted.replace(unsorted.find("[1000, 4000]"), 12, "[4000, 1000]");
  EXPECT_EQ(refusal(unsorted), "t.json: field 'matmul.table.dims': got a list not strictly increasing at entry 1, "
                               "expected strictly increasing sizes");
}
TEST(CostModel, CollectivesByAlgorithmAndLinkClass) {
  Hardware h = Toy();
  const double b = 8e9;
  // 4 ranks in one node: ring all-gather 3 alpha + 3/4 b / (100 GB/s * 0.5).
  EXPECT_DOUBLE_EQ(CollectiveSeconds(h, CollectiveKind::kAllGather, b, 4, 4), 3 * 10e-6 + 0.75 * b / 50e9);
  EXPECT_DOUBLE_EQ(CollectiveSeconds(h, CollectiveKind::kAllReduce, b, 4, 4), 2 * 3 * 10e-6 + 2 * 0.75 * b / 50e9);
  // 8 ranks over 2 nodes, 4 per node: bus min(50, 40 * 4/4) = 40 GB/s, inter-node latency.
  EXPECT_DOUBLE_EQ(CollectiveSeconds(h, CollectiveKind::kReduceScatter, b, 8, 4), 7 * 20e-6 + 7.0 / 8 * b / 40e9);
  // 8 ranks, 1 per node (3 other groups share the node's NICs): 40 * 1/4 = 10 GB/s.
  EXPECT_DOUBLE_EQ(BusBytesPerSecond(h, 8, 1), 10e9);
  // Tree: 2 ceil(log2 p) alpha + 2 b / bus; auto picks the faster (tree for tiny messages).
  h.allreduce_algorithm = "tree";
  EXPECT_DOUBLE_EQ(CollectiveSeconds(h, CollectiveKind::kAllReduce, b, 8, 4), 2 * 3 * 20e-6 + 2 * b / 40e9);
  h.allreduce_algorithm = "auto";
  const double tiny = 8;
  EXPECT_DOUBLE_EQ(CollectiveSeconds(h, CollectiveKind::kAllReduce, tiny, 8, 4), 2 * 3 * 20e-6 + 2 * tiny / 40e9);
  EXPECT_EQ(CollectiveSeconds(h, CollectiveKind::kAllReduce, b, 1, 1), 0);
  // A wire-bound inter-node link (tools/link_fit.py): a hop takes max(20 us, 5 us + its bytes' time),
  // b / 8 over 40 GB/s; tiny messages pay the 20 us; a group inside one node is untouched.
  h.allreduce_algorithm = "ring";
  h.inter.wire_latency_s = 5e-6;
  EXPECT_DOUBLE_EQ(CollectiveSeconds(h, CollectiveKind::kReduceScatter, b, 8, 4), 7 * (5e-6 + b / 8 / 40e9));
  EXPECT_DOUBLE_EQ(CollectiveSeconds(h, CollectiveKind::kAllReduce, b, 8, 4), 2 * 7 * (5e-6 + b / 8 / 40e9));
  EXPECT_DOUBLE_EQ(CollectiveSeconds(h, CollectiveKind::kAllGather, tiny, 8, 4), 7 * 20e-6);
  EXPECT_DOUBLE_EQ(CollectiveSeconds(h, CollectiveKind::kAllGather, b, 4, 4), 3 * 10e-6 + 0.75 * b / 50e9);
  // Read from a description: at most the link's latency.
  std::string wire = kHw;
  const std::string link = "\"inter_node\": {\"bandwidth_gbps\": 40, \"latency_us\": 20,";
  wire.replace(wire.find(link), link.size(), link + " \"wire_latency_us\": 5,");
  EXPECT_DOUBLE_EQ(ParseHardware(wire, "w.json").inter.wire_latency_s, 5e-6);
  EXPECT_LT(Toy().inter.wire_latency_s, 0);
  wire.replace(wire.find("\"wire_latency_us\": 5"), 20, "\"wire_latency_us\": 25");
  EXPECT_THROW(ParseHardware(wire, "w.json"), std::invalid_argument);
}
TEST(CostModel, LayerCostByHand) {
  const Hardware h = Toy();
  const ModelShape m = Small();
  ComputeOptions o;
  o.micro_batch = 2;
  const ActionCost c = LayerCost(m, h, o);
  const double tokens = 64, peak = 100e12 * 0.5;
  // Forward GEMMs: QKV 64x192, proj 64x64, fc 64x256, fc2 256x64 (K x N), M = 64 tokens.
  const double gemm_f = 2 * tokens * (64 * 192 + 64 * 64 + 64 * 256 + 256 * 64) / peak;
  const double attn_f = 4.0 * 2 * 32 * 32 * 64 / (100e12 * 0.25);
  const double values = 16 * tokens * 64 + 4 * tokens * 256 + 4 * 2 * 4 * 32 * 32;
  const double ew_f = values * 2 / (1000e9 * 0.5);
  EXPECT_NEAR(c.forward_s, gemm_f + attn_f + ew_f, 1e-18);
  EXPECT_NEAR(c.backward_weight_s, gemm_f, 1e-18);  // half_dim 0: shape-independent efficiency
  EXPECT_NEAR(c.backward_input_s, gemm_f + 2 * attn_f + 2 * ew_f, 1e-18);
  EXPECT_EQ(c.tp_comm_s, 0);
  // tp=2: every GEMM halves, 2 all-reduces of the b*s*h activation forward and 2 backward.
  o.tp = 2;
  const ActionCost t = LayerCost(m, h, o);
  const double ar = CollectiveSeconds(h, CollectiveKind::kAllReduce, tokens * 64 * 2, 2, 2);
  EXPECT_NEAR(t.tp_comm_s, 4 * ar, 1e-18);
  EXPECT_NEAR(t.backward_weight_s, gemm_f / 2, 1e-18);
}
// matmul.cold_weight_gbps: the passes that read a weight (forward, input gradient) each pay its bytes
// at that rate, whatever the tokens; the weight gradient does not read it. By hand with Small() (bf16,
// 2 bytes a value) at 20 GB/s: a layer's weights 64x192 + 64x64 + 64x256 + 256x64 values, the head's
// 64x128.
TEST(CostModel, ColdWeightsArePaidPerPassThatReadsThem) {
  const ModelShape m = Small();
  const Hardware plain = Toy();
  const Hardware cold = ParseHardware(
      std::string(fixtures::kHw).replace(std::string(fixtures::kHw).find("\"half_dim\": 0"), 13,
                                         "\"half_dim\": 0, \"cold_weight_gbps\": 20"),
      "cold");
  EXPECT_DOUBLE_EQ(cold.cold_weight_bytes_per_s, 20e9);
  const double layer = (64.0 * 192 + 64 * 64 + 64 * 256 + 256 * 64) * 2 / 20e9, head = 64.0 * 128 * 2 / 20e9;
  for (const int mb : {1, 4}) {  // whatever the tokens
    ComputeOptions o;
    o.micro_batch = mb;
    const ActionCost a = LayerCost(m, cold, o), b = LayerCost(m, plain, o);
    EXPECT_NEAR(a.forward_s - b.forward_s, layer, 1e-15) << mb;
    EXPECT_NEAR(a.backward_input_s - b.backward_input_s, layer, 1e-15) << mb;
    EXPECT_DOUBLE_EQ(a.backward_weight_s, b.backward_weight_s) << mb;
    const ActionCost ha = HeadCost(m, cold, o), hb = HeadCost(m, plain, o);
    EXPECT_NEAR(ha.forward_s - hb.forward_s, head, 1e-15) << mb;
    EXPECT_DOUBLE_EQ(ha.backward_weight_s, hb.backward_weight_s) << mb;
  }
  EXPECT_DOUBLE_EQ(ColdWeightSeconds(plain, 64, 64), 0.0);  // unset: nothing
}
// Flash attention: masked blocks skipped (half the dense core's FLOPs), backward 2.5x forward, at
// attention_efficiency; FlashAttention 1's kernels (flash_v1) at attention_efficiency_flash_v1,
// which defaults to attention_efficiency when the description does not set it.
TEST(CostModel, FlashAttentionKernelsByHand) {
  ModelShape m = Small();
  m.flash_attention = true;
  ComputeOptions o;
  o.micro_batch = 2;
  const double core_f = 4.0 * 2 * 32 * 32 * 64 * 0.5;
  const Hardware h = Toy();
  EXPECT_DOUBLE_EQ(h.attention_efficiency_flash_v1, 0.25);
  EXPECT_NEAR(LayerCost(m, h, o).attention_s, 3.5 * core_f / (100e12 * 0.25), 1e-18);
  m.flash_v1 = true;
  EXPECT_NEAR(LayerCost(m, h, o).attention_s, 3.5 * core_f / (100e12 * 0.25), 1e-18);
  const Hardware v1 = ParseHardware(WithField(kHw, "\"attention_efficiency_flash_v1\": 0.1"), "v1.json");
  EXPECT_NEAR(LayerCost(m, v1, o).attention_s, 3.5 * core_f / (100e12 * 0.1), 1e-18);
  m.flash_v1 = false;  // FlashAttention 2: the description's attention_efficiency
  EXPECT_NEAR(LayerCost(m, v1, o).attention_s, 3.5 * core_f / (100e12 * 0.25), 1e-18);
  EXPECT_THROW(ParseHardware(WithField(kHw, "\"attention_efficiency_flash_v1\": 0"), "v1.json"), std::invalid_argument);
}
// Element-wise work by hand (micro-batch 2 x 32 tokens, h 64, ffn 256, dense attention: 16 hidden
// passes, 4 over the MLP, 4 over the 2 x 4 heads' 32 x 32 scores; the head's loss reads bf16 logits
// and moves 8 fp32 bytes a logit) at the description's memory efficiency, and at its own
// memory.elementwise_efficiency where set: the element-wise times scale, the optimizer's does not.
TEST(CostModel, ElementwiseEfficiencyByHand) {
  const ModelShape m = Small();
  ComputeOptions o;
  o.micro_batch = 2;
  const double tokens = 64, values = 16 * tokens * 64 + 4 * tokens * 256 + 4 * 2 * 4 * 32 * 32;
  const double logits = tokens * 128 * (2 + 4 + 4);
  const Hardware h = Toy();
  EXPECT_DOUBLE_EQ(h.elementwise_efficiency, 0.5);
  EXPECT_NEAR(LayerCost(m, h, o).elementwise_s, 3 * values * 2 / (1000e9 * 0.5), 1e-18);
  EXPECT_NEAR(HeadCost(m, h, o).elementwise_s, 2 * logits / (1000e9 * 0.5), 1e-18);
  std::string eager = kHw;
  const std::string memory = "\"efficiency\": 0.5, \"reserved_gb\": 1";
  ASSERT_NE(eager.find(memory), std::string::npos);
  eager.replace(eager.find(memory), memory.size(), memory + ", \"elementwise_efficiency\": 0.2");
  const Hardware e = ParseHardware(eager, "eager.json");
  EXPECT_NEAR(LayerCost(m, e, o).elementwise_s, 3 * values * 2 / (1000e9 * 0.2), 1e-18);
  EXPECT_NEAR(HeadCost(m, e, o).elementwise_s, 2 * logits / (1000e9 * 0.2), 1e-18);
  EXPECT_DOUBLE_EQ(OptimizerSeconds(e, 1e6), OptimizerSeconds(h, 1e6));
  std::string bad = eager;
  bad.replace(bad.find("0.2"), 3, "1.5");
  EXPECT_THROW(ParseHardware(bad, "bad.json"), std::invalid_argument);
}
// A GPU's host issue time per layer (layer_dispatch_us): the layer takes the larger of its device
// time and the host's, a host-bound layer's passes stretched in proportion; the default (0)
// changes nothing.
TEST(CostModel, LayerDispatchFloorsTheLayer) {
  const ModelShape m = Small();
  ComputeOptions o;
  o.micro_batch = 2;
  const ActionCost gpu = LayerCost(m, Toy(), o);
  const double passes[] = {gpu.forward_s, gpu.backward_input_s, gpu.backward_weight_s};
  const double device = passes[0] + passes[1] + passes[2];
  auto with = [&](double dispatch_s) {
    const std::string field = "\"layer_dispatch_us\": " + std::to_string(dispatch_s * 1e6);
    return LayerCost(m, ParseHardware(WithField(kHw, field), "d.json"), o);
  };
  // Below the layer's device time, though above three times its shortest pass: the host keeps
  // ahead, nothing changes.
  const double lo = *std::min_element(passes, passes + 3);
  ASSERT_GT(0.95 * device, 3 * lo);
  const ActionCost ahead = with(0.95 * device);
  EXPECT_NEAR(ahead.forward_s, passes[0], 1e-12);
  EXPECT_NEAR(ahead.backward_input_s, passes[1], 1e-12);
  EXPECT_NEAR(ahead.backward_weight_s, passes[2], 1e-12);
  // Twice the device time: host-bound, every pass twice as long (to the microsecond digits the
  // description is written with).
  const ActionCost bound = with(2 * device);
  const double got[] = {bound.forward_s, bound.backward_input_s, bound.backward_weight_s};
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(got[i], 2 * passes[i], 1e-6 * device) << i;
  EXPECT_NEAR(bound.forward_s + bound.Backward(), 2 * device, 1e-6 * device);
  EXPECT_DOUBLE_EQ(bound.matmul_s, gpu.matmul_s);  // the kinds' device times stay
  EXPECT_THROW(ParseHardware(WithField(kHw, "\"layer_dispatch_us\": -1"), "d.json"), std::invalid_argument);
}
// Sequence parallelism: forward 2 x (all-gather + reduce-scatter) of the b*s*h activation, their
// conjugates in the backward, and the backward's re-gather of the two column-parallel inputs:
// blocking (benchmarks/baseline_3d), or behind each one's input-gradient GEMM (Megatron).
TEST(CostModel, SequenceParallelBackwardRegathersColumnInputs) {
  Hardware h = Toy();
  const ModelShape m = Small();
  ComputeOptions o;
  o.micro_batch = 2;
  o.tp = 2;
  o.sequence_parallel = true;
  const double tokens = 64, act = tokens * 64 * 2, peak = 100e12 * 0.5;
  const double ag = CollectiveSeconds(h, CollectiveKind::kAllGather, act, 2, 2);
  const double rs = CollectiveSeconds(h, CollectiveKind::kReduceScatter, act, 2, 2);
  o.async_tp_backward = false;
  const ActionCost blocking = LayerCost(m, h, o);
  EXPECT_NEAR(blocking.tp_forward_s, 2 * (ag + rs), 1e-18);
  EXPECT_NEAR(blocking.tp_backward_extra_s, 2 * ag, 1e-18);
  EXPECT_NEAR(blocking.tp_comm_s, 4 * (ag + rs) + 2 * ag, 1e-18);
  // Input-gradient GEMMs of QKV (64 tokens x 96 -> 64) and MLP up (64 x 128 -> 64) at tp 2.
  const double qkv_di = 2 * tokens * 96 * 64 / peak, up_di = 2 * tokens * 128 * 64 / peak;
  // A latency-only link whose gather outlasts the QKV GEMM but not the MLP's.
  h.intra.bytes_per_s = 1e30;
  h.intra.latency_s = 0.5 * (qkv_di + up_di);
  const double ag_slow = CollectiveSeconds(h, CollectiveKind::kAllGather, act, 2, 2);
  ASSERT_GT(ag_slow, qkv_di);
  ASSERT_LT(ag_slow, up_di);
  o.async_tp_backward = true;
  const ActionCost async = LayerCost(m, h, o);
  const double expected = std::max(0.0, ag_slow - qkv_di) + std::max(0.0, ag_slow - up_di);
  EXPECT_NEAR(async.tp_backward_extra_s, expected, 1e-15);
  o.async_tp_backward = false;
  const ActionCost slow_blocking = LayerCost(m, h, o);
  EXPECT_NEAR(slow_blocking.backward_input_s - async.backward_input_s, 2 * ag_slow - expected, 1e-15);
  EXPECT_NEAR(slow_blocking.backward_weight_s, async.backward_weight_s, 1e-18);
}
// Tensor parallelism outside the layers: the embedding's reduction (forward only), the head's
// input copy (its backward all-reduces) and the vocabulary-parallel loss's all-gather of each
// token's maximum and two fp32 all-reduces; with sequence parallelism a reduce-scatter into the
// shards, and the head's input all-gathered forward and reduce-scattered backward.
TEST(CostModel, TensorParallelEmbeddingAndHeadByHand) {
  const Hardware h = Toy();
  const ModelShape m = Small();
  ComputeOptions o;
  o.micro_batch = 2;
  EXPECT_EQ(EmbeddingCost(m, h, o).forward_s, 0);
  const ActionCost plain_head = HeadCost(m, h, o);
  EXPECT_EQ(plain_head.tp_comm_s, 0);
  o.tp = 2;
  const double tokens = 64, act = tokens * 64 * 2;
  auto coll = [&](CollectiveKind k, double bytes) { return CollectiveSeconds(h, k, bytes, 2, 2); };
  const ActionCost e = EmbeddingCost(m, h, o);
  EXPECT_DOUBLE_EQ(e.forward_s, coll(CollectiveKind::kAllReduce, act));
  EXPECT_EQ(e.backward_input_s + e.backward_weight_s, 0);
  const double loss = coll(CollectiveKind::kAllGather, tokens * 4 * 2) + 2 * coll(CollectiveKind::kAllReduce, tokens * 4);
  const ActionCost head = HeadCost(m, h, o);
  const double n = 128.0 / 2, ew = tokens * n * (2 + 4 + 4) / (1000e9 * 0.5), peak = 100e12 * 0.5;
  EXPECT_NEAR(head.forward_s, 2 * tokens * n * 64 / peak + ew + loss, 1e-18);
  EXPECT_NEAR(head.backward_input_s, 2 * tokens * n * 64 / peak + ew + coll(CollectiveKind::kAllReduce, act), 1e-18);
  EXPECT_NEAR(head.tp_comm_s, loss + coll(CollectiveKind::kAllReduce, act), 1e-18);
  o.sequence_parallel = true;
  EXPECT_DOUBLE_EQ(EmbeddingCost(m, h, o).forward_s, coll(CollectiveKind::kReduceScatter, act));
  EXPECT_NEAR(HeadCost(m, h, o).tp_comm_s,
              coll(CollectiveKind::kAllGather, act) + loss + coll(CollectiveKind::kReduceScatter, act), 1e-18);
}
// The executor's measured costs (./zpp calibrate on a CPU box): the optimizer at its measured
// rate instead of the memory-bound formula. The gradient bookkeeping is not in any action's cost:
// the simulator charges it per reduction (planner_predict_test).
TEST(CostModel, MeasuredOptimizerRateAndGradientBookkeeping) {
  std::string text = kHw;
  text.replace(text.find("\"allreduce_algorithm\""), 0,
               "\"optimizer_mparams_per_s\": 250, \"grad_handling_ns_per_param\": 0.5, \"compute_overhead\": 1.5, ");
  const Hardware h = ParseHardware(text, "measured");
  const Hardware plain = Toy();
  EXPECT_NEAR(OptimizerSeconds(h, 1e6), 1e6 / 250e6, 1e-15);
  EXPECT_NEAR(OptimizerSeconds(plain, 1e6), 1e6 * 30 / (1000e9 * 0.5), 1e-15);  // bf16: 30 B per parameter
  const ModelShape m = Small();
  EXPECT_DOUBLE_EQ(h.grad_handling_s_per_param, 0.5e-9);
  ComputeOptions o;
  o.micro_batch = 2;
  o.compute_scale = h.compute_overhead;
  const ActionCost with = LayerCost(m, h, o), without = LayerCost(m, plain, o);
  EXPECT_DOUBLE_EQ(with.backward_weight_s - without.backward_weight_s, 0);
  EXPECT_DOUBLE_EQ(HeadCost(m, h, o).backward_weight_s, HeadCost(m, plain, o).backward_weight_s);
}
// Eager execution's fixed cost per layer per micro-batch (./zpp calibrate fits it beside
// compute_overhead): a third each in F, Bi and W of every layer, whatever its size, not scaled by
// compute_overhead; the LM head pays none.
TEST(CostModel, FixedLayerOverheadSplitsAcrossForwardAndBothBackwards) {
  std::string text = kHw;
  text.replace(text.find("\"allreduce_algorithm\""), 0, "\"layer_overhead_us\": 300, \"compute_overhead\": 1.5, ");
  const Hardware h = ParseHardware(text, "overhead");
  EXPECT_DOUBLE_EQ(h.layer_overhead_s, 300e-6);
  std::string plain_text = kHw;
  plain_text.replace(plain_text.find("\"allreduce_algorithm\""), 0, "\"compute_overhead\": 1.5, ");
  const Hardware plain = ParseHardware(plain_text, "plain");
  const ModelShape m = Small();
  for (int b : {1, 8}) {
    ComputeOptions o;
    o.micro_batch = b;
    o.compute_scale = h.compute_overhead;
    const ActionCost with = LayerCost(m, h, o), without = LayerCost(m, plain, o);
    EXPECT_NEAR(with.forward_s - without.forward_s, 100e-6, 1e-15);
    EXPECT_NEAR(with.backward_input_s - without.backward_input_s, 100e-6, 1e-15);
    EXPECT_NEAR(with.backward_weight_s - without.backward_weight_s, 100e-6, 1e-15);
    EXPECT_DOUBLE_EQ(HeadCost(m, h, o).forward_s, HeadCost(m, plain, o).forward_s);
  }
  text.replace(text.find("300"), 3, "-1");
  EXPECT_THROW(ParseHardware(text, "negative"), std::invalid_argument);
}
TEST(Simulator, VirtualStageExtraAddsToItsStageOnly) {
  using namespace scheduler;
  const Schedule s = OneFOneB(2, 4);
  CostModel c;
  c.forward_s = 1, c.backward_s = 2;
  const double base = Simulate(s, c).step_s;
  c.virtual_stage_extra.assign(2, {});
  c.virtual_stage_extra[1] = {0.5, 0.25, 0.25};
  const SimResult r = Simulate(s, c);
  EXPECT_DOUBLE_EQ(r.busy_s[1] - r.busy_s[0], 4 * (0.5 + 0.25 + 0.25));
  EXPECT_GT(r.step_s, base);
}
// Chunks of unequal size: each gather and reduction moves its own chunk's (z-1)/z, and each
// computation takes its chunk's share of the stage's time.
TEST(Simulator, ChunksOfUnequalSize) {
  using namespace scheduler;
  Zero3Plan z;
  z.units = 3;
  const Schedule s = Zero3(1, z);
  CostModel c;
  c.forward_s = 4, c.backward_s = 8, c.backward_input_s = 4, c.backward_weight_s = 4;
  c.zero = 4;
  c.intra = {0.0, 1e12};
  c.chunk_param_bytes = {400, 0, 1200};
  c.chunk_compute_share = {0.25, 0, 0.75};
  const SimResult r = Simulate(s, c);
  // One micro-batch: every unit gathered for forward; in backward the last is still held and the
  // other two are gathered again; every unit reduced once.
  EXPECT_DOUBLE_EQ(r.gather_bytes_per_rank, 0.75 * (400 + 0 + 1200) + 0.75 * (0 + 400));
  EXPECT_DOUBLE_EQ(r.reduce_bytes_per_rank, 0.75 * (400 + 0 + 1200));
  EXPECT_DOUBLE_EQ(r.busy_s[0], 4 + 8);  // the shares add up to one stage's F + B
  c.chunk_compute_share = {};            // uniform: 1/3 each, the same total
  EXPECT_DOUBLE_EQ(Simulate(s, c).busy_s[0], 4 + 8);
}
// On a CPU box a transfer's copies take the rank's cores: each gathered, reduced or sent byte
// delays the rank's compute by comm_cpu_s_per_byte, and the step grows by exactly that much on a
// single rank whose communication is otherwise hidden.
TEST(Simulator, CommunicationCpuIsTakenFromCompute) {
  using namespace scheduler;
  Zero3Plan z;
  z.units = 2;
  const Schedule s = Zero3(2, z);
  CostModel c;
  c.forward_s = 1, c.backward_s = 2, c.backward_input_s = 1, c.backward_weight_s = 1;
  c.zero = 4;
  c.stage_param_bytes = 800;
  c.intra = {0.0, 1e12};  // communication itself is free: nothing to wait for
  const SimResult base = Simulate(s, c);
  c.comm_cpu_s_per_byte = 1e-3;
  const SimResult r = Simulate(s, c);
  // Each gather and reduction moves (z-1)/z of a 400-byte unit: 300 bytes, 0.3 s of CPU.
  const double moved = r.gather_bytes_per_rank + r.reduce_bytes_per_rank;
  EXPECT_GT(moved, 0);
  EXPECT_NEAR(r.busy_s[0] - base.busy_s[0], moved * 1e-3, 1e-9);
  EXPECT_NEAR(r.step_s - base.step_s, moved * 1e-3, 1e-9);
  c.p2p_cpu_s_per_byte = 5e-3;  // the rate of transfers between stages: none here
  EXPECT_DOUBLE_EQ(Simulate(s, c).busy_s[0], r.busy_s[0]);
}

// A pipeline transfer takes CPU on both ranks: per byte, and per message (an activation is a header
// and its data, a gradient one message). 1F1B over 2 ranks, 4 micro-batches: each rank sends 4
// and receives 4 of the other kind, so each loses 8 transfers' bytes and 4 x (2 + 1) messages.
TEST(Simulator, PipelineTransfersTakeCpuOnBothSides) {
  using namespace scheduler;
  const Schedule s = OneFOneB(2, 4);
  CostModel c;
  c.forward_s = 1, c.backward_s = 2, c.backward_input_s = 1, c.backward_weight_s = 1;
  c.activation_bytes = 1000;
  c.inter = {0.0, 1e12};
  const SimResult base = Simulate(s, c);
  c.comm_cpu_s_per_byte = 1e-4;
  c.comm_cpu_s_per_message = 0.01;
  const SimResult r = Simulate(s, c);
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_NEAR(r.busy_s[rank] - base.busy_s[rank], 8 * 1000 * 1e-4 + 4 * (2 + 1) * 0.01, 1e-9) << rank;
  }
  // Transfers between stages on different nodes: their own rate per byte, the messages' unchanged.
  c.p2p_cpu_s_per_byte = 3e-4;
  const SimResult crossing = Simulate(s, c);
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_NEAR(crossing.busy_s[rank] - base.busy_s[rank], 8 * 1000 * 3e-4 + 4 * (2 + 1) * 0.01, 1e-9) << rank;
  }
  c.p2p_cpu_s_per_byte = -1;
  // Per message only where transfers cost CPU at all (a GPU's cost model has no per-byte CPU).
  c.comm_cpu_s_per_byte = 0;
  EXPECT_DOUBLE_EQ(Simulate(s, c).busy_s[0], base.busy_s[0]);
}

// Offloaded parameters: each gather first stages the rank's shard (the chunk's bytes / zero), each
// reduction sends its gradient shard back, and each reduction of a chunk after its first in the
// step reads the shard back to accumulate; with zero = 1 an offloaded chunk is still staged (and
// a resident one costs nothing). With free links and no compute the comm timeline holds exactly
// those seconds, counted here from the schedule's own actions.
// A two-unit ZeRO-3 schedule of `microbatches` and its rank's gathers, reductions, and reductions of
// a unit after its first in the step.
struct StagedSchedule {
  scheduler::Schedule s;
  int gathers = 0, reductions = 0, later = 0;
};
StagedSchedule TwoUnitZero3(int microbatches) {
  using namespace scheduler;
  Zero3Plan z;
  z.units = 2;
  StagedSchedule r{Zero3(microbatches, z)};
  std::set<int> reduced;
  for (const Action& a : r.s.ranks[0]) {
    r.gathers += a.kind == ActionKind::kGather;
    if (a.kind == ActionKind::kReduceGrad) ++r.reductions, r.later += !reduced.insert(a.chunk).second;
  }
  return r;
}

TEST(Simulator, OffloadedShardsAreStagedForEachGatherAndReduction) {
  using namespace scheduler;
  const StagedSchedule z3 = TwoUnitZero3(3);
  const Schedule& s = z3.s;
  const int gathers = z3.gathers, reductions = z3.reductions, later = z3.later;
  ASSERT_GT(later, 0);  // three micro-batches: every unit accumulates
  auto comm_seconds = [](const SimResult& r) {
    double t = 0;
    for (const SimEvent& e : r.events) t += e.cat == "comm" ? e.end_s - e.start_s : 0.0;
    return t;
  };
  CostModel c;
  c.zero = 4;
  c.stage_param_bytes = 800;  // two units of 400 B: a shard is 100 B
  c.intra = {0.0, 1e300};
  EXPECT_NEAR(comm_seconds(Simulate(s, c)), 0, 1e-12);
  c.gather_staging_s_per_byte = 1e-3, c.reduce_staging_s_per_byte = 2e-3, c.reduce_accumulate_s_per_byte = 5e-3;
  EXPECT_NEAR(comm_seconds(Simulate(s, c)), 100 * (gathers * 1e-3 + reductions * 2e-3 + later * 5e-3), 1e-9);
  c.zero = 1;  // the shard is the whole 400 B unit
  EXPECT_NEAR(comm_seconds(Simulate(s, c)), 400 * (gathers * 1e-3 + reductions * 2e-3 + later * 5e-3), 1e-9);
  c.gather_staging_s_per_byte = c.reduce_staging_s_per_byte = c.reduce_accumulate_s_per_byte = 0;
  EXPECT_NEAR(comm_seconds(Simulate(s, c)), 0, 1e-12);
}

// Staged by blocking copies (CostModel::staging_blocks, zeropp on a GPU): each staging runs on the
// rank's compute timeline between its computations, so a one-rank step is every computation plus
// every staging, where on the comm stream the staging hid behind the computation beside it.
TEST(Simulator, BlockingStagingRunsBetweenTheComputations) {
  using namespace scheduler;
  const StagedSchedule z2 = TwoUnitZero3(2);
  const Schedule& s = z2.s;
  const int gathers = z2.gathers, reductions = z2.reductions;
  CostModel c;
  c.zero = 1;
  c.stage_param_bytes = 800;  // two units of 400 B, the whole unit staged each time
  c.intra = {0.0, 1e300};
  c.forward_s = 1.0, c.backward_s = 2.0;  // a unit's share: half of each
  c.gather_staging_s_per_byte = 1e-3, c.reduce_staging_s_per_byte = 2e-3;
  const double compute = 2 * (1.0 + 2.0), staging = 400 * (gathers * 1e-3 + reductions * 2e-3);
  const double overlapped = Simulate(s, c).step_s;
  c.staging_blocks = true;
  const SimResult blocked = Simulate(s, c);
  EXPECT_NEAR(blocked.step_s, compute + staging, 1e-9);
  EXPECT_LT(overlapped, compute + staging - 0.1);  // the comm stream overlapped some of it
  // The staging is traced on the compute track, one span per gather and reduction; nothing on comm.
  int spans = 0;
  for (const SimEvent& e : blocked.events) {
    spans += e.name.find("(staging)") != std::string::npos;
    EXPECT_FALSE(e.cat == "comm" && e.end_s - e.start_s > 1e-12) << e.name;
  }
  EXPECT_EQ(spans, gathers + reductions);
}

}  // namespace
}  // namespace planner
}  // namespace zeropp
