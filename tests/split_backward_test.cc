// SplitBackward: B then W on a GPT chunk gives the gradients of one ordinary backward; B alone
// leaves every matmul weight's gradient (and, when asked, every layer norm's) untouched; W never
// reads the weights (they hold NaN while it runs); graphs that cannot be split exactly fall back
// to a whole backward in B.
#include "scheduler/runtime/split_backward.h"

#include <limits>
#include <map>
#include <string>
#include <vector>

#include <ATen/Parallel.h>
#include <ATen/ops/allclose.h>
#include <ATen/ops/cross_entropy_loss.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/full.h>
#include <ATen/ops/isnan.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/zeros_like.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/nn/modules/container/sequential.h>

#include "gtest/gtest.h"
#include "models/gpt.h"
#include "zeropp/grad_sink.h"

namespace zeropp {
namespace scheduler {
namespace {

using zeropp::GradLanding;
using zeropp::InstallGradSink;
using zeropp::RemoveGradSink;

constexpr int64_t kBatch = 2, kTime = 8;

models::GptConfig Config() {
  models::GptConfig c;
  c.vocab = 48;
  c.context = kTime;
  c.width = 32;
  c.depth = 2;
  c.heads = 2;
  return c;
}

// Children [first, end) of the model, then the loss.
at::Tensor RunChunk(torch::nn::Sequential& seq, size_t first, const at::Tensor& x, const at::Tensor& target) {
  at::Tensor y = x;
  for (size_t i = first; i < seq->size(); ++i) y = (seq->begin() + i)->forward(y);
  return at::cross_entropy_loss(y.reshape({-1, y.size(-1)}), target.reshape({-1}));
}

using Grads = std::map<std::string, at::Tensor>;

Grads Snapshot(torch::nn::Sequential& seq) {
  Grads g;
  for (const auto& p : seq->named_parameters()) {
    g[p.key()] = p.value().grad().defined() ? p.value().grad().clone() : at::zeros_like(p.value());
  }
  return g;
}

void ZeroGrads(torch::nn::Sequential& seq) {
  for (auto& p : seq->parameters()) p.mutable_grad() = at::Tensor();
}

bool IsMatmulWeight(const std::string& name) {
  for (const char* w : {"qkv.weight", "proj.weight", "fc.weight", "fc_out.weight", "head.weight"}) {
    const std::string s(w);
    if (name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) return true;
  }
  return false;
}

bool IsLinearBias(const std::string& name) {
  const std::string bias = ".bias";
  return name.find("ln") == std::string::npos && name.size() > bias.size() &&
         name.compare(name.size() - bias.size(), bias.size(), bias) == 0;
}

bool IsLayerNorm(const std::string& name) { return name.find("ln") != std::string::npos; }

class SplitBackwardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    at::set_num_threads(1);
    seq_ = models::MakeGpt(Config());
    ids_ = at::randint(Config().vocab, {kBatch, kTime}, at::TensorOptions().dtype(at::kLong));
    target_ = at::randint(Config().vocab, {kBatch, kTime}, at::TensorOptions().dtype(at::kLong));
    c10::NoGradGuard no_grad;
    embedded_ = (seq_->begin())->forward(ids_);
  }
  int CheckMiddleChunk(bool defer_ln);  // returns the deferred nodes
  // B then W on the chunk after the embedding for `n` micro-batches, each split, with every linear
  // layer's weight gradient (4 per block and the tied head's) written by the product itself.
  void SplitMicroBatches(int n) {
    for (int mb = 0; mb < n; ++mb) {
      at::Tensor x = embedded_.clone().requires_grad_(true);
      SplitBackward split;
      split.RunInputPass(RunChunk(seq_, 1, x, target_), at::Tensor(), x);
      EXPECT_TRUE(split.split());
      split.RunWeightPass();
      EXPECT_EQ(split.direct_products(), 4 * Config().depth + 1);
    }
  }
  torch::nn::Sequential seq_;
  at::Tensor ids_, target_, embedded_;
};

// B then W on the chunk after the embedding against one ordinary backward (W with every weight
// poisoned); with defer_ln, layer norm's weight gradients wait for W too.
int SplitBackwardTest::CheckMiddleChunk(bool defer_ln) {
  // Reference: one ordinary backward through the chunk (blocks, final norm, head, loss).
  at::Tensor x_ref = embedded_.clone().requires_grad_(true);
  torch::autograd::backward({RunChunk(seq_, 1, x_ref, target_)});
  const Grads ref = Snapshot(seq_);
  const at::Tensor gx_ref = x_ref.grad().clone();
  ZeroGrads(seq_);

  at::Tensor x = embedded_.clone().requires_grad_(true);
  SplitBackward split(defer_ln);
  const at::Tensor gx = split.RunInputPass(RunChunk(seq_, 1, x, target_), at::Tensor(), x);
  EXPECT_TRUE(split.split());
  if (!split.split()) return 0;
  // At least one deferred node per matmul weight: 4 Linears per block and the LM head (a Linear's
  // bias add may be a node of its own, depending on how ATen lowers a 3-D linear); with defer_ln,
  // the 2 layer norms per block and the final one as well.
  EXPECT_GE(split.deferred_nodes(), (defer_ln ? 6 : 4) * Config().depth + (defer_ln ? 2 : 1));
  const int deferred = split.deferred_nodes();
  EXPECT_TRUE(at::allclose(gx, gx_ref, 1e-6, 1e-7)) << "B's input gradient differs from one backward";
  const Grads after_b = Snapshot(seq_);
  for (const auto& [name, g] : after_b) {
    if (name.rfind("embed.", 0) == 0 && name != "embed.wte.weight") continue;  // not in the chunk
    if (IsMatmulWeight(name) || IsLinearBias(name) || (defer_ln && IsLayerNorm(name)) || name == "embed.wte.weight") {
      EXPECT_EQ(g.abs().max().item<float>(), 0.0f) << name << " got a gradient in B; W should compute it";
    }
  }

  // W with every weight poisoned: a pass that read them would produce NaN. Written through
  // .data() (no version bump), as a ZeRO gather or release changes storage behind autograd.
  // All copies first: a tied weight is listed twice, and its second copy must not be the poison.
  std::vector<std::pair<at::Tensor, at::Tensor>> saved;
  for (auto& p : seq_->parameters()) saved.push_back({p, p.detach().clone()});
  for (auto& [p, v] : saved) p.data().fill_(std::numeric_limits<float>::quiet_NaN());
  split.RunWeightPass();
  for (auto& [p, v] : saved) p.data().copy_(v);
  const Grads got = Snapshot(seq_);
  for (auto& kv : seq_->named_parameters()) {
    // W adds into .grad without recording history (a recorded in-place product would chain the
    // micro-batch's whole graph to .grad and keep it alive).
    if (kv.value().grad().defined()) {
      EXPECT_FALSE(kv.value().grad().requires_grad()) << kv.key();
    }
  }
  for (const auto& [name, g] : ref) {
    EXPECT_FALSE(at::isnan(got.at(name)).any().item<bool>()) << name << ": W read a weight";
    EXPECT_TRUE(at::allclose(got.at(name), g, 1e-5, 1e-7))
        << name << ": max diff " << (got.at(name) - g).abs().max().item<float>();
  }
  return deferred;
}

TEST_F(SplitBackwardTest, MiddleChunkMatchesOneBackwardAndDefersEveryMatmulWeight) { CheckMiddleChunk(false); }

// W computes every layer norm's weight gradients (2 per block and the final norm: that many more
// deferred nodes), without reading gamma (poisoned while W runs), matching one backward.
TEST_F(SplitBackwardTest, LayerNormWeightGradientsInWNeverReadGamma) {
  const int without = CheckMiddleChunk(false);
  ZeroGrads(seq_);
  EXPECT_EQ(CheckMiddleChunk(true) - without, 2 * Config().depth + 1);
}

// As in training, where .grad is the engine's gradient buffer (defined, accumulating across
// micro-batches): W adds each linear weight's gradient with one product into it, and two
// micro-batches accumulate to what two ordinary backwards give.
TEST_F(SplitBackwardTest, WeightPassAccumulatesIntoExistingGradients) {
  for (int mb = 0; mb < 2; ++mb) {
    at::Tensor x = embedded_.clone().requires_grad_(true);
    torch::autograd::backward({RunChunk(seq_, 1, x, target_)});
  }
  const Grads ref = Snapshot(seq_);
  for (auto& p : seq_->parameters()) p.mutable_grad() = at::zeros_like(p);
  std::vector<const void*> buffers;
  for (auto& p : seq_->parameters()) buffers.push_back(p.grad().data_ptr());
  SplitMicroBatches(2);
  size_t i = 0;
  for (auto& kv : seq_->named_parameters()) {
    EXPECT_EQ(kv.value().grad().data_ptr(), buffers[i++]) << kv.key() << ": .grad was replaced, not added into";
    EXPECT_FALSE(kv.value().grad().requires_grad()) << kv.key() << ": .grad recorded history";
  }
  const Grads got = Snapshot(seq_);
  for (const auto& [name, g] : ref) {
    EXPECT_TRUE(at::allclose(got.at(name), g, 1e-5, 1e-6))
        << name << ": max diff " << (got.at(name) - g).abs().max().item<float>();
  }
}

// As in training, where each parameter's gradient lands in its unit's flat buffer (grad_sink.h):
// the buffer starts as NaN, W's products write a slice nothing landed in yet and add into one
// that has, and two micro-batches land what two ordinary backwards give; .grad stays undefined.
TEST_F(SplitBackwardTest, WeightPassWritesIntoGradientSinks) {
  for (int mb = 0; mb < 2; ++mb) {
    at::Tensor x = embedded_.clone().requires_grad_(true);
    torch::autograd::backward({RunChunk(seq_, 1, x, target_)});
  }
  const Grads ref = Snapshot(seq_);
  ZeroGrads(seq_);
  std::vector<GradLanding::Slice> slices;
  std::map<std::string, size_t> slice_of;
  std::vector<at::Tensor> unique;
  int64_t offset = 0;
  for (const auto& kv : seq_->named_parameters()) {
    bool seen = false;
    for (size_t i = 0; i < unique.size(); ++i) {
      if (unique[i].is_same(kv.value())) slice_of[kv.key()] = i, seen = true;
    }
    if (seen) continue;
    slice_of[kv.key()] = unique.size();
    unique.push_back(kv.value());
    slices.push_back({offset, kv.value().numel(), kv.value().sizes().vec()});
    offset += kv.value().numel();
  }
  auto landing = std::make_shared<GradLanding>(slices);
  for (size_t i = 0; i < unique.size(); ++i) InstallGradSink(unique[i], landing, i);
  landing->Open(at::full({offset}, std::numeric_limits<float>::quiet_NaN()));
  SplitMicroBatches(2);
  for (const at::Tensor& p : unique) EXPECT_FALSE(p.grad().defined());
  const at::Tensor& buf = landing->Finish();
  for (const auto& [name, g] : ref) {
    const GradLanding::Slice& s = slices[slice_of.at(name)];
    const at::Tensor got = buf.narrow(0, s.offset, s.numel).view(s.shape);
    EXPECT_TRUE(at::allclose(got, g, 1e-5, 1e-6)) << name << ": max diff " << (got - g).abs().max().item<float>();
  }
  for (const at::Tensor& p : unique) RemoveGradSink(p);
}

TEST_F(SplitBackwardTest, FirstStageRunsEverythingInB) {
  torch::autograd::backward({RunChunk(seq_, 0, ids_, target_)});
  const Grads ref = Snapshot(seq_);
  ZeroGrads(seq_);
  SplitBackward split;
  const at::Tensor gx = split.RunInputPass(RunChunk(seq_, 0, ids_, target_), at::Tensor(), ids_);
  EXPECT_FALSE(split.split()) << "token ids need no gradient: nothing to split";
  EXPECT_FALSE(gx.defined());
  const Grads after_b = Snapshot(seq_);
  split.RunWeightPass();  // nothing left to do
  const Grads after_w = Snapshot(seq_);
  for (const auto& [name, g] : ref) {
    EXPECT_TRUE(at::allclose(after_b.at(name), g, 1e-6, 1e-8)) << name;
    EXPECT_TRUE(at::equal(after_w.at(name), after_b.at(name))) << name;
  }
}

TEST(SplitBackwardGraph, SharedWeightEdgeFallsBackToOneBackward) {
  // y = (x Wt) Wt with one transpose node feeding two matmuls: W could not keep the two
  // contributions apart without rerunning the input path, so B does the whole backward.
  at::Tensor w = at::randn({4, 4}).requires_grad_(true);
  at::Tensor x = at::randn({3, 4}).requires_grad_(true);
  auto run = [&](const at::Tensor& in) {
    at::Tensor wt = w.t();
    return at::matmul(at::matmul(in, wt), wt).sum();
  };
  torch::autograd::backward({run(x)});
  const at::Tensor gw = w.grad().clone(), gx = x.grad().clone();
  w.mutable_grad() = at::Tensor();
  at::Tensor x2 = x.detach().clone().requires_grad_(true);
  SplitBackward split;
  const at::Tensor gx2 = split.RunInputPass(run(x2), at::Tensor(), x2);
  EXPECT_FALSE(split.split());
  split.RunWeightPass();
  EXPECT_TRUE(at::allclose(w.grad(), gw, 1e-6, 1e-7));
  EXPECT_TRUE(at::allclose(gx2, gx, 1e-6, 1e-7));
}

TEST(SplitBackwardGraph, MatmulSplitsIntoInputAndWeightHalves) {
  // y = x W^T + b, loss = sum(y * r): dx = r W, dW = r^T x, db = sum(r); B gives dx only.
  at::Tensor w = at::randn({5, 3}).requires_grad_(true);
  at::Tensor b = at::randn({5}).requires_grad_(true);
  at::Tensor r = at::randn({4, 5});
  at::Tensor x = at::randn({4, 3}).requires_grad_(true);
  SplitBackward split;
  at::Tensor loss = ((at::matmul(x, w.t()) + b) * r).sum();
  const at::Tensor gx = split.RunInputPass(loss, at::Tensor(), x);
  ASSERT_TRUE(split.split());
  EXPECT_TRUE(at::allclose(gx, at::matmul(r, w.detach()), 1e-5, 1e-6));
  EXPECT_FALSE(w.grad().defined());
  EXPECT_FALSE(b.grad().defined());
  split.RunWeightPass();
  EXPECT_TRUE(at::allclose(w.grad(), at::matmul(r.t(), x.detach()), 1e-5, 1e-6));
  EXPECT_TRUE(at::allclose(b.grad(), r.sum(0), 1e-5, 1e-6));
  EXPECT_THROW(split.RunWeightPass(), std::logic_error);
}

}  // namespace
}  // namespace scheduler
}  // namespace zeropp
