// Pipeline executor parity: every schedule on 2 and 4 ranks (pp=2 with zero=1 and 2, pp=4) and
// both hybrids (dp, zero1) train to the same losses and parameters as single-process AdamW within
// 1e-5 relative after 10 steps (fp32), with tied embedding/head across the first and last stage.
#include "scheduler/runtime/executor.h"
#include "zeropp/zeropp.h"
#include "tests/engine_harness.h"

namespace zeropp {
namespace {

struct PipeCase {
  std::string name;
  std::string device = "cpu";
  ParallelConfig cfg;
  PipelineOptions pipe;
  int microbatches = 4;
  testing::ModelKind model = testing::ModelKind::kGpt;
};

struct PipeRecord {
  std::vector<double> losses, norms;
  std::vector<std::pair<std::string, at::Tensor>> params;
  StepResult last;
  scheduler::BackwardSplitStats split;
  int expect_split = 0, expect_whole = 0;  // from the schedule: Bi's off the first stage split
  int expect_w_released = 0;               // split W's placed after their chunk's Release
  int most_deferred = 0;                   // the executor's schedule: W's outstanding at a Bi, at most
};

TrainerOptions OptionsOf(const PipeCase& c, const EngineOptions& engine) {
  TrainerOptions to;
  to.layout = c.cfg;
  to.engine = engine;
  to.pipeline = c.pipe;
  to.microbatches = c.microbatches;
  return to;
}

std::vector<PipeRecord> RunPipeline(const PipeCase& c, const EngineOptions& opts, int steps) {
  const int n = c.cfg.WorldSize();
  std::vector<torch::nn::Sequential> models;
  for (int r = 0; r < n; ++r) models.push_back(testing::MakeModel(c.model));
  std::vector<PipeRecord> records(n);
  testing::RunRanks(n, [&](int rank, const auto& store) {
    ProcessGroupsOptions po;
    po.comm.timeout = std::chrono::milliseconds(60000);
    TrainerOptions to = OptionsOf(c, opts);
    testing::PlaceOn(c.device, n, &po, &to);
    Trainer ex(models[rank].ptr(), ProcessGroups::CreateWithStore(store, rank, n, c.cfg, po), to);
    const MeshCoord me = c.cfg.CoordOf(rank);
    const int dp_rank = me.dp_index * c.cfg.zero + me.zero_index;
    testing::ModelKind kind = c.model;
    for (int s = 0; s < steps; ++s) {
      std::vector<at::Tensor> xs(c.microbatches), ys(c.microbatches);
      for (int mb = 0; mb < c.microbatches; ++mb) testing::MakeBatch(kind, s, mb, dp_rank, &xs[mb], &ys[mb]);
      StepResult r = ex.Step(xs, ys, [kind](const at::Tensor& o, const at::Tensor& t) { return testing::Loss(kind, o, t); });
      records[rank].losses.push_back(r.loss);
      records[rank].norms.push_back(r.grad_norm);
      records[rank].last = r;
    }
    records[rank].split = ex.executor().split_stats();
    const int pp_rank = me.pp_index;
    std::set<int> gathered;
    int outstanding_w = 0;
    int first_stage_units = 0;  // a first stage of 2+ units is cut after its first: it splits too
    for (int k = 0; k < ex.engine().num_units(); ++k) first_stage_units += ex.executor().stage_of_unit(k) == 0 ? 1 : 0;
    for (const auto& a : ex.executor().schedule().ranks[pp_rank]) {
      const bool first_stage = a.chunk * c.cfg.pp + pp_rank == 0 && first_stage_units < 2;
      if (a.kind == scheduler::ActionKind::kGather) gathered.insert(a.chunk);
      if (a.kind == scheduler::ActionKind::kRelease) gathered.erase(a.chunk);
      if (a.kind == scheduler::ActionKind::kBackwardWeight && !first_stage && !gathered.count(a.chunk)) {
        ++records[rank].expect_w_released;
      }
      if (a.kind == scheduler::ActionKind::kBackwardInput) {
        records[rank].most_deferred = std::max(records[rank].most_deferred, outstanding_w++);
      }
      if (a.kind == scheduler::ActionKind::kBackwardWeight) --outstanding_w;
      if (a.kind == scheduler::ActionKind::kBackwardInput && !first_stage) ++records[rank].expect_split;
      if (a.kind == scheduler::ActionKind::kBackward || (a.kind == scheduler::ActionKind::kBackwardInput && first_stage)) {
        ++records[rank].expect_whole;
      }
    }
    records[rank].params = ex.FullParameters();
    ex.groups().world().Barrier()->Wait();
  });
  return records;
}

class PipelineParityTest : public ::testing::TestWithParam<std::tuple<PipeCase, std::string>> {};

TEST_P(PipelineParityTest, MatchesSingleProcessAdamW) {
  PipeCase c = std::get<0>(GetParam());
  c.device = std::get<1>(GetParam());
  const std::string skip = testing::SkipReason(c.device);
  if (!skip.empty()) GTEST_SKIP() << "needs a GPU: " << skip;
  EngineOptions opts = testing::BaseOptions();
  opts.adamw.eps = 1e-6f;  // see engine_parity_test.cc: the GPT's key bias has a zero gradient
  opts.max_grad_norm = 0.5;
  const int steps = 10;
  auto ranks = RunPipeline(c, opts, steps);
  if (::testing::Test::HasFailure()) return;
  testing::ParityCase ref_case;
  ref_case.n = c.cfg.zero * c.cfg.dp;
  ref_case.options = opts;
  ref_case.model = c.model;
  ref_case.micro = c.microbatches;
  ref_case.steps = steps;
  testing::RankRecord ref = testing::RunReference(ref_case);
  // Reference values by every name a tensor is registered under (the tied head too).
  torch::nn::Sequential ref_model = testing::MakeModel(c.model);
  std::map<std::string, at::Tensor> by_name;
  for (const auto& kv : ref.params) by_name[kv.first] = kv.second;
  std::map<const void*, std::string> first_name;
  for (auto& kv : ref_model->named_parameters()) {
    auto it = first_name.emplace(kv.value().unsafeGetTensorImpl(), kv.key());
    if (!it.second) by_name[kv.key()] = by_name[it.first->second];
  }
  std::set<std::string> covered;
  double worst = 0;
  int w_released = 0;
  for (size_t r = 0; r < ranks.size(); ++r) {
    // Bi leaves the weight work to W (every W after its Bi, as validated), except on a first stage
    // of one unit, whose input needs no gradient.
    EXPECT_EQ(ranks[r].split.split, ranks[r].expect_split) << "rank " << r;
    EXPECT_EQ(ranks[r].split.whole, ranks[r].expect_whole) << "rank " << r;
    // ZeroPP's deferred W's run after their chunk's weights were freed (read from saved tensors).
    EXPECT_EQ(ranks[r].split.w_released, ranks[r].expect_w_released) << "rank " << r;
    w_released += ranks[r].split.w_released;
    // The trainer built its schedule with the cap: never more W's pending at a Bi than it allows.
    if (c.pipe.max_deferred_w >= 0) {
      EXPECT_LE(ranks[r].most_deferred, c.pipe.max_deferred_w) << "rank " << r;
    }
    for (int s = 0; s < steps; ++s) {
      EXPECT_NEAR(ranks[r].losses[s], ref.losses[s], 1e-5 * std::abs(ref.losses[s])) << "rank " << r << " step " << s;
      EXPECT_NEAR(ranks[r].norms[s], ref.norms[s], 1e-5 * std::abs(ref.norms[s])) << "rank " << r << " step " << s;
    }
    for (const auto& kv : ranks[r].params) {
      ASSERT_TRUE(by_name.count(kv.first)) << kv.first;
      const double e = testing::RelErr(kv.second, by_name[kv.first]);
      worst = std::max(worst, e);
      EXPECT_LT(e, testing::ParamTolerance(c.device)) << "rank " << r << " " << kv.first;
      covered.insert(kv.first);
    }
  }
  // Every parameter of the model lives on some stage.
  for (const auto& kv : ref.params) EXPECT_TRUE(covered.count(kv.first)) << kv.first << " on no stage";
  std::printf("%s: final loss %.6f (ref %.6f), worst parameter rel err %.2e, gathers/step %lld, W's after release %d\n",
              c.name.c_str(), ranks[0].losses.back(), ref.losses.back(), worst, (long long)ranks[0].last.gathers,
              w_released);
}

std::vector<PipeCase> Cases() {
  auto mk = [](std::string name, ParallelConfig cfg, std::string sched, int v, int m, int u,
               testing::ModelKind model = testing::ModelKind::kGpt, std::string recompute = "default") {
    PipeCase c;
    c.name = std::move(name);
    c.cfg = cfg;
    c.pipe.schedule = ParsePipelineSchedule("schedule", std::move(sched));
    c.pipe.chunks = v;
    c.microbatches = m;
    c.pipe.unit_size = u;
    c.pipe.recompute = ParsePipelineRecompute("recompute", recompute);
    c.model = model;
    return c;
  };
  using testing::ModelKind;
  // Every schedule on pp=2 x zero=1, pp=2 x zero=2 and pp=4 (4 virtual stages per 2 chunks need
  // the deeper GPT), then recompute policies, an MLP with a parameterless child and a frozen
  // tensor, and both hybrids across replicas.
  std::vector<PipeCase> cases;
  struct Layout {
    const char* tag;
    ParallelConfig cfg;
    ModelKind model;
  };
  const Layout layouts[] = {{"pp2", {2, 1, 1, DpMode::kDp}, ModelKind::kGpt},
                            {"pp2_zero2", {2, 2, 1, DpMode::kDp}, ModelKind::kGpt},
                            {"pp4", {4, 1, 1, DpMode::kDp}, ModelKind::kGptDeep}};
  for (const Layout& l : layouts) {
    const int pp = l.cfg.pp;
    cases.push_back(mk(std::string("gpipe_") + l.tag, l.cfg, "gpipe", 1, 4, 0, l.model));
    cases.push_back(mk(std::string("onefoneb_") + l.tag, l.cfg, "1f1b", 1, 4, 0, l.model));
    cases.push_back(mk(std::string("interleaved_v2_") + l.tag, l.cfg, "interleaved", 2, 4, 0, l.model));
    cases.push_back(mk(std::string("zbh1_") + l.tag, l.cfg, "zb-h1", 1, pp + 1, 0, l.model));
    cases.push_back(mk(std::string("zeropp_v2_") + l.tag, l.cfg, "zeropp", 2, 2 * pp, pp, l.model));
  }
  cases.push_back(mk("zeropp_pp2_v1_u2", {2, 1, 1, DpMode::kDp}, "zeropp", 1, 4, 2));
  cases.push_back(mk("zeropp_pp2_v2_recompute_none", {2, 1, 1, DpMode::kDp}, "zeropp", 2, 4, 2, ModelKind::kGpt, "none"));
  cases.push_back(mk("onefoneb_pp2_recompute_all", {2, 1, 1, DpMode::kDp}, "1f1b", 1, 4, 0, ModelKind::kGpt, "all"));
  cases.push_back(mk("onefoneb_pp4_mlp", {4, 1, 1, DpMode::kDp}, "1f1b", 1, 4, 0, ModelKind::kMlp));
  cases.push_back(mk("zbh1_pp4_mlp", {4, 1, 1, DpMode::kDp}, "zb-h1", 1, 5, 0, ModelKind::kMlp));
  cases.push_back(mk("zeropp_pp2_dp2_hybrid_dp", {2, 1, 2, DpMode::kDp}, "zeropp", 2, 4, 2));
  cases.push_back(mk("zeropp_pp2_dp2_hybrid_zero1", {2, 1, 2, DpMode::kZero1}, "zeropp", 2, 4, 2));
  cases.push_back(mk("zeropp_pp2_zero2_dp2_hybrid_zero1", {2, 2, 2, DpMode::kZero1}, "zeropp", 2, 4, 2));
  // Deferral capped (PipelineOptions::max_deferred_w): no W deferred, and at most one at once.
  for (int cap : {0, 1}) {
    PipeCase z = mk("zeropp_v2_pp4_max_deferred_w" + std::to_string(cap), {4, 1, 1, DpMode::kDp}, "zeropp", 2, 8, 4,
                    ModelKind::kGptDeep);
    z.pipe.max_deferred_w = cap;
    cases.push_back(z);
  }
  PipeCase zb = mk("zbh1_pp4_max_deferred_w1", {4, 1, 1, DpMode::kDp}, "zb-h1", 1, 5, 0, ModelKind::kGptDeep);
  zb.pipe.max_deferred_w = 1;
  cases.push_back(zb);
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Schedules, PipelineParityTest,
                         ::testing::Combine(::testing::ValuesIn(Cases()), ::testing::ValuesIn(testing::Devices())),
                         [](const auto& info) { return std::get<0>(info.param).name + "_" + std::get<1>(info.param); });

}  // namespace
}  // namespace zeropp

