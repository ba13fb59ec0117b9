// checkpoint_bench: save and load of a GPT's training state on the launcher's ranks, and the stall
// of an asynchronous save against the step time. Prints one BENCH line (rank 0); the script
// benchmarks/checkpoint.sh compares it with fio and PyTorch DCP on the same directory. The
// synchronous save and load run REPEATS times: the best is the figure (as for fio and the peer,
// since this disk's writeback varies run to run) and the mean and spread are printed beside it.
//   launcher --nproc-per-node 2 -- checkpoint_bench DIR [REPEATS]
#include <ATen/Parallel.h>
#include <ATen/ops/cross_entropy_loss.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <numeric>
#include <string>

#include "models/byte_corpus.h"
#include "models/gpt.h"
#include "zeropp/cli/cli_main.h"
#include "zeropp/zeropp.h"

namespace zeropp {
namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

int Main(int argc, char** argv) {
  if (argc != 2 && argc != 3) throw std::invalid_argument("usage: checkpoint_bench DIR [REPEATS]");
  const std::string dir = argv[1];
  const int repeats = argc == 3 ? std::max(1, std::atoi(argv[2])) : 3;
  at::set_num_threads(1);
  models::GptConfig g;
  g.vocab = 256;
  g.context = 128;
  g.width = 768;
  g.depth = 8;
  g.heads = 12;
  torch::manual_seed(1);
  auto model = models::MakeGpt(g);
  TrainerOptions o;
  o.engine.adamw.lr = 1e-4f;
  auto t = Trainer::Create(model.ptr(), DistEnv::FromEnvironment(), o);
  Communicator& world = t->groups().world();
  auto corpus = models::ByteCorpus::FromDirectory("/usr/share/common-licenses");
  LossFn loss = [](const at::Tensor& out, const at::Tensor& y) {
    return at::cross_entropy_loss(out.reshape({-1, out.size(-1)}), y.reshape({-1}));
  };
  int64_t step = 0;
  auto train = [&] {
    std::vector<at::Tensor> xs(1), ys(1);
    corpus.MicroBatch(step, 0, t->dp_rank(), t->dp_size(), 2, 1, g.context, 7, &xs[0], &ys[0]);
    t->Step(xs, ys, loss);
    ++step;
  };
  train();  // warm-up
  world.Barrier()->Wait();
  auto t0 = Clock::now();
  const int steps = 3;
  for (int i = 0; i < steps; ++i) train();
  const double step_s = MaxOverRanks(world, Since(t0)) / steps;
  // Synchronous save and load (each timed between barriers; the slowest rank counts).
  if (t->groups().rank() == 0) std::filesystem::remove_all(dir);
  std::vector<double> saves_s, loads_s;
  std::string path;
  for (int r = 0; r < repeats; ++r) {
    world.Barrier()->Wait();
    t0 = Clock::now();
    path = t->Save(dir);
    saves_s.push_back(MaxOverRanks(world, Since(t0)));
    world.Barrier()->Wait();
    t0 = Clock::now();
    t->Load(path);
    loads_s.push_back(MaxOverRanks(world, Since(t0)));
  }
  int64_t bytes = 0;
  for (const auto& e : std::filesystem::directory_iterator(path)) bytes += std::filesystem::file_size(e.path());
  auto stats = [](const std::vector<double>& v) {  // best, mean, spread (max - min)
    const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    return std::array<double, 3>{*lo, std::accumulate(v.begin(), v.end(), 0.0) / v.size(), *hi - *lo};
  };
  const auto save = stats(saves_s), load = stats(loads_s);
  const double save_s = save[0], load_s = load[0];
  // Asynchronous saves: the stall at the step boundary, and the steps taken while writing.
  double stall_ms = 0;
  const int saves = 2;
  t0 = Clock::now();
  for (int i = 0; i < saves; ++i) {
    stall_ms += t->SaveAsync(dir) / saves;
    train();
    train();
  }
  t->WaitForSave();
  const double async_total_s = MaxOverRanks(world, Since(t0));
  stall_ms = MaxOverRanks(world, stall_ms);
  if (t->groups().rank() == 0) {
    std::printf("BENCH checkpoint ranks=%d state_bytes=%lld repeats=%d save_s=%.3f save_gbs=%.3f save_mean_s=%.3f "
                "save_spread_s=%.3f load_s=%.3f load_gbs=%.3f load_mean_s=%.3f load_spread_s=%.3f step_s=%.3f "
                "async_stall_ms=%.1f async_stall_share=%.4f async_window_s=%.3f\n",
                world.size(), (long long)bytes, repeats, save_s, bytes / save_s / 1e9, save[1], save[2], load_s,
                bytes / load_s / 1e9, load[1], load[2], step_s, stall_ms, stall_ms / 1000 / step_s, async_total_s);
  }
  world.Barrier()->Wait();
  return 0;
}

}  // namespace
}  // namespace zeropp

int main(int argc, char** argv) { return zeropp::cli::RunMain(argc, argv, zeropp::Main); }
