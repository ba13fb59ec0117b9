// cold_weights: what a linear layer's GEMM pays on a CPU to bring its weight from memory, beyond the
// rate benchmarks/linear_grid measures with the weight in cache: the optional matmul.cold_weight_gbps
// of a hardware description (scheduler/planner/hardware.h). No calibration writes it: in place of the
// compute fit's fixed cost per layer it predicted this box's runs worse
// (benchmarks/results/planner-local-whatif-layer-cost-2026-11-29.txt).
//
// linear_grid times each shape again and again, so its weight stays in cache. In a training step a
// layer's weight is used once per pass and micro-batch, with the other layers' weights and
// activations passing through the cache in between. Measured here (2026-11-29, one thread, width
// 256): the GPT's four linears at 128 tokens took 40-130 us more per pass with their weights
// rotated through 100 MB than with one weight, whatever the tokens (32-512); about 290 us over a
// layer's forward and input-gradient passes, under a third of the fixed cost per layer call that the
// compute fit puts beside its factor (planner-local r129: 950 us).
//
// The passes that read the weight are timed: forward y = addmm(b, x, W^T) and input gradient
// dx = dy W (the weight gradient dW = dy^T x does not read it). Each round runs every pass over the
// layer's four linears (QKV, attention output, MLP up, MLP down) `--copies` times, once with the same
// weights each time (hot) and once with each time the next of `--copies` copies (cold), in turns.
//
//   cold_weights --threads 1 --width 256 --ffn 1024 --tokens 128 [--copies 32] [--rounds 5]
// Prints one line per round and pass, then the median over the rounds of the extra time per weight
// byte as a rate:
//   COLD round=R pass=forward hot_us=H cold_us=C weight_bytes=B     (per sweep of the four linears)
//   COLD_WEIGHT gbps=G rounds=R
#include <ATen/Parallel.h>
#include <ATen/ops/addmm.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/randn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

namespace {

struct Linear {
  at::Tensor w, b;
};

double Seconds(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1, copies = 32, rounds = 5;
  int64_t width = 0, ffn = 0, tokens = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    char* end = nullptr;
    const long long n = std::strtoll(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0' || n < 1 || (k == "--copies" && n < 2)) {
      std::fprintf(stderr, "error: %s: got '%s', expected a whole number of at least %d\n", k.c_str(), v.c_str(),
                   k == "--copies" ? 2 : 1);
      return 2;
    }
    if (k == "--threads") threads = static_cast<int>(n);
    else if (k == "--width") width = n;
    else if (k == "--ffn") ffn = n;
    else if (k == "--tokens") tokens = n;
    else if (k == "--copies") copies = static_cast<int>(n);
    else if (k == "--rounds") rounds = static_cast<int>(n);
    else {
      std::fprintf(stderr, "error: unknown option %s (expected --threads --width --ffn --tokens --copies --rounds)\n",
                   k.c_str());
      return 2;
    }
  }
  if (argc % 2 == 0 || width == 0 || ffn == 0 || tokens == 0) {
    std::fprintf(stderr, "usage: cold_weights --threads T --width H --ffn F --tokens N [--copies C] [--rounds R]\n");
    return 2;
  }
  at::set_num_threads(threads);
  const int64_t shapes[4][2] = {{3 * width, width}, {width, width}, {ffn, width}, {width, ffn}};  // (out, in)
  std::vector<std::vector<Linear>> layers(copies);
  double weight_bytes = 0;
  for (int c = 0; c < copies; ++c) {
    for (const auto& s : shapes) layers[c].push_back({at::randn({s[0], s[1]}), at::randn({s[0]})});
  }
  for (const auto& s : shapes) weight_bytes += static_cast<double>(s[0] * s[1]) * 4;
  std::vector<at::Tensor> x, dy;
  for (const auto& s : shapes) {
    x.push_back(at::randn({tokens, s[1]}));
    dy.push_back(at::randn({tokens, s[0]}));
  }
  const std::pair<const char*, std::function<void(const Linear&, int)>> passes[] = {
      {"forward", [&](const Linear& l, int i) { (void)at::addmm(l.b, x[i], l.w.t()); }},
      {"input_grad", [&](const Linear& l, int i) { (void)at::mm(dy[i], l.w); }},
  };
  std::vector<double> rates;
  for (int r = 0; r < rounds; ++r) {
    double extra = 0;
    for (const auto& [name, pass] : passes) {
      const auto sweep = [&](bool rotate) {
        return Seconds([&] {
          for (int c = 0; c < copies; ++c) {
            for (int i = 0; i < 4; ++i) pass(layers[rotate ? c : 0][i], i);
          }
        });
      };
      (void)sweep(false);  // warm-up: the allocator, and the hot weights into cache
      (void)sweep(true);
      // In turns, the cold sweep first in odd rounds: a box whose speed moves falls on both.
      const double a = sweep(r % 2 == 1), b = sweep(r % 2 == 0);
      const double hot = (r % 2 == 1 ? b : a) / copies, cold = (r % 2 == 1 ? a : b) / copies;
      std::printf("COLD round=%d pass=%s hot_us=%.1f cold_us=%.1f weight_bytes=%.0f\n", r, name, hot * 1e6,
                  cold * 1e6, weight_bytes);
      extra += cold - hot;
    }
    if (extra > 0) rates.push_back(2 * weight_bytes / extra);
  }
  if (rates.size() * 2 <= static_cast<size_t>(rounds)) {
    std::fprintf(stderr, "error: the cold sweeps were not slower than the hot ones in %d of %d rounds: the weights "
                 "fit the cache (raise --copies) or the box was disturbed\n",
                 rounds - static_cast<int>(rates.size()), rounds);
    return 1;
  }
  std::sort(rates.begin(), rates.end());
  std::printf("COLD_WEIGHT gbps=%.3f rounds=%zu\n", rates[rates.size() / 2] / 1e9, rates.size());
  return 0;
}
