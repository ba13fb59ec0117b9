// The 3D baseline's tensor parallelism (benchmarks/baseline_3d): the GPT split over tp = 2 ranks
// the way Megatron splits it (column/row-parallel linears, vocabulary-parallel embedding and
// cross-entropy), with and without sequence parallelism, built by slicing the reference's weights,
// trains like the single-process reference: losses within 1e-5 relative over 10 SGD steps and
// every parameter slice within the parity tolerances; and the TP group's bytes equal the formula
// (8, or 10 with sequence parallelism, x b s h (t-1)/t per layer, plus the ends), step by step;
// and tp2 x dp2 (gradients averaged across the two TP pairs) follows the reference too.
#include <gtest/gtest.h>

#include <ATen/ops/cross_entropy_loss.h>
#include <ATen/ops/randint.h>
#include <torch/optim/sgd.h>

#include <vector>

#include "benchmarks/baseline_3d/tp_gpt.h"
#include "tests/thread_ranks.h"
#include "tests/tp_config.h"
#include "zeropp/process_groups.h"

namespace zeropp {
namespace {

models::GptConfig Config() { return testing::TpTestConfig(); }

void Batch(int step, at::Tensor* x, at::Tensor* y, int64_t sequences = 3) {
  at::Generator gen = at::detail::createCPUGenerator(977 * step + 5);
  const at::Tensor seq =
      at::randint(Config().vocab, {sequences, Config().context + 1}, gen, at::TensorOptions().dtype(at::kLong));
  *x = seq.narrow(1, 0, Config().context).contiguous();
  *y = seq.narrow(1, 1, Config().context).contiguous();
}

constexpr int kSteps = 10;
constexpr double kLr = 0.1;

// The single-process reference trained with SGD on `sequences` per step, and a copy of its
// initial weights (what the TP models are sliced from).
struct Reference {
  torch::nn::Sequential trained, initial;
  std::vector<double> losses;
};

Reference TrainReference(int64_t sequences) {
  const models::GptConfig cfg = Config();
  Reference r;
  torch::manual_seed(3);
  r.trained = models::MakeGpt(cfg);
  r.initial = models::MakeGpt(cfg);
  {
    c10::NoGradGuard no_grad;
    auto dst = r.initial->named_parameters(), src = r.trained->named_parameters();
    for (auto& kv : src) dst[kv.key()].copy_(kv.value());
  }
  // LibTorch lists the tied embedding twice (as head.weight too); the optimizer must see it once.
  std::vector<at::Tensor> unique;
  for (const at::Tensor& p : r.trained->parameters()) {
    bool seen = false;
    for (const at::Tensor& q : unique) seen = seen || q.is_same(p);
    if (!seen) unique.push_back(p);
  }
  torch::optim::SGD opt(unique, torch::optim::SGDOptions(kLr));
  for (int s = 0; s < kSteps; ++s) {
    at::Tensor x, y;
    Batch(s, &x, &y, sequences);
    opt.zero_grad();
    at::Tensor loss = at::cross_entropy_loss(r.trained->forward(x).reshape({-1, cfg.vocab}), y.reshape({-1}));
    loss.backward();
    opt.step();
    r.losses.push_back(loss.item<double>());
  }
  return r;
}

// Each rank's losses equal the reference's, and every slice it holds equals the reference's
// trained parameter there (rank r is at r % tp in its TP group).
void ExpectMatches(const Reference& ref, const std::vector<std::vector<double>>& got,
                   const std::vector<std::vector<std::pair<std::string, at::Tensor>>>& trained, int tp) {
  auto ref_params = ref.trained->named_parameters();
  for (size_t r = 0; r < got.size(); ++r) {
    ASSERT_EQ(got[r].size(), ref.losses.size());
    for (size_t s = 0; s < got[r].size(); ++s) {
      EXPECT_NEAR(got[r][s], ref.losses[s], 1e-5 * ref.losses[s]) << "rank " << r << " step " << s;
    }
    const int tp_rank = static_cast<int>(r) % tp;  // TP is innermost: ranks {0, 1}, {2, 3} are pairs
    for (const auto& [name, value] : trained[r]) {
      const at::Tensor full = ref_params[name];
      std::vector<at::Tensor> parts;
      const auto slices = baseline3d::TpGpt::SlicesOf(name, Config(), tp_rank, tp);
      for (const auto& sl : slices) parts.push_back(full.narrow(sl.dim, sl.begin, sl.size));
      const at::Tensor expect = parts.empty() ? full : at::cat(parts, slices[0].dim);
      EXPECT_TRUE(at::allclose(value, expect, 1e-4, 1e-6))
          << "rank " << r << " " << name << " max diff " << (value - expect).abs().max().item<double>();
    }
  }
}

void ExpectParity(bool sp) {
  const models::GptConfig cfg = Config();
  const int tp = 2;
  const Reference ref = TrainReference(3);
  std::vector<std::vector<double>> got(tp);
  std::vector<int64_t> bytes_per_step(tp, -1);
  std::vector<std::vector<std::pair<std::string, at::Tensor>>> trained(tp);
  testing::RunRanks(tp, [&](int rank, const auto& store) {
    auto groups = ProcessGroups::CreateWithStore(store, rank, tp, {1, tp, 1, DpMode::kDp}, {});
    Communicator& comm = groups->zero();
    auto model = std::make_shared<baseline3d::TpGpt>(ref.initial, cfg, comm, sp);
    torch::optim::SGD opt(model->UniqueParameters(), torch::optim::SGDOptions(kLr));
    for (int s = 0; s < kSteps; ++s) {
      at::Tensor x, y;
      Batch(s, &x, &y);
      const CommStats before = comm.Stats();
      opt.zero_grad();
      at::Tensor loss = model->Loss(model->forward(x), y);
      loss.backward();
      model->AllReduceSequenceParallelGrads();
      opt.step();
      const int64_t sent = comm.Stats().Since(before).TotalSent();
      if (s == 0) bytes_per_step[rank] = sent;
      EXPECT_EQ(sent, bytes_per_step[rank]) << "step " << s;
      got[rank].push_back(loss.item<double>());
    }
    for (const auto& kv : model->named_parameters()) {
      trained[rank].push_back({model->reference_names().at(kv.key()), kv.value().detach().clone()});
    }
  });
  ExpectMatches(ref, got, trained, tp);
  // Bytes per rank per step. A ring all-reduce of S bytes sends 2 S (t-1)/t, an all-gather or a
  // reduce-scatter S (t-1)/t (S: the full tensor). With S = b s h floats:
  //   without SP, per layer 4 all-reduces (forward: attention and MLP outputs; backward: their
  //   inputs' gradients): 8 b s h (t-1)/t elements, Megatron's formula; with SP, per layer 4
  //   all-gathers and 4 reduce-scatters plus the 2 all-gathers that re-form the column-parallel
  //   inputs in backward: 10 b s h (t-1)/t;
  //   the embedding (forward) and the head's input (backward): 2 all-reduces, or with SP a
  //   reduce-scatter and an all-gather each way;
  //   the cross-entropy: an all-gather of the N = b s row maxima and two all-reduces of N values;
  //   with SP, the replicated parameters' gradients summed once (all-reduce).
  const int64_t b = 3, s = cfg.context, h = cfg.width, n = b * s;
  const int64_t act = b * s * h * 4;
  const int64_t ce = n * 4 * (tp - 1) + 2 * 2 * n * 4 * (tp - 1) / tp;
  int64_t expect = 0;
  if (!sp) {
    expect = (cfg.depth * 4 + 2) * 2 * act * (tp - 1) / tp + ce;
  } else {
    const int64_t replicated = (cfg.depth * 6 * h + 2 * h + cfg.context * h) * 4;
    expect = (cfg.depth * 10 + 4) * act * (tp - 1) / tp + ce + 2 * replicated * (tp - 1) / tp;
  }
  for (int r = 0; r < tp; ++r) EXPECT_EQ(bytes_per_step[r], expect) << "rank " << r;
}

TEST(TpParityTest, Tp2TrainsLikeTheReferenceAndCountsTheFormulaBytes) { ExpectParity(false); }

// tp2 x dp2 on 4 ranks: each replica (a TP pair) takes half of the batch, gradients are averaged
// across replicas (DP all-reduce); the mean loss and the parameters follow the reference trained
// on the whole batch.
TEST(TpParityTest, Tp2TimesDp2TrainsLikeTheReference) {
  const models::GptConfig cfg = Config();
  const int tp = 2, dp = 2;
  const Reference ref = TrainReference(4);
  std::vector<std::vector<double>> got(tp * dp);
  std::vector<std::vector<std::pair<std::string, at::Tensor>>> trained(tp * dp);
  testing::RunRanks(tp * dp, [&](int rank, const auto& store) {
    auto groups = ProcessGroups::CreateWithStore(store, rank, tp * dp, {1, tp, dp, DpMode::kDp}, {});
    Communicator& tpc = groups->zero();
    Communicator& dpc = groups->dp();
    auto model = std::make_shared<baseline3d::TpGpt>(ref.initial, cfg, tpc);
    torch::optim::SGD opt(model->UniqueParameters(), torch::optim::SGDOptions(kLr));
    for (int s = 0; s < kSteps; ++s) {
      at::Tensor x, y;
      Batch(s, &x, &y, 4);
      const int64_t half = 4 / dp;
      opt.zero_grad();
      at::Tensor loss = model->Loss(model->forward(x.narrow(0, dpc.rank() * half, half).contiguous()),
                                    y.narrow(0, dpc.rank() * half, half).contiguous());
      loss.backward();
      for (const at::Tensor& p : model->UniqueParameters()) dpc.AllReduce(p.grad(), ReduceOp::kAvg)->Wait();
      opt.step();
      at::Tensor mean = loss.detach().clone().reshape({1});
      dpc.AllReduce(mean, ReduceOp::kAvg)->Wait();
      got[rank].push_back(mean.item<double>());
    }
    for (const auto& kv : model->named_parameters()) {
      trained[rank].push_back({model->reference_names().at(kv.key()), kv.value().detach().clone()});
    }
  });
  ExpectMatches(ref, got, trained, tp);
}

TEST(TpParityTest, Tp2WithSequenceParallelismTrainsLikeTheReferenceAndCountsTheFormulaBytes) { ExpectParity(true); }

}  // namespace
}  // namespace zeropp
