// train_flags: every layout `plan` ranks that zeropp's engine runs comes with tools/train flags
// that parse (TrainConfig::Parse) and resolve (TrainerOptions::Resolve on the plan's device count)
// into the same layout: pipeline, sharding, replicas, schedule, chunks, unit, micro-batches,
// recomputation, the deferral cap and offload. Layouts it cannot run say why.
#include "scheduler/planner/train_flags.h"

#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "scheduler/planner/hardware.h"
#include "scheduler/planner/planner.h"
#include "tools/train_config.h"

namespace zeropp {
namespace planner {
namespace {

std::vector<std::string> Split(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

struct Seen {
  std::set<std::string> reasons;  // why the layouts zeropp's engine does not run are not
  int runnable = 0, capped = 0, offloaded = 0, recomputed = 0;
};

void CheckPlan(PlanRequest q, Seen* seen) {
  const PlanResult r = Plan(q);
  ASSERT_FALSE(r.fitting.empty());
  for (const Prediction& p : r.fitting) {
    const Layout& l = p.layout;
    std::string why;
    const std::string flags = TrainFlags(q.model, l, q.global_batch, q.hardware, &why);
    if (flags.empty()) {
      EXPECT_FALSE(why.empty()) << l.Name();
      seen->reasons.insert(why);
      continue;
    }
    ++seen->runnable;
    seen->capped += l.max_deferred_w >= 0;
    seen->offloaded += l.offload != Offload::kNone;
    seen->recomputed += l.recompute;
    tools::TrainConfig c;
    ASSERT_NO_THROW(c = tools::TrainConfig::Parse(Split(flags))) << l.Name() << ": " << flags;
    ASSERT_EQ(c.trainer.Resolve(q.devices), "") << l.Name() << ": " << flags;
    const TrainerOptions& t = c.trainer;
    EXPECT_EQ(t.layout.pp, l.pp) << l.Name();
    EXPECT_EQ(t.layout.zero, l.design == Design::k3D ? 1 : l.zero) << l.Name();
    EXPECT_EQ(t.layout.dp, l.dp) << l.Name();
    EXPECT_EQ(t.layout.dp > 1 && t.layout.dp_mode == DpMode::kZero1, l.dp > 1 && l.zero1) << l.Name();
    EXPECT_EQ(c.micro_batch, l.micro_batch) << l.Name();
    EXPECT_EQ(t.microbatches, l.MicroBatches(q.global_batch)) << l.Name();
    EXPECT_EQ(t.microbatches * c.micro_batch * t.layout.zero * t.layout.dp, q.global_batch) << l.Name();
    EXPECT_EQ(c.gpt.width, q.model.hidden);
    EXPECT_EQ(c.gpt.depth, q.model.layers);
    EXPECT_EQ(c.gpt.context, q.model.seq);
    EXPECT_DOUBLE_EQ(static_cast<double>(c.NumParameters()), q.model.Parameters()) << l.Name();
    EXPECT_EQ(t.engine.offload.optimizer != OffloadTarget::kNone, l.offload != Offload::kNone) << l.Name();
    EXPECT_EQ(t.engine.offload.params != OffloadTarget::kNone, l.params_offload != Offload::kNone) << l.Name();
    if (l.pp == 1) {
      EXPECT_EQ(t.engine.recompute, l.recompute) << l.Name();
      continue;
    }
    EXPECT_EQ(t.pipeline.chunks, l.v) << l.Name();
    EXPECT_EQ(t.pipeline.max_deferred_w, l.max_deferred_w) << l.Name();
    if (l.design == Design::kZeroPP) {
      EXPECT_EQ(t.pipeline.schedule, PipelineSchedule::kZeroPP) << l.Name();
      EXPECT_EQ(t.pipeline.unit_size, l.u) << l.Name();
      EXPECT_EQ(t.pipeline.recompute, l.recompute ? PipelineRecompute::kDefault : PipelineRecompute::kNone);
    } else {
      EXPECT_EQ(Name(t.pipeline.schedule), l.schedule) << l.Name();
      EXPECT_EQ(t.pipeline.recompute, l.recompute ? PipelineRecompute::kAll : PipelineRecompute::kDefault);
    }
  }
}

TEST(TrainFlags, EveryRankedLayoutZeroppRunsParsesIntoTheSameLayout) {
  Seen seen;
  PlanRequest q;
  q.model = ModelPreset("llama2-7b");
  q.hardware = LoadHardware("a100-80gb-ib400");
  q.devices = 32;
  q.global_batch = 256;
  CheckPlan(q, &seen);
  q.model = ModelPreset("gpt3-6.7b");  // train's GPT: GeLU, tied head
  q.model.seq = 1024;
  q.devices = 16;
  CheckPlan(q, &seen);
  q.hardware.memory_bytes = 24e9;  // tight: capped deferral, recomputation and offload
  CheckPlan(q, &seen);
  q.model = ModelPreset("llama2-13b");
  q.model.seq = 8192;
  q.devices = 64;
  q.global_batch = 256;
  q.hardware = LoadHardware("a100-80gb-ib400");
  CheckPlan(q, &seen);
  std::printf("%d runnable layouts checked (%d capped, %d offloaded, %d recomputing); not on zeropp's engine:\n",
              seen.runnable, seen.capped, seen.offloaded, seen.recomputed);
  for (const std::string& r : seen.reasons) std::printf("  %s\n", r.c_str());
  EXPECT_GT(seen.runnable, 500);
  EXPECT_GT(seen.capped, 0);
  EXPECT_GT(seen.offloaded, 0);
  EXPECT_GT(seen.recomputed, 0);
  EXPECT_TRUE(seen.reasons.count("tensor parallelism is the 3D baseline's (Megatron-LM); zeropp's engine trains none"));
}

TEST(TrainFlags, ModelsTrainCannotBuildAreSaidSo) {
  Layout l;
  l.design = Design::kZero3;
  l.schedule = "zero3";
  l.zero = 8;
  std::string why;
  ModelShape m = ModelPreset("llama2-7b");
  m.tied_embedding = true;
  EXPECT_EQ(TrainFlags(m, l, 64, LoadHardware("a100-80gb-ib400"), &why), "");
  EXPECT_EQ(why, "train's Llama has an untied head and no biases");
  m = ModelPreset("gpt3-6.7b");
  m.ffn = 3 * m.hidden;
  EXPECT_EQ(TrainFlags(m, l, 64, LoadHardware("a100-80gb-ib400"), &why), "");
  EXPECT_EQ(why, "train's GPT has a 4h GeLU MLP, multi-head attention and a tied head");
}

}  // namespace
}  // namespace planner
}  // namespace zeropp
