// linear_grid: the throughput of a linear layer's three GEMMs, each as the engine runs it, over a
// grid of shapes: the table ./zpp calibrate writes into a CPU box's hardware description
// (matmul.table), from which the planner's cost model interpolates any layer's GEMMs.
//
// A linear layer y = x W^T + b with x [tokens x in] and W [out x in] costs three GEMMs:
//   forward       y  = addmm(b, x, W^T)    (torch::nn::Linear's own call)
//   input_grad    dx = dy W                ([tokens x out] x [out x in])
//   weight_grad   dW = dy^T x              ([out x tokens] x [tokens x in])
// On a CPU their rates differ by shape and by operand layout (at 128 tokens x 2048 x 8192 one
// thread runs the forward at ~140 GFLOP/s and the weight gradient at ~90, while 256-wide shapes all
// run at ~180), so one peak and a saturating curve cannot describe them; a measured table can.
//
//   linear_grid --threads 1 --tokens 32,64,... --dims 128,256,... [--min-ms 60]
// Prints one line per pass and shape:
//   GRID pass=forward tokens=T in=I out=O gflops=G
// Each: best of timed runs after one warm-up, repeated until --min-ms has passed (at least 2).
#include <ATen/Parallel.h>
#include <ATen/ops/addmm.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/randn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace {

bool ParseList(const std::string& text, std::vector<int64_t>* out) {
  std::istringstream in(text);
  std::string part;
  while (std::getline(in, part, ',')) {
    char* end = nullptr;
    const long long v = std::strtoll(part.c_str(), &end, 10);
    if (part.empty() || *end != '\0' || v < 1) return false;
    out->push_back(v);
  }
  return !out->empty();
}

double BestSeconds(const std::function<at::Tensor()>& run, double min_s) {
  (void)run();  // warm-up
  double best = 1e30, spent = 0;
  for (int r = 0; r < 2 || spent < min_s; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    (void)run();
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, dt);
    spent += dt;
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1;
  double min_ms = 60;
  std::vector<int64_t> tokens, dims;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    bool ok = true;
    if (k == "--threads") ok = (threads = std::atoi(v.c_str())) > 0;
    else if (k == "--min-ms") ok = (min_ms = std::atof(v.c_str())) > 0;
    else if (k == "--tokens") ok = ParseList(v, &tokens);
    else if (k == "--dims") ok = ParseList(v, &dims);
    else {
      std::fprintf(stderr, "error: unknown option %s (expected --threads --tokens --dims --min-ms)\n", k.c_str());
      return 2;
    }
    if (!ok) {
      std::fprintf(stderr, "error: %s: got '%s', expected %s\n", k.c_str(), v.c_str(),
                   k == "--tokens" || k == "--dims" ? "a comma-separated list of positive integers"
                                                    : "a positive number");
      return 2;
    }
  }
  if (argc % 2 == 0 || tokens.empty() || dims.empty()) {
    std::fprintf(stderr, "usage: linear_grid --threads T --tokens A,B,... --dims C,D,... [--min-ms MS]\n");
    return 2;
  }
  at::set_num_threads(threads);
  const double min_s = min_ms * 1e-3;
  for (const int64_t t : tokens) {
    for (const int64_t in : dims) {
      for (const int64_t out : dims) {
        const at::Tensor x = at::randn({t, in}), w = at::randn({out, in}), b = at::randn({out}),
                         dy = at::randn({t, out});
        const double flops = 2.0 * static_cast<double>(t) * static_cast<double>(in) * static_cast<double>(out);
        const std::pair<const char*, std::function<at::Tensor()>> passes[] = {
            {"forward", [&] { return at::addmm(b, x, w.t()); }},
            {"input_grad", [&] { return at::mm(dy, w); }},
            {"weight_grad", [&] { return at::mm(dy.t(), x); }},
        };
        for (const auto& [name, run] : passes) {
          std::printf("GRID pass=%s tokens=%lld in=%lld out=%lld gflops=%.2f\n", name, static_cast<long long>(t),
                      static_cast<long long>(in), static_cast<long long>(out), flops / BestSeconds(run, min_s) / 1e9);
          std::fflush(stdout);
        }
      }
    }
  }
  return 0;
}
