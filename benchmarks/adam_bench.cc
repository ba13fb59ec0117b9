// adam_bench: Mparam/s of zeropp's CPU AdamW (every available path, 1 and all threads) beside the
// STREAM-triad memory bandwidth measured in the same run. AdamW moves 28 bytes per parameter
// (reads param, grad, exp_avg, exp_avg_sq; writes param, exp_avg, exp_avg_sq), so the bound is
// triad_bytes_per_s / 28. Prints "ZPP key=value" lines for benchmarks/adam.sh.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "kernels/adamw_cpu.h"

namespace {

using Clock = std::chrono::steady_clock;

// Best wall time of `reps` runs of fn(lo, hi) split over `threads` threads in contiguous ranges.
template <typename Fn>
double BestParallelSeconds(int64_t n, int threads, int reps, Fn fn) {
  double best = 1e300;
  for (int r = 0; r < reps; ++r) {
    auto t0 = Clock::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) pool.emplace_back([=] { fn(n * t / threads, n * (t + 1) / threads); });
    for (auto& th : pool) th.join();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return best;
}

// STREAM triad a = b + s*c over doubles with `threads` threads; bytes/s counting 24 per element.
double Triad(int64_t n, int threads, int reps) {
  std::vector<double> va(n, 0.0), vb(n, 1.0), vc(n, 2.0);
  double* __restrict a = va.data();
  const double* __restrict b = vb.data();
  const double* __restrict c = vc.data();
  const double best = BestParallelSeconds(n, threads, reps, [=](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) a[i] = b[i] + 3.0 * c[i];
  });
  if (a[n / 2] != 7.0) std::abort();
  return 24.0 * n / best;
}

// The AdamW access pattern (read p, g, m, v; write p, m, v) with trivial arithmetic: the memory
// roofline of that pattern on this machine, in Mparam/s.
double PatternBound(float* __restrict p, const float* __restrict g, float* __restrict m, float* __restrict v, int64_t n,
                    int threads, int reps) {
  const double best = BestParallelSeconds(n, threads, reps, [=](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      m[i] += g[i];
      v[i] += g[i];
      p[i] += m[i] + v[i];
    }
  });
  return n / best / 1e6;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace zeropp::kernels;
  const int64_t n = argc > 1 ? std::atoll(argv[1]) : (int64_t{1} << 26);
  const int hw = static_cast<int>(std::thread::hardware_concurrency());
  const double triad = Triad(n, hw, 5);
  std::printf("ZPP triad_gbs=%.3f threads=%d\n", triad / 1e9, hw);
  std::vector<float> p(n, 0.5f), g(n, 0.01f), m(n, 0.f), v(n, 0.f);
  std::printf("ZPP pattern_mparams_per_s=%.1f\n", PatternBound(p.data(), g.data(), m.data(), v.data(), n, hw, 5));
  AdamWHyper h;
  for (CpuPath path : {CpuPath::kScalar, CpuPath::kAvx2, CpuPath::kAvx512}) {
    if (!CpuPathAvailable(path)) continue;
    for (int threads : {1, hw}) {
      AdamWArgs a;
      a.param = p.data();
      a.grad = g.data();
      a.exp_avg = m.data();
      a.exp_avg_sq = v.data();
      a.n = n;
      double best = 1e300;
      for (int r = 0; r < 4; ++r) {
        h.step = r + 1;
        auto t0 = Clock::now();
        AdamWCpu(a, h, path, threads);
        best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
      }
      std::printf("ZPP path=%s threads=%d mparams_per_s=%.1f\n", CpuPathName(path), threads, n / best / 1e6);
      std::fflush(stdout);
    }
  }
  return 0;
}
