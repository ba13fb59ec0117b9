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
// A shared box's speed moves while the grid runs: a fixed GEMM's best rate over half a second swung
// 58-86 GFLOP/s within 90 s here, for seconds at a time, and one calibration's grid caught a slow
// spell over all its 512-token shapes (planner-local r99: that row 20-30% under its neighbours, and
// the compute fit off 17% on one shape). So each shape is timed in turns with a reference GEMM
// (forward of --reference T,I,O), both in the same window, and prints the reference's rate beside its
// own: ./zpp calibrate scales each rate by the run's median reference rate over its own
// (tools/grid_table.py). --repeats N measures the grid N times, every other time in reverse order.
//
//   linear_grid --threads 1 --tokens 32,64,... --dims 128,256,... [--min-ms 60]
//               [--reference 256,512,512] [--repeats 1]
// Prints one line per repeat, pass and shape:
//   GRID repeat=R pass=forward tokens=T in=I out=O gflops=G reference_gflops=F
// Each: best of timed turns (the reference, then the shape) after one warm-up of both, repeated
// until --min-ms has passed (at least 2).
#include <ATen/Parallel.h>
#include <ATen/ops/addmm.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/randn.h>

#include <algorithm>
#include <array>
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

// The best seconds of `run` and of `reference`, timed in turns within one window.
std::pair<double, double> BestSeconds(const std::function<at::Tensor()>& run,
                                      const std::function<at::Tensor()>& reference, double min_s) {
  (void)reference();  // warm-up
  (void)run();
  double best = 1e30, best_ref = 1e30, spent = 0;
  const auto seconds = [](const std::function<at::Tensor()>& f) {
    const auto t0 = std::chrono::steady_clock::now();
    (void)f();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  for (int r = 0; r < 2 || spent < min_s; ++r) {
    const double ref = seconds(reference), dt = seconds(run);
    best_ref = std::min(best_ref, ref);
    best = std::min(best, dt);
    spent += ref + dt;
  }
  return {best, best_ref};
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1, repeats = 1;
  double min_ms = 60;
  std::vector<int64_t> tokens, dims, reference = {256, 512, 512};
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    bool ok = true;
    const bool list = k == "--tokens" || k == "--dims" || k == "--reference";
    if (k == "--threads") ok = (threads = std::atoi(v.c_str())) > 0;
    else if (k == "--repeats") ok = (repeats = std::atoi(v.c_str())) > 0;
    else if (k == "--min-ms") ok = (min_ms = std::atof(v.c_str())) > 0;
    else if (k == "--tokens") ok = ParseList(v, &tokens);
    else if (k == "--dims") ok = ParseList(v, &dims);
    else if (k == "--reference") ok = (reference.clear(), ParseList(v, &reference)) && reference.size() == 3;
    else {
      std::fprintf(stderr, "error: unknown option %s (expected --threads --tokens --dims --min-ms --reference "
                   "--repeats)\n", k.c_str());
      return 2;
    }
    if (!ok) {
      std::fprintf(stderr, "error: %s: got '%s', expected %s\n", k.c_str(), v.c_str(),
                   k == "--reference" ? "three positive integers TOKENS,IN,OUT"
                   : list             ? "a comma-separated list of positive integers"
                                      : "a positive number");
      return 2;
    }
  }
  if (argc % 2 == 0 || tokens.empty() || dims.empty()) {
    std::fprintf(stderr, "usage: linear_grid --threads T --tokens A,B,... --dims C,D,... [--min-ms MS] "
                 "[--reference T,I,O] [--repeats N]\n");
    return 2;
  }
  at::set_num_threads(threads);
  const double min_s = min_ms * 1e-3;
  const at::Tensor rx = at::randn({reference[0], reference[1]}), rw = at::randn({reference[2], reference[1]}),
                   rb = at::randn({reference[2]});
  const double ref_flops = 2.0 * static_cast<double>(reference[0] * reference[1] * reference[2]);
  const std::function<at::Tensor()> ref = [&] { return at::addmm(rb, rx, rw.t()); };
  std::vector<std::array<int64_t, 3>> shapes;  // tokens, in, out; tokens slowest
  for (const int64_t t : tokens) {
    for (const int64_t in : dims) {
      for (const int64_t out : dims) shapes.push_back({t, in, out});
    }
  }
  for (int r = 0; r < repeats; ++r) {
    for (size_t n = 0; n < shapes.size(); ++n) {
      // Every other repeat in reverse, so that a slow spell falls on different shapes each time.
      const auto [t, in, out] = shapes[r % 2 == 0 ? n : shapes.size() - 1 - n];
      const at::Tensor x = at::randn({t, in}), w = at::randn({out, in}), b = at::randn({out}), dy = at::randn({t, out});
      const double flops = 2.0 * static_cast<double>(t) * static_cast<double>(in) * static_cast<double>(out);
      const std::pair<const char*, std::function<at::Tensor()>> passes[] = {
          {"forward", [&] { return at::addmm(b, x, w.t()); }},
          {"input_grad", [&] { return at::mm(dy, w); }},
          {"weight_grad", [&] { return at::mm(dy.t(), x); }},
      };
      for (const auto& [name, run] : passes) {
        const auto [best, best_ref] = BestSeconds(run, ref, min_s);
        std::printf("GRID repeat=%d pass=%s tokens=%lld in=%lld out=%lld gflops=%.2f reference_gflops=%.2f\n", r,
                    name, static_cast<long long>(t), static_cast<long long>(in), static_cast<long long>(out),
                    flops / best / 1e9, ref_flops / best_ref / 1e9);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