namespace zeropp {
namespace {

// From the counters: the executor's all-gathers per step equal the schedule's gathers times the
// units with parameters in each gathered chunk, and ZeroPP's all-gather bytes fall as U grows.
TEST(PipelineCountersTest, ZeroPPGathersEqualTheSchedule) {
  int64_t previous_bytes = -1;
  for (int u : {2, 4, 8}) {
    PipeCase c;
    c.cfg = {2, 2, 1, DpMode::kDp};
    c.pipe.schedule = ParsePipelineSchedule("schedule", "zeropp");
    c.pipe.chunks = 2;
    c.microbatches = 8;
    c.pipe.unit_size = u;
    const int n = c.cfg.WorldSize();
    std::vector<torch::nn::Sequential> models;
    for (int r = 0; r < n; ++r) models.push_back(testing::MakeModel(testing::ModelKind::kGpt));
    std::vector<int64_t> bytes(n);
    testing::RunRanks(n, [&](int rank, const auto& store) {
      Trainer ex(models[rank].ptr(), ProcessGroups::CreateWithStore(store, rank, n, c.cfg, {}), OptionsOf(c, testing::BaseOptions()));
      std::vector<at::Tensor> xs(8), ys(8);
      for (int mb = 0; mb < 8; ++mb) testing::MakeBatch(testing::ModelKind::kGpt, 0, mb, rank % 2, &xs[mb], &ys[mb]);
      StepResult r = ex.Step(xs, ys, [](const at::Tensor& o, const at::Tensor& t) {
        return testing::Loss(testing::ModelKind::kGpt, o, t);
      });
      const int me = c.cfg.CoordOf(rank).pp_index;
      int64_t expect_gathers = 0, expect_bytes = 0;
      for (const auto& a : ex.executor().schedule().ranks[me]) {
        if (a.kind != scheduler::ActionKind::kGather) continue;
        for (int k = 0; k < ex.engine().num_units(); ++k) {
          const auto* f = ex.engine().unit(k).flat();
          if (f && ex.executor().stage_of_unit(k) == a.chunk * c.cfg.pp + me) {
            ++expect_gathers;
            expect_bytes += f->padded_numel() * 4 / 2;  // (N-1)/N of the unit, N = zero = 2
          }
        }
      }
      EXPECT_EQ(r.gathers, expect_gathers) << "U " << u << " rank " << rank;
      EXPECT_EQ(r.zero_comm[OpKind::kAllGather].bytes_sent, expect_bytes) << "U " << u << " rank " << rank;
      bytes[rank] = r.zero_comm[OpKind::kAllGather].bytes_sent;
      ex.groups().world().Barrier()->Wait();
    });
    if (previous_bytes >= 0) {
      EXPECT_LT(bytes[0], previous_bytes) << "U " << u;
    }
    std::printf("zeropp pp=2 zero=2 v=2 m=8 U=%d: rank 0 all-gathers %lld bytes per step\n", u, (long long)bytes[0]);
    previous_bytes = bytes[0];
  }
}

}  // namespace
}  // namespace zeropp

