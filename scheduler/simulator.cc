#include "scheduler/simulator.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <stdexcept>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace zeropp {
namespace scheduler {
namespace {

using Key = std::tuple<int, int, int, int, int>;  // (is_grad, src, dst, sender chunk, mb)

bool IsGrad(ActionKind k) { return k == ActionKind::kSendGrad || k == ActionKind::kRecvGrad; }

// One stretch of a rank's compute stream: an action's computation, a recomputed forward, the CPU
// a transfer takes, or the optimizer step.
struct Work {
  std::string label;
  double seconds = 0;        // at a whole compute unit
  int chunk = -1, mb = -1;
  bool wait_gather = false;  // waits for its chunk's gather
  int wait_input = 0;        // 1: its forward's activation, 2: its backward's gradient, 0: none
  bool after_comm = false;   // waits for the comm stream to drain (the optimizer step)
  bool wait_transfer = false;  // a blocking send or receive (CostModel::blocking_p2p): its arrival
  Key transfer;
  bool shared = true;        // shares the box's cores (false: a blocking wait, or the step tail)
  bool traced = true;
  // A computation with blocking collectives runs as two works: its compute, then the wait (no
  // core), traced together as one event when the wait ends.
  enum class Part { kWhole, kCompute, kWait } part = Part::kWhole;
};

// The send action of a transfer, as the trace names it.
std::string TransferName(const Key& k) {
  const ActionKind kind = std::get<0>(k) ? ActionKind::kSendGrad : ActionKind::kSendAct;
  return Action{kind, std::get<3>(k), std::get<4>(k), std::get<2>(k)}.ToString();
}

// Whether the gather at actions[at] is waited on at once: the next computation in the program is
// of the gathered chunk (no computation stands between them to overlap).
bool WaitedAtOnce(const std::vector<Action>& actions, size_t at) {
  for (size_t i = at + 1; i < actions.size(); ++i) {
    const ActionKind k = actions[i].kind;
    if (k == ActionKind::kForward || k == ActionKind::kBackward || k == ActionKind::kBackwardInput ||
        k == ActionKind::kBackwardWeight) {
      return actions[i].chunk == actions[at].chunk;
    }
  }
  return false;
}

}  // namespace

std::string SimResult::ChromeTraceJson() const { return scheduler::ChromeTraceJson(events); }

namespace {

// One run of the schedule; with `rng`, each duration is drawn around its mean (CostModel::
// compute_cv, comm_cv).
SimResult SimulateOnce(const Schedule& s, const CostModel& cost, std::mt19937_64* rng) {
  // A factor of mean 1 and coefficient of variation cv: lognormal, sigma^2 = ln(1 + cv^2).
  auto draw = [rng](double cv) {
    if (rng == nullptr || cv <= 0) return 1.0;
    const double sigma2 = std::log1p(cv * cv);
    return std::lognormal_distribution<double>(-sigma2 / 2, std::sqrt(sigma2))(*rng);
  };
  const int pp = static_cast<int>(s.ranks.size());
  auto compute_share = [&](int vstage) {
    return vstage >= 0 && vstage < static_cast<int>(cost.chunk_compute_share.size()) ? cost.chunk_compute_share[vstage]
                                                                                     : 1.0 / s.v;
  };
  auto chunk_bytes = [&](int vstage) {
    return vstage >= 0 && vstage < static_cast<int>(cost.chunk_param_bytes.size()) ? cost.chunk_param_bytes[vstage]
                                                                                   : cost.stage_param_bytes / s.v;
  };
  auto collectives = [&](int vstage) {  // per gather or reduction of the chunk
    return vstage >= 0 && vstage < static_cast<int>(cost.chunk_collectives.size()) ? cost.chunk_collectives[vstage]
                                                                                   : 1.0;
  };
  const double shard_out = static_cast<double>(cost.zero - 1) / std::max(1, cost.zero);
  // CostModel::intra_idle: the comm stream's collectives progress event by event at a rate set by
  // the box's load, and a gather's landing is known only when it lands (kPending until then).
  const bool load_dependent = cost.has_intra_idle && cost.shared_cores > 0;
  constexpr double kPending = std::numeric_limits<double>::infinity();
  struct Comm {  // a collective on the comm stream (load_dependent)
    std::string name;
    double busy_s = 0, idle_s = 0;  // its whole time while the box is oversubscribed, and otherwise
    double left = 1;                // the fraction still to do
    double start = 0;               // when it reached the head of the stream
    int chunk = -1;                 // a gather's chunk; -1: a reduction
    bool at_once = false;
  };
  struct R {
    size_t pc = 0;
    double t = 0, comm_t = 0, busy = 0;
    std::map<int, double> gather_ready;
    std::map<int, double> at_once_ready;  // chunks whose latest gather is waited on at once
    std::set<int> reduced;                // chunks reduced at least once this step
    std::map<std::pair<int, int>, double> act_ready, grad_ready;  // (own chunk, mb) -> arrival
    // Posted receives not yet arrived: the transfer's key and when the receive was posted.
    std::map<std::pair<int, int>, std::pair<Key, double>> act_posted, grad_posted;
    double gather_bytes = 0, reduce_bytes = 0, p2p_bytes = 0, blocking_gather_s = 0;
    std::deque<Work> queue;
    std::deque<Comm> comm;  // load_dependent: issued, not yet finished
    // Otherwise, with overlap_slowdown: the comm stream's busy spans not yet over, in order.
    std::deque<std::pair<double, double>> comm_spans;
    bool running = false;
    double start = 0, left = 0;  // the running work: when it starts, its seconds still to do
    double computation_start = 0;  // of a computation split into compute and a blocking wait
  };
  std::vector<R> st(pp);
  std::map<Key, double> sent;  // transfer -> when its send was issued
  std::map<Key, double> recv_posted;  // transfer -> when its receive was posted
  std::map<Key, double> arrived;      // transfer -> when its data arrived, once both sides were there
  SimResult res;

  // Takes the rank's next action off its program: communication is issued at once, computation
  // is queued on the compute stream.
  auto issue = [&](int r) {
    R& x = st[r];
    const Action& a = s.ranks[r][x.pc];
    const std::string name = a.ToString();
    const bool whole_backward = cost.first_stage_whole_backward && a.chunk * pp + r == 0;
    const int vstage = a.chunk * pp + r;
    const double per_chunk = compute_share(vstage);
    const double gather_bytes = chunk_bytes(vstage) * shard_out;
    const bool has_extra = a.chunk >= 0 && vstage < static_cast<int>(cost.virtual_stage_extra.size());
    const CostModel::StageExtra extra = has_extra ? cost.virtual_stage_extra[vstage] : CostModel::StageExtra{};
    const double scale = r < static_cast<int>(cost.rank_compute_scale.size()) ? cost.rank_compute_scale[r] : 1.0;
    // A computation of `seconds` (the stage's, times this chunk's share) + `extra_s` (this virtual
    // stage's), of which `wait_s` + `extra_wait_s` is spent in blocking collectives: compute work,
    // then that wait, which takes no core.
    auto compute = [&](double seconds, double extra_s, double wait_s = 0, double extra_wait_s = 0,
                       const std::string& label = std::string(), bool inputs = true) {
      Work w;
      w.label = label.empty() ? name : label;
      const double total = (seconds * per_chunk + extra_s) * scale, wait = wait_s * per_chunk + extra_wait_s;
      w.seconds = std::max(0.0, total - wait) * draw(cost.compute_cv);
      w.chunk = a.chunk, w.mb = a.mb;
      w.wait_gather = true;
      if (inputs && a.kind == ActionKind::kForward) w.wait_input = 1;
      if (inputs && (a.kind == ActionKind::kBackward || a.kind == ActionKind::kBackwardInput)) w.wait_input = 2;
      if (wait <= 0) {
        x.queue.push_back(w);
        return;
      }
      w.part = Work::Part::kCompute;
      Work blocked;
      blocked.label = w.label;
      blocked.seconds = wait * draw(cost.comm_cv);
      blocked.shared = false;
      blocked.part = Work::Part::kWait;
      x.queue.push_back(w);
      x.queue.push_back(blocked);
    };
    // A recomputed chunk runs its forward again at the start of B, before the gradient is needed
    // (the executor does the same, so the transfer overlaps it).
    auto recompute = [&] {
      if (s.Recompute(r, a.chunk)) compute(cost.forward_s, 0.0, cost.forward_wait_s, 0.0, a.RecomputeName(), false);
    };
    // The CPU a transfer takes from this rank's compute (CostModel::comm_cpu_s_per_byte).
    auto steal_cpu = [&](double bytes, double messages = 0, bool p2p = false) {
      if (cost.comm_cpu_s_per_byte <= 0) return;
      const double per_byte = p2p && cost.p2p_cpu_s_per_byte >= 0 ? cost.p2p_cpu_s_per_byte : cost.comm_cpu_s_per_byte;
      const double cpu = bytes * per_byte + messages * cost.comm_cpu_s_per_message;
      if (cpu <= 0) return;
      Work w;
      w.label = name + " (cpu)";
      w.seconds = cpu * draw(cost.compute_cv);
      x.queue.push_back(w);
    };
    // A blocking transfer (CostModel::blocking_p2p): nothing after it in the program starts
    // before its data has arrived.
    auto block_on = [&](const Key& k) {
      Work w;
      w.label = name;
      w.wait_transfer = true;
      w.transfer = k;
      w.shared = false;
      w.traced = false;
      x.queue.push_back(w);
    };
    // A synchronous copy of `seconds` on the training thread (CostModel::staging_blocks): after the
    // computation queued before it, before anything after it; it takes no core.
    auto block_for = [&](double seconds, const std::string& label) {
      if (seconds <= 0) return;
      Work w;
      w.label = label;
      w.seconds = seconds * draw(cost.comm_cv);
      w.shared = false;
      x.queue.push_back(w);
    };
    // A collective of `seconds` (`idle_seconds` on an idle box where load_dependent): returns when
    // it finishes, or kPending where that is decided as the simulation runs. Of its time, the
    // `wire_s` after the first `lead_s` is the collective's own (NCCL's kernels: what slows the
    // computation beside it, CostModel::overlap_slowdown); the rest is staging over PCIe or NVMe.
    auto on_comm = [&](double seconds, double idle_seconds, double* bytes_acc, double bytes, double lead_s,
                       double wire_s, int chunk = -1, bool at_once = false) {
      *bytes_acc += bytes;
      steal_cpu(bytes);
      const double f = draw(cost.comm_cv);
      seconds *= f, idle_seconds *= f, lead_s *= f, wire_s *= f;
      if (load_dependent && (seconds > 0 || idle_seconds > 0)) {
        Comm c;
        c.name = name, c.busy_s = seconds, c.idle_s = idle_seconds, c.chunk = chunk, c.at_once = at_once;
        c.start = x.t;
        x.comm.push_back(c);
        return kPending;
      }
      double start = std::max(x.t, x.comm_t);
      x.comm_t = start + seconds;
      res.events.push_back({r, name, "comm", start, x.comm_t});
      if (cost.overlap_slowdown > 0 && wire_s > 0) x.comm_spans.emplace_back(start + lead_s, start + lead_s + wire_s);
      return x.comm_t;
    };
    switch (a.kind) {
      case ActionKind::kGather: {
        const bool at_once = WaitedAtOnce(s.ranks[r], x.pc);
        const Link& link = cost.has_intra_blocking && at_once ? cost.intra_blocking : cost.intra;
        const double wire_s = cost.zero > 1 ? link.Time(gather_bytes, collectives(vstage)) : 0.0;
        const bool idle_twin = cost.zero > 1 && cost.has_intra_idle && &link == &cost.intra;
        const double idle_wire_s = idle_twin ? cost.intra_idle.Time(gather_bytes, collectives(vstage)) : wire_s;
        if (at_once) x.blocking_gather_s += wire_s;
        const double staged_s = chunk_bytes(vstage) / cost.zero * cost.gather_staging_s_per_byte;
        // zero = 1 keeps the chunk in place (nothing to gather) unless it is offloaded: then the
        // shard is staged and copied into its own unsharded buffer.
        const bool moves = cost.zero > 1 || cost.gather_staging_s_per_byte > 0;
        if (cost.staging_blocks) block_for(staged_s, name + " (staging)");
        const double staging_s = cost.staging_blocks ? 0.0 : staged_s;
        const double rest_s = chunk_bytes(vstage) / cost.copy_bytes_per_s + staging_s;
        const double gather_s = moves ? wire_s + rest_s : 0.0, idle_gather_s = moves ? idle_wire_s + rest_s : 0.0;
        x.gather_ready[a.chunk] = on_comm(gather_s, idle_gather_s, &x.gather_bytes, gather_bytes, moves ? staging_s : 0.0,
                                          moves ? wire_s : 0.0, a.chunk, at_once);
        if (at_once) {
          x.at_once_ready[a.chunk] = x.gather_ready[a.chunk];
        } else {
          x.at_once_ready.erase(a.chunk);
        }
        break;
      }
      case ActionKind::kReduceGrad:
        if (cost.reduce_handling_s_per_byte > 0) {
          Work w;
          w.label = name + " (handling)";
          w.seconds = chunk_bytes(vstage) * cost.reduce_handling_s_per_byte * scale * draw(cost.compute_cv);
          x.queue.push_back(w);
        }
        {
          // An offloaded gradient shard: written by the chunk's first reduction of the step, read
          // and written by each later one (the accumulation).
          const bool later = !x.reduced.insert(a.chunk).second;
          const double staging = cost.reduce_staging_s_per_byte + (later ? cost.reduce_accumulate_s_per_byte : 0.0);
          double rest_s = chunk_bytes(vstage) / cost.zero * staging;
          if (cost.staging_blocks) block_for(rest_s, name + " (staging)"), rest_s = 0;
          const Link& idle = cost.has_intra_idle ? cost.intra_idle : cost.intra;
          const double reduced = gather_bytes * cost.reduce_bytes_factor;
          const double wire_s = cost.intra.Time(reduced, collectives(vstage));
          on_comm(wire_s + rest_s, idle.Time(reduced, collectives(vstage)) + rest_s, &x.reduce_bytes, reduced, 0.0,
                  wire_s);
        }
        break;
      case ActionKind::kRelease:
        break;
      case ActionKind::kForward:
        compute(cost.forward_s, extra.forward_s, cost.forward_wait_s, extra.forward_wait_s);
        break;
      case ActionKind::kBackward:
        recompute();
        compute(cost.backward_s, extra.backward_input_s + extra.backward_weight_s, cost.backward_input_wait_s,
                extra.backward_input_wait_s);
        break;
      case ActionKind::kBackwardInput:
        recompute();
        compute(whole_backward ? cost.backward_s : cost.backward_input_s,
                extra.backward_input_s + (whole_backward ? extra.backward_weight_s : 0.0), cost.backward_input_wait_s,
                extra.backward_input_wait_s);
        break;
      case ActionKind::kBackwardWeight:
        compute(whole_backward ? 0.0 : cost.backward_weight_s, whole_backward ? 0.0 : extra.backward_weight_s);
        break;
      case ActionKind::kSendAct:
      case ActionKind::kSendGrad: {
        const Key k{IsGrad(a.kind), r, a.peer, a.chunk, a.mb};
        sent[k] = x.t;
        x.p2p_bytes += cost.activation_bytes;
        steal_cpu(cost.activation_bytes, IsGrad(a.kind) ? 1 : 2, true);
        if (cost.blocking_p2p) block_on(k);
        break;
      }
      case ActionKind::kRecvAct:
      case ActionKind::kRecvGrad: {
        steal_cpu(cost.activation_bytes, IsGrad(a.kind) ? 1 : 2, true);  // the receiving side's copies and calls
        // A receive only posts: the computation that consumes it waits for the arrival. The data
        // moves once both sides are there (Gloo's and NCCL's point-to-point are rendezvous: a send
        // waits for its receive to be posted). A gradient's receive is posted with the forward
        // whose output it belongs to (the executor does, as Megatron's send_forward_recv_backward
        // does), so it is always there before the send; an activation's is posted here.
        const int sender_stage = a.chunk * s.pp + a.peer;
        const int mine = IsGrad(a.kind) ? sender_stage - 1 : sender_stage + 1;
        constexpr double kWithItsForward = -std::numeric_limits<double>::infinity();  // before any send
        const double posted_at = IsGrad(a.kind) && !cost.blocking_p2p ? kWithItsForward : x.t;
        const Key k{IsGrad(a.kind), a.peer, r, a.chunk, a.mb};
        (IsGrad(a.kind) ? x.grad_posted : x.act_posted)[{mine / s.pp, a.mb}] = {k, posted_at};
        recv_posted[k] = posted_at;
        if (cost.blocking_p2p) block_on(k);
        break;
      }
      case ActionKind::kOptimizerStep: {
        Work w;
        w.label = name;
        w.seconds = cost.optimizer_s;
        w.after_comm = true;
        w.shared = false;
        w.traced = cost.optimizer_s > 0;
        x.queue.push_back(w);
        break;
      }
    }
    x.pc++;
  };

  // When a transfer's data arrives, once its send and its receive are both issued (-1 before). A
  // send that waited for its receive starts when the receive's notice reaches the sender (one
  // message latency), then takes the transfer's own time.
  auto arrive = [&](const Key& k) -> double {
    auto done = arrived.find(k);
    if (done != arrived.end()) return done->second;
    auto snd = sent.find(k);
    auto rcv = recv_posted.find(k);
    if (snd == sent.end() || rcv == recv_posted.end()) return -1;
    const double send_at = snd->second;
    const double start = std::max(send_at, rcv->second + cost.inter.alpha_s);
    const double at = start + cost.inter.Time(cost.activation_bytes) * draw(cost.comm_cv);
    res.events.push_back({std::get<1>(k), TransferName(k), "p2p", send_at, at});
    sent.erase(snd);
    recv_posted.erase(rcv);
    arrived[k] = at;
    return at;
  };

  // When the rank's next work may start, or a negative value while an input it waits for has not
  // been sent yet.
  auto ready = [&](R& x, const Work& w) -> double {
    double at = x.t;
    if (w.wait_transfer) {
      const double got = arrive(w.transfer);
      if (got < 0) return -1;
      at = std::max(at, got);
    }
    if (w.wait_gather && x.gather_ready.count(w.chunk)) {
      if (x.gather_ready[w.chunk] == kPending) return -1;
      at = std::max(at, x.gather_ready[w.chunk]);
    }
    if (w.after_comm) {
      if (!x.comm.empty()) return -1;
      at = std::max(at, x.comm_t);
    }
    if (w.wait_input) {
      auto& posted = w.wait_input == 1 ? x.act_posted : x.grad_posted;
      auto& got = w.wait_input == 1 ? x.act_ready : x.grad_ready;
      const std::pair<int, int> cm{w.chunk, w.mb};
      auto p = posted.find(cm);
      if (p != posted.end()) {
        const double arrival = arrive(p->second.first);
        if (arrival < 0) return -1;
        got[cm] = arrival;
        if (!cost.blocking_p2p) arrived.erase(p->second.first);  // else its sender may still ask
        posted.erase(p);
      }
      if (got.count(cm)) at = std::max(at, got[cm]);
    }
    return at;
  };

  // Processor sharing: the ranks computing at one moment share the box's cores equally.
  const double ranks_each = std::max(1, cost.ranks_per_simulated_rank);
  double now = 0;
  for (;;) {
    for (bool moved = true; moved;) {
      moved = false;
      for (int r = 0; r < pp; ++r) {
        R& x = st[r];
        while (!x.running && x.queue.empty() && x.pc < s.ranks[r].size()) {
          issue(r);
          moved = true;
        }
        if (!x.running && !x.queue.empty()) {
          const double at = ready(x, x.queue.front());
          if (at < 0) continue;
          x.running = true;
          x.start = std::max(at, now);
          x.left = x.queue.front().seconds;
          moved = true;
        }
      }
    }
    // A rank waiting on a gather it needs at once holds its cores too where waits do (its partner
    // is mostly still computing, and its transfer's copies run meanwhile): until that gather lands,
    // or 0 when the rank holds none.
    std::vector<double> held_until(pp, 0.0);
    double computing = 0;
    bool any = false;
    for (int r = 0; r < pp; ++r) {
      const R& x = st[r];
      if (!x.comm.empty()) any = true;
      if (!x.running) {
        // Blocked on a gather it needs at once that has not landed (load_dependent): holds its
        // cores, CostModel::gather_wait_core_share of them.
        if (cost.waits_hold_cores && !x.queue.empty() && x.queue.front().wait_gather) {
          auto g = x.at_once_ready.find(x.queue.front().chunk);
          if (g != x.at_once_ready.end() && g->second == kPending) {
            computing += ranks_each * cost.gather_wait_core_share;
          }
        }
        continue;
      }
      any = true;
      const Work& w = x.queue.front();
      if (cost.waits_hold_cores && w.wait_gather && x.start > now) {
        auto g = x.at_once_ready.find(w.chunk);
        if (g != x.at_once_ready.end() && g->second > now) held_until[r] = g->second;
      }
      if (x.start <= now && (w.shared || (cost.waits_hold_cores && w.part == Work::Part::kWait))) {
        computing += ranks_each;
      } else if (held_until[r] > 0) {
        computing += ranks_each * cost.gather_wait_core_share;
      }
    }
    if (!any) break;
    const double rate = cost.shared_cores > 0 && computing > cost.shared_cores
                            ? cost.shared_cores / computing / std::max(1.0, cost.shared_slowdown)
                            : 1.0;
    // CostModel::overlap_slowdown: whether the rank's comm stream runs a collective now, and the
    // next moment that changes.
    auto comm_busy = [&](const R& x) {
      if (load_dependent) return !x.comm.empty();
      return !x.comm_spans.empty() && x.comm_spans.front().first <= now;
    };
    for (R& x : st) {
      while (!x.comm_spans.empty() && x.comm_spans.front().second <= now) x.comm_spans.pop_front();
    }
    auto rate_of = [&](const R& x) {
      const Work& w = x.queue.front();
      if (!w.shared) return 1.0;  // a blocking wait or the step tail
      return cost.overlap_slowdown > 0 && comm_busy(x) ? rate / (1 + cost.overlap_slowdown) : rate;
    };
    auto finish = [&](const R& x) { return x.start > now ? x.start : now + x.left / rate_of(x); };
    const bool oversubscribed = cost.shared_cores > 0 && computing > cost.shared_cores;
    auto comm_finish = [&](const R& x) {
      const Comm& c = x.comm.front();
      return now + c.left * (oversubscribed ? c.busy_s : c.idle_s);
    };
    double next = std::numeric_limits<double>::infinity();
    for (int r = 0; r < pp; ++r) {
      if (st[r].running) next = std::min(next, finish(st[r]));
      if (held_until[r] > 0) next = std::min(next, held_until[r]);
      if (!st[r].comm.empty()) next = std::min(next, comm_finish(st[r]));
      if (st[r].running && !st[r].comm_spans.empty()) {
        const auto& span = st[r].comm_spans.front();
        next = std::min(next, span.first > now ? span.first : span.second);
      }
    }
    // The comm streams: each head collective advances at the box's current rate; one that
    // finishes lands its gather and hands the stream to the next.
    for (int r = 0; r < pp; ++r) {
      R& x = st[r];
      if (x.comm.empty()) continue;
      Comm& c = x.comm.front();
      if (comm_finish(x) > next) {
        c.left -= (next - now) / (oversubscribed ? c.busy_s : c.idle_s);
        continue;
      }
      res.events.push_back({r, c.name, "comm", c.start, next});
      if (c.chunk >= 0) {
        x.gather_ready[c.chunk] = next;
        if (c.at_once) x.at_once_ready[c.chunk] = next;
      }
      x.comm_t = next;
      x.comm.pop_front();
      if (!x.comm.empty()) x.comm.front().start = next;
    }
    for (int r = 0; r < pp; ++r) {
      R& x = st[r];
      if (!x.running || x.start > now) continue;
      if (finish(x) > next) {
        x.left -= (next - now) * rate_of(x);
        continue;
      }
      const Work& w = x.queue.front();
      // busy: computations, their blocking collectives included (not the step tail).
      if (w.shared || w.part == Work::Part::kWait) x.busy += next - x.start;
      switch (w.part) {
        case Work::Part::kWhole:
          if (w.traced) res.events.push_back({r, w.label, "compute", x.start, next});
          break;
        case Work::Part::kCompute:
          x.computation_start = x.start;
          break;
        case Work::Part::kWait:
          res.events.push_back({r, w.label, "compute", x.computation_start, next});
          break;
      }
      x.t = next;
      x.running = false;
      x.queue.pop_front();
    }
    now = next;
  }
  double busy = 0;
  for (int r = 0; r < pp; ++r) {
    if (st[r].pc < s.ranks[r].size() || !st[r].queue.empty() || !st[r].act_posted.empty() ||
        !st[r].grad_posted.empty()) {
      const size_t at = std::min(st[r].pc - (st[r].queue.empty() ? 0 : 1), s.ranks[r].size() - 1);
      throw std::invalid_argument(absl::StrCat("simulate ", s.name, ": rank ", r, " cannot proceed at #", at, " ",
                                               s.ranks[r][at].ToString(), " (validate the schedule first)"));
    }
    res.step_s = std::max(res.step_s, std::max(st[r].t, st[r].comm_t));
    res.busy_s.push_back(st[r].busy);
    busy += st[r].busy;
    res.gather_bytes_per_rank = std::max(res.gather_bytes_per_rank, st[r].gather_bytes);
    res.reduce_bytes_per_rank = std::max(res.reduce_bytes_per_rank, st[r].reduce_bytes);
    res.p2p_bytes_per_rank = std::max(res.p2p_bytes_per_rank, st[r].p2p_bytes);
    res.blocking_gather_s = std::max(res.blocking_gather_s, st[r].blocking_gather_s);
  }
  res.bubble = busy > 0 ? (pp * (res.step_s - cost.optimizer_s) - busy) / busy : 0;
  return res;
}

}  // namespace

SimResult Simulate(const Schedule& s, const CostModel& cost) {
  if ((cost.compute_cv <= 0 && cost.comm_cv <= 0) || cost.variability_samples < 1) return SimulateOnce(s, cost, nullptr);
  // The mean over runs with durations drawn independently (fixed seeds: the same answer each call);
  // the events are the first run's.
  SimResult mean;
  const int n = cost.variability_samples;
  for (int k = 0; k < n; ++k) {
    std::mt19937_64 rng(k + 1);
    SimResult one = SimulateOnce(s, cost, &rng);
    if (k == 0) {
      mean = one;
      mean.step_s = mean.bubble = mean.blocking_gather_s = 0;
      for (double& b : mean.busy_s) b = 0;
    }
    mean.step_s += one.step_s / n;
    mean.bubble += one.bubble / n;
    mean.blocking_gather_s += one.blocking_gather_s / n;
    for (size_t r = 0; r < mean.busy_s.size(); ++r) mean.busy_s[r] += one.busy_s[r] / n;
  }
  return mean;
}

}  // namespace scheduler
}  // namespace zeropp
