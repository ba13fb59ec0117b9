#include "zeropp/trainer_options.h"

#include <cmath>
#include <stdexcept>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace zeropp {
namespace {

template <typename E, size_t N>
E ParseEnum(const std::string& field, const std::string& text, const std::pair<const char*, E> (&table)[N]) {
  std::vector<std::string> names;
  for (const auto& kv : table) {
    if (text == kv.first) return kv.second;
    names.push_back(kv.first);
  }
  throw std::invalid_argument(absl::StrCat(field, ": got '", text, "', expected one of: ", absl::StrJoin(names, ", ")));
}

template <typename E, size_t N>
const char* EnumName(E e, const std::pair<const char*, E> (&table)[N]) {
  for (const auto& kv : table) {
    if (kv.second == e) return kv.first;
  }
  return "?";
}

constexpr std::pair<const char*, PipelineSchedule> kSchedules[] = {
    {"auto", PipelineSchedule::kAuto},     {"gpipe", PipelineSchedule::kGPipe},   {"1f1b", PipelineSchedule::kOneFOneB},
    {"interleaved", PipelineSchedule::kInterleaved}, {"zeropp", PipelineSchedule::kZeroPP}, {"zb-h1", PipelineSchedule::kZbH1}};
constexpr std::pair<const char*, PipelineRecompute> kRecomputes[] = {{"default", PipelineRecompute::kDefault},
                                                                     {"none", PipelineRecompute::kNone},
                                                                     {"all-but-last", PipelineRecompute::kAllButLast},
                                                                     {"all", PipelineRecompute::kAll}};
constexpr std::pair<const char*, StagePartition> kPartitions[] = {{"parameters", StagePartition::kParameters},
                                                                  {"uniform", StagePartition::kUniform}};
constexpr std::pair<const char*, LrDecay> kDecays[] = {{"constant", LrDecay::kConstant}, {"cosine", LrDecay::kCosine}};

}  // namespace

const char* Name(PipelineSchedule s) { return EnumName(s, kSchedules); }
const char* Name(PipelineRecompute r) { return EnumName(r, kRecomputes); }
const char* Name(StagePartition p) { return EnumName(p, kPartitions); }
const char* Name(LrDecay d) { return EnumName(d, kDecays); }
PipelineSchedule ParsePipelineSchedule(const std::string& f, const std::string& t) { return ParseEnum(f, t, kSchedules); }
PipelineRecompute ParsePipelineRecompute(const std::string& f, const std::string& t) { return ParseEnum(f, t, kRecomputes); }
StagePartition ParseStagePartition(const std::string& f, const std::string& t) { return ParseEnum(f, t, kPartitions); }
LrDecay ParseLrDecay(const std::string& f, const std::string& t) { return ParseEnum(f, t, kDecays); }

double LrSchedule::At(int64_t step, double peak) const {
  if (warmup_steps > 0 && step < warmup_steps) return peak * static_cast<double>(step + 1) / (warmup_steps + 1);
  if (decay == LrDecay::kConstant) return peak;
  const double floor = peak * min_lr_ratio;
  if (step >= decay_steps) return floor;
  const double t = static_cast<double>(step - warmup_steps) / static_cast<double>(decay_steps - warmup_steps);
  return floor + 0.5 * (peak - floor) * (1.0 + std::cos(M_PI * t));
}

