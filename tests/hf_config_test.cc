// hf_config_test: `plan --model PATH` reads a Hugging Face config.json (scheduler/planner/hf_config.h).
// The configs below are those the model hubs publish (the fields the reader uses, as written
// there); the parameter counts are the ones their model cards and the transformers library report
// (GPT-2 124,439,808; Llama-2-7B 6,738,415,616; Meta-Llama-3-8B 8,030,261,248; Mistral-7B
// 7,241,732,096), and the Llama 3 presets' counts (70B 70,553,706,496; 405B 405,853,388,800) were
// computed by hand from their published shapes. Qwen2.5's counts (7B 7,615,616,512; 0.5B, tied,
// 494,032,768) were computed by hand from the configs below and agree with their model cards'
// 7.61B and 0.49B (6.53B and 0.36B without the embedding). Every bad field is refused in one line
// naming the file, the field, its value and what was expected.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "gtest/gtest.h"
#include "scheduler/planner/hf_config.h"
#include "scheduler/planner/model_shape.h"

namespace zeropp {
namespace planner {
namespace {

namespace fs = std::filesystem;

constexpr const char* kGpt2 = R"({"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"],
  "model_type": "gpt2", "n_ctx": 1024, "n_embd": 768, "n_head": 12, "n_inner": null, "n_layer": 12,
  "n_positions": 1024, "vocab_size": 50257})";
constexpr const char* kLlama2 = R"({"architectures": ["LlamaForCausalLM"], "hidden_act": "silu",
  "hidden_size": 4096, "intermediate_size": 11008, "max_position_embeddings": 4096, "model_type": "llama",
  "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 32, "rms_norm_eps": 1e-05,
  "rope_scaling": null, "tie_word_embeddings": false, "torch_dtype": "float16", "vocab_size": 32000})";
constexpr const char* kLlama3 = R"({"architectures": ["LlamaForCausalLM"], "hidden_act": "silu",
  "hidden_size": 4096, "intermediate_size": 14336, "max_position_embeddings": 8192, "model_type": "llama",
  "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "rope_theta": 500000.0,
  "tie_word_embeddings": false, "vocab_size": 128256})";
constexpr const char* kMistral = R"({"architectures": ["MistralForCausalLM"], "hidden_act": "silu",
  "hidden_size": 4096, "intermediate_size": 14336, "max_position_embeddings": 32768, "model_type": "mistral",
  "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "sliding_window": 4096,
  "tie_word_embeddings": false, "vocab_size": 32000})";
constexpr const char* kQwen25 = R"({"architectures": ["Qwen2ForCausalLM"], "hidden_act": "silu",
  "hidden_size": 3584, "intermediate_size": 18944, "max_position_embeddings": 131072, "max_window_layers": 28,
  "model_type": "qwen2", "num_attention_heads": 28, "num_hidden_layers": 28, "num_key_value_heads": 4,
  "rope_theta": 1000000.0, "sliding_window": 131072, "tie_word_embeddings": false, "use_sliding_window": false,
  "vocab_size": 152064})";
constexpr const char* kQwen25Small = R"({"architectures": ["Qwen2ForCausalLM"], "hidden_act": "silu",
  "hidden_size": 896, "intermediate_size": 4864, "max_position_embeddings": 32768, "max_window_layers": 24,
  "model_type": "qwen2", "num_attention_heads": 14, "num_hidden_layers": 24, "num_key_value_heads": 2,
  "sliding_window": 32768, "tie_word_embeddings": true, "use_sliding_window": false, "vocab_size": 151936})";

// Writes `text` as DIR/config.json under the test's temporary directory; returns DIR.
std::string Write(const std::string& dir, const std::string& text) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const fs::path d = fs::path(tmp ? tmp : "/tmp") / dir;
  fs::create_directories(d);
  std::ofstream(d / "config.json") << text;
  return d.string();
}

// `text` with the first occurrence of `from` replaced by `to`.
std::string Edit(std::string text, const std::string& from, const std::string& to) {
  return text.replace(text.find(from), from.size(), to);
}

