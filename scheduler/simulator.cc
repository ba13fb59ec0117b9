#include "scheduler/simulator.h"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace zeropp {
namespace scheduler {
namespace {

using Key = std::tuple<int, int, int, int, int>;  // (is_grad, src, dst, sender chunk, mb)

bool IsGrad(ActionKind k) { return k == ActionKind::kSendGrad || k == ActionKind::kRecvGrad; }

}  // namespace

std::string SimResult::ChromeTraceJson() const { return scheduler::ChromeTraceJson(events); }

SimResult Simulate(const Schedule& s, const CostModel& cost) {
  const int pp = static_cast<int>(s.ranks.size());
  auto compute_share = [&](int vstage) {
    return vstage >= 0 && vstage < static_cast<int>(cost.chunk_compute_share.size()) ? cost.chunk_compute_share[vstage]
                                                                                     : 1.0 / s.v;
  };
  auto chunk_bytes = [&](int vstage) {
    return vstage >= 0 && vstage < static_cast<int>(cost.chunk_param_bytes.size()) ? cost.chunk_param_bytes[vstage]
                                                                                   : cost.stage_param_bytes / s.v;
  };
  const double shard_out = static_cast<double>(cost.zero - 1) / std::max(1, cost.zero);
  struct R {
    size_t pc = 0;
    double t = 0, comm_t = 0, busy = 0;
    std::map<int, double> gather_ready;
    std::map<std::pair<int, int>, double> act_ready, grad_ready;  // (own chunk, mb) -> arrival
    double gather_bytes = 0, reduce_bytes = 0, p2p_bytes = 0;
  };
  std::vector<R> st(pp);
  std::map<Key, double> arrivals;
  SimResult res;
  bool progress = true;
  while (progress) {
    progress = false;
    for (int r = 0; r < pp; ++r) {
      R& x = st[r];
      while (x.pc < s.ranks[r].size()) {
        const Action& a = s.ranks[r][x.pc];
        const std::string name = a.ToString();
        const bool whole_backward = cost.first_stage_whole_backward && a.chunk * pp + r == 0;
        const int vstage = a.chunk * pp + r;
        const double per_chunk = compute_share(vstage);
        const double gather_bytes = chunk_bytes(vstage) * shard_out;
        const bool has_extra = a.chunk >= 0 && vstage < static_cast<int>(cost.virtual_stage_extra.size());
        const CostModel::StageExtra extra = has_extra ? cost.virtual_stage_extra[vstage] : CostModel::StageExtra{};
        auto compute = [&](double seconds, const std::string& label = std::string(), bool wait_inputs = true,
                           double extra_s = 0) {
          double start = std::max(x.t, x.gather_ready.count(a.chunk) ? x.gather_ready[a.chunk] : 0.0);
          // A receive only posts; the computation that consumes it waits for the arrival.
          const std::pair<int, int> cm{a.chunk, a.mb};
          if (wait_inputs && a.kind == ActionKind::kForward && x.act_ready.count(cm)) {
            start = std::max(start, x.act_ready[cm]);
          }
          if (wait_inputs && (a.kind == ActionKind::kBackward || a.kind == ActionKind::kBackwardInput) &&
              x.grad_ready.count(cm)) {
            start = std::max(start, x.grad_ready[cm]);
          }
          const double scale = r < static_cast<int>(cost.rank_compute_scale.size()) ? cost.rank_compute_scale[r] : 1.0;
          x.t = start + (seconds * per_chunk + extra_s) * scale;
          x.busy += (seconds * per_chunk + extra_s) * scale;
          res.events.push_back({r, label.empty() ? name : label, "compute", start, x.t});
        };
        // A recomputed chunk runs its forward again at the start of B, before the gradient is
        // needed (the executor does the same, so the transfer overlaps it).
        auto recompute = [&] {
          if (s.Recompute(r, a.chunk)) compute(cost.forward_s, a.RecomputeName(), false);
        };
        // The CPU a transfer takes from this rank's compute (CostModel::comm_cpu_s_per_byte).
        auto steal_cpu = [&](double bytes) {
          const double cpu = bytes * cost.comm_cpu_s_per_byte;
          if (cpu <= 0) return;
          res.events.push_back({r, name + " (cpu)", "compute", x.t, x.t + cpu});
          x.t += cpu;
          x.busy += cpu;
        };
        auto on_comm = [&](double seconds, double* bytes_acc, double bytes) {
          double start = std::max(x.t, x.comm_t);
          x.comm_t = start + seconds;
          *bytes_acc += bytes;
          res.events.push_back({r, name, "comm", start, x.comm_t});
          steal_cpu(bytes);
          return x.comm_t;
        };
        bool blocked = false;
        switch (a.kind) {
          case ActionKind::kGather:
            x.gather_ready[a.chunk] = on_comm(
                cost.zero > 1 ? cost.intra.Time(gather_bytes) + chunk_bytes(vstage) / cost.copy_bytes_per_s : 0.0,
                &x.gather_bytes, gather_bytes);
            break;
          case ActionKind::kReduceGrad:
            on_comm(cost.intra.Time(gather_bytes), &x.reduce_bytes, gather_bytes);
            break;
          case ActionKind::kRelease:
            break;
          case ActionKind::kForward:
            compute(cost.forward_s, "", true, extra.forward_s);
            break;
          case ActionKind::kBackward:
            recompute();
            compute(cost.backward_s, "", true, extra.backward_input_s + extra.backward_weight_s);
            break;
          case ActionKind::kBackwardInput:
            recompute();
            compute(whole_backward ? cost.backward_s : cost.backward_input_s, "", true,
                    extra.backward_input_s + (whole_backward ? extra.backward_weight_s : 0.0));
            break;
          case ActionKind::kBackwardWeight:
            compute(whole_backward ? 0.0 : cost.backward_weight_s, "", true,
                    whole_backward ? 0.0 : extra.backward_weight_s);
            break;
          case ActionKind::kSendAct:
          case ActionKind::kSendGrad: {
            const double arrive = x.t + cost.inter.Time(cost.activation_bytes);
            arrivals[Key{IsGrad(a.kind), r, a.peer, a.chunk, a.mb}] = arrive;
            x.p2p_bytes += cost.activation_bytes;
            res.events.push_back({r, name, "p2p", x.t, arrive});
            steal_cpu(cost.activation_bytes);
            break;
          }
          case ActionKind::kRecvAct:
          case ActionKind::kRecvGrad: {
            auto it = arrivals.find(Key{IsGrad(a.kind), a.peer, r, a.chunk, a.mb});
            if (it == arrivals.end()) {
              blocked = true;
              break;
            }
            const int sender_stage = a.chunk * s.pp + a.peer;
            const int mine = IsGrad(a.kind) ? sender_stage - 1 : sender_stage + 1;
            (IsGrad(a.kind) ? x.grad_ready : x.act_ready)[{mine / s.pp, a.mb}] = it->second;
            arrivals.erase(it);
            break;
          }
          case ActionKind::kOptimizerStep: {
            const double start = std::max(x.t, x.comm_t);
            x.t = start + cost.optimizer_s;
            if (cost.optimizer_s > 0) res.events.push_back({r, name, "compute", start, x.t});
            break;
          }
        }
        if (blocked) break;
        x.pc++;
        progress = true;
      }
    }
  }
  double busy = 0;
  for (int r = 0; r < pp; ++r) {
    if (st[r].pc < s.ranks[r].size()) {
      throw std::invalid_argument(absl::StrCat("simulate ", s.name, ": rank ", r, " cannot proceed at #", st[r].pc, " ",
                                               s.ranks[r][st[r].pc].ToString(), " (validate the schedule first)"));
    }
    res.step_s = std::max(res.step_s, std::max(st[r].t, st[r].comm_t));
    res.busy_s.push_back(st[r].busy);
    busy += st[r].busy;
    res.gather_bytes_per_rank = std::max(res.gather_bytes_per_rank, st[r].gather_bytes);
    res.reduce_bytes_per_rank = std::max(res.reduce_bytes_per_rank, st[r].reduce_bytes);
    res.p2p_bytes_per_rank = std::max(res.p2p_bytes_per_rank, st[r].p2p_bytes);
  }
  res.bubble = busy > 0 ? (pp * (res.step_s - cost.optimizer_s) - busy) / busy : 0;
  return res;
}

}  // namespace scheduler
}  // namespace zeropp
