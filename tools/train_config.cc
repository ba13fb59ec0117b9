#include "tools/train_config.h"

#include <cctype>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <stdexcept>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace zeropp {
namespace tools {
namespace {

// Reads a flat JSON object of scalars into (key, text) pairs, in file order.
std::vector<std::pair<std::string, std::string>> ReadFlatJson(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument("--config: cannot read '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string s = ss.str();
  size_t i = 0;
  auto fail = [&](const std::string& what) {
    throw std::invalid_argument(absl::StrCat("--config ", path, ": ", what, " at byte ", i));
  };
  auto ws = [&] {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  };
  auto str = [&] {
    if (s[i] != '"') fail("expected '\"'");
    std::string out;
    for (++i; i < s.size() && s[i] != '"'; ++i) out += s[i];
    if (i >= s.size()) fail("unterminated string");
    ++i;
    return out;
  };
  std::vector<std::pair<std::string, std::string>> kv;
  ws();
  if (i >= s.size() || s[i] != '{') fail("expected a JSON object '{'");
  ++i;
  ws();
  while (i < s.size() && s[i] != '}') {
    std::string key = str();
    ws();
    if (i >= s.size() || s[i] != ':') fail("expected ':'");
    ++i;
    ws();
    std::string value;
    if (i < s.size() && s[i] == '"') {
      value = str();
    } else {
      while (i < s.size() && s[i] != ',' && s[i] != '}' && !std::isspace(static_cast<unsigned char>(s[i]))) value += s[i++];
      if (value.empty()) fail("expected a value for '" + key + "'");
    }
    kv.emplace_back(key, value);
    ws();
    if (i < s.size() && s[i] == ',') {
      ++i;
      ws();
    }
  }
  if (i >= s.size()) fail("expected '}'");
  return kv;
}

}  // namespace

TrainConfig TrainConfig::Parse(const std::vector<std::string>& args) {
  TrainConfig c;
  auto i64 = [](const std::string& name, const std::string& v, int64_t lo) {
    int64_t x;
    if (!absl::SimpleAtoi(v, &x) || x < lo) {
      throw std::invalid_argument(absl::StrCat(name, ": got '", v, "', expected an integer >= ", lo));
    }
    return x;
  };
  auto f64 = [](const std::string& name, const std::string& v) {
    double x;
    if (!absl::SimpleAtod(v, &x)) throw std::invalid_argument(absl::StrCat(name, ": got '", v, "', expected a number"));
    return x;
  };
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
      {"microbatches", {false, [&](const std::string& v) { c.microbatches = i64("microbatches", v, 1); }}},
      {"seed", {false, [&](const std::string& v) { c.seed = static_cast<uint64_t>(i64("seed", v, 0)); }}},
      {"data-dir", {false, [&](const std::string& v) { c.data_dir = v; }}},
      {"schedule", {false, [&](const std::string& v) { c.pipeline.schedule = v; }}},
      {"chunks", {false, [&](const std::string& v) { c.pipeline.chunks = static_cast<int>(i64("chunks", v, 1)); }}},
      {"unit-size", {false, [&](const std::string& v) { c.pipeline.unit_size = static_cast<int>(i64("unit-size", v, 1)); }}},
      {"pipeline-recompute", {false, [&](const std::string& v) { c.pipeline.recompute = v; }}},
      {"partition", {false, [&](const std::string& v) { c.pipeline.partition = v; }}},
      {"split-backward", {true, [&](const std::string& v) { c.pipeline.split_backward = boolean("split-backward", v); }}},
      {"offload-optimizer", {false, [&](const std::string& v) { c.engine.offload.optimizer = v; }}},
      {"offload-params", {false, [&](const std::string& v) { c.engine.offload.params = v; }}},
      {"offload-activations", {false, [&](const std::string& v) { c.engine.offload.activations = v; }}},
      {"offload-dir", {false, [&](const std::string& v) { c.engine.offload.dir = v; }}},
      {"host-budget-mb", {false, [&](const std::string& v) { c.engine.offload.host_budget_bytes = i64("host-budget-mb", v, 1) << 20; }}},
      {"memory-budget-mb", {false, [&](const std::string& v) { c.engine.memory_budget_bytes = i64("memory-budget-mb", v, 0) << 20; }}},
      {"threads", {false, [&](const std::string& v) { c.threads = static_cast<int>(i64("threads", v, 1)); }}},
      {"trace", {false, [&](const std::string& v) { c.trace = v; }}},
      {"metrics", {false, [&](const std::string& v) { c.metrics = v; }}},
      {"bench-warmup", {false, [&](const std::string& v) { c.bench_warmup = i64("bench-warmup", v, 0); }}},
      {"log-every", {false, [&](const std::string& v) { c.log_every = i64("log-every", v, 1); }}},
      {"eval-every", {false, [&](const std::string& v) { c.eval_every = i64("eval-every", v, 0); }}},
      {"eval-batches", {false, [&](const std::string& v) { c.eval_batches = i64("eval-batches", v, 1); }}},
      {"vocab", {false, [&](const std::string& v) { c.gpt.vocab = i64("vocab", v, 1); }}},
      {"context", {false, [&](const std::string& v) { c.gpt.context = i64("context", v, 1); }}},
      {"width", {false, [&](const std::string& v) { c.gpt.width = i64("width", v, 1); }}},
      {"depth", {false, [&](const std::string& v) { c.gpt.depth = i64("depth", v, 1); }}},
      {"heads", {false, [&](const std::string& v) { c.gpt.heads = i64("heads", v, 1); }}},
      {"pp", {false, [&](const std::string& v) { c.parallel.pp = static_cast<int>(i64("pp", v, 1)); }}},
      {"zero", {false, [&](const std::string& v) { c.parallel.zero = static_cast<int>(i64("zero", v, 1)); c.zero_set = true; }}},
      {"dp", {false, [&](const std::string& v) { c.parallel.dp = static_cast<int>(i64("dp", v, 1)); }}},
      {"dp-mode", {false, [&](const std::string& v) { c.parallel.dp_mode = ParseDpMode(v); }}},
      {"lr", {false, [&](const std::string& v) { c.engine.adamw.lr = static_cast<float>(f64("lr", v)); }}},
      {"weight-decay", {false, [&](const std::string& v) { c.engine.adamw.weight_decay = static_cast<float>(f64("weight-decay", v)); }}},
      {"clip", {false, [&](const std::string& v) { c.engine.max_grad_norm = f64("clip", v); }}},
      {"prefetch", {false, [&](const std::string& v) { c.engine.prefetch_depth = static_cast<int>(i64("prefetch", v, 0)); }}},
      {"max-live-units", {false, [&](const std::string& v) { c.engine.max_live_units = static_cast<int>(i64("max-live-units", v, 0)); }}},
      {"param-dtype", {false, [&](const std::string& v) { c.engine.param_dtype = dtype("param-dtype", v); }}},
      {"reduce-dtype", {false, [&](const std::string& v) { c.engine.reduce_dtype = dtype("reduce-dtype", v); }}},
      {"reshard-after-forward", {true, [&](const std::string& v) { c.engine.reshard_after_forward = boolean("reshard-after-forward", v); }}},
      {"recompute", {true, [&](const std::string& v) { c.engine.recompute = boolean("recompute", v); }}},
      {"no-sync", {true, [&](const std::string& v) { c.engine.no_sync = boolean("no-sync", v); }}},
  };
  c.engine.adamw.lr = 3e-3f;
  c.engine.adamw.weight_decay = 0.01f;
  c.engine.max_grad_norm = 1.0;
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
      for (const auto& kv : ReadFlatJson(args[++i])) set(kv.first, kv.second);
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
  c.pipeline.microbatches = static_cast<int>(c.microbatches);
  if (c.eval_every > 0 && c.parallel.pp > 1 && c.eval_batches % c.microbatches != 0) {
    throw std::invalid_argument("eval-batches: got " + std::to_string(c.eval_batches) + ", expected a multiple of " +
                                "microbatches (" + std::to_string(c.microbatches) +
                                ") with pp > 1: the pipeline evaluates whole steps");
  }
  c.gpt.Validate();
  std::string err = c.engine.Validate();
  if (!err.empty()) throw std::invalid_argument("engine options: " + err);
  return c;
}

}  // namespace tools
}  // namespace zeropp
