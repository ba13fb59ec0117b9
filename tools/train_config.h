// train_config.h: the training job's settings, from flags and/or a flat JSON file.
//
// Every setting is a flag (--name value, or --name for booleans); --config FILE reads a flat JSON
// object whose keys are the same names ({"steps": 50, "zero": 4, "param_dtype": "bf16"}), read with
// nlohmann::json (invalid JSON and duplicate keys are refused with the byte position or key), and
// flags given after it override the file. Unknown names and malformed values are refused, naming
// the field, the value and what was expected; integers are range-checked before narrowing and
// floats must be finite.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/gpt.h"
#include "models/llama.h"
#include "zeropp/trainer_options.h"

namespace zeropp {
namespace tools {

struct TrainConfig {
  std::string model = "gpt";   // "gpt" (GPT-2 style) or "llama" (RMSNorm, rotary, SwiGLU, GQA)
  models::GptConfig gpt;       // the sizes both models share: vocab, context, width, depth, heads
  int64_t kv_heads = 0;        // llama: key/value heads (0 = heads)
  int64_t ffn = 0;             // llama: SwiGLU hidden size (0 = Llama's 8/3 * width rule)
  TrainerOptions trainer;      // layout, engine, pipeline, lr schedule, microbatches per step
  int64_t steps = 100;
  int64_t micro_batch = 8;     // sequences per micro-batch per rank
  std::string trace;           // write the last step's trace to <trace>.rank<R>.json
  uint64_t seed = 1234;
  std::string data_dir = "/usr/share/common-licenses";
  std::string metrics;         // JSON-lines file written by rank 0 ("" = none)
  int64_t log_every = 1;
  int64_t eval_every = 0;      // > 0: every N steps (and at the end) evaluate on held-out text
  int64_t eval_batches = 4;    // micro-batches per rank per evaluation
  int threads = 1;             // intra-op threads per rank
  int64_t bench_warmup = 0;    // > 0: time only the steps after these, print a BENCH line
  bool profile = false;        // each rank prints where its step time went (PROFILE line)
  bool profile_ops = false;    // each rank prints its operator time by kind (OPS line, zeropp/cli/op_profile.h)
  bool mfu = false;            // measure every rank's matmul throughput first; end with an MFU line
  std::string save_dir;        // checkpoints go to save_dir/step-N (with --save-every)
  int64_t save_every = 0;      // > 0: save every N steps and after the last
  int keep = 0;                // > 0: keep only the newest N checkpoints
  bool async_save = false;     // write checkpoints in the background while training goes on
  std::string resume;          // "auto": save_dir's latest if there is one; else a checkpoint path
  std::string init_from;       // a Hugging Face GPT-2 or Llama safetensors file to start from

  models::LlamaConfig Llama() const;  // the llama model's sizes
  std::string ModelDescription() const;
  int64_t NumParameters() const;
  double ModelFlopsPerToken() const;  // the model's TrainingFlopsPerToken

  // Parses argv (without the program name). Throws std::invalid_argument naming the field.
  static TrainConfig Parse(const std::vector<std::string>& args);
  // Every setting's name, in order, "--name" or "--name [true|false]" for a switch (--help).
  static std::vector<std::string> SettingNames();
  // Fills the defaults that depend on the world size and checks every option against every
  // other (TrainerOptions::Resolve plus the job's own rules). Throws std::invalid_argument.
  void Resolve(int world_size);
  // Refuses, with the breakdown, a job whose estimated memory per rank exceeds what this machine
  // has available for its `local_ranks` ranks (before anything is allocated).
  void CheckMemoryEstimate(int local_ranks) const;
 private:
  // With names_out: fills it (SettingNames) and returns the defaults, parsing nothing.
  static TrainConfig Parse(const std::vector<std::string>& args, std::vector<std::string>* names_out);
};

}  // namespace tools
}  // namespace zeropp
