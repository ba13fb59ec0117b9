#include "scheduler/planner/hf_config.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "absl/strings/str_cat.h"

namespace zeropp {
namespace planner {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kTypes = "llama, mistral, qwen2 or gpt2";  // the model_type values priced

class Config {
 public:
  Config(json root, std::string origin) : root_(std::move(root)), origin_(std::move(origin)) {}

  [[noreturn]] void Fail(const std::string& field, const std::string& got, const std::string& expected) const {
    throw std::invalid_argument(absl::StrCat("--model ", origin_, ": field '", field, "': got ", got, ", expected ",
                                             expected));
  }
  bool Present(const std::string& field) const { return root_.contains(field) && !root_[field].is_null(); }
  // A whole number > 0; `fallback` (when >= 0) where the field is absent or null.
  int Count(const std::string& field, int fallback = -1, const std::string& hint = "") const {
    const std::string want = "a whole number > 0" + hint;
    if (!Present(field)) {
      if (fallback >= 0) return fallback;
      Fail(field, "nothing (missing)", want);
    }
    const json& v = root_[field];
    if (!v.is_number_integer() || v.get<long long>() <= 0 || v.get<long long>() > (1LL << 30)) {
      Fail(field, v.dump(), want);
    }
    return static_cast<int>(v.get<long long>());
  }
  bool Flag(const std::string& field, bool fallback) const {
    if (!Present(field)) return fallback;
    if (!root_[field].is_boolean()) Fail(field, root_[field].dump(), "true or false");
    return root_[field].get<bool>();
  }
  // A dropout probability in [0, 1); `fallback` where the field is absent or null.
  double Probability(const std::string& field, double fallback) const {
    if (!Present(field)) return fallback;
    const json& v = root_[field];
    if (!v.is_number() || !(v.get<double>() >= 0 && v.get<double>() < 1)) Fail(field, v.dump(), "a number in [0, 1)");
    return v.get<double>();
  }
  std::string Text(const std::string& field) const {
    if (!Present(field)) Fail(field, "nothing (missing)", kTypes);
    if (!root_[field].is_string()) Fail(field, root_[field].dump(), absl::StrCat("a string: ", kTypes));
    return root_[field].get<std::string>();
  }

 private:
  json root_;
  std::string origin_;
};

fs::path ConfigFile(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) ? fs::path(path) / "config.json" : fs::path(path);
}

// Refuses `field` (its value `part`) unless it divides `whole_field` (its value `whole`).
void Divides(const Config& c, const std::string& field, int part, const std::string& whole_field, int whole) {
  if (whole % part != 0) {
    c.Fail(field, std::to_string(part), absl::StrCat("a whole number dividing ", whole_field, " (", whole, ")"));
  }
}

// A Llama-family block (llama, mistral, qwen2). Qwen2's biases are fixed (q, k and v); a
// transformers Llama or Mistral config says where it has any (attention_bias: q, k, v and o).
ModelShape Llama(const Config& c, const std::string& type) {
  ModelShape m;
  m.hidden = c.Count("hidden_size");
  m.layers = c.Count("num_hidden_layers");
  m.heads = c.Count("num_attention_heads");
  m.kv_heads = c.Count("num_key_value_heads", m.heads);
  m.ffn = c.Count("intermediate_size");
  m.vocab = c.Count("vocab_size");
  m.swiglu = true;
  m.tied_embedding = c.Flag("tie_word_embeddings", false);
  m.dropout = c.Probability("attention_dropout", 0.0) > 0;  // the family's only dropout
  if (type == "qwen2") {
    m.qkv_bias = true;
  } else {
    m.qkv_bias = m.out_bias = c.Flag("attention_bias", false);
    m.mlp_bias = c.Flag("mlp_bias", false);
  }
  Divides(c, "num_attention_heads", m.heads, "hidden_size", m.hidden);
  Divides(c, "num_key_value_heads", m.kv_heads, "num_attention_heads", m.heads);
  if (c.Present("head_dim") && c.Count("head_dim") != m.hidden / m.heads) {
    c.Fail("head_dim", std::to_string(c.Count("head_dim")),
           absl::StrCat("hidden_size / num_attention_heads = ", m.hidden / m.heads,
                        " (the planner's attention projections are hidden x hidden)"));
  }
  return m;
}

ModelShape Gpt2(const Config& c) {
  ModelShape m;
  m.hidden = c.Count("n_embd");
  m.layers = c.Count("n_layer");
  m.heads = c.Count("n_head");
  m.kv_heads = m.heads;
  Divides(c, "n_head", m.heads, "n_embd", m.hidden);
  m.ffn = c.Count("n_inner", 4 * m.hidden);  // null in GPT-2's configs: 4 x n_embd
  m.vocab = c.Count("vocab_size");
  m.tied_embedding = c.Flag("tie_word_embeddings", true);
  // transformers' GPT2Config defaults: 0.1 each.
  m.dropout = c.Probability("resid_pdrop", 0.1) > 0 || c.Probability("attn_pdrop", 0.1) > 0;
  return m;
}

}  // namespace

