// The host update reading a bf16 gradient as it is and writing the bf16 compute shard in the same
// pass (what an offloaded bf16 unit runs) gives the same bits as the two-pass form it replaced:
// the gradient widened to an fp32 copy, the update, then the shard cast from the master by ATen.
// Frozen values and the padding, which the update skips, are copied out unchanged.
#include "zeropp/sharded_adamw.h"

#include <cstring>

#include <gtest/gtest.h>
#include <ATen/ATen.h>

#include "zeropp/flat_param.h"

namespace zeropp {
namespace {

struct Unit {
  std::vector<at::Tensor> params;
  std::unique_ptr<FlatParam> flat;
  ShardedAdamW opt{kernels::AdamWHyper{}, /*threads=*/3};
};

// A trainable [33, 7], a frozen [5] and a trainable [40]; padded to a multiple of 64.
std::unique_ptr<Unit> MakeUnit() {
  auto u = std::make_unique<Unit>();
  at::manual_seed(11);
  std::vector<FlatEntry> entries;
  const std::vector<std::vector<int64_t>> shapes = {{33, 7}, {5}, {40}};
  for (size_t i = 0; i < shapes.size(); ++i) {
    FlatEntry e;
    e.name = "p" + std::to_string(i);
    e.param = at::randn(shapes[i]).set_requires_grad(i != 1);
    e.shape = shapes[i];
    e.numel = e.param.numel();
    e.trainable = i != 1;
    u->params.push_back(e.param);
    entries.push_back(std::move(e));
  }
  u->flat = std::make_unique<FlatParam>(std::move(entries), 1, 0, 64, at::kBFloat16, at::kBFloat16);
  u->flat->InitFromFull(u->flat->GatherLocalValues());
  u->opt.AddUnit(u->flat.get(), 0, u->flat->padded_numel());
  return u;
}

bool SameBits(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && a.scalar_type() == b.scalar_type() &&
         std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()) == 0;
}

TEST(ShardedAdamWTest, Bf16GradientAndFusedShardCopyMatchTheTwoPassForm) {
  auto fused = MakeUnit(), two_pass = MakeUnit();
  const int64_t n = fused->flat->padded_numel();
  ASSERT_GT(n, 33 * 7 + 5 + 40);  // there is padding
  at::manual_seed(12);
  for (int step = 0; step < 3; ++step) {
    const at::Tensor grad = (at::randn({n}) * 0.1).to(at::kBFloat16);
    const float scale = step == 1 ? 0.37f : 1.0f;
    // The norm over bf16 as it is equals the norm over its fp32 widening.
    EXPECT_EQ(fused->opt.SquaredNorm(0, grad), two_pass->opt.SquaredNorm(0, grad.to(at::kFloat)));
    fused->opt.BeginStep();
    two_pass->opt.BeginStep();
    const at::Tensor shard = fused->flat->AcquireShard();
    fused->opt.StepUnit(0, fused->flat->AcquireMaster(), grad, scale, shard);
    two_pass->opt.StepUnit(0, two_pass->flat->AcquireMaster(), grad.to(at::kFloat), scale);
    two_pass->flat->AcquireShard().copy_(two_pass->flat->AcquireMaster());
    EXPECT_TRUE(SameBits(fused->flat->AcquireMaster(), two_pass->flat->AcquireMaster())) << "step " << step;
    EXPECT_TRUE(SameBits(shard, two_pass->flat->AcquireShard())) << "step " << step;
  }
  // The update moved the trainable values and not the frozen ones.
  const at::Tensor before = MakeUnit()->flat->AcquireMaster(), after = fused->flat->AcquireMaster();
  EXPECT_FALSE(at::equal(before.narrow(0, 0, 33 * 7), after.narrow(0, 0, 33 * 7)));
  EXPECT_TRUE(at::equal(before.narrow(0, 33 * 7, 5), after.narrow(0, 33 * 7, 5)));
}

// The norm over the trainable ranges only (the frozen entry and the padding excluded), fp32 and
// bf16, returned (SquaredNorm) and added to an fp64 accumulator on the gradient's device
// (AddSquaredNorm; on a GPU its kernel is checked against the host sum by adamw_cuda_test); a
// wrong accumulator is refused.
TEST(ShardedAdamWTest, NormCountsTheTrainableRangesOnly) {
  auto u = MakeUnit();
  const int64_t n = u->flat->padded_numel();
  at::manual_seed(13);
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    const at::Tensor grad = (at::randn({n}) * 0.1).to(dtype);
    double expect = 0;
    for (int64_t lo : {int64_t{0}, int64_t{33 * 7 + 5}}) {
      const int64_t len = lo == 0 ? 33 * 7 : 40;
      expect += grad.narrow(0, lo, len).to(at::kDouble).square().sum().item<double>();
    }
    const double host = u->opt.SquaredNorm(0, grad);
    at::Tensor acc = at::zeros({1}, at::kDouble);
    u->opt.AddSquaredNorm(0, grad, acc);
    EXPECT_NEAR(host, expect, 1e-12 * expect) << c10::toString(dtype);
    EXPECT_NEAR(acc.item<double>(), expect, 1e-12 * expect) << c10::toString(dtype);
  }
  at::Tensor wrong = at::zeros({1}, at::kFloat);
  EXPECT_THROW(u->opt.AddSquaredNorm(0, at::zeros({n}), wrong), std::logic_error);
}

TEST(ShardedAdamWTest, RefusesAGradientOfTheWrongSizeOrAnOutputOfTheWrongType) {
  auto u = MakeUnit();
  const int64_t n = u->flat->padded_numel();
  u->opt.BeginStep();
  const at::Tensor master = u->flat->AcquireMaster();
  EXPECT_THROW(u->opt.StepUnit(0, master, at::zeros({n - 1}), 1.0f), std::logic_error);
  EXPECT_THROW(u->opt.StepUnit(0, master, at::zeros({n}, at::kDouble), 1.0f), std::logic_error);
  EXPECT_THROW(u->opt.StepUnit(0, master, at::zeros({n}), 1.0f, at::zeros({n})), std::logic_error);
  EXPECT_THROW(u->opt.SquaredNorm(0, at::zeros({n}, at::kDouble)), std::logic_error);
}

}  // namespace
}  // namespace zeropp
