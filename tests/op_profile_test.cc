// op_profile_test: the operator profile `train --profile-ops` prints (zeropp/cli/op_profile.h).
// Self-time folding against times computed by hand; kernel names of cuBLAS, FlashAttention, NCCL
// and zeropp's own kernels classified; and a GPT's forward and backward on the CPU, whose matrix-
// product FLOPs as PyTorch's profiler counts them must equal what the planner charges for the
// same model (PredictOpTimes), so the planner's GEMM accounting is checked against the operators
// the model really runs.
#include <ATen/Parallel.h>
#include <ATen/ops/cross_entropy_loss.h>
#include <ATen/ops/randint.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/container/sequential.h>

#include <chrono>

#include "models/gpt.h"
#include "scheduler/planner/hardware.h"
#include "scheduler/planner/predictor.h"
#include "tests/planner_fixtures.h"
#include "zeropp/cli/op_profile.h"
#include "zeropp/device.h"

namespace zeropp {
namespace cli {
namespace {

using zeropp::DeviceUnavailableReason;
using zeropp::ResolveDevice;
using zeropp::SetCurrentDevice;
using zeropp::StreamEvent;

TEST(OpProfile, SelfTimeIsASpanLessItsChildrenOnItsThread) {
  // Thread 1: linear [0,100] calls addmm [10,60] (1000 FLOPs) and view [60,65]; then add
  // [120,150]. Thread 2: addmm [0,50] (500 FLOPs) calls copy_ [5,15]; the threads overlap in
  // time but do not nest across each other.
  std::vector<OpSpan> spans = {
      {1, 120, 150, "aten::add", 0},       {1, 10, 60, "aten::addmm", 1000}, {2, 5, 15, "aten::copy_", 0},
      {1, 0, 100, "aten::linear", 0},      {1, 60, 65, "aten::view", 0},     {2, 0, 50, "aten::addmm", 500},
  };
  const OpTotals t = FoldHostSpans(spans);
  EXPECT_DOUBLE_EQ(t.Seconds(OpKind::kMatmul), (50 + 40) * 1e-9);
  EXPECT_DOUBLE_EQ(t.Seconds(OpKind::kOther), (45 + 5) * 1e-9);  // linear's own 45 ns, the view's 5
  EXPECT_DOUBLE_EQ(t.Seconds(OpKind::kElementwise), 30 * 1e-9);
  EXPECT_DOUBLE_EQ(t.Seconds(OpKind::kCopy), 10 * 1e-9);
  EXPECT_DOUBLE_EQ(t.TotalSeconds(), (100 + 30 + 50) * 1e-9);  // each thread's outermost spans
  EXPECT_DOUBLE_EQ(t.matmul_flops, 1500);
  EXPECT_EQ(t.operators, 6);
}

TEST(OpProfile, NamesCarryTheirSelfTimeAndCallsMostFirst) {
  // Two steps: addmm twice (40 ns self each, inside a linear of 100 ns), gelu once (30 ns).
  const OpTotals t = FoldHostSpans({{1, 0, 100, "aten::linear", 0}, {1, 10, 50, "aten::addmm", 0},
                                    {1, 200, 300, "aten::linear", 0}, {1, 210, 250, "aten::addmm", 0},
                                    {1, 400, 430, "aten::gelu", 0}});
  ASSERT_EQ(t.by_name.size(), 3u);
  EXPECT_DOUBLE_EQ(t.by_name.at("aten::addmm").seconds, 80e-9);
  EXPECT_EQ(t.by_name.at("aten::addmm").calls, 2);
  EXPECT_EQ(t.by_name.at("aten::addmm").kind, OpKind::kMatmul);
  EXPECT_DOUBLE_EQ(t.by_name.at("aten::linear").seconds, 120e-9);  // 60 + 60 of its own
  const std::string top = FormatOpTop(t, 3, 2, 2);
  // Per step: linear 60 ns of 230 ns in all, one call; addmm 40 ns, one call; gelu cut by top=2.
  EXPECT_EQ(top,
            "OPS_TOP rank=3 kind=other seconds=0.000000 calls=1.0 share=0.5217 name=aten::linear\n"
            "OPS_TOP rank=3 kind=matmul seconds=0.000000 calls=1.0 share=0.3478 name=aten::addmm");
  // A device kernel names its main launcher (with input shapes) and that launcher's share.
  OpTotals k;
  k.seconds[static_cast<int>(OpKind::kElementwise)] = 4.0;
  OpTotals::Named& add = k.by_name["elementwise_kernel<add>"];
  add.kind = OpKind::kElementwise;
  add.seconds = 4.0;
  add.calls = 4;
  add.launched_by = {{"aten::add_[8,64][8,64]", 3.0}, {"aten::add[4]", 1.0}};
  EXPECT_EQ(FormatOpTop(k, 0, 1, 5),
            "OPS_TOP rank=0 kind=elementwise seconds=4.000000 calls=4.0 share=1.0000 by=aten::add_[8,64][8,64](0.75) "
            "name=elementwise_kernel<add>");
}

TEST(OpProfile, SameStartNestsTheShorterInsideTheLonger) {
  // addmm starts with its caller; a sibling after the caller ends is no child of it.
  const OpTotals t = FoldHostSpans({{7, 0, 40, "aten::addmm", 0}, {7, 0, 100, "aten::linear", 0},
                                    {7, 100, 130, "aten::gelu", 0}});
  EXPECT_DOUBLE_EQ(t.Seconds(OpKind::kMatmul), 40e-9);
  EXPECT_DOUBLE_EQ(t.Seconds(OpKind::kOther), 60e-9);
  EXPECT_DOUBLE_EQ(t.Seconds(OpKind::kElementwise), 30e-9);
}

TEST(OpProfile, ElementwiseValuesCountOnlyOperatorsThatCallNoOther) {
  // A composite (log_softmax over _log_softmax) counts its callee's values once; a leaf counts its
  // own; a product's values are no element-wise values.
  OpSpan outer{3, 0, 100, "aten::log_softmax", 0, 1000};
  OpSpan inner{3, 10, 90, "aten::_log_softmax", 0, 600};
  OpSpan leaf{3, 120, 130, "aten::gelu", 0, 50};
  OpSpan mm{3, 140, 150, "aten::mm", 99, 70};
  EXPECT_DOUBLE_EQ(FoldHostSpans({outer, inner, leaf, mm}).elementwise_values, 650);
  // Values moved: every input read, one output of the largest input's size written.
  EXPECT_DOUBLE_EQ(ValuesMoved({{4, 8}, {8}}), 32 + 8 + 32);
  EXPECT_DOUBLE_EQ(ValuesMoved({{4, 8}, {}}), 32 + 1 + 32);  // a scalar is one value
}

TEST(OpProfile, MatmulFlopsFromTheFactorsShapes) {
  EXPECT_DOUBLE_EQ(MatmulFlops("aten::mm", {{3, 5}, {5, 7}}), 2.0 * 3 * 5 * 7);
  // addmm and the in-place addmm_ the split weight pass accumulates with: self first.
  EXPECT_DOUBLE_EQ(MatmulFlops("aten::addmm", {{7}, {3, 5}, {5, 7}}), 2.0 * 3 * 5 * 7);
  EXPECT_DOUBLE_EQ(MatmulFlops("aten::addmm_", {{5, 7}, {5, 3}, {3, 7}}), 2.0 * 5 * 3 * 7);
  EXPECT_DOUBLE_EQ(MatmulFlops("aten::bmm", {{4, 3, 5}, {4, 5, 7}}), 2.0 * 4 * 3 * 5 * 7);
  EXPECT_DOUBLE_EQ(MatmulFlops("aten::baddbmm", {{4, 3, 7}, {4, 3, 5}, {4, 5, 7}}), 2.0 * 4 * 3 * 5 * 7);
  EXPECT_DOUBLE_EQ(MatmulFlops("aten::add", {{3, 5}, {3, 5}}), 0);  // not a product
  EXPECT_DOUBLE_EQ(MatmulFlops("aten::mm", {{3, 5}}), 0);          // shapes not recorded whole
}

TEST(OpProfile, ClassifiesOperatorsAndKernelsByName) {
  EXPECT_EQ(ClassifyOperator("aten::mm"), OpKind::kMatmul);
  EXPECT_EQ(ClassifyOperator("aten::bmm"), OpKind::kMatmul);
  EXPECT_EQ(ClassifyOperator("aten::addmm_"), OpKind::kMatmul);
  EXPECT_EQ(ClassifyOperator("zeropp::adamw_step"), OpKind::kOptimizer);
  EXPECT_EQ(ClassifyOperator("aten::_scaled_dot_product_flash_attention_for_cpu"), OpKind::kAttention);
  EXPECT_EQ(ClassifyOperator("aten::native_layer_norm"), OpKind::kElementwise);
  EXPECT_EQ(ClassifyOperator("aten::gelu_backward"), OpKind::kElementwise);
  EXPECT_EQ(ClassifyOperator("aten::copy_"), OpKind::kCopy);
  EXPECT_EQ(ClassifyOperator("aten::_foreach_add_"), OpKind::kOptimizer);
  EXPECT_EQ(ClassifyOperator("gloo:all_gather"), OpKind::kCommunication);
  EXPECT_EQ(ClassifyOperator("aten::view"), OpKind::kOther);
  EXPECT_EQ(ClassifyOperator("aten::linear"), OpKind::kOther);
  EXPECT_EQ(ClassifyOperator("autograd::engine::evaluate_function: AddmmBackward0"), OpKind::kOther);
  // Kernel names as CUDA 12-13 and PyTorch 2.x report them on A100 and H100.
  EXPECT_EQ(ClassifyKernel("nvjet_tst_192x192_64x4_2x1_v_bz_coopB_TNT"), OpKind::kMatmul);
  EXPECT_EQ(ClassifyKernel("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1"),
            OpKind::kMatmul);
  EXPECT_EQ(ClassifyKernel("ampere_bf16_s16816gemm_bf16_256x128_ldg8_f2f_stages_64x3_tn"), OpKind::kMatmul);
  EXPECT_EQ(ClassifyKernel("void splitKreduce_kernel<32, 16, int, float, __nv_bfloat16, float, __nv_bfloat16, true>"),
            OpKind::kMatmul);
  EXPECT_EQ(ClassifyKernel("void cublasLt::epilogue::impl::globalKernel<8, 32, float, float, __nv_bfloat16, true>"),
            OpKind::kMatmul);
  EXPECT_EQ(ClassifyKernel("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128>, true>"),
            OpKind::kAttention);
  EXPECT_EQ(ClassifyKernel("fmha_cutlassB_bf16_aligned_64x64_k128_sm80"), OpKind::kAttention);
  EXPECT_EQ(ClassifyKernel("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"),
            OpKind::kCommunication);
  EXPECT_EQ(ClassifyKernel("zeropp::kernels::(anonymous namespace)::MultiAdamWKernel(void const*, int, AdamWCoeffs)"),
            OpKind::kOptimizer);
  EXPECT_EQ(ClassifyKernel("Memcpy DtoD (Device -> Device)"), OpKind::kCopy);
  EXPECT_EQ(ClassifyKernel("void at::native::elementwise_kernel<128, 2, at::native::direct_copy_kernel_cuda>"),
            OpKind::kCopy);
  EXPECT_EQ(ClassifyKernel("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>"),
            OpKind::kElementwise);
}

// One forward and backward of a small GPT on `device`, profiled; the wall time around it in *wall.
OpTotals ProfileGptStep(const models::GptConfig& g, int64_t batch, const c10::Device& device, double* wall) {
  torch::nn::Sequential model = models::MakeGpt(g);
  model->to(device);
  const at::Tensor ids = at::randint(g.vocab, {batch, g.context}, at::TensorOptions().dtype(at::kLong).device(device));
  const at::Tensor targets = at::randint(g.vocab, {batch * g.context}, ids.options());
  OpProfiler profiler;
  const auto t0 = std::chrono::steady_clock::now();
  profiler.Start(device.is_cuda());
  const at::Tensor logits = model->forward(ids);
  at::cross_entropy_loss(logits.reshape({-1, g.vocab}), targets).backward();
  if (device.is_cuda()) StreamEvent::RecordCurrent(device).Synchronize();
  const OpTotals t = profiler.Stop();
  *wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return t;
}

// The planner's charge for that step (one rank, ZeRO-3 over 1: no communication).
planner::OpTimes PredictedGptStep(const models::GptConfig& g, int64_t batch) {
  planner::ModelShape m;
  m.name = "gpt";
  m.hidden = g.width, m.layers = g.depth, m.heads = g.heads, m.kv_heads = g.heads, m.ffn = 4 * g.width;
  m.vocab = g.vocab, m.seq = g.context, m.tied_embedding = true, m.flash_attention = true;
  planner::Layout l;
  l.design = planner::Design::kZero3, l.schedule = "zero3", l.micro_batch = static_cast<int>(batch);
  const std::vector<planner::OpTimes> predicted =
      planner::PredictOpTimes(m, l, planner::fixtures::Toy(), /*global_batch=*/static_cast<int>(batch));
  EXPECT_EQ(predicted.size(), 1u);
  return predicted.at(0);
}

TEST(OpProfile, GptMatmulFlopsAreWhatThePlannerCharges) {
  at::set_num_threads(1);
  models::GptConfig g;
  g.vocab = 96, g.context = 24, g.width = 48, g.depth = 3, g.heads = 4;
  const int64_t batch = 2;
  double wall = 0;
  const OpTotals t = ProfileGptStep(g, batch, c10::Device(c10::kCPU), &wall);
  const planner::OpTimes predicted = PredictedGptStep(g, batch);
  // QKV, projection, MLP up and down per layer and the tied head; forward, input and weight
  // gradients each 2 FLOPs per multiply-add.
  const double tokens = batch * g.context, h = g.width;
  const double by_hand = 3 * 2 * tokens * (g.depth * 12 * h * h + h * g.vocab);
  EXPECT_DOUBLE_EQ(predicted.matmul_flops, by_hand);
  EXPECT_DOUBLE_EQ(t.matmul_flops, predicted.matmul_flops);
  // Every kind ran and nothing was counted twice: the self times fit in the wall time.
  EXPECT_GT(t.Seconds(OpKind::kMatmul), 0);
  EXPECT_GT(t.Seconds(OpKind::kAttention), 0);
  EXPECT_GT(t.Seconds(OpKind::kElementwise), 0);
  EXPECT_LE(t.TotalSeconds(), wall);
  EXPECT_GT(t.operators, 0);
  const std::string line = FormatOpTotals(t, 0, 1);
  EXPECT_NE(line.find("OPS rank=0 steps=1 matmul_s="), std::string::npos) << line;
  EXPECT_NE(line.find("time=host"), std::string::npos) << line;
}

TEST(OpProfile, GptOnCudaCountsKernelsByKind) {
  const std::string why = DeviceUnavailableReason("cuda");
  if (!why.empty()) GTEST_SKIP() << "needs a GPU: " << why;
  models::GptConfig g;
  g.vocab = 256, g.context = 256, g.width = 256, g.depth = 2, g.heads = 4;
  const int64_t batch = 4;
  const c10::Device dev = ResolveDevice("cuda", 0, 0);
  SetCurrentDevice(dev);
  double wall = 0;
  ProfileGptStep(g, batch, dev, &wall);  // warms up cuBLAS and the allocator
  const OpTotals t = ProfileGptStep(g, batch, dev, &wall);
  EXPECT_TRUE(t.device);
  // The host operators still carry the FLOPs; the kinds' times are the kernels'.
  EXPECT_DOUBLE_EQ(t.matmul_flops, PredictedGptStep(g, batch).matmul_flops);
  EXPECT_GT(t.Seconds(OpKind::kMatmul), 0);
  EXPECT_GT(t.Seconds(OpKind::kAttention), 0);
  EXPECT_GT(t.Seconds(OpKind::kElementwise), 0);
  EXPECT_LE(t.TotalSeconds(), wall);  // one stream: kernels do not overlap
  std::printf("%s\n", FormatOpTotals(t, 0, 1).c_str());
}

TEST(OpProfile, RefusesASecondProfilerAndAStopWithoutStart) {
  OpProfiler a, b;
  EXPECT_THROW(a.Stop(), std::logic_error);
  a.Start(false);
  EXPECT_THROW(b.Start(false), std::runtime_error);
  a.Stop();
}

}  // namespace
}  // namespace cli
}  // namespace zeropp
