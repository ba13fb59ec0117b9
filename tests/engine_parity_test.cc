// ZeRO-3 engine parity: losses, gradient norms and final parameters after 10 steps equal
// single-process training of the same Sequential with torch::optim::AdamW (fp32, 1e-5 relative).
#include "tests/engine_harness.h"

namespace zeropp {
namespace {

using testing::ParityCase;

std::vector<ParityCase> Cases() {
  std::vector<ParityCase> cases;
  auto add = [&](std::string name, int n, ParallelConfig cfg, EngineOptions o,
                 testing::ModelKind model = testing::ModelKind::kMlp, int micro = 1) {
    ParityCase c;
    c.name = std::move(name);
    c.n = n;
    c.cfg = cfg;
    c.options = o;
    c.model = model;
    c.micro = micro;
    cases.push_back(c);
  };
  EngineOptions base = testing::BaseOptions();
  // GPT: the key part of the attention's qkv bias has an exactly-zero gradient in exact
  // arithmetic (softmax ignores a constant added to every key), so its gradient is pure rounding
  // noise (~1e-9) that AdamW with eps=1e-8 would turn into full-size updates differing between any
  // two summation orders. eps=1e-6 keeps that noise from being amplified; everything else is the
  // same comparison.
  EngineOptions gpt = base;
  gpt.adamw.eps = 1e-6f;
  add("n1_default", 1, {1, 1, 1, DpMode::kDp}, base);
  // A zero group of one adds each unsharded gradient into the shard without a collective: the
  // first micro-batch's pass copies, the later ones add.
  add("n1_grad_accum3", 1, {1, 1, 1, DpMode::kDp}, base, testing::ModelKind::kMlp, 3);
  add("n2_default", 2, {1, 2, 1, DpMode::kDp}, base);
  EngineOptions o = base;
  o.prefetch_depth = 0;
  o.reshard_after_forward = false;
  add("n4_no_prefetch_keep_after_forward", 4, {1, 4, 1, DpMode::kDp}, o);
  o = base;
  o.prefetch_depth = 2;
  o.max_live_units = 2;
  add("n4_prefetch2_live2", 4, {1, 4, 1, DpMode::kDp}, o);
  o = base;
  o.max_grad_norm = 0.05;
  add("n2_grad_accum3_clip", 2, {1, 2, 1, DpMode::kDp}, o, testing::ModelKind::kMlp, 3);
  o = base;
  o.no_sync = true;
  add("n2_no_sync_accum2", 2, {1, 2, 1, DpMode::kDp}, o, testing::ModelKind::kMlp, 2);
  o = base;
  o.recompute = true;
  add("n2_recompute", 2, {1, 2, 1, DpMode::kDp}, o);
  o = base;
  o.units.kind = UnitPolicy::Kind::kBySize;
  o.units.target_numel = 120;
  add("n4_units_by_size", 4, {1, 4, 1, DpMode::kDp}, o);
  add("n1_gpt_tied", 1, {1, 1, 1, DpMode::kDp}, gpt, testing::ModelKind::kGpt);
  o = gpt;
  o.reshard_after_forward = false;
  add("n1_gpt_tied_keep", 1, {1, 1, 1, DpMode::kDp}, o, testing::ModelKind::kGpt);
  o = gpt;
  o.max_grad_norm = 0.5;
  add("n4_gpt_tied_clip", 4, {1, 4, 1, DpMode::kDp}, o, testing::ModelKind::kGpt);
  add("n2_gpt_tied_accum2", 2, {1, 2, 1, DpMode::kDp}, gpt, testing::ModelKind::kGpt, 2);
  o = gpt;
  o.max_grad_norm = 0.5;
  add("n1_gpt_tied_accum2_clip", 1, {1, 1, 1, DpMode::kDp}, o, testing::ModelKind::kGpt, 2);
  add("n4_hybrid_dp", 4, {1, 2, 2, DpMode::kDp}, base);
  add("n4_hybrid_zero1", 4, {1, 2, 2, DpMode::kZero1}, base);
  o = gpt;
  o.max_grad_norm = 0.3;
  add("n4_gpt_zero1_clip", 4, {1, 2, 2, DpMode::kZero1}, o, testing::ModelKind::kGpt);
  return cases;
}

class EngineParityTest : public ::testing::TestWithParam<std::tuple<ParityCase, std::string>> {};

TEST_P(EngineParityTest, MatchesSingleProcessAdamW) {
  ParityCase c = std::get<0>(GetParam());
  c.device = std::get<1>(GetParam());
  const std::string skip = testing::SkipReason(c.device);
  if (!skip.empty()) GTEST_SKIP() << "needs a GPU: " << skip;
  auto ranks = testing::RunZeropp(c);
  if (::testing::Test::HasFailure()) return;
  testing::RankRecord ref = testing::RunReference(c);
  for (int r = 0; r < c.n; ++r) {
    ASSERT_EQ(ranks[r].losses.size(), ref.losses.size());
    for (size_t s = 0; s < ref.losses.size(); ++s) {
      EXPECT_NEAR(ranks[r].losses[s], ref.losses[s], 1e-5 * std::abs(ref.losses[s]))
          << "rank " << r << " step " << s;
      EXPECT_NEAR(ranks[r].norms[s], ref.norms[s], 1e-5 * std::abs(ref.norms[s]) + 1e-9)
          << "rank " << r << " step " << s;
    }
    ASSERT_EQ(ranks[r].params.size(), ref.params.size());
    double worst = 0;
    for (size_t i = 0; i < ref.params.size(); ++i) {
      double e = testing::RelErr(ranks[r].params[i].second, ref.params[i].second);
      worst = std::max(worst, e);
      EXPECT_LT(e, testing::ParamTolerance(c.device)) << "rank " << r << " " << ranks[r].params[i].first << " vs " << ref.params[i].first;
    }
    if (r == 0) {
      std::printf("%s: final loss %.6f (ref %.6f), worst parameter rel err %.2e\n", c.name.c_str(),
                  ranks[0].losses.back(), ref.losses.back(), worst);
    }
  }
  // Training did something: the loss moved.
  EXPECT_NE(ref.losses.front(), ref.losses.back());
}

INSTANTIATE_TEST_SUITE_P(Cases, EngineParityTest,
                         ::testing::Combine(::testing::ValuesIn(Cases()), ::testing::ValuesIn(testing::Devices())),
                         [](const auto& info) { return std::get<0>(info.param).name + "_" + std::get<1>(info.param); });

}  // namespace
}  // namespace zeropp

