#include "tools/train_config.h"

#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <stdexcept>

#include <algorithm>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "zeropp/cli/run_checks.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace zeropp {
namespace tools {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument("--config: cannot read '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A JSON object's keys and values (as the text a flag would carry), in file order. nlohmann's
// parser refuses invalid JSON with the byte position; a duplicate key is refused here, because
// the library keeps the last one silently.
std::vector<std::pair<std::string, std::string>> ReadJsonObject(const std::string& path) {
  const std::string text = ReadFile(path);
  std::vector<std::pair<std::string, std::string>> kv;
  std::vector<std::set<std::string>> keys_at_depth;
  auto check_keys = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    if (event == nlohmann::json::parse_event_t::object_start) {
      keys_at_depth.emplace_back();
    } else if (event == nlohmann::json::parse_event_t::object_end) {
      keys_at_depth.pop_back();
    } else if (event == nlohmann::json::parse_event_t::key) {
      const std::string key = parsed.get<std::string>();
      if (!keys_at_depth.back().insert(key).second) {
        throw std::invalid_argument(absl::StrCat("--config ", path, ": duplicate key '", key, "'"));
      }
    }
    (void)depth;
    return true;
  };
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text, check_keys);
  } catch (const nlohmann::json::parse_error& e) {
    throw std::invalid_argument(absl::StrCat("--config ", path, ": invalid JSON at byte ", e.byte, ": ",
                                             std::string(e.what()).substr(std::string(e.what()).find(':') + 2)));
  }
  if (!j.is_object()) throw std::invalid_argument(absl::StrCat("--config ", path, ": expected a JSON object {...}"));
  for (auto it = j.begin(); it != j.end(); ++it) {
    const auto& v = it.value();
    std::string value;
    if (v.is_string()) {
      value = v.get<std::string>();
    } else if (v.is_boolean()) {
      value = v.get<bool>() ? "true" : "false";
    } else if (v.is_number_integer()) {
      value = v.dump();
    } else if (v.is_number_float()) {
      value = absl::StrCat(v.get<double>());
    } else {
      throw std::invalid_argument(absl::StrCat("--config ", path, ": '", it.key(), "' is ", v.type_name(),
                                               ", expected a string, number or boolean"));
    }
    kv.emplace_back(it.key(), value);
  }
  return kv;
}

}  // namespace

std::vector<std::string> TrainConfig::SettingNames() {
  std::vector<std::string> names;
  Parse({}, &names);
  return names;
}

TrainConfig TrainConfig::Parse(const std::vector<std::string>& args) { return Parse(args, nullptr); }

