// Offloaded training equals non-offloaded training (same kernels) to 1e-6 relative over 10 steps,
// for every offload target on 1 and 2 ZeRO ranks and on 2 ZeRO-1 replicas (whose re-assembly of
// the updated shards reads what the offloaded update wrote: on a GPU, after its copy back);
// offload files vanish with the engine; an unusable offload directory and an impossible memory
// budget are refused before training.
#include <dirent.h>
#include <sys/stat.h>

#include "tests/engine_harness.h"
#include "tests/test_dirs.h"

namespace zeropp {
namespace {

using testing::TestDir;

int FilesIn(const std::string& dir) {
  int n = 0;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
    closedir(d);
  }
  return n;
}

struct Target {
  const char* name;
  const char* optimizer;
  const char* params;
};

struct Layout {
  const char* name;
  ParallelConfig cfg;
};

class EngineOffloadTest : public ::testing::TestWithParam<std::tuple<Target, Layout, std::string>> {};

TEST_P(EngineOffloadTest, MatchesNonOffloadedTraining) {
  const Target t = std::get<0>(GetParam());
  const Layout layout = std::get<1>(GetParam());
  const int n = layout.cfg.WorldSize();
  const std::string skip = testing::SkipReason(std::get<2>(GetParam()));
  if (!skip.empty()) GTEST_SKIP() << "needs a GPU: " << skip;
  testing::ParityCase c;
  c.device = std::get<2>(GetParam());
  c.n = n;
  c.cfg = layout.cfg;
  c.model = testing::ModelKind::kGpt;
  c.options = testing::BaseOptions();
  c.options.max_grad_norm = 0.5;
  c.micro = 2;
  c.steps = 10;
  auto plain = testing::RunZeropp(c);
  const std::string dir = TestDir(std::string("offload_") + t.name + "_" + layout.name);
  c.options.offload.optimizer = ParseOffloadTarget("optimizer", t.optimizer);
  c.options.offload.params = ParseOffloadTarget("params", t.params);
  c.options.offload.dir = dir;
  c.options.offload.host_budget_bytes = 64 << 20;
  auto off = testing::RunZeropp(c);
  for (int r = 0; r < n; ++r) {
    for (int s = 0; s < c.steps; ++s) {
      EXPECT_NEAR(off[r].losses[s], plain[r].losses[s], 1e-6 * std::abs(plain[r].losses[s])) << "step " << s;
      // Offloaded gradients are measured on the host, resident ones on the device (both in fp64, in
      // different orders).
      EXPECT_NEAR(off[r].norms[s], plain[r].norms[s], 1e-5 * plain[r].norms[s]) << "gradient norm, step " << s;
    }
    double worst = 0;
    std::string worst_name;
    for (size_t i = 0; i < plain[r].params.size(); ++i) {
      const double e = testing::RelErr(off[r].params[i].second, plain[r].params[i].second);
      if (e > worst) worst = e, worst_name = plain[r].params[i].first;
    }
    EXPECT_LT(worst, 1e-6) << "rank " << r << ", parameter " << worst_name;
    const MemoryStats& m = off[r].memory;
    int64_t expect_nvme = 0;
    if (std::string(t.params) == "nvme") expect_nvme += m.param_shard_bytes + m.master_bytes + m.grad_shard_bytes;
    if (std::string(t.optimizer) == "nvme") expect_nvme += m.optim_state_bytes;
    EXPECT_EQ(m.nvme_bytes, expect_nvme);
    if (expect_nvme > 0) {
      EXPECT_GT(m.io.bytes_read, 0);
    }
    if (r == 0) {
      std::printf("%s on %s: worst parameter rel err %.2e, read %lld B, written %lld B, waited %lld us\n",
                  t.name, layout.name, worst, (long long)m.io.bytes_read, (long long)m.io.bytes_written,
                  (long long)m.io.wait_us);
    }
  }
  EXPECT_EQ(FilesIn(dir), 0) << "offload files left in " << dir;
}

INSTANTIATE_TEST_SUITE_P(Targets, EngineOffloadTest,
                         ::testing::Combine(::testing::Values(Target{"optimizer_cpu", "cpu", "none"},
                                                              Target{"optimizer_nvme", "nvme", "none"},
                                                              Target{"params_cpu", "none", "cpu"},
                                                              Target{"params_nvme", "none", "nvme"},
                                                              Target{"all_nvme", "nvme", "nvme"}),
                                            ::testing::Values(Layout{"n1", {1, 1, 1, DpMode::kDp}},
                                                              Layout{"n2", {1, 2, 1, DpMode::kDp}},
                                                              Layout{"dp2_zero1", {1, 1, 2, DpMode::kZero1}}),
                                            ::testing::ValuesIn(testing::Devices())),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param).name) + "_" + std::get<1>(info.param).name + "_" +
                                  std::get<2>(info.param);
                         });

