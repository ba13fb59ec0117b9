// mlp.cc: a plain multilayer perceptron (no transformer) learning a fixed random "teacher"
// network, wrapped and trained with zeropp's public header.
//
//   ./zpp run --nproc-per-node 2 -- bazel-bin/examples/mlp            # ZeRO-3 over 2 ranks
//   ./zpp run --nproc-per-node 2 -- bazel-bin/examples/mlp --pp 2     # 2 pipeline stages
#include <ATen/ATen.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include <cstdio>
#include <string>

#include "zeropp/cli/cli_main.h"
#include "zeropp/zeropp.h"

namespace {

int Main(int argc, char** argv) {
  zeropp::TrainerOptions options;
  options.engine.adamw.lr = 1e-2f;
  options.lr.decay = zeropp::LrDecay::kCosine;
  options.lr.decay_steps = 60;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--pp") options.layout.pp = std::stoi(argv[i + 1]);
  }
  at::set_num_threads(1);
  torch::manual_seed(0);
  // Every child takes one tensor and returns one tensor: Linear, activations, LayerNorm.
  torch::nn::Sequential model(torch::nn::Linear(16, 64), torch::nn::GELU(), torch::nn::LayerNorm(std::vector<int64_t>{64}),
                              torch::nn::Linear(64, 64), torch::nn::GELU(), torch::nn::Linear(64, 4));
  at::Tensor teacher = at::randn({16, 4}, at::detail::createCPUGenerator(99));

  auto trainer = zeropp::Trainer::Create(model.ptr(), zeropp::DistEnv::FromEnvironment(), options);
  auto loss_fn = [](const at::Tensor& out, const at::Tensor& target) { return at::mse_loss(out, target); };
  const int steps = 60;
  double first = 0, last = 0;
  for (int step = 0; step < steps; ++step) {
    std::vector<at::Tensor> xs, ys;
    for (int m = 0; m < trainer->microbatches(); ++m) {
      at::Generator gen = at::detail::createCPUGenerator(1000 * step + 10 * m + trainer->dp_rank());
      at::Tensor x = at::randn({32, 16}, gen);
      xs.push_back(x);
      ys.push_back(at::tanh(x.matmul(teacher)));
    }
    zeropp::StepResult r = trainer->Step(xs, ys, loss_fn);
    if (step == 0) first = r.loss;
    last = r.loss;
  }
  if (trainer->groups().rank() == 0) {
    std::printf("DONE steps=%d first_loss=%.4f last_loss=%.4f schedule=%s\n", steps, first, last,
                trainer->ScheduleName().c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return zeropp::cli::RunMain(argc, argv, Main); }