std::string Refusal(const std::string& path, int seq = 0) {
  try {
    ModelFromHfConfig(path, seq);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "accepted";
}

TEST(HfConfig, Gpt2CountsAsPublished) {
  const ModelShape m = ModelFromHfConfig(Write("gpt2", kGpt2));
  EXPECT_EQ(m.name, "gpt2");
  EXPECT_EQ(m.hidden, 768);
  EXPECT_EQ(m.ffn, 4 * 768);  // n_inner null
  EXPECT_EQ(m.kv_heads, 12);
  EXPECT_EQ(m.seq, 1024);
  EXPECT_TRUE(m.tied_embedding);
  EXPECT_FALSE(m.swiglu);
  EXPECT_DOUBLE_EQ(m.Parameters(), 124439808);
  EXPECT_TRUE(m.dropout);  // resid_pdrop and attn_pdrop absent: GPT2Config's 0.1
  const std::string off = Edit(Edit(kGpt2, "\"n_ctx\"", "\"resid_pdrop\": 0.0, \"n_ctx\""), "\"n_ctx\"",
                               "\"attn_pdrop\": 0.0, \"n_ctx\"");
  EXPECT_FALSE(ModelFromHfConfig(Write("gpt2-nodropout", off)).dropout);
}

TEST(HfConfig, LlamaMatchesItsPresetAndPublishedCount) {
  const ModelShape m = ModelFromHfConfig(Write("Llama-2-7b-hf", kLlama2));
  const ModelShape p = ModelPreset("llama2-7b");
  EXPECT_EQ(m.name, "Llama-2-7b-hf");
  EXPECT_EQ(m.hidden, p.hidden);
  EXPECT_EQ(m.layers, p.layers);
  EXPECT_EQ(m.heads, p.heads);
  EXPECT_EQ(m.kv_heads, p.kv_heads);
  EXPECT_EQ(m.ffn, p.ffn);
  EXPECT_EQ(m.vocab, p.vocab);
  EXPECT_EQ(m.seq, p.seq);
  EXPECT_EQ(m.swiglu, p.swiglu);
  EXPECT_EQ(m.tied_embedding, p.tied_embedding);
  EXPECT_FALSE(m.dropout);
  EXPECT_FALSE(p.dropout);
  EXPECT_DOUBLE_EQ(m.Parameters(), 6738415616);
  EXPECT_DOUBLE_EQ(p.Parameters(), 6738415616);
  // The file itself, not only its directory; a sequence given overrides max_position_embeddings.
  EXPECT_EQ(ModelFromHfConfig(Write("Llama-2-7b-hf", kLlama2) + "/config.json", 2048).seq, 2048);
}

TEST(HfConfig, GroupedQueryAttentionAndLlama3Presets) {
  const ModelShape m = ModelFromHfConfig(Write("Meta-Llama-3-8B", kLlama3));
  EXPECT_EQ(m.kv_heads, 8);
  EXPECT_EQ(m.seq, 8192);
  EXPECT_DOUBLE_EQ(m.Parameters(), 8030261248);
  EXPECT_DOUBLE_EQ(ModelPreset("llama3-8b").Parameters(), 8030261248);
  EXPECT_DOUBLE_EQ(ModelPreset("llama3-70b").Parameters(), 70553706496);
  EXPECT_DOUBLE_EQ(ModelPreset("llama3-405b").Parameters(), 405853388800);
}

TEST(HfConfig, SlidingWindowShorterThanTheSequenceIsRefused) {
  const std::string dir = Write("Mistral-7B-v0.1", kMistral);
  EXPECT_EQ(Refusal(dir), "--model " + dir + "/config.json: field 'sliding_window': got 4096, expected null or at "
                          "least the sequence, 32768 (the planner prices full causal attention; give --seq "
                          "4096 or less)");
  const ModelShape m = ModelFromHfConfig(dir, 4096);
  EXPECT_DOUBLE_EQ(m.Parameters(), 7241732096);
  const std::string unwindowed = Edit(kMistral, "\"sliding_window\": 4096", "\"sliding_window\": null");
  EXPECT_EQ(ModelFromHfConfig(Write("mistral-nowindow", unwindowed)).seq, 32768);
}

TEST(HfConfig, Qwen2CountsItsQkvBiases) {
  const ModelShape m = ModelFromHfConfig(Write("Qwen2.5-7B", kQwen25), 4096);
  EXPECT_TRUE(m.qkv_bias);
  EXPECT_FALSE(m.out_bias);
  EXPECT_FALSE(m.mlp_bias);
  EXPECT_EQ(m.seq, 4096);
  // Per layer: q and o 3584^2 each, k and v 3584 x 512 each, biases 3584 + 2 x 512, the MLP 3 x 3584
  // x 18944, two norms; the untied table twice and the final norm.
  const double layer = 2.0 * 3584 * 3584 + 2.0 * 3584 * 512 + (3584 + 2 * 512) + 3.0 * 3584 * 18944 + 2 * 3584;
  EXPECT_DOUBLE_EQ(m.LayerParameters(), layer);
  EXPECT_DOUBLE_EQ(m.Parameters(), 28 * layer + 2.0 * 152064 * 3584 + 3584);
  EXPECT_DOUBLE_EQ(m.Parameters(), 7615616512);
  EXPECT_DOUBLE_EQ(ModelFromHfConfig(Write("Qwen2.5-0.5B", kQwen25Small)).Parameters(), 494032768);
  // The window is off unless use_sliding_window turns it on; then it refuses as Mistral's does.
  const std::string on = Write("qwen-window", Edit(Edit(kQwen25Small, "\"use_sliding_window\": false",
                                                        "\"use_sliding_window\": true"),
                                                   "\"sliding_window\": 32768", "\"sliding_window\": 4096"));
  EXPECT_EQ(Refusal(on), "--model " + on + "/config.json: field 'sliding_window': got 4096, expected null or at "
                         "least the sequence, 32768 (the planner prices full causal attention; give --seq 4096 "
                         "or less)");
}

TEST(HfConfig, LlamaBiasesAreCountedWhereSet) {
  const ModelShape plain = ModelFromHfConfig(Write("llama3-nobias", kLlama3));
  const ModelShape attn = ModelFromHfConfig(
      Write("llama3-attnbias", Edit(kLlama3, "\"hidden_act\"", "\"attention_bias\": true, \"hidden_act\"")));
  const ModelShape mlp = ModelFromHfConfig(
      Write("llama3-mlpbias", Edit(kLlama3, "\"hidden_act\"", "\"mlp_bias\": true, \"hidden_act\"")));
  // q 4096, k and v 1024 each, o 4096; gate and up 14336 each, down 4096; 32 layers.
  EXPECT_DOUBLE_EQ(attn.Parameters() - plain.Parameters(), 32.0 * (4096 + 1024 + 1024 + 4096));
  EXPECT_DOUBLE_EQ(mlp.Parameters() - plain.Parameters(), 32.0 * (14336 + 14336 + 4096));
  EXPECT_DOUBLE_EQ(attn.LayerMatmulWeights(), plain.LayerMatmulWeights());  // biases are no GEMM weights
  const std::string d =
      Write("llama3-badbias", Edit(kLlama3, "\"hidden_act\"", "\"mlp_bias\": \"no\", \"hidden_act\""));
  EXPECT_EQ(Refusal(d), "--model " + d + "/config.json: field 'mlp_bias': got \"no\", expected true or false");
}

TEST(HfConfig, RefusesWhatItCannotPriceInOneLine) {
  const std::string f = "/config.json: field '";
  std::string d = Write("gemma", Edit(kLlama3, "\"llama\"", "\"gemma\""));
  EXPECT_EQ(Refusal(d), "--model " + d + f +
                            "model_type': got \"gemma\", expected llama, mistral, qwen2 or gpt2 (the shapes the "
                            "planner prices)");
  d = Write("nohidden", Edit(kLlama3, "\"hidden_size\": 4096,", ""));
  EXPECT_EQ(Refusal(d), "--model " + d + f + "hidden_size': got nothing (missing), expected a whole number > 0");
  d = Write("texthidden", Edit(kLlama3, "\"hidden_size\": 4096", "\"hidden_size\": \"4096\""));
  EXPECT_EQ(Refusal(d), "--model " + d + f + "hidden_size': got \"4096\", expected a whole number > 0");
  d = Write("zerolayers", Edit(kLlama3, "\"num_hidden_layers\": 32", "\"num_hidden_layers\": 0"));
  EXPECT_EQ(Refusal(d), "--model " + d + f + "num_hidden_layers': got 0, expected a whole number > 0");
  d = Write("headdim", Edit(kLlama3, "\"hidden_act\"", "\"head_dim\": 256, \"hidden_act\""));
  EXPECT_EQ(Refusal(d), "--model " + d + f + "head_dim': got 256, expected hidden_size / num_attention_heads = 128 "
                                             "(the planner's attention projections are hidden x hidden)");
  d = Write("nopositions", Edit(kLlama3, "\"max_position_embeddings\": 8192,", ""));
  EXPECT_EQ(Refusal(d), "--model " + d + f +
                            "max_position_embeddings': got nothing (missing), expected a whole number > 0 (or "
                            "give --seq)");
  EXPECT_EQ(ModelFromHfConfig(d, 4096).seq, 4096);
  d = Write("dropout", Edit(kLlama3, "\"hidden_act\"", "\"attention_dropout\": 1.5, \"hidden_act\""));
  EXPECT_EQ(Refusal(d), "--model " + d + f + "attention_dropout': got 1.5, expected a number in [0, 1)");
  d = Write("tied", Edit(kLlama3, "\"tie_word_embeddings\": false", "\"tie_word_embeddings\": 1"));
  EXPECT_EQ(Refusal(d), "--model " + d + f + "tie_word_embeddings': got 1, expected true or false");
  d = Write("kv", Edit(kLlama3, "\"num_key_value_heads\": 8", "\"num_key_value_heads\": 5"));
  EXPECT_EQ(Refusal(d), "--model " + d + f + "num_key_value_heads': got 5, expected a whole number dividing "
                                             "num_attention_heads (32)");
  d = Write("gpt2long", kGpt2);
  EXPECT_EQ(Refusal(d, 2048), "--model " + d + f + "n_positions': got 1024, expected at least --seq 2048 (GPT-2's "
                                                   "learned positions end there)");
  d = Write("notjson", "{\"model_type\": \"llama\",");
  EXPECT_EQ(Refusal(d).rfind("--model " + d + "/config.json: not JSON (at byte ", 0), 0u) << Refusal(d);
  d = Write("array", "[1, 2]");
  EXPECT_EQ(Refusal(d),
            "--model " + d + "/config.json: got array, expected a JSON object (a Hugging Face config.json)");
  EXPECT_EQ(Refusal("/nonexistent/dir"),
            "--model: got '/nonexistent/dir', expected a preset name, a Hugging Face config.json or a directory "
            "holding one (cannot read '/nonexistent/dir')");
}

TEST(HfConfig, PresetNamesAreNotPaths) {
  EXPECT_FALSE(IsHfConfigPath("llama2-7b"));
  EXPECT_FALSE(IsHfConfigPath("llama3-405b"));
  EXPECT_FALSE(IsHfConfigPath("no-such-preset"));  // neither a preset nor a file: ModelPreset lists the presets
  EXPECT_TRUE(IsHfConfigPath("checkpoints/Llama-2-7b-hf"));
  EXPECT_TRUE(IsHfConfigPath(Write("here", kGpt2)));
}

}  // namespace
}  // namespace planner
}  // namespace zeropp
