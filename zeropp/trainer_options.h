// trainer_options.h: every option of a training job, typed, and one pure Validate over all of
// them (layout, engine, pipeline, learning-rate schedule) that runs before any process group
// exists and reports every problem with the field and the value.
//
//   TrainerOptions o;
//   o.layout.pp = 2;                       // zero = world / (pp * dp) when left at 0
//   o.pipeline.schedule = PipelineSchedule::kZeroPP;
//   std::string err = o.Resolve(world_size);   // fills defaults, "" when valid
#pragma once

#include <string>
#include <vector>

#include "zeropp/engine_options.h"
#include "zeropp/parallel_config.h"

namespace zeropp {

// kAuto: zeropp when pp > 1 (pp = 1 always runs the zero3 schedule).
enum class PipelineSchedule { kAuto, kGPipe, kOneFOneB, kInterleaved, kZeroPP, kZbH1 };
// default: ZeroPP recomputes every chunk but the last rank's last; other schedules none.
enum class PipelineRecompute { kDefault, kNone, kAllButLast, kAll };
// How units are assigned to virtual stages: balanced by a compute proxy, or by unit count.
enum class StagePartition { kParameters, kUniform };
enum class LrDecay { kConstant, kCosine };

// Names as the CLI and JSON spell them; Parse* throw std::invalid_argument listing the choices.
const char* Name(PipelineSchedule s);
const char* Name(PipelineRecompute r);
const char* Name(StagePartition p);
const char* Name(LrDecay d);
PipelineSchedule ParsePipelineSchedule(const std::string& field, const std::string& text);
PipelineRecompute ParsePipelineRecompute(const std::string& field, const std::string& text);
StagePartition ParseStagePartition(const std::string& field, const std::string& text);
LrDecay ParseLrDecay(const std::string& field, const std::string& text);

// Used when layout.pp > 1 (the schedule of pp = 1 is always zero3, built from EngineOptions).
struct PipelineOptions {
  PipelineSchedule schedule = PipelineSchedule::kAuto;
  int chunks = 1;         // v: model chunks per pipeline rank
  int unit_size = 0;      // U for zeropp; 0 = all micro-batches of the step in one unit
  PipelineRecompute recompute = PipelineRecompute::kDefault;
  StagePartition partition = StagePartition::kParameters;
  // false: the backward is not split into input and weight passes (an ablation).
  bool split_backward = true;
  // zeropp and zb-h1: at most this many weight-gradient passes deferred at once per rank; -1: as
  // the schedule defers them (scheduler::GenOptions::max_deferred_w). Each deferred pass keeps its
  // chunk's weight-pass inputs and output gradients: 0 runs every W right after its Bi.
  int max_deferred_w = -1;
  // Sample the heap after every action (benchmarks; costs a mallinfo2 call per action).
  bool measure_heap = false;
};

// Learning rate of step s (0-based): linear warm-up from 0 to the peak (EngineOptions::adamw.lr)
// over warmup_steps, then constant, or cosine decay to min_lr_ratio * peak at decay_steps.
struct LrSchedule {
  LrDecay decay = LrDecay::kConstant;
  int64_t warmup_steps = 0;
  int64_t decay_steps = 0;   // kCosine: the step at which the floor is reached (> warmup_steps)
  double min_lr_ratio = 0.1;
  double At(int64_t step, double peak) const;
};

struct TrainerOptions {
  ParallelConfig layout{1, 0, 1, DpMode::kDp};  // zero = 0: world_size / (pp * dp)
  // cpu | cuda. On cuda each rank uses the GPU of its LOCAL_RANK (modulo the GPUs visible).
  std::string device = "cpu";
  // auto | gloo | nccl. auto: nccl on cuda, gloo on cpu. gloo on cuda stages transfers through
  // host memory: several ranks can then share one GPU (NCCL refuses that).
  std::string backend = "auto";
  EngineOptions engine;
  PipelineOptions pipeline;
  LrSchedule lr;
  int microbatches = 0;     // per optimizer step; 0: 1 when pp = 1, else 2 * pp
  // glibc malloc keeps freed memory for reuse and large CPU tensors come from a block cache
  // (zeropp/host_allocator.h): no page faults on every micro-batch's buffers, no heap
  // fragmentation by unit-sized ones. Process-wide; set false to leave the defaults.
  bool tune_host_allocator = true;

  // Fills the defaults that depend on the world size (zero, microbatches, backend), then checks every
  // option against every other. Returns "" when valid, else every problem ("; "-separated),
  // each naming the field and the value. Pure: no process group, no I/O.
  std::string Resolve(int world_size);
};

}  // namespace zeropp
