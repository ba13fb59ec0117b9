// AdamWReference against the torch.optim.AdamW formula evaluated in double precision with ATen,
// over several steps and odd sizes; prints the max abs/rel error.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdio>

#include "kernels/adamw.h"

namespace zeropp {
namespace {

TEST(AdamWReferenceTest, MatchesDoublePrecisionFormula) {
  at::manual_seed(0);
  const int64_t n = 1003;
  kernels::AdamWHyper h;
  h.lr = 3e-3f;
  h.weight_decay = 0.1f;
  at::Tensor p = at::randn({n}), m = at::zeros({n}), v = at::zeros({n});
  at::Tensor pd = p.to(at::kDouble), md = m.to(at::kDouble), vd = v.to(at::kDouble);
  double max_abs = 0, max_rel = 0;
  for (int64_t step = 1; step <= 5; ++step) {
    at::Tensor g = at::randn({n});
    h.step = step;
    kernels::AdamWReference(p.data_ptr<float>(), g.data_ptr<float>(), m.data_ptr<float>(),
                            v.data_ptr<float>(), n, h);
    at::Tensor gd = g.to(at::kDouble);
    md = md * h.beta1 + gd * (1 - h.beta1);
    vd = vd * h.beta2 + gd * gd * (1 - h.beta2);
    double bc1 = 1 - std::pow(double(h.beta1), step), bc2 = 1 - std::pow(double(h.beta2), step);
    pd = pd * (1 - double(h.lr) * h.weight_decay) - (md / bc1) / ((vd / bc2).sqrt() + h.eps) * h.lr;
    at::Tensor err = (p.to(at::kDouble) - pd).abs();
    max_abs = std::max(max_abs, err.max().item<double>());
    max_rel = std::max(max_rel, (err / pd.abs().clamp_min(1e-3)).max().item<double>());
  }
  std::printf("adamw reference vs fp64 formula: max abs err %.3g, max rel err %.3g\n", max_abs, max_rel);
  EXPECT_LT(max_abs, 1e-5);
  EXPECT_LT(max_rel, 1e-4);
  EXPECT_TRUE(m.to(at::kDouble).allclose(md, 1e-5, 1e-7));
  EXPECT_TRUE(v.to(at::kDouble).allclose(vd, 1e-5, 1e-9));
}

}  // namespace
}  // namespace zeropp
