// adam_bench: Mparam/s of zeropp's CPU AdamW, as the product runs it (the CPU's best vector path,
// all threads), beside the memory bound of AdamW's own access pattern measured in the same run.
//
// Rules (issue "Performance that holds up"): the bound is a STREAM-like kernel with AdamW's access
// pattern (read p, g, m, v; write p, m, v: 28 bytes per parameter) and trivial arithmetic; it and
// zeropp run alternately, `reps` times each, on the same buffers and the same thread count, and
// each reports its best and its median. The peers (benchmarks/adam_peers.py) get the same reps,
// the same best-of and the same thread count. The STREAM triad is printed for information only:
// on this VM its 2-read/1-write mix is not a bound for a 4-read/3-write kernel.
// Then the gradient norm's pass (kernels::SumOfSquaresBf16) over n bf16 values against a read-only
// pass over the same bytes, and against its own scalar path, alternately in the same way.
// Prints "ZPP key=value" lines for benchmarks/adam.sh.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "kernels/adamw_cpu.h"

namespace {

using Clock = std::chrono::steady_clock;

// Wall time of one run of fn(lo, hi) split over `threads` threads in contiguous ranges.
template <typename Fn>
double ParallelSeconds(int64_t n, int threads, Fn fn) {
  auto t0 = Clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back([=] { fn(n * t / threads, n * (t + 1) / threads); });
  for (auto& th : pool) th.join();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// STREAM triad a = b + s*c over doubles; bytes/s counting 24 per element, best of `reps`.
double TriadBytesPerSecond(int64_t n, int threads, int reps) {
  std::vector<double> va(n, 0.0), vb(n, 1.0), vc(n, 2.0);
  double* __restrict a = va.data();
  const double* __restrict b = vb.data();
  const double* __restrict c = vc.data();
  double best = 1e300;
  for (int r = 0; r < reps; ++r) {
    best = std::min(best, ParallelSeconds(n, threads, [=](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) a[i] = b[i] + 3.0 * c[i];
    }));
  }
  if (a[n / 2] != 7.0) std::abort();
  return 24.0 * n / best;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace zeropp::kernels;
  const int64_t n = argc > 1 ? std::atoll(argv[1]) : (int64_t{1} << 26);
  const int reps = argc > 2 ? std::atoi(argv[2]) : 10;
  const int threads = argc > 3 ? std::atoi(argv[3]) : static_cast<int>(std::thread::hardware_concurrency());
  std::printf("ZPP triad_gbs=%.3f threads=%d (information only)\n", TriadBytesPerSecond(n, threads, reps) / 1e9,
              threads);
  std::vector<float> p(n, 0.5f), g(n, 0.01f), m(n, 0.f), v(n, 0.f);
  float* __restrict pp = p.data();
  const float* __restrict gp = g.data();
  float* __restrict mp = m.data();
  float* __restrict vp = v.data();
  AdamWArgs a;
  a.param = pp;
  a.grad = gp;
  a.exp_avg = mp;
  a.exp_avg_sq = vp;
  a.n = n;
  AdamWHyper h;
  const CpuPath path = BestCpuPath();
  std::vector<double> bound_s, ours_s;
  for (int r = 0; r < reps; ++r) {
    bound_s.push_back(ParallelSeconds(n, threads, [=](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        mp[i] += gp[i];
        vp[i] += gp[i];
        pp[i] += mp[i] + vp[i];
      }
    }));
    std::fill(p.begin(), p.end(), 0.5f);
    std::fill(m.begin(), m.end(), 0.f);
    std::fill(v.begin(), v.end(), 0.f);
    h.step = r + 1;
    auto t0 = Clock::now();
    AdamWCpu(a, h, path, threads);
    ours_s.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  // n items over the best, median and worst seconds, in units of `per` (1e6: Mparam/s, 1e9: Gvalue/s).
  auto report = [&](const char* key, const std::vector<double>& s, double per = 1e6, const char* unit = "mparams") {
    const int d = per > 1e6 ? 3 : 1;  // decimals
    std::printf("ZPP %s_%s_per_s=%.*f median=%.*f worst=%.*f reps=%d threads=%d\n", key, unit, d,
                n / *std::min_element(s.begin(), s.end()) / per, d, n / Median(s) / per, d,
                n / *std::max_element(s.begin(), s.end()) / per, reps, threads);
  };
  report("pattern", bound_s);
  std::printf("ZPP path=%s\n", CpuPathName(path));
  report("zeropp", ours_s);

  // The gradient norm's pass over n bf16 values (an offloaded bf16 gradient shard), beside the
  // memory bound of a read-only pass over the same bytes (a sum of 64-bit words, four partial sums:
  // trivial arithmetic), and the scalar path in the same run. Alternating, `reps` times each.
  std::vector<uint16_t> gb(n);
  CastFloatToBf16(g.data(), gb.data(), n);
  const uint16_t* gbp = gb.data();
  std::atomic<uint64_t> checksum{0};
  std::atomic<uint64_t>* sum = &checksum;
  std::vector<double> read_s, norm_s, scalar_s;
  double norm = 0, scalar = 0;
  for (int r = 0; r < reps; ++r) {
    read_s.push_back(ParallelSeconds(n / 4, threads, [=](int64_t lo, int64_t hi) {
      const uint64_t* w = reinterpret_cast<const uint64_t*>(gbp);
      uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      int64_t i = lo;
      for (; i + 4 <= hi; i += 4) s0 += w[i], s1 += w[i + 1], s2 += w[i + 2], s3 += w[i + 3];
      for (; i < hi; ++i) s0 += w[i];
      sum->fetch_add(s0 + s1 + s2 + s3, std::memory_order_relaxed);
    }));
    auto t0 = Clock::now();
    norm = SumOfSquaresBf16(gbp, n, threads, path);
    norm_s.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    t0 = Clock::now();
    scalar = SumOfSquaresBf16(gbp, n, threads, CpuPath::kScalar);
    scalar_s.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  if (norm != scalar) {
    std::fprintf(stderr, "adam_bench: the %s norm (%.17g) differs from the scalar one (%.17g)\n", CpuPathName(path),
                 norm, scalar);
    return 1;
  }
  report("norm_read_pattern", read_s, 1e9, "gvalues");
  report("norm_zeropp", norm_s, 1e9, "gvalues");
  report("norm_scalar", scalar_s, 1e9, "gvalues");
  // Printed, so the read pass cannot be optimised away.
  std::printf("ZPP norm_read_checksum=%llu (information only)\n", static_cast<unsigned long long>(checksum.load()));
  return 0;
}