TrainConfig TrainConfig::Parse(const std::vector<std::string>& args, std::vector<std::string>* names_out) {
  TrainConfig c;
  // Integers are range-checked before any narrowing: [lo, hi].
  auto i64 = [](const std::string& name, const std::string& v, int64_t lo,
                int64_t hi = std::numeric_limits<int64_t>::max() >> 20) {
    int64_t x;
    if (!absl::SimpleAtoi(v, &x) || x < lo || x > hi) {
      throw std::invalid_argument(absl::StrCat(name, ": got '", v, "', expected an integer in [", lo, ", ", hi, "]"));
    }
    return x;
  };
  constexpr int64_t kIntMax = std::numeric_limits<int>::max();
  auto i32 = [&](const std::string& name, const std::string& v, int64_t lo) {
    return static_cast<int>(i64(name, v, lo, kIntMax));
  };
  // Floats must be finite and inside [lo, hi].
  auto f64 = [](const std::string& name, const std::string& v, double lo, double hi) {
    double x;
    if (!absl::SimpleAtod(v, &x) || !std::isfinite(x) || x < lo || x > hi) {
      throw std::invalid_argument(absl::StrCat(name, ": got '", v, "', expected a finite number in [", lo, ", ", hi, "]"));
    }
    return x;
  };
  auto tier = [](const std::string& name, const std::string& v) { return ParseOffloadTarget(name, v); };
  auto path = [](const std::string& name, const std::string& v) {
    if (v.empty()) throw std::invalid_argument(name + ": got '', expected a file path");
    return v;
  };
  EngineOptions& e = c.trainer.engine;
  PipelineOptions& pl = c.trainer.pipeline;
  ParallelConfig& lay = c.trainer.layout;
  auto boolean = [](const std::string& name, const std::string& v) {
    if (v == "true" || v == "1") return true;
    if (v == "false" || v == "0") return false;
    throw std::invalid_argument(absl::StrCat(name, ": got '", v, "', expected true or false"));
  };
  auto dtype = [](const std::string& name, const std::string& v) {
    if (v == "fp32" || v == "float32") return at::kFloat;
    if (v == "bf16" || v == "bfloat16") return at::kBFloat16;
    throw std::invalid_argument(absl::StrCat(name, ": got '", v, "', expected fp32 or bf16"));
  };
  using Setter = std::function<void(const std::string&)>;
  std::map<std::string, std::pair<bool, Setter>> table = {  // name -> (is_boolean, setter)
      {"steps", {false, [&](const std::string& v) { c.steps = i64("steps", v, 1); }}},
      {"micro-batch", {false, [&](const std::string& v) { c.micro_batch = i64("micro-batch", v, 1); }}},
      {"microbatches", {false, [&](const std::string& v) { c.trainer.microbatches = i32("microbatches", v, 1); }}},
      {"seed", {false, [&](const std::string& v) { c.seed = static_cast<uint64_t>(i64("seed", v, 0)); }}},
      {"data-dir", {false, [&](const std::string& v) { c.data_dir = v; }}},
      {"schedule", {false, [&](const std::string& v) { pl.schedule = ParsePipelineSchedule("schedule", v); }}},
      {"chunks", {false, [&](const std::string& v) { pl.chunks = i32("chunks", v, 1); }}},
      {"unit-size", {false, [&](const std::string& v) { pl.unit_size = i32("unit-size", v, 1); }}},
      {"pipeline-recompute", {false, [&](const std::string& v) { pl.recompute = ParsePipelineRecompute("pipeline-recompute", v); }}},
      {"partition", {false, [&](const std::string& v) { pl.partition = ParseStagePartition("partition", v); }}},
      {"max-deferred-w", {false, [&](const std::string& v) { pl.max_deferred_w = i32("max-deferred-w", v, 0); }}},
      {"split-backward", {true, [&](const std::string& v) { pl.split_backward = boolean("split-backward", v); }}},
      {"offload-optimizer", {false, [&](const std::string& v) { e.offload.optimizer = tier("offload-optimizer", v); }}},
      {"offload-params", {false, [&](const std::string& v) { e.offload.params = tier("offload-params", v); }}},
      {"offload-activations", {false, [&](const std::string& v) { e.offload.activations = tier("offload-activations", v); }}},
      {"offload-dir", {false, [&](const std::string& v) { e.offload.dir = path("offload-dir", v); }}},
      {"host-budget-mb", {false, [&](const std::string& v) { e.offload.host_budget_bytes = i64("host-budget-mb", v, 1) << 20; }}},
      {"memory-budget-mb", {false, [&](const std::string& v) { e.memory_budget_bytes = i64("memory-budget-mb", v, 0) << 20; }}},
      {"threads", {false, [&](const std::string& v) { c.threads = i32("threads", v, 1); }}},
      {"host-threads", {false, [&](const std::string& v) { e.host_threads = i32("host-threads", v, 1); }}},
      {"trace", {false, [&](const std::string& v) { c.trace = path("trace", v); }}},
      {"metrics", {false, [&](const std::string& v) { c.metrics = path("metrics", v); }}},
      {"save-dir", {false, [&](const std::string& v) { c.save_dir = path("save-dir", v); }}},
      {"save-every", {false, [&](const std::string& v) { c.save_every = i64("save-every", v, 1); }}},
      {"keep", {false, [&](const std::string& v) { c.keep = i32("keep", v, 1); }}},
      {"async-save", {true, [&](const std::string& v) { c.async_save = boolean("async-save", v); }}},
      {"init-from", {false, [&](const std::string& v) { c.init_from = path("init-from", v); }}},
      {"resume", {false, [&](const std::string& v) { c.resume = path("resume", v); }}},
      {"warmup-steps", {false, [&](const std::string& v) { c.trainer.lr.warmup_steps = i64("warmup-steps", v, 0); }}},
      {"lr-decay", {false, [&](const std::string& v) { c.trainer.lr.decay = ParseLrDecay("lr-decay", v); }}},
      {"decay-steps", {false, [&](const std::string& v) { c.trainer.lr.decay_steps = i64("decay-steps", v, 1); }}},
      {"min-lr-ratio", {false, [&](const std::string& v) { c.trainer.lr.min_lr_ratio = f64("min-lr-ratio", v, 0, 1); }}},
      {"profile", {true, [&](const std::string& v) { c.profile = boolean("profile", v); }}},
      {"profile-ops", {true, [&](const std::string& v) { c.profile_ops = boolean("profile-ops", v); }}},
      {"mfu", {true, [&](const std::string& v) { c.mfu = boolean("mfu", v); }}},
      {"bench-warmup", {false, [&](const std::string& v) { c.bench_warmup = i64("bench-warmup", v, 0); }}},
      {"log-every", {false, [&](const std::string& v) { c.log_every = i64("log-every", v, 1); }}},
      {"eval-every", {false, [&](const std::string& v) { c.eval_every = i64("eval-every", v, 0); }}},
      {"eval-batches", {false, [&](const std::string& v) { c.eval_batches = i64("eval-batches", v, 1); }}},
      {"model", {false, [&](const std::string& v) {
         if (v != "gpt" && v != "llama") throw std::invalid_argument("model: got '" + v + "', expected gpt or llama");
         c.model = v;
       }}},
      {"kv-heads", {false, [&](const std::string& v) { c.kv_heads = i64("kv-heads", v, 1, kIntMax); }}},
      {"ffn", {false, [&](const std::string& v) { c.ffn = i64("ffn", v, 1, kIntMax); }}},
      {"vocab", {false, [&](const std::string& v) { c.gpt.vocab = i64("vocab", v, 1, kIntMax); }}},
      {"context", {false, [&](const std::string& v) { c.gpt.context = i64("context", v, 1, kIntMax); }}},
      {"width", {false, [&](const std::string& v) { c.gpt.width = i64("width", v, 1, kIntMax); }}},
      {"depth", {false, [&](const std::string& v) { c.gpt.depth = i64("depth", v, 1, kIntMax); }}},
      {"heads", {false, [&](const std::string& v) { c.gpt.heads = i64("heads", v, 1, kIntMax); }}},
      {"device", {false, [&](const std::string& v) {
         if (v != "cpu" && v != "cuda") throw std::invalid_argument("device: got '" + v + "', expected cpu or cuda");
         c.trainer.device = v;
       }}},
      {"backend", {false, [&](const std::string& v) {
         if (v != "auto" && v != "gloo" && v != "nccl") {
           throw std::invalid_argument("backend: got '" + v + "', expected auto, gloo or nccl");
         }
         c.trainer.backend = v;
       }}},
      {"pp", {false, [&](const std::string& v) { lay.pp = i32("pp", v, 1); }}},
      {"zero", {false, [&](const std::string& v) { lay.zero = i32("zero", v, 1); }}},
      {"dp", {false, [&](const std::string& v) { lay.dp = i32("dp", v, 1); }}},
      {"dp-mode", {false, [&](const std::string& v) { lay.dp_mode = ParseDpMode(v); }}},
      {"lr", {false, [&](const std::string& v) { e.adamw.lr = static_cast<float>(f64("lr", v, 0, 10)); }}},
      {"weight-decay", {false, [&](const std::string& v) { e.adamw.weight_decay = static_cast<float>(f64("weight-decay", v, 0, 10)); }}},
      {"clip", {false, [&](const std::string& v) { e.max_grad_norm = f64("clip", v, 0, 1e9); }}},
      {"prefetch", {false, [&](const std::string& v) { e.prefetch_depth = i32("prefetch", v, 0); }}},
      {"max-live-units", {false, [&](const std::string& v) { e.max_live_units = i32("max-live-units", v, 0); }}},
      {"max-pending-reductions",
       {false, [&](const std::string& v) { e.max_pending_reductions = i32("max-pending-reductions", v, 0); }}},
      {"param-dtype", {false, [&](const std::string& v) { e.param_dtype = dtype("param-dtype", v); }}},
      {"reduce-dtype", {false, [&](const std::string& v) { e.reduce_dtype = dtype("reduce-dtype", v); }}},
      {"reshard-after-forward", {true, [&](const std::string& v) { e.reshard_after_forward = boolean("reshard-after-forward", v); }}},
      {"recompute", {true, [&](const std::string& v) { e.recompute = boolean("recompute", v); }}},
      {"no-sync", {true, [&](const std::string& v) { e.no_sync = boolean("no-sync", v); }}},
  };
  if (names_out != nullptr) {
    for (const auto& kv : table) names_out->push_back("--" + kv.first + (kv.second.first ? " [true|false]" : ""));
    return c;
  }
  e.adamw.lr = 3e-3f;
  e.adamw.weight_decay = 0.01f;
  e.max_grad_norm = 1.0;
  lay.zero = 0;  // world_size / (pp * dp) unless set
  auto set = [&](std::string name, const std::string& value) {
    for (auto& ch : name) ch = ch == '_' ? '-' : ch;
    auto it = table.find(name);
    if (it == table.end()) {
      std::vector<std::string> names;
      for (const auto& kv : table) names.push_back(kv.first);
      throw std::invalid_argument(absl::StrCat("unknown setting '", name, "'; expected one of: ", absl::StrJoin(names, ", ")));
    }
    it->second.second(value);
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.rfind("--", 0) != 0) throw std::invalid_argument("unexpected argument '" + a + "' (settings are --name value)");
    std::string name = a.substr(2);
    if (name == "config") {
      if (i + 1 >= args.size()) throw std::invalid_argument("--config: missing file name");
      for (const auto& kv : ReadJsonObject(args[++i])) set(kv.first, kv.second);
      continue;
    }
    std::string key = name;
    for (auto& ch : key) ch = ch == '_' ? '-' : ch;
    auto it = table.find(key);
    bool is_bool = it != table.end() && it->second.first;
    if (is_bool && (i + 1 >= args.size() || args[i + 1].rfind("--", 0) == 0)) {
      set(key, "true");
    } else {
      if (i + 1 >= args.size()) throw std::invalid_argument("--" + name + ": missing value");
      set(key, args[++i]);
    }
  }
  // The byte corpus's tokens are 0..255: a smaller vocabulary would index out of the embedding.
  if (c.gpt.vocab < 256) {
    throw std::invalid_argument(absl::StrCat("vocab: got ", c.gpt.vocab,
                                             ", expected >= 256 (the byte corpus's tokens are 0..255)"));
  }
  if (c.model == "llama") {
    c.Llama().Validate();
  } else {
    if (c.kv_heads > 0) throw std::invalid_argument(absl::StrCat("kv-heads: got ", c.kv_heads, ", expected --model llama too"));
    if (c.ffn > 0) throw std::invalid_argument(absl::StrCat("ffn: got ", c.ffn, ", expected --model llama too"));
    c.gpt.Validate();
  }
  return c;
}