std::string TrainerOptions::Resolve(int world_size) {
  std::vector<std::string> p;
  auto finite = [&](const char* field, double v) {
    if (!std::isfinite(v)) p.push_back(absl::StrCat(field, "(", v, ") must be a finite number"));
  };
  if (world_size < 1) p.push_back(absl::StrCat("world_size(", world_size, ") must be >= 1"));
  if (layout.pp < 1) p.push_back(absl::StrCat("pp(", layout.pp, ") must be >= 1"));
  if (layout.dp < 1) p.push_back(absl::StrCat("dp(", layout.dp, ") must be >= 1"));
  if (!p.empty()) return absl::StrJoin(p, "; ");
  if (layout.zero == 0) {
    const int64_t rest = static_cast<int64_t>(layout.pp) * layout.dp;
    layout.zero = world_size % rest == 0 ? static_cast<int>(world_size / rest) : 0;
    if (layout.zero == 0) {
      p.push_back(absl::StrCat("pp(", layout.pp, ")*dp(", layout.dp, ")=", rest, " does not divide world_size(",
                               world_size, "); set zero explicitly"));
    }
  }
  if (p.empty()) {
    const std::string err = layout.Validate(world_size);
    if (!err.empty()) p.push_back("ParallelConfig: " + err);
  }
  if (device != "cpu" && device != "cuda") {
    p.push_back(absl::StrCat("device(", device, ") must be one of: cpu, cuda"));
  } else if (backend == "auto") {
    backend = device == "cuda" ? "nccl" : "gloo";
  }
  if (backend != "auto" && backend != "gloo" && backend != "nccl") {
    p.push_back(absl::StrCat("backend(", backend, ") must be one of: auto, gloo, nccl"));
  } else if (backend == "nccl" && device == "cpu") {
    p.push_back("backend(nccl) needs device(cuda): NCCL moves GPU tensors only (use gloo on cpu)");
  }
  const std::string engine_err = engine.Validate();
  if (!engine_err.empty()) p.push_back(engine_err);
  finite("lr", engine.adamw.lr);
  finite("weight_decay", engine.adamw.weight_decay);
  if (!(engine.adamw.weight_decay >= 0)) p.push_back(absl::StrCat("weight_decay(", engine.adamw.weight_decay, ") must be >= 0"));
  finite("clip", engine.max_grad_norm);
  const bool pipelined = layout.pp > 1;
  if (microbatches == 0) microbatches = pipelined ? 2 * layout.pp : 1;
  if (microbatches < 1) p.push_back(absl::StrCat("microbatches(", microbatches, ") must be >= 1"));
  if (pipeline.chunks < 1) p.push_back(absl::StrCat("chunks(", pipeline.chunks, ") must be >= 1"));
  if (pipeline.unit_size < 0) p.push_back(absl::StrCat("unit_size(", pipeline.unit_size, ") must be >= 0"));
  if (pipeline.max_deferred_w < -1) {
    p.push_back(
        absl::StrCat("max_deferred_w(", pipeline.max_deferred_w, ") must be >= 0, or -1 for the schedule's own"));
  }
  if (!pipelined) {
    // pp = 1 runs the zero3 schedule: pipeline settings would be ignored, so they are refused.
    if (pipeline.schedule != PipelineSchedule::kAuto) {
      p.push_back(absl::StrCat("schedule(", Name(pipeline.schedule), ") needs pp > 1 (pp = 1 runs the zero3 schedule)"));
    }
    if (pipeline.chunks != 1) p.push_back(absl::StrCat("chunks(", pipeline.chunks, ") needs pp > 1"));
    if (pipeline.unit_size != 0) p.push_back(absl::StrCat("unit_size(", pipeline.unit_size, ") needs pp > 1 and schedule zeropp"));
    if (pipeline.max_deferred_w >= 0) {
      p.push_back(
          absl::StrCat("max_deferred_w(", pipeline.max_deferred_w, ") needs pp > 1 and schedule zeropp or zb-h1"));
    }
    if (pipeline.recompute != PipelineRecompute::kDefault) {
      p.push_back(absl::StrCat("pipeline_recompute(", Name(pipeline.recompute), ") needs pp > 1; with pp = 1 use recompute"));
    }
  } else {
    if (pipeline.schedule == PipelineSchedule::kAuto) pipeline.schedule = PipelineSchedule::kZeroPP;
    if (pipeline.unit_size != 0 && pipeline.schedule != PipelineSchedule::kZeroPP) {
      p.push_back(absl::StrCat("unit_size(", pipeline.unit_size, ") needs schedule zeropp, got ", Name(pipeline.schedule)));
    }
    const bool defers = pipeline.schedule == PipelineSchedule::kZeroPP || pipeline.schedule == PipelineSchedule::kZbH1;
    if (pipeline.max_deferred_w >= 0 && !defers) {
      p.push_back(absl::StrCat("max_deferred_w(", pipeline.max_deferred_w, ") needs schedule zeropp or zb-h1, got ",
                               Name(pipeline.schedule)));
    }
    // Engine options whose pp = 1 meaning is per unit: a pipeline chunk is gathered, released and
    // reduced as its schedule says, so these are refused rather than ignored.
    const char* why = "under pp > 1 the schedule gathers and releases whole chunks; use more chunks for smaller ones";
    if (engine.prefetch_depth != 1) p.push_back(absl::StrCat("prefetch(", engine.prefetch_depth, ") needs pp = 1: ", why));
    if (engine.max_live_units != 0) p.push_back(absl::StrCat("max_live_units(", engine.max_live_units, ") needs pp = 1: ", why));
    if (!engine.reshard_after_forward) p.push_back(absl::StrCat("reshard_after_forward(false) needs pp = 1: ", why));
    if (engine.no_sync) {
      p.push_back("no_sync(true) needs pp = 1: pipeline schedules already reduce each chunk's gradient once per step "
                  "(once per unit for zeropp)");
    }
    if (engine.offload.activations != OffloadTarget::kNone) {
      p.push_back(absl::StrCat("offload_activations(", Name(engine.offload.activations),
                               ") needs pp = 1: a pipeline keeps several micro-batches of a chunk in flight and the "
                               "offload tier holds one saved input per unit"));
    }
    if (engine.recompute) {
      if (pipeline.recompute != PipelineRecompute::kDefault && pipeline.recompute != PipelineRecompute::kAll) {
        p.push_back(absl::StrCat("recompute(true) conflicts with pipeline_recompute(", Name(pipeline.recompute), ")"));
      }
      pipeline.recompute = PipelineRecompute::kAll;
    }
  }
  if (lr.warmup_steps < 0) p.push_back(absl::StrCat("warmup_steps(", lr.warmup_steps, ") must be >= 0"));
  if (lr.decay == LrDecay::kCosine && lr.decay_steps <= lr.warmup_steps) {
    p.push_back(absl::StrCat("decay_steps(", lr.decay_steps, ") must be > warmup_steps(", lr.warmup_steps,
                             ") for lr_decay cosine"));
  }
  if (!(lr.min_lr_ratio >= 0 && lr.min_lr_ratio <= 1)) {
    p.push_back(absl::StrCat("min_lr_ratio(", lr.min_lr_ratio, ") must be in [0, 1]"));
  }
  return absl::StrJoin(p, "; ");
}

}  // namespace zeropp
