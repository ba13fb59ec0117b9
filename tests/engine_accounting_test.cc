// The engine's own counters against theory: all-gathers and reduce-scatters per unit, bytes on
// the wire, model-state bytes per rank and the peak of unsharded parameters.
#include "tests/engine_harness.h"

namespace zeropp {
namespace {

using testing::ModelKind;
using testing::ParityCase;

ParityCase MlpCase(int n, int micro, bool raf, bool no_sync = false) {
  ParityCase c;
  c.name = "acct";
  c.n = n;
  c.cfg = {1, n, 1, DpMode::kDp};
  c.options = testing::BaseOptions();
  c.options.reshard_after_forward = raf;
  c.options.no_sync = no_sync;
  c.micro = micro;
  c.steps = 1;
  return c;
}

TEST(EngineAccountingTest, GathersAndBytesEqualTheory) {
  const int n = 4;
  for (int micro : {1, 3}) {
    for (bool raf : {true, false}) {
      for (bool no_sync : {false, true}) {
        auto ranks = testing::RunZeropp(MlpCase(n, micro, raf, no_sync));
        const auto& rec = ranks[0];
        const int k_units = static_cast<int>(rec.unit_padded.size());
        int64_t expect_ag = 0, expect_rs = 0, psi = 0;
        int64_t expect_gathers = 0, expect_rs_ops = 0;
        for (int u = 0; u < k_units; ++u) {
          const int64_t p = rec.unit_padded[u];
          if (p == 0) {
            EXPECT_EQ(rec.unit_gathers[u], 0) << "unit " << u << " has no parameters";
            continue;
          }
          psi += p;
          // Forward: once per micro-batch, but unit 0 stays gathered from one micro-batch's
          // backward into the next one's forward. Backward: once per micro-batch, except the
          // last unit (still gathered from its forward) and, without reshard-after-forward,
          // every unit.
          int64_t fwd = micro - (u == 0 ? micro - 1 : 0);
          int64_t bwd = (!raf || u == k_units - 1) ? 0 : micro;
          EXPECT_EQ(rec.unit_gathers[u], fwd + bwd)
              << "unit " << u << " micro " << micro << " raf " << raf << " no_sync " << no_sync;
          expect_gathers += fwd + bwd;
          expect_ag += (fwd + bwd) * p * 4 * (n - 1) / n;
          int64_t rs = no_sync ? 1 : micro;
          expect_rs_ops += rs;
          expect_rs += rs * p * 4 * (n - 1) / n;
        }
        const StepResult& r = rec.results[0];
        EXPECT_EQ(r.gathers, expect_gathers);
        EXPECT_EQ(r.reduce_scatters, expect_rs_ops);
        EXPECT_EQ(r.zero_comm[OpKind::kAllGather].bytes_sent, expect_ag);
        EXPECT_EQ(r.zero_comm[OpKind::kReduceScatter].bytes_sent, expect_rs);
        EXPECT_FALSE(r.zero_comm[OpKind::kAllGather].modeled);
        if (micro == 1 && raf && !no_sync) {
          // The ZeRO-3 headline, 3 x Psi x (N-1)/N x 4 bytes, less the last unit's backward gather.
          const int64_t last = rec.unit_padded[k_units - 1];
          EXPECT_EQ(r.zero_comm[OpKind::kAllGather].bytes_sent + r.zero_comm[OpKind::kReduceScatter].bytes_sent,
                    (3 * psi - last) * 4 * (n - 1) / n);
          std::printf("fp32 ZeRO-3, N=%d, Psi=%lld (padded): %lld bytes sent per rank per step; theory 3*Psi*(N-1)/N*4 = %lld "
                      "minus the last unit's regather %lld\n",
                      n, (long long)psi,
                      (long long)(r.zero_comm[OpKind::kAllGather].bytes_sent + r.zero_comm[OpKind::kReduceScatter].bytes_sent),
                      (long long)(3 * psi * 4 * (n - 1) / n), (long long)(last * 4 * (n - 1) / n));
        }
      }
    }
  }
}

TEST(EngineAccountingTest, ModelStateBytesAre16PsiOverN) {
  struct Dt {
    at::ScalarType param, reduce;
    int64_t bytes_per_param;  // shard + master + grad + two moments
  };
  for (Dt d : {Dt{at::kFloat, at::kFloat, 16}, Dt{at::kBFloat16, at::kBFloat16, 16}, Dt{at::kBFloat16, at::kFloat, 18}}) {
    for (int n : {1, 2, 4}) {
      ParityCase c = MlpCase(n, 1, true);
      c.model = ModelKind::kGpt;
      c.options.param_dtype = d.param;
      c.options.reduce_dtype = d.reduce;
      c.steps = 2;
      auto ranks = testing::RunZeropp(c);
      int64_t psi = 0;
      for (int64_t p : ranks[0].unit_padded) psi += p;
      for (int r = 0; r < n; ++r) {
        EXPECT_EQ(ranks[r].memory.ModelStateBytes(), d.bytes_per_param * psi / n)
            << "n " << n << " dtype " << c10::toString(d.param) << "/" << c10::toString(d.reduce) << ": "
            << ranks[r].memory.ToString();
      }
    }
  }
}

// fp32 bytes of the n largest units (padded element counts).
int64_t LargestUnitsBytes(std::vector<int64_t> padded, int n) {
  std::sort(padded.rbegin(), padded.rend());
  int64_t sum = 0;
  for (int i = 0; i < n && i < static_cast<int>(padded.size()); ++i) sum += padded[i] * 4;
  return sum;
}

TEST(EngineAccountingTest, PeakUnshardedRespectsLiveUnitCap) {
  for (int cap : {2, 3}) {
    ParityCase c = MlpCase(2, 2, true);
    c.model = ModelKind::kGpt;
    c.options.max_live_units = cap;
    c.options.prefetch_depth = 2;
    c.steps = 2;
    auto ranks = testing::RunZeropp(c);
    EXPECT_LE(ranks[0].memory.unsharded_peak_bytes, LargestUnitsBytes(ranks[0].unit_padded, cap)) << "cap " << cap;
    EXPECT_GT(ranks[0].memory.unsharded_peak_bytes, 0);
  }
  // Without resharding after forward every unit is gathered at once at the end of forward.
  ParityCase keep = MlpCase(2, 1, false);
  keep.model = ModelKind::kGpt;
  auto ranks = testing::RunZeropp(keep);
  int64_t all = 0;
  for (int64_t p : ranks[0].unit_padded) all += p * 4;
  EXPECT_EQ(ranks[0].memory.unsharded_peak_bytes, all);
}

// Each reduce-scatter in flight holds its unit's unsharded gradient until it lands: the unit
// computing its backward, the tied embedding's unit (accumulating from the head's backward to its
// own), and at most max_pending_reductions being reduced.
TEST(EngineAccountingTest, PeakUnshardedGradRespectsPendingReductionCap) {
  for (int cap : {1, 2}) {
    ParityCase c = MlpCase(2, 3, true);
    c.model = ModelKind::kGpt;
    c.options.max_pending_reductions = cap;
    c.steps = 2;
    auto ranks = testing::RunZeropp(c);
    EXPECT_LE(ranks[0].memory.grad_unsharded_peak_bytes, LargestUnitsBytes(ranks[0].unit_padded, 2 + cap))
        << "cap " << cap;
    EXPECT_GT(ranks[0].memory.grad_unsharded_peak_bytes, 0);
  }
}

// A zero group of one: every unit's gradient is still reduced once per micro-batch (the engine's
// count), but into its shard directly: no reduce-scatter reaches the communicator, and no
// reduction is left pending: at most two units' unsharded gradients are live (the one in backward
// and the tied embedding's, accumulating from the head's backward onward).
TEST(EngineAccountingTest, ZeroGroupOfOneReducesWithoutCollective) {
  for (int micro : {1, 2}) {
    ParityCase c = MlpCase(1, micro, true);
    c.model = ModelKind::kGpt;
    c.options.param_dtype = at::kBFloat16;
    c.options.reduce_dtype = at::kFloat;
    c.steps = 2;
    auto ranks = testing::RunZeropp(c);
    const auto& rec = ranks[0];
    int64_t units_with_params = 0;
    for (int64_t p : rec.unit_padded) units_with_params += p > 0;
    for (const StepResult& r : rec.results) {
      EXPECT_EQ(r.reduce_scatters, units_with_params * micro) << "micro " << micro;
      EXPECT_EQ(r.zero_comm[OpKind::kReduceScatter].ops, 0) << "micro " << micro;
      EXPECT_EQ(r.zero_comm[OpKind::kReduceScatter].bytes_sent, 0) << "micro " << micro;
    }
    EXPECT_GT(rec.memory.grad_unsharded_peak_bytes, 0);
    EXPECT_LE(rec.memory.grad_unsharded_peak_bytes, LargestUnitsBytes(rec.unit_padded, 2) / 2)
        << "bf16 bytes of the two largest units, micro " << micro;
  }
}

// A gradient shard's first reduction of a step: adopted without a copy when it is in the shard's
// dtype (the reduce dtype), copied and converted otherwise (here fp32 gradients, as a zero group of
// one passes them, into a bf16 shard); later ones add into it; the next step adopts afresh.
TEST(FlatParamTest, FirstReductionInTheShardsDtypeIsAdopted) {
  for (at::ScalarType reduce : {at::kFloat, at::kBFloat16}) {
    at::Tensor w = at::zeros({2, 3}).requires_grad_(true);
    FlatEntry e;
    e.name = "w";
    e.param = w;
    e.shape = {2, 3};
    e.numel = 6;
    FlatParam f({e}, /*zero_size=*/1, /*zero_rank=*/0, /*pad_multiple=*/4, at::kFloat, reduce, c10::Device(c10::kCPU),
                c10::Device(c10::kCPU));
    f.InitFromFull(at::zeros({8}), nullptr, offload::Tier::kCpu);
    for (int step = 0; step < 2; ++step) {
      f.StartStep();
      at::Tensor first = at::arange(8, at::TensorOptions().dtype(at::kFloat)).add_(step);
      f.AccumulateGradShard(first);
      EXPECT_EQ(f.AcquireGradShard().data_ptr() == first.data_ptr(), reduce == at::kFloat)
          << c10::toString(reduce) << " step " << step;
      f.AccumulateGradShard(at::ones({8}));
      at::Tensor want = at::arange(8, at::TensorOptions().dtype(at::kFloat)).add_(step + 1);
      EXPECT_TRUE(at::equal(f.AcquireGradShard().to(at::kFloat), want)) << c10::toString(reduce) << " step " << step;
    }
  }
}

// The GPT on 2 ranks for 10 steps on `device`, `micro` micro-batches a step.
ParityCase GptCase(const std::string& device, int micro) {
  ParityCase c = MlpCase(2, micro, true);
  c.model = ModelKind::kGpt;
  c.steps = 10;
  c.device = device;
  return c;
}

// bf16 compute with fp32 masters, gradients reduced in bf16 or fp32, on every device: close to the
// fp32 run after 10 steps, loss falling. On a GPU, the caching allocator holds at least the
// engine's resident model state.
class Bf16Test : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(Bf16Test, TrainsCloseToFp32) {
  const std::string device = std::get<0>(GetParam());
  const std::string skip = testing::SkipReason(device);
  if (!skip.empty()) GTEST_SKIP() << "needs a GPU: " << skip;
  ParityCase c = GptCase(device, 1);
  auto fp32 = testing::RunZeropp(c);
  c.options.param_dtype = at::kBFloat16;
  c.options.reduce_dtype = std::get<1>(GetParam()) == "bf16" ? at::kBFloat16 : at::kFloat;
  auto bf16 = testing::RunZeropp(c);
  const double a = fp32[0].losses.back(), b = bf16[0].losses.back();
  std::printf("%s, reduce %s: after 10 steps fp32 loss %.5f, bf16 loss %.5f (first %.5f)\n", device.c_str(),
              std::get<1>(GetParam()).c_str(), a, b, bf16[0].losses.front());
  EXPECT_LT(std::abs(a - b), 0.02 * a);
  EXPECT_LT(b, bf16[0].losses.front());
  if (device == "cuda") {
    const MemoryStats& m = bf16[0].memory;
    EXPECT_GE(m.device.peak_allocated_bytes, m.ModelStateBytes()) << m.ToString();
    EXPECT_GT(m.device.total_bytes, m.device.reserved_bytes) << m.ToString();
  } else {
    EXPECT_EQ(bf16[0].memory.device.total_bytes, 0);
  }
}

// bf16 parameters with fp32 masters: ZeRO-1 across 2 replicas trains exactly as plain data
// parallelism does (with 2 ranks both reductions give the same averages). Each step's update (about
// lr = 3e-4 under Adam) is smaller than half a bf16 ulp of most weights, so only an fp32 master
// accumulates it: a replica that rounded its own part of the master to bf16 would leave those
// weights where they started. Resident and with the optimizer offloaded (on a GPU: staged copies).
// Each replica's master holds only the half it updates.
class Zero1Bf16Test : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(Zero1Bf16Test, KeepsItsOwnMasterInFp32) {
  const std::string device = std::get<0>(GetParam());
  const std::string skip = testing::SkipReason(device);
  if (!skip.empty()) GTEST_SKIP() << "needs a GPU: " << skip;
  ParityCase c = GptCase(device, 2);
  c.options.adamw.lr = 3e-4f;
  c.options.param_dtype = at::kBFloat16;
  c.options.reduce_dtype = at::kFloat;
  c.options.offload.optimizer = ParseOffloadTarget("optimizer", std::get<1>(GetParam()));
  c.cfg = {1, 1, 2, DpMode::kDp};
  auto dp = testing::RunZeropp(c);
  c.cfg = {1, 1, 2, DpMode::kZero1};
  auto zero1 = testing::RunZeropp(c);
  auto initial = testing::RunZeropp([&] { ParityCase z = c; z.steps = 0; return z; }());
  for (int r = 0; r < 2; ++r) {
    int moved = 0;
    for (size_t i = 0; i < dp[r].params.size(); ++i) {
      EXPECT_LT(testing::RelErr(zero1[r].params[i].second, dp[r].params[i].second), 1e-6)
          << "rank " << r << ", parameter " << dp[r].params[i].first;
      moved += !dp[r].params[i].second.equal(initial[r].params[i].second);
    }
    EXPECT_EQ(moved, static_cast<int>(dp[r].params.size())) << "rank " << r << ": every tensor moved under dp";
    EXPECT_GT(dp[r].memory.master_bytes, 0);
    EXPECT_EQ(2 * zero1[r].memory.master_bytes, dp[r].memory.master_bytes) << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, Zero1Bf16Test,
                         ::testing::Combine(::testing::ValuesIn(testing::Devices()), ::testing::Values("none", "cpu")),
                         [](const auto& info) {
                           return "optimizer_" + std::get<1>(info.param) + "_" + std::get<0>(info.param);
                         });

INSTANTIATE_TEST_SUITE_P(Devices, Bf16Test,
                         ::testing::Combine(::testing::ValuesIn(testing::Devices()), ::testing::Values("bf16", "fp32")),
                         [](const auto& info) {
                           return "reduce_" + std::get<1>(info.param) + "_" + std::get<0>(info.param);
                         });

}  // namespace
}  // namespace zeropp
