// train_config.h: the training job's settings, from flags and/or a flat JSON file.
//
// Every setting is a flag (--name value, or --name for booleans); --config FILE reads a flat JSON
// object whose keys are the same names ({"steps": 50, "zero": 4, "param_dtype": "bf16"}), and flags
// given after it override the file. Unknown names and malformed values are refused, naming the
// field, the value and what was expected.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/gpt.h"
#include "scheduler/pipeline_executor.h"
#include "zeropp/engine_options.h"
#include "zeropp/parallel_config.h"

namespace zeropp {
namespace tools {

struct TrainConfig {
  models::GptConfig gpt;
  ParallelConfig parallel;  // pp, zero, dp; zero defaults to the world size
  EngineOptions engine;
  int64_t steps = 100;
  int64_t micro_batch = 8;     // sequences per micro-batch per rank
  int64_t microbatches = 1;    // per step
  scheduler::PipelineOptions pipeline;  // schedule, chunks, unit size (used when pp > 1)
  std::string trace;           // pp > 1: write the last step's trace to <trace>.rank<R>.json
  uint64_t seed = 1234;
  std::string data_dir = "/usr/share/common-licenses";
  std::string metrics;         // JSON-lines file written by rank 0 ("" = none)
  int64_t log_every = 1;
  int64_t eval_every = 0;      // > 0: every N steps (and at the end) evaluate on held-out text
  int64_t eval_batches = 4;    // micro-batches per rank per evaluation
  int threads = 1;             // intra-op threads per rank
  int64_t bench_warmup = 0;    // > 0: time only the steps after these, print a BENCH line
  bool zero_set = false;

  // Parses argv (without the program name). Throws std::invalid_argument naming the field.
  static TrainConfig Parse(const std::vector<std::string>& args);
  std::string Usage() const;
};

}  // namespace tools
}  // namespace zeropp