models::LlamaConfig TrainConfig::Llama() const {
  models::LlamaConfig l;
  l.vocab = gpt.vocab;
  l.context = gpt.context;
  l.width = gpt.width;
  l.depth = gpt.depth;
  l.heads = gpt.heads;
  l.kv_heads = kv_heads;
  l.ffn = ffn;
  return l;
}

std::string TrainConfig::ModelDescription() const { return model == "llama" ? Llama().ToString() : gpt.ToString(); }

double TrainConfig::ModelFlopsPerToken() const {
  return model == "llama" ? Llama().TrainingFlopsPerToken() : gpt.TrainingFlopsPerToken();
}

int64_t TrainConfig::NumParameters() const { return model == "llama" ? Llama().NumParameters() : gpt.NumParameters(); }

void TrainConfig::Resolve(int world_size) {
  std::string err = trainer.Resolve(world_size);
  if (!err.empty()) throw std::invalid_argument(err);
  if (save_every > 0 && save_dir.empty()) {
    throw std::invalid_argument(absl::StrCat("save-every: got ", save_every, ", expected --save-dir too"));
  }
  if (resume == "auto" && save_dir.empty()) throw std::invalid_argument("resume: got 'auto', expected --save-dir too");
  if (eval_every > 0 && eval_batches % trainer.microbatches != 0) {
    throw std::invalid_argument(absl::StrCat("eval-batches: got ", eval_batches, ", expected a multiple of microbatches (",
                                             trainer.microbatches, "): evaluation runs whole steps"));
  }
}