bool IsHfConfigPath(const std::string& model) {
  for (const std::string& preset : ModelPresetNames()) {
    if (model == preset) return false;
  }
  std::error_code ec;
  return model.find('/') != std::string::npos || fs::exists(model, ec);
}

ModelShape ModelFromHfConfig(const std::string& path, int seq) {
  const fs::path file = ConfigFile(path);
  std::ifstream in(file);
  if (!in) {
    throw std::invalid_argument(absl::StrCat("--model: got '", path,
                                             "', expected a preset name, a Hugging Face config.json or a directory "
                                             "holding one (cannot read '",
                                             file.string(), "')"));
  }
  std::stringstream text;
  text << in.rdbuf();
  json root;
  try {
    root = json::parse(text.str());
  } catch (const json::parse_error& e) {
    throw std::invalid_argument(absl::StrCat("--model ", file.string(), ": not JSON (at byte ", e.byte,
                                             "), expected a Hugging Face config.json"));
  }
  if (!root.is_object()) {
    throw std::invalid_argument(absl::StrCat("--model ", file.string(), ": got ", root.type_name(),
                                             ", expected a JSON object (a Hugging Face config.json)"));
  }
  const Config c(root, file.string());
  const std::string type = c.Text("model_type");
  ModelShape m;
  if (type == "llama" || type == "mistral" || type == "qwen2") {
    m = Llama(c, type);
    // Qwen2's sliding window applies only where use_sliding_window says so.
    const bool windowed = type != "qwen2" || c.Flag("use_sliding_window", false);
    m.seq = seq > 0 ? seq : c.Count("max_position_embeddings", -1, " (or give --seq)");
    if (windowed && c.Present("sliding_window") && c.Count("sliding_window") < m.seq) {
      c.Fail("sliding_window", std::to_string(c.Count("sliding_window")),
             absl::StrCat("null or at least the sequence, ", m.seq,
                          " (the planner prices full causal attention; give --seq ", c.Count("sliding_window"),
                          " or less)"));
    }
  } else if (type == "gpt2") {
    m = Gpt2(c);
    const int positions = c.Count("n_positions");
    if (seq > positions) {
      c.Fail("n_positions", std::to_string(positions),
             absl::StrCat("at least --seq ", seq, " (GPT-2's learned positions end there)"));
    }
    m.seq = seq > 0 ? seq : positions;
  } else {
    c.Fail("model_type", json(type).dump(), absl::StrCat(kTypes, " (the shapes the planner prices)"));
  }
  std::error_code ec;
  const fs::path dir = fs::weakly_canonical(fs::absolute(file), ec).parent_path();
  m.name = file.filename() == "config.json" && !dir.filename().empty() ? dir.filename().string() : file.stem().string();
  const std::string bad = m.Validate();
  if (!bad.empty()) throw std::invalid_argument(absl::StrCat("--model ", file.string(), ": ", bad));
  return m;
}

}  // namespace planner
}  // namespace zeropp