TEST(EngineOffloadTest2, ActivationsOfRecomputedUnitsMatch) {
  for (int n : {1, 2}) {
    for (const char* tier : {"cpu", "nvme"}) {
      testing::ParityCase c;
      c.n = n;
      c.cfg = {1, n, 1, DpMode::kDp};
      c.model = testing::ModelKind::kGpt;
      c.options = testing::BaseOptions();
      c.options.recompute = true;
      c.micro = 2;
      c.steps = 10;
      auto plain = testing::RunZeropp(c);
      c.options.offload.activations = ParseOffloadTarget("activations", tier);
      c.options.offload.dir = TestDir(std::string("act_") + tier + std::to_string(n));
      auto off = testing::RunZeropp(c);
      for (int r = 0; r < n; ++r) {
        for (int s = 0; s < c.steps; ++s) {
          EXPECT_NEAR(off[r].losses[s], plain[r].losses[s], 1e-6 * std::abs(plain[r].losses[s])) << tier << " step " << s;
        }
        for (size_t i = 0; i < plain[r].params.size(); ++i) {
          EXPECT_LT(testing::RelErr(off[r].params[i].second, plain[r].params[i].second), 1e-6) << tier;
        }
      }
      if (std::string(tier) == "nvme") {
        EXPECT_GT(off[0].memory.io.bytes_read, 0);
      }
      EXPECT_EQ(FilesIn(c.options.offload.dir), 0);
    }
  }
}

// bf16 parameters and gradients: the offloaded update reads the bf16 gradient as it is and writes
// the bf16 shard in the same pass (on a GPU, through page-locked bf16 buffers both ways), where
// resident training casts; the same bits either way, so offloading changes nothing. On a ZeRO
// group of 2 and on 2 ZeRO-1 replicas (whose fp32 masters hold half the shard each).
class EngineOffloadBf16Test : public ::testing::TestWithParam<std::string> {};

TEST_P(EngineOffloadBf16Test, MatchesResidentBf16Training) {
  const std::string skip = testing::SkipReason(GetParam());
  if (!skip.empty()) GTEST_SKIP() << "needs a GPU: " << skip;
  for (const auto& [layout, params] : std::vector<std::pair<ParallelConfig, std::string>>{
           {{1, 2, 1, DpMode::kDp}, "none"},
           {{1, 2, 1, DpMode::kDp}, "cpu"},
           {{1, 1, 2, DpMode::kZero1}, "none"},
           {{1, 1, 2, DpMode::kZero1}, "cpu"}}) {
    testing::ParityCase c;
    c.device = GetParam();
    c.n = 2;
    c.cfg = layout;
    c.model = testing::ModelKind::kGpt;
    c.options = testing::BaseOptions();
    c.options.param_dtype = at::kBFloat16;
    c.options.reduce_dtype = at::kBFloat16;
    c.options.max_grad_norm = 0.5;
    c.micro = 2;
    c.steps = 10;
    auto plain = testing::RunZeropp(c);
    c.options.offload.optimizer = ParseOffloadTarget("optimizer", "cpu");
    c.options.offload.params = ParseOffloadTarget("params", params);
    c.options.offload.dir = TestDir("bf16_" + params + (layout.zero > 1 ? "_z2" : "_dp2"));
    auto off = testing::RunZeropp(c);
    for (int r = 0; r < c.n; ++r) {
      for (int s = 0; s < c.steps; ++s) {
        EXPECT_NEAR(off[r].losses[s], plain[r].losses[s], 1e-6 * std::abs(plain[r].losses[s]))
            << "params " << params << " step " << s;
      }
      EXPECT_NE(plain[r].losses.back(), plain[r].losses.front());  // the updates moved the model
      for (size_t i = 0; i < plain[r].params.size(); ++i) {
        EXPECT_LT(testing::RelErr(off[r].params[i].second, plain[r].params[i].second), 1e-6) << "params " << params;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, EngineOffloadBf16Test, ::testing::ValuesIn(testing::Devices()),
                         [](const auto& info) { return info.param; });

TEST(EngineOffloadErrorsTest, UnusableDirectoryAndImpossibleBudgetAreRefusedUpFront) {
  auto error_of = [](EngineOptions o) {
    std::string err;
    testing::RunRanks(2, [&](int rank, const auto& store) {
      TrainerOptions to;
      to.engine = o;
      try {
        Trainer e(testing::MakeModel(testing::ModelKind::kGpt).ptr(),
                  ProcessGroups::CreateWithStore(store, rank, 2, {1, 2, 1, DpMode::kDp}, {}), to);
      } catch (const std::exception& ex) {
        if (rank == 1) err = ex.what();
      }
    });
    return err;
  };
  EngineOptions o;
  o.offload.optimizer = OffloadTarget::kNvme;
  o.offload.dir = "/nonexistent/zeropp-offload";
  EXPECT_NE(error_of(o).find("[rank 1] EngineOptions: offload dir '/nonexistent/zeropp-offload': No such file or directory"),
            std::string::npos)
      << error_of(o);
  EngineOptions nodir;
  nodir.offload.params = OffloadTarget::kNvme;
  EXPECT_NE(error_of(nodir).find("offload.params(nvme) needs offload.dir"), std::string::npos);
  EngineOptions tight;
  tight.memory_budget_bytes = 1000;
  const std::string e = error_of(tight);
  EXPECT_NE(e.find("[rank 1] memory budget: the plan needs about"), std::string::npos) << e;
  EXPECT_NE(e.find("but memory_budget_bytes is 1000 (resident model state"), std::string::npos) << e;
}

}  // namespace
}  // namespace zeropp
