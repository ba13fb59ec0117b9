#include "scheduler/planner/planner.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace zeropp {
namespace planner {
namespace {

std::vector<int> Divisors(int n) {
  std::vector<int> d;
  for (int i = 1; i <= n; ++i) {
    if (n % i == 0) d.push_back(i);
  }
  return d;
}

bool Has(const std::vector<Design>& v, Design d) { return std::find(v.begin(), v.end(), d) != v.end(); }

}  // namespace

std::string CheckRequest(const PlanRequest& q) {
  if (q.devices < 1) return absl::StrCat("--gpus: got ", q.devices, ", expected a whole number >= 1");
  if (q.devices > 1 && q.devices > q.hardware.devices_per_node && q.devices % q.hardware.devices_per_node != 0) {
    return absl::StrCat("--gpus: got ", q.devices, ", expected a multiple of the ", q.hardware.devices_per_node,
                        " devices per node of ", q.hardware.name, " (or at most one node)");
  }
  if (q.global_batch < 1) return absl::StrCat("--global-batch: got ", q.global_batch, ", expected >= 1 sequences");
  const std::string bad = q.model.Validate();
  if (!bad.empty()) return bad;
  return "";
}

std::vector<Layout> EnumerateLayouts(const PlanRequest& q) {
  const int n = q.devices, g = std::min(q.hardware.devices_per_node, q.devices);
  std::vector<Layout> out;
  auto add = [&](Layout l) {
    PartitionAsExecuted(q.model, &l);  // pipelines: the layers of each chunk as the executor splits them
    if (l.Check(q.model, n, q.hardware.devices_per_node, q.global_batch).empty()) out.push_back(l);
  };
  for (int b : q.micro_batches) {
    if (Has(q.designs, Design::kZero3)) {
      Layout l;
      l.design = Design::kZero3;
      l.schedule = "zero3";
      l.micro_batch = b;
      l.zero = n;
      add(l);
      if (n > g) {
        l.zero = g;
        l.dp = n / g;
        add(l);
      }
    }
    for (int z : Divisors(g)) {
      if (z < 2 && n > 1) continue;
      for (int pp : Divisors(n / z)) {
        if (pp < 2) continue;
        const int dp = n / (z * pp);
        for (int zero1 = 0; zero1 <= (dp > 1 ? 1 : 0); ++zero1) {
          if (Has(q.designs, Design::kZeroPP)) {
            for (int v : q.chunks) {
              const int m = q.global_batch / std::max(1, dp * z * b);
              for (int u = 2; u <= m; u *= 2) {
                Layout l;
                l.design = Design::kZeroPP;
                l.schedule = "zeropp";
                l.pp = pp, l.zero = z, l.dp = dp, l.v = v, l.u = u, l.micro_batch = b, l.zero1 = zero1;
                add(l);
              }
            }
          }
          if (Has(q.designs, Design::kPipeFsdp)) {
            for (const char* sched : {"1f1b", "interleaved", "zb-h1"}) {
              Layout l;
              l.design = Design::kPipeFsdp;
              l.schedule = sched;
              l.pp = pp, l.zero = z, l.dp = dp, l.micro_batch = b, l.zero1 = zero1;
              l.v = l.schedule == "interleaved" ? 2 : 1;
              add(l);
            }
          }
        }
      }
    }
    if (Has(q.designs, Design::k3D)) {
      for (int tp : Divisors(g)) {
        for (int pp : Divisors(n / tp)) {
          const int dp = n / (tp * pp);
          for (const char* sched : {"1f1b", "interleaved", "zb-h1"}) {
            if (pp == 1 && std::string(sched) != "1f1b") continue;
            for (int sp = 0; sp <= (tp > 1 ? 1 : 0); ++sp) {
              for (int zero1 = 0; zero1 <= (dp > 1 ? 1 : 0); ++zero1) {
                for (int outer = 0; outer <= (dp > 1 && pp > 1 ? 1 : 0); ++outer) {
                  Layout l;
                  l.design = Design::k3D;
                  l.schedule = sched;
                  l.tp = tp, l.pp = pp, l.dp = dp, l.micro_batch = b, l.sequence_parallel = sp, l.zero1 = zero1;
                  l.dp_outer = outer;
                  l.v = l.schedule == "interleaved" ? 2 : 1;
                  add(l);
                }
              }
            }
          }
        }
      }
    }
  }
  return out;
}

PlanResult Plan(const PlanRequest& q) {
  const std::string bad = CheckRequest(q);
  if (!bad.empty()) throw std::invalid_argument(bad);
  PlanResult res;
  const double capacity = q.hardware.memory_bytes;
  // A node's host memory is shared by the ranks on it: all of its devices, or fewer where the
  // job is smaller than a node (one GPU gets the whole host).
  const double host_per_device =
      q.hardware.host_capacity_bytes / std::max(1, std::min(q.hardware.devices_per_node, q.devices));
  // Each layout is tried on its own (pure functions of the request), on up to q.threads threads;
  // the outcomes are merged in enumeration order, so the result is the same on any thread count.
  struct Outcome {
    int considered = 0, over_memory = 0;
    double smallest_memory = 0;
    std::string smallest_layout;
    std::optional<Prediction> fitting;
  };
  const std::vector<Layout> layouts = EnumerateLayouts(q);
  std::vector<Outcome> outcomes(layouts.size());
  auto evaluate = [&](size_t i) {
    Outcome& out = outcomes[i];
    Layout l = layouts[i];
    // The first way that fits, in this order (each moves more off the device, and as a rule costs
    // more): as it is, then (schedules that defer weight passes, ZeroPP and FSDP-in-pipeline's ZB-H1)
    // fewer of them deferred at once, then recomputing, then recomputing with fewer deferred, then
    // offloading (ZeRO designs) the optimizer state to host
    // memory and then to NVMe, each without and with recomputation; then (ZeRO-3, recomputing) the
    // recomputed units' saved inputs with it; then the parameters too (ZeRO-Infinity: each use
    // stages the rank's shard, or on one rank the whole unit, from the tier), and at last (ZeRO-3)
    // everything.
    struct Try {
      Offload optimizer, params, activations;
      bool recompute;
      int max_deferred_w = -1;
    };
    constexpr Offload kN = Offload::kNone, kC = Offload::kCpu, kV = Offload::kNvme;
    std::vector<Try> tries = {{kN, kN, kN, false}};
    // A deferred W keeps its chunk's weight-pass inputs and output gradients: at long sequences
    // they outweigh the stashed activations. Caps halve from the schedule's own deferral (ZeroPP:
    // up to 2pp - 1 a rank, ZEROPP.md; ZB-H1: pp - 1) down to none.
    std::vector<int> caps;
    // Not the 3D baseline's: Megatron-LM's ZB-H1 has no such cap.
    if (l.DefersWeightPasses() && l.design != Design::k3D) {
      for (int c = (l.design == Design::kZeroPP ? 2 * l.pp - 1 : l.pp - 1) / 2;; c /= 2) {
        caps.push_back(c);
        if (c == 0) break;
      }
    }
    for (int c : caps) tries.push_back({kN, kN, kN, false, c});
    tries.push_back({kN, kN, kN, true});
    for (int c : caps) tries.push_back({kN, kN, kN, true, c});
    if (l.design != Design::k3D && q.offload) {
      const bool zero3 = l.design == Design::kZero3;
      tries.insert(tries.end(), {{kC, kN, kN, false}, {kC, kN, kN, true}, {kV, kN, kN, false}, {kV, kN, kN, true}});
      if (zero3) tries.insert(tries.end(), {{kC, kN, kC, true}, {kV, kN, kV, true}});
      tries.insert(tries.end(), {{kC, kC, kN, false}, {kC, kC, kN, true}, {kV, kV, kN, false}, {kV, kV, kN, true}});
      if (zero3) tries.insert(tries.end(), {{kC, kC, kC, true}, {kV, kV, kV, true}});
    }
    for (const Try& t : tries) {
      l.offload = t.optimizer;
      l.params_offload = t.params;
      l.activations_offload = t.activations;
      l.recompute = t.recompute;
      l.max_deferred_w = t.max_deferred_w;
      MemoryBreakdown mem;
      try {
        mem = PredictMemory(q.model, l, q.hardware, q.global_batch);
      } catch (const std::invalid_argument&) {
        break;  // a generator refused these numbers (e.g. ZeroPP's unit constraints)
      }
      out.considered++;
      if (out.smallest_memory == 0 || mem.Total() < out.smallest_memory) {
        out.smallest_memory = mem.Total();
        out.smallest_layout = l.Name();
      }
      if (mem.Total() > capacity || (host_per_device > 0 && mem.host > host_per_device)) {
        out.over_memory++;
        continue;
      }
      out.fitting = Predict(q.model, l, q.hardware, q.global_batch);
      break;
    }
  };
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const size_t threads = std::min<size_t>(layouts.size(), q.threads > 0 ? q.threads : cores);
  std::atomic<size_t> next{0};
  std::vector<std::exception_ptr> errors(std::max<size_t>(threads, 1));
  auto work = [&](size_t w) {
    try {
      for (size_t i = next++; i < layouts.size(); i = next++) evaluate(i);
    } catch (...) {
      errors[w] = std::current_exception();
      next = layouts.size();  // the others stop at their next layout
    }
  };
  std::vector<std::thread> pool;
  for (size_t w = 1; w < threads; ++w) pool.emplace_back(work, w);
  work(0);
  for (std::thread& t : pool) t.join();
  for (const std::exception_ptr& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  for (Outcome& o : outcomes) {
    res.considered += o.considered;
    res.over_memory += o.over_memory;
    if (o.considered > 0 && (res.smallest_memory == 0 || o.smallest_memory < res.smallest_memory)) {
      res.smallest_memory = o.smallest_memory;
      res.smallest_layout = o.smallest_layout;
    }
    if (o.fitting) res.fitting.push_back(std::move(*o.fitting));
  }
  std::sort(res.fitting.begin(), res.fitting.end(),
            [](const Prediction& a, const Prediction& b) { return a.step_s < b.step_s; });
  return res;
}

const Prediction* BestOf(const PlanResult& r, Design d) {
  for (const Prediction& p : r.fitting) {
    if (p.layout.design == d) return &p;
  }
  return nullptr;
}

}  // namespace planner
}  // namespace zeropp
