#include "tools/hf_safetensors.h"

#include <cstdio>
#include <filesystem>
#include <map>
#include <regex>
#include <stdexcept>

#include <ATen/ops/empty.h>
#include <torch/nn/module.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "zeropp/checkpoint/checkpoint.h"
#include "zeropp/checkpoint/safetensors.h"

namespace zeropp {
namespace tools {

namespace {

HfName Gpt2Name(const std::string& n) {
  static const std::map<std::string, std::pair<std::string, bool>> kBlock = {
      {"ln1.weight", {"ln_1.weight", false}},          {"ln1.bias", {"ln_1.bias", false}},
      {"ln2.weight", {"ln_2.weight", false}},          {"ln2.bias", {"ln_2.bias", false}},
      {"attn.qkv.weight", {"attn.c_attn.weight", true}}, {"attn.qkv.bias", {"attn.c_attn.bias", false}},
      {"attn.proj.weight", {"attn.c_proj.weight", true}}, {"attn.proj.bias", {"attn.c_proj.bias", false}},
      {"fc.weight", {"mlp.c_fc.weight", true}},         {"fc.bias", {"mlp.c_fc.bias", false}},
      {"fc_out.weight", {"mlp.c_proj.weight", true}},   {"fc_out.bias", {"mlp.c_proj.bias", false}}};
  if (n == "embed.wte.weight") return {"wte.weight", false};
  if (n == "embed.wpe.weight") return {"wpe.weight", false};
  if (n == "ln_f.weight" || n == "ln_f.bias") return {n, false};
  if (n == "head.weight") return {"", false};
  static const std::regex kBlockName(R"(block(\d+)\.(.+))");
  std::smatch m;
  if (std::regex_match(n, m, kBlockName)) {
    auto it = kBlock.find(m[2].str());
    if (it != kBlock.end()) return {absl::StrCat("h.", m[1].str(), ".", it->second.first), it->second.second};
  }
  throw std::invalid_argument("gpt2 names: '" + n + "' is not a parameter of the bundled GPT");
}

HfName LlamaName(const std::string& n) {
  static const std::map<std::string, std::string> kLayer = {
      {"attn_norm.weight", "input_layernorm.weight"},  {"mlp_norm.weight", "post_attention_layernorm.weight"},
      {"attn.q.weight", "self_attn.q_proj.weight"},    {"attn.k.weight", "self_attn.k_proj.weight"},
      {"attn.v.weight", "self_attn.v_proj.weight"},    {"attn.o.weight", "self_attn.o_proj.weight"},
      {"mlp.gate.weight", "mlp.gate_proj.weight"},     {"mlp.up.weight", "mlp.up_proj.weight"},
      {"mlp.down.weight", "mlp.down_proj.weight"}};
  if (n == "embed.weight") return {"model.embed_tokens.weight", false};
  if (n == "head.norm.weight") return {"model.norm.weight", false};
  if (n == "head.proj.weight") return {"lm_head.weight", false};
  static const std::regex kLayerName(R"(layer(\d+)\.(.+))");
  std::smatch m;
  if (std::regex_match(n, m, kLayerName)) {
    auto it = kLayer.find(m[2].str());
    if (it != kLayer.end()) return {absl::StrCat("model.layers.", m[1].str(), ".", it->second), false};
  }
  throw std::invalid_argument("llama names: '" + n + "' is not a parameter of the bundled Llama");
}

}  // namespace

const char* HfFamilyName(HfFamily f) { return f == HfFamily::kGpt2 ? "gpt2" : "llama"; }

HfFamily HfFamilyOf(const std::vector<std::string>& names) {
  for (const std::string& n : names) {
    if (n == "embed.wte.weight") return HfFamily::kGpt2;
    if (n == "embed.weight") return HfFamily::kLlama;
  }
  throw std::invalid_argument("hf names: the model has neither embed.wte.weight (GPT) nor embed.weight (Llama)");
}

HfName ToHfName(HfFamily family, const std::string& n) {
  return family == HfFamily::kGpt2 ? Gpt2Name(n) : LlamaName(n);
}

ExportResult ExportHf(const std::string& ckpt, const std::string& out) {
  const checkpoint::Reader reader(ckpt);
  std::vector<std::string> names;
  for (const auto& kv : reader.model_shapes()) names.push_back(kv.first);
  ExportResult r{HfFamilyOf(names)};
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  for (const auto& [name, shape] : reader.model_shapes()) {
    if (!reader.Has(name)) continue;  // a tied registration, saved under its first name
    const HfName g = ToHfName(r.family, name);
    if (g.name.empty()) continue;
    at::Tensor t = at::empty(shape, at::TensorOptions().dtype(at::kFloat));
    reader.Read(name, shape, 0, t.numel(), t.data_ptr<float>());
    tensors.emplace_back(g.name, g.transpose ? t.t().contiguous() : t);
  }
  std::sort(tensors.begin(), tensors.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  const std::string tmp = out + ".tmp";
  checkpoint::WriteSafetensors(tmp, tensors, {{"format", "pt"}});
  if (std::rename(tmp.c_str(), out.c_str()) != 0) throw std::runtime_error(out + ": rename failed");
  r.tensors = static_cast<int>(tensors.size());
  return r;
}

int ImportHf(const std::string& path, torch::nn::Sequential& model) {
  checkpoint::SafetensorsFile f;
  try {
    f = checkpoint::ReadSafetensorsHeader(path);
  } catch (const std::exception& e) {
    throw std::invalid_argument(absl::StrCat("init-from: ", e.what()));
  }
  int read = 0;
  std::vector<std::string> names;
  for (const auto& kv : model->named_parameters(/*recurse=*/true)) names.push_back(kv.key());
  const HfFamily family = HfFamilyOf(names);
  std::vector<const void*> seen;
  c10::NoGradGuard no_grad;
  for (auto& kv : model->named_parameters(/*recurse=*/true)) {
    at::Tensor p = kv.value();
    if (std::find(seen.begin(), seen.end(), p.unsafeGetTensorImpl()) != seen.end()) continue;  // tied
    seen.push_back(p.unsafeGetTensorImpl());
    const HfName g = ToHfName(family, kv.key());
    if (g.name.empty()) continue;
    int i = f.Find(g.name);
    if (i < 0) i = f.Find("transformer." + g.name);  // transformers' GPT2LMHeadModel prefix
    if (i < 0) throw std::invalid_argument(absl::StrCat("init-from ", path, ": tensor ", g.name, " is missing"));
    const checkpoint::SafetensorsEntry& e = f.tensors[i];
    std::vector<int64_t> want = p.sizes().vec();
    if (g.transpose) std::reverse(want.begin(), want.end());
    if (e.shape != want) {
      throw std::invalid_argument(absl::StrCat("init-from ", path, ": tensor ", e.name, " has shape [",
                                               absl::StrJoin(e.shape, ","), "], expected [", absl::StrJoin(want, ","),
                                               "] for this model"));
    }
    at::ScalarType dt;
    if (e.dtype == "F32") {
      dt = at::kFloat;
    } else if (e.dtype == "BF16") {
      dt = at::kBFloat16;
    } else if (e.dtype == "F16") {
      dt = at::kHalf;
    } else {
      throw std::invalid_argument(absl::StrCat("init-from ", path, ": tensor ", e.name, " is ", e.dtype,
                                               ", expected F32, BF16 or F16"));
    }
    at::Tensor t = at::empty(e.shape, at::TensorOptions().dtype(dt));
    f.ReadElements(i, 0, t.numel(), t.data_ptr());
    p.copy_(g.transpose ? t.t() : t);
    ++read;
  }
  return read;
}

}  // namespace tools
}  // namespace zeropp
