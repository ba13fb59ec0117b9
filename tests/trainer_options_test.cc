// TrainerOptions::Resolve (pure: no process group), the learning-rate schedule, the zero3
// schedule's engine options as actions, and engine options under pp > 1: each honoured (proved by
// a counter, the trace or a memory figure) or refused with the reason.
#include "zeropp/trainer_options.h"

#include <cctype>
#include <cmath>
#include <functional>

#include <gtest/gtest.h>

#include "scheduler/generators.h"
#include "scheduler/validator.h"
#include "tests/engine_harness.h"

namespace zeropp {
namespace {

std::string Resolve(TrainerOptions o, int world) { return o.Resolve(world); }

TEST(TrainerOptionsTest, DefaultsWorkForEveryLayout) {
  TrainerOptions o;
  o.layout.pp = 2;
  ASSERT_EQ(o.Resolve(4), "");
  EXPECT_EQ(o.layout.zero, 2);
  EXPECT_EQ(o.microbatches, 4);  // 2 * pp: a zeropp unit of every micro-batch holds >= pp
  EXPECT_EQ(o.pipeline.schedule, PipelineSchedule::kZeroPP);
  TrainerOptions flat;
  ASSERT_EQ(flat.Resolve(3), "");
  EXPECT_EQ(flat.layout.zero, 3);
  EXPECT_EQ(flat.microbatches, 1);
}

TEST(TrainerOptionsTest, DeviceAndBackendResolveAndAreChecked) {
  TrainerOptions cpu;
  ASSERT_EQ(cpu.Resolve(2), "");
  EXPECT_EQ(cpu.backend, "gloo");
  TrainerOptions gpu;
  gpu.device = "cuda";
  ASSERT_EQ(gpu.Resolve(2), "");
  EXPECT_EQ(gpu.backend, "nccl");  // NCCL is the default on cuda
  TrainerOptions shared_gpu;
  shared_gpu.device = "cuda";
  shared_gpu.backend = "gloo";  // several ranks on one GPU
  ASSERT_EQ(shared_gpu.Resolve(4), "");
  EXPECT_EQ(shared_gpu.backend, "gloo");
  TrainerOptions bad;
  bad.device = "tpu";
  EXPECT_NE(Resolve(bad, 1).find("device(tpu) must be one of: cpu, cuda"), std::string::npos);
  bad = TrainerOptions();
  bad.backend = "mpi";
  EXPECT_NE(Resolve(bad, 1).find("backend(mpi) must be one of: auto, gloo, nccl"), std::string::npos);
  bad = TrainerOptions();
  bad.backend = "nccl";
  EXPECT_NE(Resolve(bad, 1).find("backend(nccl) needs device(cuda)"), std::string::npos);
}

TEST(TrainerOptionsTest, EngineOptionsUnderPipelinesAreRefusedWithTheReason) {
  auto with = [](auto set) {
    TrainerOptions o;
    o.layout.pp = 2;
    set(o);
    return Resolve(o, 2);
  };
  EXPECT_NE(with([](TrainerOptions& o) { o.engine.prefetch_depth = 2; }).find("prefetch(2) needs pp = 1: under pp > 1"),
            std::string::npos);
  EXPECT_NE(with([](TrainerOptions& o) { o.engine.max_live_units = 3; }).find("max_live_units(3) needs pp = 1"),
            std::string::npos);
  EXPECT_NE(with([](TrainerOptions& o) { o.engine.reshard_after_forward = false; })
                .find("reshard_after_forward(false) needs pp = 1"),
            std::string::npos);
  EXPECT_NE(with([](TrainerOptions& o) { o.engine.no_sync = true; }).find("no_sync(true) needs pp = 1"),
            std::string::npos);
  EXPECT_NE(with([](TrainerOptions& o) {
              o.engine.recompute = true;
              o.engine.offload.activations = OffloadTarget::kCpu;
            }).find("offload_activations(cpu) needs pp = 1"),
            std::string::npos);
  // recompute is honoured: it becomes the pipeline's recompute-everything policy.
  TrainerOptions r;
  r.layout.pp = 2;
  r.engine.recompute = true;
  ASSERT_EQ(r.Resolve(2), "");
  EXPECT_EQ(r.pipeline.recompute, PipelineRecompute::kAll);
  // And pipeline settings are refused under pp = 1.
  TrainerOptions flat;
  flat.pipeline.chunks = 2;
  flat.pipeline.schedule = PipelineSchedule::kGPipe;
  EXPECT_EQ(Resolve(flat, 1), "schedule(gpipe) needs pp > 1 (pp = 1 runs the zero3 schedule); chunks(2) needs pp > 1");
}

// The cap on deferred weight passes belongs to the schedules that defer them (zeropp, zb-h1).
TEST(TrainerOptionsTest, DeferralCapNeedsAScheduleThatDefers) {
  auto with = [](int pp, PipelineSchedule s, int cap) {
    TrainerOptions o;
    o.layout.pp = pp;
    o.pipeline.schedule = s;
    o.pipeline.max_deferred_w = cap;
    return Resolve(o, pp);
  };
  EXPECT_EQ(with(2, PipelineSchedule::kZeroPP, 0), "");
  EXPECT_EQ(with(2, PipelineSchedule::kZbH1, 3), "");
  EXPECT_EQ(with(2, PipelineSchedule::kAuto, 1), "");  // auto under pp > 1 is zeropp
  EXPECT_EQ(with(2, PipelineSchedule::kOneFOneB, 1), "max_deferred_w(1) needs schedule zeropp or zb-h1, got 1f1b");
  EXPECT_EQ(with(2, PipelineSchedule::kZeroPP, -2), "max_deferred_w(-2) must be >= 0, or -1 for the schedule's own");
  EXPECT_EQ(with(1, PipelineSchedule::kAuto, 0), "max_deferred_w(0) needs pp > 1 and schedule zeropp or zb-h1");
}

TEST(TrainerOptionsTest, NonFiniteAndOutOfRangeValuesNameTheField) {
  TrainerOptions o;
  o.engine.adamw.lr = std::numeric_limits<float>::infinity();
  o.engine.adamw.weight_decay = std::nanf("");
  const std::string e = Resolve(o, 1);
  EXPECT_NE(e.find("lr(inf) must be a finite number"), std::string::npos) << e;
  EXPECT_NE(e.find("weight_decay(nan) must be a finite number"), std::string::npos) << e;
  TrainerOptions bad_layout;
  bad_layout.layout.pp = 3;
  EXPECT_NE(Resolve(bad_layout, 4).find("pp(3)*dp(1)=3 does not divide world_size(4)"), std::string::npos);
}

TEST(LrScheduleTest, WarmupThenCosineToTheFloor) {
  LrSchedule s;
  s.decay = LrDecay::kCosine;
  s.warmup_steps = 4;
  s.decay_steps = 14;
  s.min_lr_ratio = 0.1;
  EXPECT_DOUBLE_EQ(s.At(0, 1.0), 1.0 / 5);
  EXPECT_DOUBLE_EQ(s.At(3, 1.0), 4.0 / 5);
  EXPECT_DOUBLE_EQ(s.At(4, 1.0), 1.0);                                   // peak after warm-up
  EXPECT_NEAR(s.At(9, 1.0), 0.1 + 0.45 * (1 + std::cos(M_PI * 0.5)), 1e-12);  // half-way
  EXPECT_DOUBLE_EQ(s.At(14, 1.0), 0.1);
  EXPECT_DOUBLE_EQ(s.At(100, 1.0), 0.1);
  LrSchedule constant;
  EXPECT_DOUBLE_EQ(constant.At(7, 0.5), 0.5);
}

// The zero3 schedule expresses the engine options as actions, so the validator checks them.
TEST(Zero3ScheduleTest, EngineOptionsAreActions) {
  using scheduler::ActionKind;
  scheduler::Zero3Plan p;
  p.units = 6;
  p.needs = {{}, {}, {}, {}, {}, {0}};  // a tied head on the embedding's unit
  auto count = [](const scheduler::Schedule& s, ActionKind k) { return s.Count(0, k); };
  const scheduler::Schedule base = scheduler::Zero3(2, p);
  auto rep = scheduler::Validate(base);
  ASSERT_TRUE(rep.ok) << rep.error;
  // Reduce once per unit per micro-batch; with no_sync once per unit.
  EXPECT_EQ(count(base, ActionKind::kReduceGrad), 12);
  scheduler::Zero3Plan ns = p;
  ns.no_sync = true;
  EXPECT_EQ(count(scheduler::Zero3(2, ns), ActionKind::kReduceGrad), 6);
  // The live-unit cap bounds the gathered units the validator counts.
  scheduler::Zero3Plan cap = p;
  cap.max_live_units = 2;
  cap.prefetch_depth = 2;
  rep = scheduler::Validate(scheduler::Zero3(2, cap));
  ASSERT_TRUE(rep.ok) << rep.error;
  EXPECT_EQ(rep.ranks[0].peak_gathered, 2);
  // Deeper prefetch gathers more units ahead.
  scheduler::Zero3Plan deep = p;
  deep.prefetch_depth = 3;
  EXPECT_GT(scheduler::Validate(scheduler::Zero3(2, deep)).ranks[0].peak_gathered, rep.ranks[0].peak_gathered);
  // Without resharding after forward, fewer gathers: each unit stays from forward to backward.
  scheduler::Zero3Plan keep = p;
  keep.reshard_after_forward = false;
  EXPECT_LT(count(scheduler::Zero3(2, keep), ActionKind::kGather), count(base, ActionKind::kGather));
  // Recompute is a per-chunk flag of the schedule.
  scheduler::Zero3Plan rc = p;
  rc.recompute = true;
  EXPECT_TRUE(scheduler::Zero3(2, rc).Recompute(0, 3));
  EXPECT_FALSE(scheduler::Zero3(2, rc).Recompute(0, rc.units - 1));  // its backward follows at once
  // The head's forward needs the embedding's unit gathered: dropping that gather is caught.
  scheduler::Schedule broken = base;
  auto& acts = broken.ranks[0];
  for (size_t i = 0; i + 1 < acts.size(); ++i) {
    if (acts[i].kind == ActionKind::kForward && acts[i].chunk == 5) {
      for (size_t j = i; j-- > 0;) {
        if (acts[j].kind == ActionKind::kGather && acts[j].chunk == 0) {
          acts.erase(acts.begin() + j);
          break;
        }
      }
      break;
    }
  }
  rep = scheduler::Validate(broken);
  EXPECT_FALSE(rep.ok);
  EXPECT_NE(rep.error.find("(whose tied parameters it uses) not gathered"), std::string::npos) << rep.error;
}

// Engine options under pp > 1 that are honoured: recompute (every forward runs again, traced as
// R events) and parameter/optimizer offload (state in the host pool), with the same losses.
TEST(PipelineEngineOptionsTest, RecomputeAndOffloadAreHonoured) {
  const ParallelConfig cfg{2, 1, 1, DpMode::kDp};
  struct Run {
    std::vector<double> losses;
    int recomputed = 0;
    int64_t host_pool = 0;
  };
  auto run = [&](bool recompute, const char* offload) {
    std::vector<Run> out(2);
    std::vector<torch::nn::Sequential> models;
    for (int r = 0; r < 2; ++r) models.push_back(testing::MakeModel(testing::ModelKind::kGpt));
    testing::RunRanks(2, [&](int rank, const auto& store) {
      TrainerOptions to;
      to.layout = cfg;
      to.engine = testing::BaseOptions();
      to.engine.recompute = recompute;
      to.engine.offload.optimizer = ParseOffloadTarget("offload", offload);
      to.engine.offload.params = ParseOffloadTarget("offload", offload);
      to.pipeline.schedule = PipelineSchedule::kOneFOneB;
      to.pipeline.recompute = PipelineRecompute::kNone;
      if (recompute) to.pipeline.recompute = PipelineRecompute::kDefault;
      to.microbatches = 4;
      Trainer t(models[rank].ptr(), ProcessGroups::CreateWithStore(store, rank, 2, cfg, {}), to);
      for (int s = 0; s < 3; ++s) {
        std::vector<at::Tensor> xs(4), ys(4);
        for (int mb = 0; mb < 4; ++mb) testing::MakeBatch(testing::ModelKind::kGpt, s, mb, 0, &xs[mb], &ys[mb]);
        out[rank].losses.push_back(
            t.Step(xs, ys, [](const at::Tensor& o, const at::Tensor& y) { return testing::Loss(testing::ModelKind::kGpt, o, y); })
                .loss);
      }
      const std::string trace = t.TraceJson();
      // A recomputed forward is traced as its own event "R<chunk>.<mb>".
      for (size_t at = trace.find("\"R"); at != std::string::npos; at = trace.find("\"R", at + 1)) {
        out[rank].recomputed += std::isdigit(static_cast<unsigned char>(trace[at + 2])) ? 1 : 0;
      }
      out[rank].host_pool = t.Memory().host_pool_bytes;
      t.groups().world().Barrier()->Wait();
    });
    return out;
  };
  const auto plain = run(false, "none");
  const auto rec = run(true, "none");
  const auto off = run(false, "cpu");
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(plain[r].recomputed, 0);
    EXPECT_EQ(rec[r].recomputed, 4) << "rank " << r;  // every micro-batch's forward ran again in B
    EXPECT_EQ(plain[r].host_pool, 0);
    EXPECT_GT(off[r].host_pool, 0) << "rank " << r;
    for (int s = 0; s < 3; ++s) {
      EXPECT_NEAR(rec[r].losses[s], plain[r].losses[s], 1e-6 * std::abs(plain[r].losses[s]));
      EXPECT_NEAR(off[r].losses[s], plain[r].losses[s], 1e-6 * std::abs(plain[r].losses[s]));
    }
  }
}

// The remaining engine options under pp > 1: bf16 compute and reduction (shards of half the bytes,
// losses close to fp32), an explicit unit policy (the units the stages are made of), and the
// memory budget (an impossible one refused by the estimate, with its breakdown).
TEST(PipelineEngineOptionsTest, PrecisionUnitsAndBudgetAreHonoured) {
  const ParallelConfig cfg{2, 1, 1, DpMode::kDp};
  struct Run {
    std::vector<double> losses;
    int64_t param_shard_bytes = 0;
    int units = 0;
    std::string error;
  };
  auto run = [&](const std::function<void(EngineOptions&)>& set) {
    std::vector<Run> out(2);
    std::vector<torch::nn::Sequential> models;
    for (int r = 0; r < 2; ++r) models.push_back(testing::MakeModel(testing::ModelKind::kGpt));
    testing::RunRanks(2, [&](int rank, const auto& store) {
      TrainerOptions to;
      to.layout = cfg;
      to.engine = testing::BaseOptions();
      set(to.engine);
      to.pipeline.schedule = PipelineSchedule::kOneFOneB;
      to.microbatches = 4;
      try {
        Trainer t(models[rank].ptr(), ProcessGroups::CreateWithStore(store, rank, 2, cfg, {}), to);
        for (int s = 0; s < 3; ++s) {
          std::vector<at::Tensor> xs(4), ys(4);
          for (int mb = 0; mb < 4; ++mb) testing::MakeBatch(testing::ModelKind::kGpt, s, mb, 0, &xs[mb], &ys[mb]);
          out[rank].losses.push_back(t.Step(xs, ys, [](const at::Tensor& o, const at::Tensor& y) {
                                        return testing::Loss(testing::ModelKind::kGpt, o, y);
                                      }).loss);
        }
        out[rank].param_shard_bytes = t.Memory().param_shard_bytes;
        out[rank].units = t.engine().num_units();
        t.groups().world().Barrier()->Wait();
      } catch (const std::exception& e) {
        out[rank].error = e.what();
      }
    });
    return out;
  };
  const auto fp32 = run([](EngineOptions&) {});
  const auto bf16 = run([](EngineOptions& o) {
    o.param_dtype = at::kBFloat16;
    o.reduce_dtype = at::kBFloat16;
  });
  const auto two_units = run([](EngineOptions& o) {
    o.units.kind = UnitPolicy::Kind::kExplicit;
    o.units.starts = {0, 2};
  });
  const auto budget = run([](EngineOptions& o) { o.memory_budget_bytes = 1000; });
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(fp32[r].error, "");
    ASSERT_EQ(bf16[r].error, "");
    EXPECT_EQ(bf16[r].param_shard_bytes * 2, fp32[r].param_shard_bytes) << "rank " << r;
    for (int s = 0; s < 3; ++s) EXPECT_NEAR(bf16[r].losses[s], fp32[r].losses[s], 2e-2 * fp32[r].losses[s]);
    ASSERT_EQ(two_units[r].error, "");
    EXPECT_EQ(two_units[r].units, 2) << "rank " << r;
    EXPECT_NE(budget[r].error.find("memory budget: the plan needs about"), std::string::npos) << budget[r].error;
  }
}

}  // namespace
}  // namespace zeropp
