// TrainConfig: flags and flat JSON, and refusals that name the field.
#include "tools/train_config.h"

#include <cstdio>
#include <fstream>

#include <gtest/gtest.h>

#include "zeropp/cli/run_checks.h"

namespace zeropp {
namespace {

using tools::TrainConfig;

std::string ErrorOf(const std::vector<std::string>& args) {
  try {
    TrainConfig::Parse(args);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(TrainConfigTest, FlagsAndJsonWithOverrides) {
  std::string path = std::string(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp") + "/cfg.json";
  std::ofstream(path) << "{\"steps\": 7, \"width\": 32, \"heads\": 2, \"param_dtype\": \"bf16\", \"no_sync\": true,\n"
                         " \"dp-mode\": \"dp\", \"lr\": 0.01}";
  TrainConfig c = TrainConfig::Parse({"--config", path, "--steps", "9", "--recompute", "--zero", "2"});
  EXPECT_EQ(c.steps, 9);
  EXPECT_EQ(c.gpt.width, 32);
  EXPECT_EQ(c.gpt.heads, 2);
  EXPECT_EQ(c.trainer.engine.param_dtype, at::kBFloat16);
  EXPECT_TRUE(c.trainer.engine.no_sync);
  EXPECT_TRUE(c.trainer.engine.recompute);
  EXPECT_FLOAT_EQ(c.trainer.engine.adamw.lr, 0.01f);
  EXPECT_EQ(c.trainer.layout.zero, 2);
  EXPECT_EQ(c.trainer.engine.host_threads, 0);  // train resolves it (the cores over the local ranks on a GPU)
  EXPECT_EQ(TrainConfig::Parse({"--host-threads", "12"}).trainer.engine.host_threads, 12);
  EXPECT_EQ(TrainConfig::Parse({}).trainer.pipeline.max_deferred_w, -1);
  EXPECT_EQ(TrainConfig::Parse({"--max-deferred-w", "0"}).trainer.pipeline.max_deferred_w, 0);
  EXPECT_NE(ErrorOf({"--max-deferred-w", "-1"}).find("max-deferred-w"), std::string::npos);
}

// The host-memory estimate counts what lives on the host: on a CPU the whole training state and
// the activations, less what is offloaded to NVMe; on a GPU only the fp32 model built before
// sharding and what is offloaded to the host (12 bytes a parameter for the optimizer). Sizes
// follow this machine's available memory A: about A/8 parameters, so the build (A/2) fits, a
// CPU's 16 bytes a parameter (2A) and a GPU's offloaded optimizer (A/2 + 1.5A) do not.
TEST(TrainConfigTest, MemoryEstimateCountsHostMemoryOnly) {
  const double avail = static_cast<double>(cli::AvailableMemoryBytes());
  if (avail <= 0) GTEST_SKIP() << "this machine reports no available memory";
  const double per_block = 12.0 * 4096 * 4096;
  const int depth = static_cast<int>(avail / 8 / per_block) + 1;
  const std::vector<std::string> base = {"--width", "4096", "--heads", "32", "--context", "128", "--micro-batch", "1",
                                         "--depth", std::to_string(depth)};
  auto refused = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    try {
      TrainConfig::Parse(args).CheckMemoryEstimate(1);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(refused({}).find("memory estimate: about"), std::string::npos);
  EXPECT_EQ(refused({"--device", "cuda"}), "");
  const std::string offloaded = refused({"--device", "cuda", "--offload-optimizer", "cpu"});
  EXPECT_NE(offloaded.find("on the host"), std::string::npos) << offloaded;
  // On a CPU, state offloaded to NVMe is not host memory: the build (A/2) and the host pool remain.
  EXPECT_EQ(refused({"--offload-params", "nvme", "--offload-optimizer", "nvme", "--host-budget-mb", "64"}), "");
  // Only the optimizer on NVMe: parameters and gradients (8 bytes a parameter, A) still overflow.
  EXPECT_NE(refused({"--offload-optimizer", "nvme"}).find("memory estimate: about"), std::string::npos);
}

TEST(TrainConfigTest, RefusalsNameFieldValueAndExpectation) {
  EXPECT_EQ(ErrorOf({"--steps", "0"}), "steps: got '0', expected an integer in [1, 8796093022207]");
  EXPECT_EQ(ErrorOf({"--param-dtype", "fp16"}), "param-dtype: got 'fp16', expected fp32 or bf16");
  EXPECT_EQ(ErrorOf({"--width", "30", "--heads", "4"}), "gpt.width: got 30, expected a multiple of gpt.heads (4)");
  EXPECT_NE(ErrorOf({"--widht", "30"}).find("unknown setting 'widht'; expected one of:"), std::string::npos);
  EXPECT_EQ(ErrorOf({"--dp-mode", "zero3"}), "dp_mode: got 'zero3', expected one of: dp, zero1");
  EXPECT_NE(ErrorOf({"--config", "/nonexistent.json"}).find("--config: cannot read '/nonexistent.json'"), std::string::npos);
  EXPECT_EQ(ErrorOf({"--lr"}), "--lr: missing value");
  EXPECT_EQ(ErrorOf({"--host-threads", "0"}), "host-threads: got '0', expected an integer in [1, 2147483647]");
}

}  // namespace
}  // namespace zeropp
