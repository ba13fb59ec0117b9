// offload_step_bench: one optimizer step with everything on NVMe (fp32 master, gradient and Adam
// moments of U units), pipelined the way the engine runs it (read unit i+1, update unit i, write
// unit i-1), against the I/O alone and the AdamW compute alone, measured in the same run.
//   offload_step_bench DIR [UNITS] [PARAMS_PER_UNIT] [REPS]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <ATen/ops/full.h>

#include "kernels/adamw_cpu.h"
#include "offload/host_pool.h"
#include "offload/io_engine.h"
#include "offload/swap_manager.h"

using Clock = std::chrono::steady_clock;
using namespace zeropp;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: offload_step_bench DIR [UNITS] [PARAMS_PER_UNIT] [REPS]\n");
    return 2;
  }
  const int units = argc > 2 ? std::atoi(argv[2]) : 16;
  const int64_t n = argc > 3 ? std::atoll(argv[3]) : (int64_t{16} << 20);
  const int reps = argc > 4 ? std::max(1, std::atoi(argv[4])) : 10;
  auto io = offload::IoEngine::Create({});
  offload::HostPool pool(int64_t{8} * n * 4 * 4);
  offload::SwapManager swap(io.get(), &pool, argv[1]);
  struct U {
    int master, grad, moments;
  };
  std::vector<U> us;
  for (int i = 0; i < units; ++i) {
    U u;
    u.master = swap.Register("m" + std::to_string(i), at::full({n}, 0.5f), offload::Tier::kNvme);
    u.grad = swap.Register("g" + std::to_string(i), at::full({n}, 0.01f), offload::Tier::kNvme);
    u.moments = swap.Register("s" + std::to_string(i), at::full({2, n}, 0.0f), offload::Tier::kNvme);
    us.push_back(u);
  }
  swap.Flush();
  kernels::AdamWHyper h;
  const int threads = 2;
  auto update = [&](float* p, const float* g, float* m) {
    kernels::AdamWArgs a;
    a.param = p;
    a.grad = g;
    a.exp_avg = m;
    a.exp_avg_sq = m + n;
    a.n = n;
    kernels::AdamWCpu(a, h, kernels::BestCpuPath(), threads);
  };
  // Each repetition measures, in turn, the compute alone (the same updates on resident buffers),
  // the I/O alone (read everything, write master and moments back) and the offloaded step
  // (pipelined), so drift falls on all three alike; means over `reps` with the spread.
  std::vector<float> p(n, 0.5f), g(n, 0.01f), m(2 * n, 0.f);
  auto seconds_since = [](Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  std::vector<double> compute_s, io_s, step_s;
  for (int rep = 0; rep < reps; ++rep) {
    auto t0 = Clock::now();
    for (int i = 0; i < units; ++i) update(p.data(), g.data(), m.data());
    compute_s.push_back(seconds_since(t0));
    t0 = Clock::now();
    for (int i = 0; i < units; ++i) {
      for (int id : {us[i].grad, us[i].master, us[i].moments}) swap.Prefetch(id);
      for (int id : {us[i].grad, us[i].master, us[i].moments}) swap.Acquire(id);
      swap.Release(us[i].grad, false);
      swap.Release(us[i].master, true);
      swap.Release(us[i].moments, true);
    }
    swap.Flush();
    io_s.push_back(seconds_since(t0));
    t0 = Clock::now();
    for (int id : {us[0].grad, us[0].master, us[0].moments}) swap.Prefetch(id);
    for (int i = 0; i < units; ++i) {
      if (i + 1 < units) {
        for (int id : {us[i + 1].grad, us[i + 1].master, us[i + 1].moments}) swap.Prefetch(id);
      }
      at::Tensor gt = swap.Acquire(us[i].grad), mt = swap.Acquire(us[i].master), st = swap.Acquire(us[i].moments);
      update(mt.data_ptr<float>(), gt.data_ptr<float>(), st.data_ptr<float>());
      swap.Release(us[i].grad, false);
      swap.Release(us[i].master, true);
      swap.Release(us[i].moments, true);
    }
    swap.Flush();
    step_s.push_back(seconds_since(t0));
  }
  struct Stat {
    double mean = 0, sd = 0;
  };
  auto stat = [](const std::vector<double>& v) {
    Stat r;
    for (double x : v) r.mean += x / v.size();
    for (double x : v) r.sd += (x - r.mean) * (x - r.mean) / std::max<size_t>(1, v.size() - 1);
    r.sd = std::sqrt(r.sd);
    return r;
  };
  const Stat c = stat(compute_s), o = stat(io_s), st = stat(step_s);
  const double bound = std::max(o.mean, c.mean);
  std::printf("# %d units x %lld params (%.2f GB of state on nvme, engine %s), AdamW %d threads; means over %d "
              "repetitions (sd): compute alone %.3f s (%.3f), I/O alone %.3f s (%.3f), offloaded step %.3f s (%.3f)\n",
              units, (long long)n, units * n * 16.0 / 1e9, io->name(), threads, reps, c.mean, c.sd, o.mean, o.sd,
              st.mean, st.sd);
  std::printf("RESULT offload-step step_s=%.3f s reference=%.3f ratio=%.3f target=1.20 %s\n", st.mean, bound,
              st.mean / bound, st.mean / bound <= 1.2 ? "MET" : "MISSED");
  return 0;
}
