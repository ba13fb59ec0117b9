#include "scheduler/planner/model_shape.h"

#include <map>
#include <stdexcept>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace zeropp {
namespace planner {
namespace {

ModelShape Decoder(const std::string& name, int h, int l, int a, int kv, int ffn, int vocab, int seq) {
  ModelShape m;
  m.name = name;
  m.hidden = h;
  m.layers = l;
  m.heads = a;
  m.kv_heads = kv;
  m.ffn = ffn;
  m.vocab = vocab;
  m.seq = seq;
  return m;
}

ModelShape Gpt(const std::string& name, int h, int l, int a, int vocab, int seq) {
  ModelShape m = Decoder(name, h, l, a, a, 4 * h, vocab, seq);
  m.tied_embedding = true;
  m.dropout = true;  // Megatron-LM's GPT defaults: hidden and attention dropout 0.1
  return m;
}

// Llama 2 (vocabulary 32000, sequence 4096) unless told otherwise; Llama 3: 128256 and 8192.
ModelShape Llama(const std::string& name, int h, int l, int a, int kv, int ffn, int vocab = 32000, int seq = 4096) {
  ModelShape m = Decoder(name, h, l, a, kv, ffn, vocab, seq);
  m.swiglu = true;
  return m;
}

const std::map<std::string, ModelShape>& Presets() {
  static const auto* presets = new std::map<std::string, ModelShape>{
      {"llama2-7b", Llama("llama2-7b", 4096, 32, 32, 32, 11008)},
      {"llama2-13b", Llama("llama2-13b", 5120, 40, 40, 40, 13824)},
      {"llama2-34b", Llama("llama2-34b", 8192, 48, 64, 8, 22016)},
      {"llama2-70b", Llama("llama2-70b", 8192, 80, 64, 8, 28672)},
      {"llama3-8b", Llama("llama3-8b", 4096, 32, 32, 8, 14336, 128256, 8192)},
      {"llama3-70b", Llama("llama3-70b", 8192, 80, 64, 8, 28672, 128256, 8192)},
      {"llama3-405b", Llama("llama3-405b", 16384, 126, 128, 8, 53248, 128256, 8192)},
      {"gpt3-175b", Gpt("gpt3-175b", 12288, 96, 96, 51200, 2048)},
      {"gpt3-13b", Gpt("gpt3-13b", 5120, 40, 40, 51200, 2048)},
      {"gpt3-6.7b", Gpt("gpt3-6.7b", 4096, 32, 32, 51200, 2048)},
  };
  return *presets;
}

}  // namespace

double ModelShape::LayerParameters() const {
  const double h = hidden, kv = static_cast<double>(kv_heads) * head_dim();
  const double biases = swiglu ? (qkv_bias ? h + 2 * kv : 0.0) + (out_bias ? h : 0.0) + (mlp_bias ? 2.0 * ffn + h : 0.0)
                               : (h + 2 * kv) + h + ffn + h;  // GPT: qkv, proj, fc1, fc2 biases
  const double norms = (swiglu ? 1.0 : 2.0) * 2 * h;               // RMSNorm weight / LayerNorm weight+bias
  return LayerMatmulWeights() + biases + norms;
}

double ModelShape::EmbeddingParameters() const {
  const double h = hidden;
  double e = static_cast<double>(vocab) * h;
  if (!tied_embedding) e += static_cast<double>(vocab) * h;
  if (!swiglu) e += static_cast<double>(seq) * h;  // learned positions (GPT)
  e += (swiglu ? 1.0 : 2.0) * h;                   // final norm
  return e;
}

double ModelShape::Parameters() const { return layers * LayerParameters() + EmbeddingParameters(); }

double ModelShape::LayerMatmulWeights() const {
  const double h = hidden, kv = static_cast<double>(kv_heads) * head_dim();
  return h * (h + 2 * kv) + h * h + (swiglu ? 3.0 : 2.0) * h * ffn;
}

double ModelShape::LayerMatmulFlopsPerToken() const { return 2 * LayerMatmulWeights(); }

double ModelShape::AttentionFlopsPerToken() const { return 4.0 * seq * hidden; }

double ModelShape::TrainFlopsPerToken() const {
  return 3 * (layers * (LayerMatmulFlopsPerToken() + AttentionFlopsPerToken()) + 2.0 * vocab * hidden);
}

std::string ModelShape::Validate() const {
  auto bad = [](const char* f, double v, const char* want) {
    return absl::StrCat("model field '", f, "': got ", v, ", expected ", want);
  };
  if (hidden <= 0) return bad("hidden", hidden, "> 0");
  if (layers <= 0) return bad("layers", layers, "> 0");
  if (heads <= 0 || hidden % heads != 0) return bad("heads", heads, "> 0 and dividing hidden");
  if (kv_heads <= 0 || heads % kv_heads != 0) return bad("kv_heads", kv_heads, "> 0 and dividing heads");
  if (ffn <= 0) return bad("ffn", ffn, "> 0");
  if (vocab <= 0) return bad("vocab", vocab, "> 0");
  if (seq <= 0) return bad("seq", seq, "> 0");
  if (flash_v1 && !flash_attention) {
    return "model field 'flash_v1': set, expected only with flash_attention (FlashAttention 1 is a flash kernel)";
  }
  return "";
}

ModelShape ModelPreset(const std::string& name) {
  auto it = Presets().find(name);
  if (it == Presets().end()) {
    throw std::invalid_argument(absl::StrCat("--model: got '", name, "', expected one of: ",
                                             absl::StrJoin(ModelPresetNames(), ", "),
                                             " (or --hidden/--layers/--heads/--vocab/--seq, or a Hugging Face ",
                                             "config.json)"));
  }
  return it->second;
}

std::vector<std::string> ModelPresetNames() {
  std::vector<std::string> names;
  for (const auto& kv : Presets()) names.push_back(kv.first);
  return names;
}

}  // namespace planner
}  // namespace zeropp