void TrainConfig::CheckMemoryEstimate(int local_ranks) const {
  // Doubles: absurd sizes must not overflow the estimate that refuses them.
  const double w = static_cast<double>(gpt.width), d = static_cast<double>(gpt.depth);
  // The same estimate as the model's own count, in doubles (sizes can be absurd here).
  const double ffn_w = model == "llama" ? static_cast<double>(Llama().Ffn()) : 4 * w;
  const double params = (4 * w * w + 2 * w * ffn_w + (model == "llama" ? w * ffn_w : 0)) * d +
                        static_cast<double>(gpt.vocab) * w * (model == "llama" ? 2 : 1) + static_cast<double>(gpt.context) * w;
  const double build = params * 4;  // every rank builds the full fp32 model before sharding
  const int shards = std::max(1, trainer.layout.zero) * std::max(1, trainer.layout.pp);
  // Host memory only. On a CPU the training state lives on the host, 16 bytes a parameter (fp32
  // parameter and gradient 8, AdamW moments 8), less what is offloaded to NVMe. On a GPU the
  // activations and the resident state live on the device, and the host keeps what is offloaded to
  // it (optimizer: fp32 master and moments, 12 bytes a parameter; parameters: the compute-dtype
  // shard and its gradient, 4 more). Anything on NVMe adds the host pool its transfers stage in.
  const bool on_gpu = trainer.device == "cuda";
  const auto& off = trainer.engine.offload;
  auto host = [&](OffloadTarget t, double resident, double offloaded_to_host) {
    if (t == OffloadTarget::kNvme) return 0.0;
    return on_gpu ? (t == OffloadTarget::kCpu ? offloaded_to_host : 0.0) : resident;
  };
  const double host_state_bytes = host(off.optimizer, 8, 12) + host(off.params, 8, 4);
  const double pool = off.any_nvme() ? static_cast<double>(off.host_budget_bytes) : 0.0;
  const double state = params * host_state_bytes / shards + pool;
  const double tokens = static_cast<double>(micro_batch) * static_cast<double>(gpt.context);
  const double acts = on_gpu ? 0
                             : tokens * (20 * w + static_cast<double>(gpt.heads) * gpt.context) * d * 4 *
                                       std::max(1, trainer.microbatches) +
                                   tokens * static_cast<double>(gpt.vocab) * 4 * 3;
  const double per_rank = build + state + acts;
  const double avail = static_cast<double>(cli::AvailableMemoryBytes()) / std::max(1, local_ranks);
  if (avail > 0 && per_rank > avail) {
    throw std::invalid_argument(absl::StrCat(
        "memory estimate: about ", static_cast<int64_t>(per_rank / 1e6), " MB per rank (full model built before ",
        "sharding ", static_cast<int64_t>(build / 1e6), " MB, sharded model state ", static_cast<int64_t>(state / 1e6),
        " MB", on_gpu ? " on the host" : "", ", activations and logits ", static_cast<int64_t>(acts / 1e6), " MB) but ", static_cast<int64_t>(avail / 1e6),
        " MB are available per rank (", local_ranks, " local ranks); shrink width/depth/micro-batch or add ranks"));
  }
}

}  // namespace tools
}  // namespace zeropp
