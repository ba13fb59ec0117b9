// Checkpoints: saved under ZeroPP pp2 x zero2 at step 5, loaded on the same layout (the next
// steps equal the uninterrupted run bit for bit) and on other layouts (ZeRO-3 on 2 ranks, 1 rank,
// pp4 1F1B, NVMe-offloaded optimizer state: within 1e-5 relative), and every kind of damaged or
// foreign checkpoint refused with one line naming the file and the problem.
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tests/engine_harness.h"
#include "xxhash.h"
#include "models/llama.h"
#include "tools/hf_safetensors.h"
#include "zeropp/checkpoint/safetensors.h"

namespace zeropp {
namespace {

namespace fs = std::filesystem;

std::string TestDir(const std::string& name) {
  const char* t = std::getenv("TEST_TMPDIR");
  const std::string d = std::string(t ? t : "/tmp") + "/ckpt_" + name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

struct Layout {
  std::string name;
  ParallelConfig cfg;
  PipelineSchedule schedule = PipelineSchedule::kAuto;
  int chunks = 1, unit_size = 0;
  bool nvme = false;
  bool bf16 = false;  // bf16 parameters beside fp32 masters
  std::string device = "cpu";
};

// The same global batch for every layout: 4 sequences per micro-batch, split across dp ranks.
void Batch(int64_t step, int mb, int dp_rank, int dp_size, at::Tensor* x, at::Tensor* y) {
  at::Tensor gx, gy;
  testing::MakeBatch(testing::ModelKind::kGpt, step, mb, 0, &gx, &gy);  // [3, 6]
  gx = at::cat({gx, gx.flip(0).narrow(0, 0, 1)}).contiguous();          // [4, 6]
  gy = at::cat({gy, gy.flip(0).narrow(0, 0, 1)}).contiguous();
  const int64_t per = 4 / dp_size;
  *x = gx.narrow(0, dp_rank * per, per);
  *y = gy.narrow(0, dp_rank * per, per);
}

// Trains steps [from, to) on `layout`, loading `load` first (if any) and saving to `save` after
// step `save_at` (if any). Returns rank 0's losses.
std::vector<double> Train(const Layout& l, int from, int to, const std::string& load, const std::string& save,
                          int save_at, bool async = false) {
  const int n = l.cfg.WorldSize();
  std::vector<torch::nn::Sequential> models;
  for (int r = 0; r < n; ++r) models.push_back(testing::MakeModel(testing::ModelKind::kGpt));
  std::vector<double> losses;
  testing::RunRanks(n, [&](int rank, const auto& store) {
    TrainerOptions o;
    o.layout = l.cfg;
    o.engine = testing::BaseOptions();
    o.engine.max_grad_norm = 0.5;
    o.pipeline.schedule = l.schedule;
    o.pipeline.chunks = l.chunks;
    o.pipeline.unit_size = l.unit_size;
    o.microbatches = 4;
    o.lr.warmup_steps = 3;
    if (l.bf16) o.engine.param_dtype = at::kBFloat16;
    if (l.nvme) {
      o.engine.offload.optimizer = OffloadTarget::kNvme;
      o.engine.offload.dir = TestDir(l.name + "_nvme" + std::to_string(rank));
    }
    ProcessGroupsOptions po;
    testing::PlaceOn(l.device, n, &po, &o);
    Trainer t(models[rank].ptr(), ProcessGroups::CreateWithStore(store, rank, n, l.cfg, po), o);
    if (!load.empty()) {
      EXPECT_EQ(t.Load(load), from);
    }
    for (int s = from; s < to; ++s) {
      std::vector<at::Tensor> xs(4), ys(4);
      for (int mb = 0; mb < 4; ++mb) Batch(s, mb, t.dp_rank(), t.dp_size(), &xs[mb], &ys[mb]);
      const double loss =
          t.Step(xs, ys, [](const at::Tensor& o, const at::Tensor& y) { return testing::Loss(testing::ModelKind::kGpt, o, y); })
              .loss;
      if (rank == 0) losses.push_back(loss);
      if (s + 1 == save_at) {
        if (async) {
          t.SaveAsync(save, /*keep=*/2);  // the next steps change the state while the files are written
        } else {
          t.Save(save, /*keep=*/2);
        }
      }
    }
    t.WaitForSave();
    t.groups().world().Barrier()->Wait();
  });
  return losses;
}

TEST(CheckpointTest, SavedUnderZeroPPLoadsIntoEveryLayout) {
  const std::string dir = TestDir("roundtrip");
  const Layout zeropp{"zeropp", {2, 2, 1, DpMode::kDp}, PipelineSchedule::kZeroPP, 2, 2};
  const std::vector<double> full = Train(zeropp, 0, 8, "", dir, 5);
  ASSERT_EQ(full.size(), 8u);
  ASSERT_TRUE(fs::exists(dir + "/step-000005/manifest.json"));
  // The same layout continues bit for bit.
  const std::vector<double> same = Train(zeropp, 5, 8, dir, "", 0);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(same[i], full[5 + i]) << "step " << 5 + i;
  const std::vector<Layout> others = {{"zero3_2", {1, 2, 1, DpMode::kDp}},
                                      {"one_rank", {1, 1, 1, DpMode::kDp}},
                                      {"pp4_1f1b", {4, 1, 1, DpMode::kDp}, PipelineSchedule::kOneFOneB},
                                      {"zero1_hybrid", {1, 2, 2, DpMode::kZero1}},
                                      {"zero3_nvme", {1, 2, 1, DpMode::kDp}, PipelineSchedule::kAuto, 1, 0, true}};
  for (const Layout& l : others) {
    const std::vector<double> got = Train(l, 5, 8, dir + "/step-000005", "", 0);
    ASSERT_EQ(got.size(), 3u) << l.name;
    for (int i = 0; i < 3; ++i) {
      EXPECT_NEAR(got[i], full[5 + i], 1e-5 * std::abs(full[5 + i])) << l.name << " step " << 5 + i;
    }
    std::printf("%s: steps 5..7 losses %.6f %.6f %.6f (uninterrupted %.6f %.6f %.6f)\n", l.name.c_str(), got[0], got[1],
                got[2], full[5], full[6], full[7]);
  }
}

// bf16 parameters under ZeRO-1: each replica saves and loads the part of the fp32 master it holds,
// and the compute shards are rebuilt from all replicas' parts. On the host the same layout
// continues bit for bit, plain data parallelism (every replica reading the whole master) and ZeRO-1
// over 4 replicas (other parts of the master) within 1e-5. On a GPU (4 ranks on one device, Gloo
// staging) within 1e-3: its embedding backward adds in no fixed order, so no two runs agree to the
// bit; a compute shard not rebuilt from the other replicas' parts is off by far more.
class CheckpointZero1Bf16Test : public ::testing::TestWithParam<std::string> {};

TEST_P(CheckpointZero1Bf16Test, ResumesFromEachReplicasMaster) {
  const std::string skip = testing::SkipReason(GetParam());
  if (!skip.empty()) GTEST_SKIP() << "needs a GPU: " << skip;
  const bool host = GetParam() == "cpu";
  const double tol = host ? 1e-5 : 1e-3;
  const std::string dir = TestDir("zero1_bf16_" + GetParam());
  Layout zero1{"zero1_bf16", {1, 2, 2, DpMode::kZero1}};
  zero1.bf16 = true;
  zero1.device = GetParam();
  const std::vector<double> full = Train(zero1, 0, 8, "", dir, 5);
  ASSERT_EQ(full.size(), 8u);
  const std::vector<double> same = Train(zero1, 5, 8, dir, "", 0);
  ASSERT_EQ(same.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    if (host) {
      EXPECT_EQ(same[i], full[5 + i]) << "step " << 5 + i;
    } else {
      EXPECT_NEAR(same[i], full[5 + i], tol * std::abs(full[5 + i])) << "step " << 5 + i;
    }
  }
  Layout dp = zero1;
  dp.cfg.dp_mode = DpMode::kDp;
  const std::vector<double> other = Train(dp, 5, 8, dir, "", 0);
  ASSERT_EQ(other.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(other[i], full[5 + i], tol * std::abs(full[5 + i])) << "dp step " << 5 + i;
  Layout four = zero1;
  four.cfg = {1, 1, 4, DpMode::kZero1};
  const std::vector<double> quarters = Train(four, 5, 8, dir, "", 0);
  ASSERT_EQ(quarters.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_NEAR(quarters[i], full[5 + i], tol * std::abs(full[5 + i])) << "zero1 x 4 step " << 5 + i;
  }
  std::printf("zero1 bf16 on %s: steps 5..7 uninterrupted %.7f %.7f %.7f; resumed %.7f %.7f %.7f; dp %.7f %.7f %.7f; "
              "zero1 x 4 %.7f %.7f %.7f\n",
              GetParam().c_str(), full[5], full[6], full[7], same[0], same[1], same[2], other[0], other[1], other[2],
              quarters[0], quarters[1], quarters[2]);
}

INSTANTIATE_TEST_SUITE_P(Devices, CheckpointZero1Bf16Test, ::testing::ValuesIn(testing::Devices()),
                         [](const auto& info) { return info.param; });

// An asynchronous save holds the state of its step although training went on while it was
// written: loading it continues exactly like the uninterrupted run.
TEST(CheckpointTest, AsynchronousSaveHoldsTheStateOfItsStep) {
  const std::string dir = TestDir("async");
  const Layout zero3{"zero3_2", {1, 2, 1, DpMode::kDp}};
  const std::vector<double> full = Train(zero3, 0, 8, "", dir, 5, /*async=*/true);
  ASSERT_TRUE(fs::exists(dir + "/step-000005/manifest.json"));
  const std::vector<double> resumed = Train(zero3, 5, 8, dir, "", 0);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(resumed[i], full[5 + i]) << "step " << 5 + i;
}

// The default CPU generator (dropout, at::rand) continues after a load on the same layout exactly
// as it did after the save, whatever it drew in between.
TEST(CheckpointTest, RandomStateResumesOnTheSameLayout) {
  const std::string dir = TestDir("rng");
  at::Tensor after_save, after_load;
  testing::RunRanks(1, [&](int rank, const auto& store) {
    Trainer t(testing::MakeModel(testing::ModelKind::kGpt).ptr(),
              ProcessGroups::CreateWithStore(store, rank, 1, {1, 1, 1, DpMode::kDp}, {}), TrainerOptions{});
    torch::manual_seed(42);
    at::rand({16});  // the stream has moved on before the save
    t.Save(dir);
    after_save = at::rand({16});
    torch::manual_seed(7);
    const at::Tensor unrelated = at::rand({16});
    t.Load(dir);
    after_load = at::rand({16});
    EXPECT_FALSE(at::equal(unrelated, after_save));
  });
  EXPECT_TRUE(at::equal(after_save, after_load));
  nlohmann::json m = nlohmann::json::parse(std::ifstream(dir + "/step-000000/manifest.json"));
  EXPECT_EQ(m["rng"]["world"], 1);
  EXPECT_EQ(m["rng"]["cpu"].size(), 1u);
}

// Loads `dir` on one rank into the GPT (or the MLP) and returns the error ("" = loaded).
std::string LoadError(const std::string& dir, bool mlp = false) {
  std::string err;
  testing::RunRanks(1, [&](int rank, const auto& store) {
    TrainerOptions o;
    Trainer t(testing::MakeModel(mlp ? testing::ModelKind::kMlp : testing::ModelKind::kGpt).ptr(),
              ProcessGroups::CreateWithStore(store, rank, 1, {1, 1, 1, DpMode::kDp}, {}), o);
    try {
      t.Load(dir);
    } catch (const std::exception& e) {
      err = e.what();
    }
  });
  return err;
}

void Rewrite(const std::string& path, const std::function<void(std::string&)>& edit) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  edit(bytes);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// Rewrites a shard and makes the manifest agree with it, so that only the header check can catch it.
void RewriteShardKeepingManifest(const std::string& step_dir, const std::string& shard,
                                 const std::function<void(std::string&)>& edit) {
  Rewrite(step_dir + "/" + shard, edit);
  nlohmann::json m = nlohmann::json::parse(std::ifstream(step_dir + "/manifest.json"));
  for (auto& f : m["files"]) {
    if (f["path"] != shard) continue;
    f["bytes"] = fs::file_size(step_dir + "/" + shard);
    std::ifstream in(step_dir + "/" + shard, std::ios::binary);
    std::string b((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(XXH64(b.data(), b.size(), 0)));
    f["xxh64"] = hex;
  }
  std::ofstream(step_dir + "/manifest.json", std::ios::trunc) << m.dump();
}

TEST(CheckpointTest, DamagedOrForeignCheckpointsAreRefused) {
  const std::string base = TestDir("good");
  Train({"one", {1, 1, 1, DpMode::kDp}}, 0, 1, "", base, 1);
  const std::string good = base + "/step-000001";
  ASSERT_EQ(LoadError(base), "");
  const std::string shard = "shard-00000-0.safetensors";
  int variant = 0;
  auto copy = [&] {
    const std::string d = TestDir("bad" + std::to_string(variant++));
    fs::copy(good, d, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
    return d;
  };
  auto expect = [&](const std::string& d, const std::string& want, bool mlp = false) {
    const std::string e = LoadError(d, mlp);
    EXPECT_NE(e.find(want), std::string::npos) << "got: '" << e << "'";
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  };
  std::string d = copy();
  Rewrite(d + "/" + shard, [](std::string& b) { b[b.size() - 7] ^= 0x10; });
  expect(d, shard + ": xxh64 ");
  expect(d, "(corrupted)");
  d = copy();
  Rewrite(d + "/" + shard, [](std::string& b) { b.resize(b.size() - 100); });
  expect(d, shard + ": " );
  expect(d, "(truncated or replaced)");
  d = copy();
  fs::remove(d + "/" + shard);
  expect(d, shard + ": missing");
  d = copy();
  fs::remove(d + "/manifest.json");
  expect(d, "manifest.json: missing (an unfinished save?)");
  d = copy();
  RewriteShardKeepingManifest(d, shard, [](std::string& b) {
    const uint64_t n = b.size();  // the header now claims more bytes than the file holds
    for (int i = 0; i < 8; ++i) b[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  });
  expect(d, shard + ": header claims ");
  d = copy();
  RewriteShardKeepingManifest(d, shard, [](std::string& b) {
    const uint64_t n = 200000000;  // over the 100 MB limit
    for (int i = 0; i < 8; ++i) b[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  });
  expect(d, shard + ": header of 200000000 bytes exceeds the 100000000-byte limit");
  d = copy();
  RewriteShardKeepingManifest(d, shard, [](std::string& b) {
    // Make the second tensor start where the first does: overlapping offsets.
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(b[i]);
    auto h = nlohmann::ordered_json::parse(b.substr(8, n));
    int seen = 0;
    for (auto it = h.begin(); it != h.end(); ++it) {
      if (it.key() == "__metadata__") continue;
      if (++seen == 2) {
        const int64_t len = it.value()["data_offsets"][1].get<int64_t>() - it.value()["data_offsets"][0].get<int64_t>();
        it.value()["data_offsets"] = {0, len};
      }
    }
    std::string text = h.dump();
    text.resize(n, ' ');
    b.replace(8, n, text);
  });
  expect(d, "offsets must be contiguous, increasing and not overlap");
  d = copy();
  RewriteShardKeepingManifest(d, shard, [](std::string& b) {
    // A chunk whose global saved_offsets put it past its tensor's end (0 -> 9 keeps the length).
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(b[i]);
    auto h = nlohmann::ordered_json::parse(b.substr(8, n));
    auto info = nlohmann::ordered_json::parse(h["__metadata__"]["DCP_SHARDING_INFO"].get<std::string>());
    info.begin().value()["saved_offsets"][0] = 9;
    h["__metadata__"]["DCP_SHARDING_INFO"] = info.dump();
    std::string text = h.dump();
    text.resize(n, ' ');
    b.replace(8, n, text);
  });
  expect(d, "lies outside the tensor's shape (offsets out of range)");
  d = copy();
  Rewrite(d + "/manifest.json", [](std::string& b) {
    auto m = nlohmann::json::parse(b);
    m["files"][0]["path"] = "../../etc/passwd";
    b = m.dump();
  });
  expect(d, "manifest.json: names '../../etc/passwd' outside the checkpoint directory");
  expect(good, "saved from a different model (fingerprint ", /*mlp=*/true);
  // The save directory's `latest` points at the newest complete checkpoint.
  std::ifstream latest(base + "/latest");
  std::string name;
  latest >> name;
  EXPECT_EQ(name, "step-000001");
}

// The safetensors files are the format's bytes: header length, JSON with DCP's sharding
// metadata, and chunks that are n-d boxes (a flat shard of a 2-D weight becomes row boxes).
TEST(CheckpointTest, ShardsAreSafetensorsWithDcpShardingInfo) {
  const std::string base = TestDir("format");
  Train({"zero3_2", {1, 2, 1, DpMode::kDp}}, 0, 1, "", base, 1);
  int files = 0, chunks = 0;
  for (const auto& e : fs::directory_iterator(base + "/step-000001")) {
    if (e.path().extension() != ".safetensors") continue;
    ++files;
    const checkpoint::SafetensorsFile f = checkpoint::ReadSafetensorsHeader(e.path().string());
    ASSERT_TRUE(f.metadata.count("DCP_SHARDING_INFO")) << e.path();
    const auto info = nlohmann::json::parse(f.metadata.at("DCP_SHARDING_INFO"));
    for (const auto& t : f.tensors) {
      ASSERT_TRUE(info.contains(t.name)) << t.name;
      EXPECT_EQ(info[t.name]["saved_offsets"].size(), t.shape.size()) << t.name;
      ++chunks;
    }
    EXPECT_EQ(f.data_start % 8, 0) << "header padded to 8 bytes";
  }
  EXPECT_GE(files, 2);  // both ranks wrote
  EXPECT_GT(chunks, 0);
}

// Export: one consolidated file with GPT-2's names (Conv1D weights transposed) holding exactly the
// trained values; import: that file (as transformers or Python safetensors would write it) loads
// into a freshly built model, value for value.
// Trains `make()` one step on 2 ranks (ZeRO-3), saves to `dir` and returns the trained parameters.
std::vector<std::pair<std::string, at::Tensor>> TrainOneStepAndSave(const std::function<torch::nn::Sequential()>& make,
                                                                    const std::string& dir) {
  std::vector<std::pair<std::string, at::Tensor>> trained;
  const int n = 2;
  const ParallelConfig cfg{1, 2, 1, DpMode::kDp};
  std::vector<torch::nn::Sequential> models;
  for (int r = 0; r < n; ++r) models.push_back(make());
  testing::RunRanks(n, [&](int rank, const auto& store) {
    TrainerOptions o;
    o.engine = testing::BaseOptions();
    Trainer t(models[rank].ptr(), ProcessGroups::CreateWithStore(store, rank, n, cfg, {}), o);
    std::vector<at::Tensor> xs(1), ys(1);
    Batch(0, 0, t.dp_rank(), t.dp_size(), &xs[0], &ys[0]);
    t.Step(xs, ys, [](const at::Tensor& out, const at::Tensor& y) { return testing::Loss(testing::ModelKind::kGpt, out, y); });
    t.Save(dir);
    auto p = t.FullParameters();
    if (rank == 0) trained = p;
  });
  return trained;
}

// Every trained tensor is in the export under its Hugging Face name (transposed where GPT-2 is).
void ExpectExported(const std::string& out, tools::HfFamily family,
                    const std::vector<std::pair<std::string, at::Tensor>>& trained) {
  const checkpoint::SafetensorsFile f = checkpoint::ReadSafetensorsHeader(out);
  for (const auto& [name, value] : trained) {
    const tools::HfName g = tools::ToHfName(family, name);
    const int i = f.Find(g.name);
    ASSERT_GE(i, 0) << g.name;
    at::Tensor t = at::empty(f.tensors[i].shape, at::TensorOptions().dtype(at::kFloat));
    f.ReadElements(i, 0, t.numel(), t.data_ptr());
    EXPECT_TRUE(at::equal(g.transpose ? t.t() : t, value)) << name << " -> " << g.name;
  }
}

void ExpectImported(const std::string& out, torch::nn::Sequential fresh, int n,
                    const std::vector<std::pair<std::string, at::Tensor>>& trained) {
  EXPECT_EQ(tools::ImportHf(out, fresh), n);
  std::map<std::string, at::Tensor> now;
  for (auto& kv : fresh->named_parameters()) now[kv.key()] = kv.value();
  for (const auto& [name, value] : trained) EXPECT_TRUE(at::equal(now[name], value)) << name;
}

TEST(CheckpointTest, ExportToGpt2NamesAndImportBack) {
  const std::string base = TestDir("export");
  const auto trained = TrainOneStepAndSave([] { return testing::MakeModel(testing::ModelKind::kGpt); }, base);
  const std::string out = base + "/gpt2.safetensors";
  const tools::ExportResult r = tools::ExportHf(base, out);
  EXPECT_EQ(r.family, tools::HfFamily::kGpt2);
  EXPECT_EQ(r.tensors, static_cast<int>(trained.size()));  // every unique parameter; the tied head is wte
  ExpectExported(out, r.family, trained);
  const checkpoint::SafetensorsFile f = checkpoint::ReadSafetensorsHeader(out);
  EXPECT_GE(f.Find("h.1.attn.c_attn.weight"), 0);
  EXPECT_EQ(f.Find("head.weight"), -1);
  // Import into a fresh model (different values before: the seed differs).
  torch::manual_seed(7);
  models::GptConfig c = testing::TinyGpt();
  torch::nn::Sequential fresh = models::MakeGpt(c);
  ExpectImported(out, fresh, r.tensors, trained);
  EXPECT_TRUE(at::equal(fresh->named_parameters()["head.weight"], fresh->named_parameters()["embed.wte.weight"]));
  // A file of another model size is refused, naming the tensor and both shapes.
  c.width = 16;
  torch::nn::Sequential wider = models::MakeGpt(c);
  try {
    tools::ImportHf(out, wider);
    FAIL() << "a file of another width was imported";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("has shape ["), std::string::npos) << e.what();
  }
}

models::LlamaConfig TinyLlama() {
  models::LlamaConfig c;
  c.vocab = 29;  // the GPT test batches' tokens
  c.context = 6;
  c.width = 16;
  c.depth = 2;
  c.heads = 4;
  c.kv_heads = 2;
  return c;
}

// The Llama exports with LlamaForCausalLM's names (no transposes, untied head) and imports back.
TEST(CheckpointTest, ExportToLlamaNamesAndImportBack) {
  const std::string base = TestDir("export_llama");
  const auto trained = TrainOneStepAndSave([] { return models::MakeLlama(TinyLlama()); }, base);
  const std::string out = base + "/llama.safetensors";
  const tools::ExportResult r = tools::ExportHf(base, out);
  EXPECT_EQ(r.family, tools::HfFamily::kLlama);
  EXPECT_EQ(r.tensors, static_cast<int>(trained.size()));
  ExpectExported(out, r.family, trained);
  const checkpoint::SafetensorsFile f = checkpoint::ReadSafetensorsHeader(out);
  for (const char* name : {"model.embed_tokens.weight", "lm_head.weight", "model.norm.weight",
                           "model.layers.1.self_attn.k_proj.weight", "model.layers.0.mlp.gate_proj.weight",
                           "model.layers.0.post_attention_layernorm.weight"}) {
    EXPECT_GE(f.Find(name), 0) << name;
  }
  EXPECT_EQ(f.tensors[f.Find("model.layers.1.self_attn.k_proj.weight")].shape, (std::vector<int64_t>{8, 16}));  // 2 kv heads
  torch::manual_seed(7);
  ExpectImported(out, models::MakeLlama(TinyLlama()), r.tensors, trained);
  // A GPT file is not a Llama: the first missing tensor is named.
  const std::string gpt_dir = TestDir("export_llama_gpt");
  TrainOneStepAndSave([] { return testing::MakeModel(testing::ModelKind::kGpt); }, gpt_dir);
  tools::ExportHf(gpt_dir, gpt_dir + "/gpt2.safetensors");
  torch::nn::Sequential llama = models::MakeLlama(TinyLlama());
  try {
    tools::ImportHf(gpt_dir + "/gpt2.safetensors", llama);
    FAIL() << "a GPT-2 file was imported into the Llama";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("tensor model.embed_tokens.weight is missing"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace zeropp
