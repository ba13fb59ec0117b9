// GradLanding and the gradient sink (zeropp/grad_sink.h): a parameter's gradient lands in its slice
// of a flat buffer that starts uninitialised (poisoned with NaN here), copied the first time and
// added after; Finish zeroes only what nothing wrote; .grad is left undefined; a closed landing or
// a removed sink leaves autograd's ordinary .grad; FlatParam binds and unbinds the sinks.
#include "zeropp/grad_sink.h"

#include <limits>
#include <vector>

#include <ATen/TensorOperators.h>
#include <ATen/ops/allclose.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/full.h>
#include <ATen/ops/isnan.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/zeros.h>
#include <torch/csrc/autograd/autograd.h>

#include "gtest/gtest.h"
#include "zeropp/flat_param.h"

namespace zeropp {
namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();

// Slices of 6 (2 x 3), 3 and 2 values at offsets 0, 6 and 9, in a buffer of 12 (one of padding).
std::shared_ptr<GradLanding> ThreeSlices() {
  return std::make_shared<GradLanding>(
      std::vector<GradLanding::Slice>{{0, 6, {2, 3}}, {6, 3, {3}}, {9, 2, {2}}});
}

TEST(GradLandingTest, FirstLandingCopiesLaterOnesAddAndFinishZeroesTheRest) {
  auto landing = ThreeSlices();
  EXPECT_FALSE(landing->open());
  landing->Open(at::full({12}, kNaN));
  ASSERT_TRUE(landing->open());
  const at::Tensor g0 = at::arange(6, at::TensorOptions().dtype(at::kFloat)).view({2, 3});
  landing->Land(0, g0);  // copied over the NaN
  landing->Land(0, g0);  // added
  bool overwrite = false;
  at::Tensor t = landing->Target(1, &overwrite);
  EXPECT_TRUE(overwrite) << "nothing landed in slice 1 yet";
  t.copy_(at::ones({3}));
  landing->Target(1, &overwrite).add_(at::ones({3}));
  EXPECT_FALSE(overwrite) << "slice 1 was written";
  const at::Tensor& buf = landing->Finish();  // slice 2 (unused) and the padding become zeros
  const at::Tensor want = at::cat({g0.reshape({-1}) * 2, at::full({3}, 2.0f), at::zeros({3})});
  EXPECT_TRUE(at::equal(buf, want)) << buf;
  landing->Land(2, at::ones({2}));  // after Finish a slice adds to its zeros
  EXPECT_TRUE(at::equal(landing->Finish().narrow(0, 9, 2), at::ones({2})));

  // Opening again starts every slice unwritten.
  landing->Open(at::full({12}, kNaN));
  landing->Land(1, at::ones({3}));
  EXPECT_TRUE(at::equal(landing->Finish(), at::cat({at::zeros({6}), at::ones({3}), at::zeros({3})})));
  landing->Close();
  EXPECT_FALSE(landing->open());
  EXPECT_FALSE(landing->Target(0, &overwrite).defined()) << "no buffer, no target";
  EXPECT_THROW(landing->Finish(), std::logic_error);
}

// Through autograd: two backwards land their sum in the slices, .grad stays undefined; a parameter
// used twice in one graph lands once, its contributions summed by autograd first.
TEST(GradSinkTest, BackwardsLandInTheBufferNotInGrad) {
  at::Tensor w = at::randn({2, 3}).requires_grad_(true), b = at::randn({3}).requires_grad_(true);
  auto landing = ThreeSlices();
  InstallGradSink(w, landing, 0);
  InstallGradSink(b, landing, 1);
  const at::Tensor x1 = at::randn({4, 2}), x2 = at::randn({4, 2});
  auto loss = [&](const at::Tensor& x) { return ((x.matmul(w) + b) * b).sum(); };
  // Reference: plain tensors without sinks.
  at::Tensor rw = w.detach().clone().requires_grad_(true), rb = b.detach().clone().requires_grad_(true);
  for (const at::Tensor& x : {x1, x2}) torch::autograd::backward({((x.matmul(rw) + rb) * rb).sum()});

  landing->Open(at::full({12}, kNaN));
  torch::autograd::backward({loss(x1)});
  torch::autograd::backward({loss(x2)});
  EXPECT_FALSE(w.grad().defined());
  EXPECT_FALSE(b.grad().defined());
  const at::Tensor& buf = landing->Finish();
  EXPECT_TRUE(at::allclose(buf.narrow(0, 0, 6).view({2, 3}), rw.grad()));
  EXPECT_TRUE(at::allclose(buf.narrow(0, 6, 3), rb.grad()));
  EXPECT_TRUE(at::equal(buf.narrow(0, 9, 3), at::zeros({3})));

  // Closed: autograd's ordinary .grad. A target asked for it is undefined.
  landing->Close();
  torch::autograd::backward({loss(x1)});
  ASSERT_TRUE(w.grad().defined());
  bool overwrite = false;
  EXPECT_FALSE(GradSinkTarget(w, &overwrite).defined());
  // Removed: ordinary .grad even with the landing open; no target.
  w.mutable_grad() = at::Tensor();
  RemoveGradSink(w);
  landing->Open(at::full({12}, kNaN));
  torch::autograd::backward({loss(x1)});
  EXPECT_TRUE(w.grad().defined());
  EXPECT_FALSE(b.grad().defined()) << "b still has its sink";
  EXPECT_FALSE(GradSinkTarget(w, &overwrite).defined());
  EXPECT_TRUE(GradSinkTarget(b, &overwrite).defined());
}

// FlatParam: gradients land in the full gradient buffer (frozen entries and padding zero), .grad
// undefined; after the FlatParam is gone its parameters get ordinary gradients again.
TEST(GradSinkTest, FlatParamLandsGradientsAndUnbindsOnDestruction) {
  at::Tensor w = at::zeros({2, 3}).requires_grad_(true), frozen = at::zeros({2});
  std::vector<FlatEntry> entries(2);
  entries[0].name = "w", entries[0].param = w, entries[0].shape = {2, 3}, entries[0].numel = 6;
  entries[1].name = "frozen", entries[1].param = frozen, entries[1].shape = {2}, entries[1].numel = 2;
  entries[1].trainable = false;
  const at::Tensor x = at::randn({4, 2});
  {
    FlatParam f(entries, /*zero_size=*/1, /*zero_rank=*/0, /*pad_multiple=*/16, at::kFloat, at::kFloat);
    f.InitFromFull(at::arange(16, at::TensorOptions().dtype(at::kFloat)));
    f.AllocateGradFull();
    f.FinishedGradFull().fill_(kNaN);  // a buffer with stale contents, as a reused block may have
    f.ReleaseGradFull();
    f.AllocateGradFull();
    torch::autograd::backward({x.matmul(w).sum()});
    EXPECT_FALSE(w.grad().defined());
    const at::Tensor want_w = x.sum(0).unsqueeze(1).expand({2, 3}).reshape({-1});
    const at::Tensor& g = f.FinishedGradFull();
    EXPECT_TRUE(at::allclose(g.narrow(0, 0, 6), want_w)) << g;
    EXPECT_TRUE(at::equal(g.narrow(0, 6, 10), at::zeros({10}))) << "frozen entry and padding: zeros";
    f.ReleaseGradFull();
  }
  torch::autograd::backward({x.matmul(w).sum()});
  ASSERT_TRUE(w.grad().defined()) << "the destroyed FlatParam's sink still took the gradient";
  bool overwrite = false;
  EXPECT_FALSE(GradSinkTarget(w, &overwrite).defined());
}

}  // namespace
}  // namespace zeropp