namespace zeropp {
namespace {

// Evaluate is forward only: on a batch it gives the loss the next Step reports on that batch
// (computed before the update), the same twice in a row, on every rank, for ZeRO-3 and a hybrid.
TEST(EngineEvalTest, EvaluateMatchesTheStepLoss) {
  for (const ParallelConfig& cfg : {ParallelConfig{1, 2, 1, DpMode::kDp}, ParallelConfig{1, 2, 2, DpMode::kZero1}}) {
    const int n = cfg.WorldSize();
    std::vector<torch::nn::Sequential> models;
    for (int r = 0; r < n; ++r) models.push_back(testing::MakeModel(testing::ModelKind::kGpt));
    testing::RunRanks(n, [&](int rank, const auto& store) {
      TrainerOptions to;
      to.layout = cfg;
      to.engine = testing::BaseOptions();
      to.microbatches = 2;
      Trainer engine(models[rank].ptr(), ProcessGroups::CreateWithStore(store, rank, n, cfg, {}), to);
      auto loss_fn = [](const at::Tensor& o, const at::Tensor& t) {
        return testing::Loss(testing::ModelKind::kGpt, o, t);
      };
      for (int s = 0; s < 3; ++s) {
        std::vector<at::Tensor> xs(2), ys(2);
        for (int mb = 0; mb < 2; ++mb) testing::MakeBatch(testing::ModelKind::kGpt, s, mb, rank, &xs[mb], &ys[mb]);
        const double ev = engine.Evaluate(xs, ys, loss_fn);
        EXPECT_EQ(engine.Evaluate(xs, ys, loss_fn), ev) << "rank " << rank << " step " << s;
        const StepResult r = engine.Step(xs, ys, loss_fn);
        EXPECT_NEAR(ev, r.loss, 1e-6 * std::abs(r.loss)) << "rank " << rank << " step " << s;
      }
      engine.groups().world().Barrier()->Wait();
    });
  }
}

}  // namespace
}  // namespace zeropp
