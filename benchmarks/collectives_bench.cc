// collectives_bench: nccl-tests-style sweep of zeropp's collectives on the current backend.
// Run under the launcher (./zpp collectives --nproc N). For each operation and size from 1 KiB to
// --max-bytes it prints time per operation, algorithm bandwidth (S/t), bus bandwidth (algbw times
// the algorithm's factor), bytes sent per rank from zeropp's counters, and bytes actually put on
// the loopback interface per rank (from /proc/net/dev), beside the loopback TCP bound measured in
// the same run. Ends with RESULT lines. Also prints P2P_CPU (the CPU one small point-to-point
// message takes each side). With --comm-cpu-only it prints only COMM_CPU: the compute a rank loses
// per byte it sends in bulk ring collectives (MeasureCommCpu).
#include <ATen/TensorOperators.h>
#include <ATen/ops/full.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmarks/ping_pong.h"
#include "zeropp/cli/loopback_bound.h"
#include "zeropp/cli/proc_status.h"
#include "zeropp/backend_factory.h"
#include "zeropp/cli/cli_main.h"
#include "zeropp/process_groups.h"

namespace zeropp {
namespace {

using Clock = std::chrono::steady_clock;

struct Row {
  std::string op;
  int64_t bytes;
  double secs;
  double busbw;
  double counted_per_rank;
  double wire_per_rank;
};

// What bulk communication costs the computation beside it on a CPU box: the compute a rank loses
// per byte it sends, as the planner charges it (comm_cpu_gbps: bytes per second of lost compute).
// Every rank multiplies 256 x 256 matrices on its main thread while a second thread runs ring
// all-gathers and reduce-scatters of 1, 4 and 16 MiB (up to max_bytes), 64 MiB of each size; the
// multiplications go on for as long again after the communication ends. Run with as many ranks as
// training puts on the box, the cores computing (one per rank at most) lose their number x
// (1 - r_with / r_after) x the communication's time, r being the ranks' summed rate of
// multiplications while it runs and after: the communication's threads, wake-ups and copies, the
// kernel's network stack included. Both rates come from the same few seconds, so the box's drift
// (several percent a minute here) mostly cancels. Nine passes; rank 0 prints the median pass's bytes
// sent per second of lost compute.
void MeasureCommCpu(Communicator& ring, int64_t max_bytes) {
  const int n = ring.size();
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const double computing = std::min<double>(cores, n);  // one compute thread per rank
  std::vector<std::pair<at::Tensor, at::Tensor>> bufs;  // (gathered, shard) per size
  for (int64_t bytes = 1 << 20; bytes <= std::min<int64_t>(max_bytes, 16 << 20); bytes *= 4) {
    bufs.emplace_back(at::zeros({bytes / 4 / n * n}), at::full({bytes / 4 / n}, 1.0f));
  }
  if (bufs.empty()) return;
  auto communicate = [&] {
    for (auto& [full, shard] : bufs) {
      const int64_t iters = std::max<int64_t>(1, (64ll << 20) / full.nbytes());
      for (int64_t k = 0; k < iters; ++k) {
        ring.AllGather(full, shard)->Wait();
        ring.ReduceScatter(shard, full)->Wait();
      }
    }
  };
  const at::Tensor a = at::full({256, 256}, 0.5f), b = at::full({256, 256}, 0.25f);
  communicate();  // warm-up
  const auto sent = [&] {
    return ring.Stats()[OpKind::kAllGather].bytes_sent + ring.Stats()[OpKind::kReduceScatter].bytes_sent;
  };
  constexpr int kPasses = 9;
  std::vector<double> rates;  // per pass: bytes sent per second of compute lost
  double comm_total = 0, lost_total = 0, bytes_total = 0;
  for (int pass = 0; pass < kPasses; ++pass) {
    ring.Barrier()->Wait();
    const auto sent0 = sent();
    std::atomic<bool> done{false};
    const auto t0 = Clock::now();
    std::thread comm([&] {
      communicate();
      done = true;
    });
    int64_t with = 0, after = 0;
    while (!done) {
      (void)at::mm(a, b);
      ++with;
    }
    const double comm_s = std::chrono::duration<double>(Clock::now() - t0).count();
    comm.join();
    const auto t1 = Clock::now();
    double after_s = 0;
    while (after_s < comm_s) {
      (void)at::mm(a, b);
      ++after;
      after_s = std::chrono::duration<double>(Clock::now() - t1).count();
    }
    // The ranks' summed rates (multiplications per second) with the communication and after it.
    at::Tensor r = at::tensor({with / comm_s, after / after_s, comm_s}, at::kDouble);
    ring.AllReduce(r)->Wait();
    const double r_with = r[0].item<double>(), r_after = r[1].item<double>(), secs = r[2].item<double>() / n;
    const double lost = computing * std::max(0.0, 1 - r_with / r_after) * secs;
    const double pass_bytes = static_cast<double>(sent() - sent0) * n;  // a ring: every rank sends the same
    // A pass that lost no compute (spare cores ran the communication): an unbounded rate.
    rates.push_back(lost > 0 ? pass_bytes / lost : std::numeric_limits<double>::infinity());
    comm_total += secs, lost_total += lost, bytes_total += pass_bytes;
  }
  std::sort(rates.begin(), rates.end());
  const double rate = rates[kPasses / 2];
  if (ring.rank() == 0) {
    std::printf("COMM_CPU gbps=%.4f ns_per_byte=%.3f (%d ranks on %u cores computing 256x256 products: ring all-gathers "
                "and reduce-scatters of 1-%lld MiB, %.0f B sent in %.2f s a pass, took %.2f core-s of their compute; the "
                "median of %d passes, of %.3f-%.3f GB/s)\n",
                rate / 1e9, 1e9 / rate, n, cores,
                static_cast<long long>(std::min<int64_t>(max_bytes, 16 << 20) >> 20), bytes_total / kPasses,
                comm_total / kPasses, lost_total / kPasses, kPasses, rates.front() / 1e9, rates.back() / 1e9);
    std::fflush(stdout);
  }
}

int Main(int argc, char** argv) {
  int64_t max_bytes = 256ll << 20;
  bool comm_cpu_only = false;
  for (int i = 1; i < argc; ++i) {
    if (i + 1 < argc && std::strcmp(argv[i], "--max-bytes") == 0) max_bytes = std::atoll(argv[i + 1]);
    if (std::strcmp(argv[i], "--comm-cpu-only") == 0) comm_cpu_only = true;
  }
  DistEnv env = DistEnv::FromEnvironment();
  const int n = env.world_size;
  ProcessGroupsOptions opts;
  opts.comm.timeout = std::chrono::milliseconds(300000);
  auto groups = ProcessGroups::Create(env, ParallelConfig{1, n, 1, DpMode::kDp}, opts);
  Communicator& ring = groups->world();
  CommOptions native_opts = opts.comm;
  native_opts.algorithm = Algorithm::kNative;
  std::vector<int> all(n);
  for (int i = 0; i < n; ++i) all[i] = i;
  Communicator native("native", env.rank, all,
                      c10::make_intrusive<c10d::PrefixStore>("bench/native/comm", groups->store()),
                      MakeBackend("gloo", c10::make_intrusive<c10d::PrefixStore>("bench/native/pg", groups->store()),
                                  env.rank, n, opts.comm.timeout),
                      native_opts);
  const bool lead = env.rank == 0;
  if (comm_cpu_only) {
    MeasureCommCpu(ring, max_bytes);
    ring.Barrier()->Wait();
    return 0;
  }
  double loopback = 0;  // the bound: best of three single-stream loopback transfers
  for (int k = 0; lead && k < 3; ++k) loopback = std::max(loopback, cli::MeasureLoopbackBytesPerSec(1ll << 30, 1 << 20));
  // More ranks than cores: ranks share cores, so times and bandwidths mean less; every RESULT line
  // says so (the byte counts are exact either way).
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  const std::string tag = env.local_world_size > cores ? absl::StrCat("_oversubscribed_", env.local_world_size,
                                                                      "ranks_", cores, "cores")
                                                       : "";
  ring.Barrier()->Wait();
  if (lead) {
    std::printf("# zeropp collectives: %d ranks on %d cores, backend %s, loopback TCP bound %.2f GB/s (1 stream, best "
                "of 3); times are means over up to 20 operations after one warm-up, the slowest rank's\n",
                n, cores, ring.backend_name().c_str(), loopback / 1e9);
    std::printf("# %-22s %12s %12s %10s %10s %14s %14s\n", "op", "bytes", "time_us", "algbw_GB/s",
                "busbw_GB/s", "counted_B/rank", "wire_B/rank");
  }
  const double ag_factor = double(n - 1) / n, ar_factor = 2.0 * (n - 1) / n;
  struct Op {
    std::string name;
    double factor;
    Communicator* comm;
    OpKind kind;
    std::function<std::shared_ptr<CommWork>(Communicator&, at::Tensor&, at::Tensor&)> run;
    std::function<void(int64_t, at::Tensor&, at::Tensor&)> make;  // numel of S -> (a, b)
  };
  auto make_gather = [n](int64_t numel, at::Tensor& out, at::Tensor& in) {
    in = at::full({numel / n}, 1.0f);
    out = at::zeros({numel / n * n});
  };
  auto make_scatter = [n](int64_t numel, at::Tensor& out, at::Tensor& in) {
    in = at::full({numel / n * n}, 1.0f);
    out = at::zeros({numel / n});
  };
  auto make_inplace = [](int64_t numel, at::Tensor& a, at::Tensor& b) {
    a = at::full({numel}, 1.0f);
    b = at::zeros({numel});
  };
  auto ag = [](Communicator& c, at::Tensor& o, at::Tensor& i) { return c.AllGather(o, i); };
  auto rs = [](Communicator& c, at::Tensor& o, at::Tensor& i) { return c.ReduceScatter(o, i); };
  auto ar = [](Communicator& c, at::Tensor& a, at::Tensor&) { return c.AllReduce(a); };
  std::vector<Op> ops = {
      {"all_gather(ring)", ag_factor, &ring, OpKind::kAllGather, ag, make_gather},
      {"all_gather(gloo)", ag_factor, &native, OpKind::kAllGather, ag, make_gather},
      {"reduce_scatter(ring)", ag_factor, &ring, OpKind::kReduceScatter, rs, make_scatter},
      {"reduce_scatter(gloo)", ag_factor, &native, OpKind::kReduceScatter, rs, make_scatter},
      {"all_reduce(ring)", ar_factor, &ring, OpKind::kAllReduce, ar, make_inplace},
      {"all_reduce(gloo)", ar_factor, &native, OpKind::kAllReduce, ar, make_inplace},
  };
  std::vector<Row> rows;
  auto measure = [&](const std::string& name, double factor, int64_t bytes, int iters,
                     const std::function<void()>& once, const std::function<int64_t()>& counted) {
    once();  // warm-up
    ring.Barrier()->Wait();
    int64_t lo0 = cli::LoopbackTxBytes();
    int64_t c0 = counted();
    auto t0 = Clock::now();
    for (int k = 0; k < iters; ++k) once();
    double secs = std::chrono::duration<double>(Clock::now() - t0).count() / iters;
    int64_t c1 = counted();
    ring.Barrier()->Wait();
    int64_t lo1 = cli::LoopbackTxBytes();
    secs = MaxOverRanks(ring, secs);
    Row r{name, bytes, secs, bytes / secs * factor / 1e9, double(c1 - c0) / iters,
          double(lo1 - lo0) / iters / n};
    if (lead) {
      std::printf("  %-22s %12lld %12.1f %10.3f %10.3f %14.0f %14.0f\n", name.c_str(), (long long)bytes,
                  secs * 1e6, bytes / secs / 1e9, r.busbw, r.counted_per_rank, r.wire_per_rank);
      std::fflush(stdout);
    }
    rows.push_back(r);
  };
  for (const Op& op : ops) {
    for (int64_t bytes = 1024; bytes <= max_bytes; bytes *= 4) {
      int64_t numel = bytes / 4;
      at::Tensor a, b;
      op.make(numel, a, b);
      int iters = static_cast<int>(std::max<int64_t>(2, std::min<int64_t>(20, (64ll << 20) / bytes)));
      measure(op.name, op.factor, bytes, iters, [&] { op.run(*op.comm, a, b)->Wait(); },
              [&] { return op.comm->Stats()[op.kind].bytes_sent; });
    }
  }
  // send/recv: every rank sends S to the next and receives S from the previous.
  for (int64_t bytes = 1024; bytes <= max_bytes; bytes *= 4) {
    at::Tensor out = at::full({bytes / 4}, 1.0f), in = at::zeros({bytes / 4});
    int iters = static_cast<int>(std::max<int64_t>(2, std::min<int64_t>(20, (64ll << 20) / bytes)));
    measure("sendrecv", 1.0, bytes, iters,
            [&] {
              auto r = ring.Recv(in, (ring.rank() + n - 1) % n);
              auto s = ring.Send(out, (ring.rank() + 1) % n);
              r->Wait();
              s->Wait();
            },
            [&] { return ring.Stats()[OpKind::kSend].bytes_sent; });
  }
  // The CPU one point-to-point message takes each side (send or receive, the transport's threads
  // included): ranks 0 and 1 bounce a 64-byte tensor, the rest wait. The planner charges it per
  // pipeline message on a CPU box (comm_cpu_us_per_message).
  if (n >= 2) {
    at::Tensor msg = at::zeros({16});
    constexpr int kBounces = 2000;
    auto process_cpu_s = [] { return cli::ProcessCpuNs() * 1e-9; };  // the transport's threads included
    PingPong(ring, msg, 100);  // warm-up
    ring.Barrier()->Wait();
    const double cpu0 = process_cpu_s();
    PingPong(ring, msg, kBounces);
    const double cpu = ring.rank() < 2 ? (process_cpu_s() - cpu0) / (2.0 * kBounces) : 0.0;
    const double worst = MaxOverRanks(ring, cpu);
    if (lead) std::printf("P2P_CPU cpu_us_per_message=%.1f (a 64-byte message each way %d times, the busier side)\n",
                          worst * 1e6, kBounces);
  }
  if (lead) {
    auto find = [&](const std::string& name, int64_t bytes) -> const Row& {
      for (const auto& r : rows)
        if (r.op == name && r.bytes == bytes) return r;
      return rows.front();
    };
    int64_t big = 1024;
    while (big * 4 <= max_bytes) big *= 4;
    const Row& rr = find("reduce_scatter(ring)", big);
    const Row& rn = find("reduce_scatter(gloo)", big);
    const Row& ar = find("all_reduce(ring)", big);
    double theory = double(big) * (n - 1) / n;
    auto verdict = [](bool ok) { return ok ? "MET" : "MISSED"; };
    double wire_ratio = rr.wire_per_rank / theory;
    std::printf("# reduce_scatter of %lld B per rank: ring %.0f wire B/rank in %.1f ms; gloo %.0f wire B/rank in %.1f ms\n",
                (long long)big, rr.wire_per_rank, rr.secs * 1e3, rn.wire_per_rank, rn.secs * 1e3);
    std::printf("RESULT collectives rs_ring_wire_bytes_per_rank%s=%.0f B reference=%.0f ratio=%.3f target=1.10 %s\n",
                tag.c_str(), rr.wire_per_rank, theory, wire_ratio, verdict(wire_ratio <= 1.10));
    double gloo_ratio = rn.wire_per_rank / theory;
    std::printf("RESULT collectives rs_gloo_native_wire_bytes_per_rank%s=%.0f B reference=%.0f ratio=%.3f target=1.10 %s\n",
                tag.c_str(), rn.wire_per_rank, theory, gloo_ratio, verdict(gloo_ratio <= 1.10));
    double speed = rn.secs / rr.secs;
    std::printf("RESULT collectives rs_ring_speedup_vs_gloo%s=%.3f x reference=1.0 ratio=%.3f target=1.00 %s\n",
                tag.c_str(), speed, speed, verdict(speed >= 1.0));
    double bw_ratio = ar.busbw * 1e9 / loopback;
    std::printf("RESULT collectives all_reduce_ring_busbw%s=%.3f GB/s reference=%.3f ratio=%.3f target=0.50 %s\n",
                tag.c_str(), ar.busbw, loopback / 1e9, bw_ratio, verdict(bw_ratio >= 0.5));
  }
  ring.Barrier()->Wait();
  return 0;
}

}  // namespace
}  // namespace zeropp

int main(int argc, char** argv) { return zeropp::cli::RunMain(argc, argv, zeropp::Main); }