namespace zeropp {
namespace {

// Evaluation runs the forward-only schedule: its loss on a batch equals the loss the next
// training step reports on that batch (computed before the update), on every rank, for every
// schedule, including ZeroPP with more micro-batches than a unit holds.
TEST(PipelineEvalTest, EvaluateMatchesTheStepLossAndLeavesTrainingAlone) {
  struct EvalCase {
    std::string schedule;
    int v, m, u;
    ParallelConfig cfg;
  };
  const std::vector<EvalCase> cases = {{"gpipe", 1, 4, 0, {2, 2, 1, DpMode::kDp}},
                                       {"1f1b", 1, 4, 0, {4, 1, 1, DpMode::kDp}},
                                       {"interleaved", 2, 4, 0, {2, 2, 1, DpMode::kDp}},
                                       {"zb-h1", 1, 3, 0, {2, 2, 1, DpMode::kDp}},
                                       {"zeropp", 2, 6, 2, {2, 2, 1, DpMode::kDp}}};
  for (const auto& ec : cases) {
    PipeCase c;
    c.cfg = ec.cfg;
    c.pipe.schedule = ParsePipelineSchedule("schedule", ec.schedule);
    c.pipe.chunks = ec.v;
    c.microbatches = ec.m;
    c.pipe.unit_size = ec.u;
    c.model = c.cfg.pp == 4 ? testing::ModelKind::kGptDeep : testing::ModelKind::kGpt;
    const int n = c.cfg.WorldSize();
    std::vector<torch::nn::Sequential> models;
    for (int r = 0; r < n; ++r) models.push_back(testing::MakeModel(c.model));
    testing::RunRanks(n, [&](int rank, const auto& store) {
      Trainer ex(models[rank].ptr(), ProcessGroups::CreateWithStore(store, rank, n, c.cfg, {}), OptionsOf(c, testing::BaseOptions()));
      const MeshCoord me = c.cfg.CoordOf(rank);
      const int dp_rank = me.dp_index * c.cfg.zero + me.zero_index;
      const testing::ModelKind kind = c.model;
      auto loss_fn = [kind](const at::Tensor& o, const at::Tensor& t) { return testing::Loss(kind, o, t); };
      for (int s = 0; s < 3; ++s) {
        std::vector<at::Tensor> xs(ec.m), ys(ec.m);
        for (int mb = 0; mb < ec.m; ++mb) testing::MakeBatch(kind, s, mb, dp_rank, &xs[mb], &ys[mb]);
        const double ev = ex.Evaluate(xs, ys, loss_fn);
        const double again = ex.Evaluate(xs, ys, loss_fn);
        const StepResult r = ex.Step(xs, ys, loss_fn);
        EXPECT_EQ(ev, again) << ec.schedule << " rank " << rank << " step " << s;
        EXPECT_NEAR(ev, r.loss, 1e-6 * std::abs(r.loss)) << ec.schedule << " rank " << rank << " step " << s;
      }
      ex.groups().world().Barrier()->Wait();
    });
  }
}

// Activations cross stages with their shape in a header; from the second step on, the receiver
// posts the data receive before the header arrives, with the link's reference shape. Micro-batches
// whose sequence length differs from the reference (all of a step's, or some of them, on any step)
// must still arrive whole: the losses equal those of one process training on the same batches.
TEST(PipelineShapesTest, ChangingMicroBatchShapesMatchOneProcess) {
  const testing::ModelKind kind = testing::ModelKind::kGpt;
  const int m = 4;
  // Sequence length per (step, micro-batch): the reference (6), all shorter, mixed, and back.
  const std::vector<std::vector<int64_t>> lengths = {{6, 6, 6, 6}, {6, 6, 6, 6}, {3, 3, 3, 3},
                                                     {6, 4, 6, 2}, {5, 6, 6, 6}, {6, 6, 6, 6}};
  auto batch = [&](int s, int mb, at::Tensor* x, at::Tensor* y) {
    testing::MakeBatch(kind, s, mb, 0, x, y);
    *x = x->narrow(1, 0, lengths[s][mb]).contiguous();
    *y = y->narrow(1, 0, lengths[s][mb]).contiguous();
  };
  auto loss_fn = [kind](const at::Tensor& o, const at::Tensor& t) { return testing::Loss(kind, o, t); };
  auto run = [&](ParallelConfig cfg, const std::string& schedule, int v) {
    const int n = cfg.WorldSize();
    std::vector<torch::nn::Sequential> models;
    for (int r = 0; r < n; ++r) models.push_back(testing::MakeModel(kind));
    std::vector<std::vector<double>> losses(n);
    testing::RunRanks(n, [&](int rank, const auto& store) {
      PipeCase c;
      c.cfg = cfg;
      c.pipe.schedule = ParsePipelineSchedule("schedule", schedule);
      c.pipe.chunks = v;
      c.microbatches = m;
      Trainer ex(models[rank].ptr(), ProcessGroups::CreateWithStore(store, rank, n, cfg, {}), OptionsOf(c, testing::BaseOptions()));
      for (size_t s = 0; s < lengths.size(); ++s) {
        std::vector<at::Tensor> xs(m), ys(m);
        for (int mb = 0; mb < m; ++mb) batch(static_cast<int>(s), mb, &xs[mb], &ys[mb]);
        losses[rank].push_back(ex.Step(xs, ys, loss_fn).loss);
        if (s == 3) losses[rank].push_back(ex.Evaluate(xs, ys, loss_fn));  // the eval pass shares the links
      }
      ex.groups().world().Barrier()->Wait();
    });
    return losses;
  };
  const auto ref = run({1, 1, 1, DpMode::kDp}, "auto", 1)[0];
  for (const auto& [schedule, v] : std::vector<std::pair<std::string, int>>{{"1f1b", 1}, {"zb-h1", 1}, {"interleaved", 2}}) {
    const auto got = run({2, 1, 1, DpMode::kDp}, schedule, v);
    for (size_t r = 0; r < got.size(); ++r) {
      ASSERT_EQ(got[r].size(), ref.size());
      for (size_t s = 0; s < ref.size(); ++s) {
        EXPECT_NEAR(got[r][s], ref[s], 1e-5 * std::abs(ref[s])) << schedule << " rank " << r << " entry " << s;
      }
    }
  }
}

}  // namespace
}  // namespace zeropp
