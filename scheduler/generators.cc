#include "scheduler/generators.h"

#include <algorithm>
#include <stdexcept>

#include "absl/strings/str_cat.h"

namespace zeropp {
namespace scheduler {
namespace {

void Require(bool ok, const std::string& msg) {
  if (!ok) throw std::invalid_argument(msg);
}

void CheckCommon(const std::string& name, int pp, int v, int m) {
  Require(pp >= 1, absl::StrCat(name, ": pp(", pp, ") must be >= 1"));
  Require(v >= 1, absl::StrCat(name, ": v(", v, ") must be >= 1"));
  Require(m >= 1, absl::StrCat(name, ": m(", m, ") must be >= 1"));
}

// Emits actions for one rank, adding the point-to-point transfers implied by the flow rule.
class RankBuilder {
 public:
  RankBuilder(int pp, int v, int r, std::vector<Action>* out) : pp_(pp), v_(v), r_(r), out_(out) {}

  // Ranks holding the previous / next virtual stage of chunk c (-1 at the ends).
  int PrevRank(int c) const {
    int s = c * pp_ + r_;
    return s == 0 ? -1 : (s - 1) % pp_;
  }
  int NextRank(int c) const {
    int s = c * pp_ + r_;
    return s == v_ * pp_ - 1 ? -1 : (s + 1) % pp_;
  }

  void Emit(ActionKind k, int chunk = -1, int mb = -1, int peer = -1) { out_->push_back(Action{k, chunk, mb, peer}); }

  void Forward(int c, int mb) {
    int prev = PrevRank(c), next = NextRank(c);
    if (prev >= 0 && prev != r_) Emit(ActionKind::kRecvAct, PrevChunk(c), mb, prev);
    Emit(ActionKind::kForward, c, mb);
    if (next >= 0 && next != r_) Emit(ActionKind::kSendAct, c, mb, next);
  }
  // kind is kBackward or kBackwardInput.
  void Backward(ActionKind kind, int c, int mb) {
    int prev = PrevRank(c), next = NextRank(c);
    if (next >= 0 && next != r_) Emit(ActionKind::kRecvGrad, NextChunk(c), mb, next);
    Emit(kind, c, mb);
    if (prev >= 0 && prev != r_) Emit(ActionKind::kSendGrad, c, mb, prev);
  }

 private:
  // The chunk index on the peer rank: the same chunk, unless the flow wraps between ranks.
  int PrevChunk(int c) const { return r_ == 0 ? c - 1 : c; }
  int NextChunk(int c) const { return r_ == pp_ - 1 ? c + 1 : c; }

  int pp_, v_, r_;
  std::vector<Action>* out_;
};

// The 1F1B shape shared by 1F1B, interleaved, ZB-H1 and ZeroPP: `warm` forwards, then one forward
// and one backward per step, then the remaining backwards. backward(k, steady) gets the
// backward's index and whether it was paired with a forward.
template <typename Forward, typename Backward>
void WarmSteadyCool(int warm, int total, Forward forward, Backward backward) {
  for (int k = 0; k < warm; ++k) forward(k);
  for (int k = 0; k < total - warm; ++k) {
    forward(warm + k);
    backward(k, true);
  }
  for (int k = std::max(total - warm, 0); k < total; ++k) backward(k, false);
}

// Inserts gathers/releases for the baseline policies and the final reduce/optimizer actions.
void AddGathersAndTail(Schedule* s, GatherPolicy policy) {
  for (auto& actions : s->ranks) {
    std::vector<Action> out;
    if (policy == GatherPolicy::kResident) {
      for (int c = 0; c < s->v; ++c) out.push_back({ActionKind::kGather, c});
    }
    for (const Action& a : actions) {
      bool needs = a.kind == ActionKind::kForward || a.kind == ActionKind::kBackward ||
                   a.kind == ActionKind::kBackwardInput;
      if (needs && policy == GatherPolicy::kPerMicrobatch) out.push_back({ActionKind::kGather, a.chunk});
      out.push_back(a);
      if (needs && policy == GatherPolicy::kPerMicrobatch) out.push_back({ActionKind::kRelease, a.chunk});
    }
    if (policy == GatherPolicy::kResident) {
      for (int c = 0; c < s->v; ++c) out.push_back({ActionKind::kRelease, c});
    }
    for (int c = 0; c < s->v; ++c) out.push_back({ActionKind::kReduceGrad, c});
    out.push_back({ActionKind::kOptimizerStep});
    actions = std::move(out);
  }
}

bool IsP2P(const Action& a) {
  return a.kind == ActionKind::kSendAct || a.kind == ActionKind::kSendGrad || a.kind == ActionKind::kRecvAct ||
         a.kind == ActionKind::kRecvGrad;
}

// Transfers are issued as batches (each maximal run of consecutive sends/receives is posted
// together, as Megatron's batch_isend_irecv does), so their order inside a run does not matter
// and no parity trick is needed. A weight-gradient pass depends on no transfer, so a W standing
// between two transfers moves after them: the transfers then form one batch.
void GroupTransfers(Schedule* s) {
  for (auto& a : s->ranks) {
    for (size_t i = 1; i + 1 < a.size(); ++i) {
      if (!IsP2P(a[i - 1]) || a[i].kind != ActionKind::kBackwardWeight) continue;
      size_t j = i;
      while (j + 1 < a.size() && a[j + 1].kind == ActionKind::kBackwardWeight) ++j;
      size_t k = j + 1;
      while (k < a.size() && IsP2P(a[k])) ++k;
      if (k > j + 1) std::rotate(a.begin() + i, a.begin() + j + 1, a.begin() + k);
    }
  }
}

Schedule Finish(Schedule s, const GenOptions& o, bool baseline) {
  if (baseline) AddGathersAndTail(&s, o.gather);
  RecomputePolicy p = o.recompute;
  if (p == RecomputePolicy::kDefault) p = baseline ? RecomputePolicy::kNone : RecomputePolicy::kAllButLast;
  if (p != RecomputePolicy::kNone) {
    s.recompute.assign(s.pp, std::vector<bool>(s.v, true));
    if (p == RecomputePolicy::kAllButLast) s.recompute[s.pp - 1][s.v - 1] = false;
  }
  if (o.group_transfers) GroupTransfers(&s);
  return s;
}

Schedule Blank(const std::string& name, int pp, int v, int m, int u) {
  Schedule s;
  s.name = name;
  s.pp = pp;
  s.v = v;
  s.m = m;
  s.u = u;
  s.ranks.resize(pp);
  return s;
}

// Whether a rank holding `deferred` weight passes may defer one more (GenOptions::max_deferred_w).
bool DeferMore(const GenOptions& o, size_t deferred) {
  return o.max_deferred_w < 0 || deferred < static_cast<size_t>(o.max_deferred_w);
}

void CheckDeferral(const std::string& name, const GenOptions& o) {
  Require(o.max_deferred_w >= -1,
          absl::StrCat(name, ": max_deferred_w(", o.max_deferred_w, ") must be >= 0, or -1 for the design's deferral"));
}

}  // namespace

Schedule GPipe(int pp, int m, const GenOptions& o) {
  CheckCommon("gpipe", pp, 1, m);
  Schedule s = Blank("gpipe", pp, 1, m, 0);
  for (int r = 0; r < pp; ++r) {
    RankBuilder b(pp, 1, r, &s.ranks[r]);
    for (int i = 0; i < m; ++i) b.Forward(0, i);
    for (int i = 0; i < m; ++i) b.Backward(ActionKind::kBackward, 0, i);
  }
  return Finish(s, o, true);
}

Schedule OneFOneB(int pp, int m, const GenOptions& o) {
  CheckCommon("1f1b", pp, 1, m);
  Schedule s = Blank("1f1b", pp, 1, m, 0);
  for (int r = 0; r < pp; ++r) {
    RankBuilder b(pp, 1, r, &s.ranks[r]);
    WarmSteadyCool(
        std::min(pp - 1 - r, m), m, [&](int k) { b.Forward(0, k); },
        [&](int k, bool) { b.Backward(ActionKind::kBackward, 0, k); });
  }
  return Finish(s, o, true);
}

// DeepSpeed's pipeline engine (deepspeed/runtime/pipe/schedule.py, TrainSchedule): 2(m+pp-1)
// steps; at each, even stages run a forward where odd stages run a backward and the reverse at the
// next, so each transfer pairs two neighbours in the same step. A forward step first receives its
// input and sends the gradient of the previous step's backward; a backward step first sends the
// previous step's forward output and receives its gradient. Every transfer blocks its rank there
// (CostModel::blocking_p2p).
Schedule DeepSpeed1F1B(int pp, int m, const GenOptions& o) {
  CheckCommon("deepspeed", pp, 1, m);
  Schedule s = Blank("deepspeed", pp, 1, m, 0);
  for (int r = 0; r < pp; ++r) {
    auto& out = s.ranks[r];
    auto valid = [&](int mb) { return mb >= 0 && mb < m; };
    auto emit = [&](ActionKind k, int mb, int peer = -1) { out.push_back(Action{k, 0, mb, peer}); };
    int prev_mb = -1;
    for (int step = 0; step < 2 * (m + pp - 1); ++step) {
      const bool forward = step % 2 == r % 2;
      const int base = forward ? (step - (step % 2)) / 2 - r / 2
                               : (step % 2 == 0 ? step / 2 - pp + (r + 1) / 2 : (step - 1) / 2 - pp + 1 + r / 2);
      if (forward) {
        if (r > 0 && valid(base)) emit(ActionKind::kRecvAct, base, r - 1);
        if (r > 0 && valid(prev_mb)) emit(ActionKind::kSendGrad, prev_mb, r - 1);
        if (valid(base)) emit(ActionKind::kForward, base);
      } else {
        if (r < pp - 1 && valid(prev_mb)) emit(ActionKind::kSendAct, prev_mb, r + 1);
        if (r < pp - 1 && valid(base)) emit(ActionKind::kRecvGrad, base, r + 1);
        if (valid(base)) emit(ActionKind::kBackward, base);
      }
      prev_mb = base;
    }
  }
  GenOptions keep = o;
  keep.group_transfers = false;  // the engine's order is the schedule
  return Finish(s, keep, true);
}

Schedule Interleaved(int pp, int v, int m, const GenOptions& o) {
  CheckCommon("interleaved", pp, v, m);
  Require(m % pp == 0, absl::StrCat("interleaved: m(", m, ") must be a multiple of pp(", pp, ")"));
  Schedule s = Blank("interleaved", pp, v, m, 0);
  const int total = m * v;
  auto fchunk = [&](int k) { return (k % (pp * v)) / pp; };
  auto bchunk = [&](int k) { return v - 1 - (k % (pp * v)) / pp; };
  auto mbof = [&](int k) { return (k / (pp * v)) * pp + k % pp; };
  for (int r = 0; r < pp; ++r) {
    RankBuilder b(pp, v, r, &s.ranks[r]);
    WarmSteadyCool(
        std::min((pp - r - 1) * 2 + (v - 1) * pp, total), total, [&](int k) { b.Forward(fchunk(k), mbof(k)); },
        [&](int k, bool) { b.Backward(ActionKind::kBackward, bchunk(k), mbof(k)); });
  }
  return Finish(s, o, true);
}

Schedule ZbH1(int pp, int m, const GenOptions& o) {
  CheckCommon("zb-h1", pp, 1, m);
  CheckDeferral("zb-h1", o);
  Schedule s = Blank("zb-h1", pp, 1, m, 0);
  for (int r = 0; r < pp; ++r) {
    RankBuilder b(pp, 1, r, &s.ranks[r]);
    std::vector<int> deferred;
    WarmSteadyCool(std::min(pp - 1 - r, m), m, [&](int k) { b.Forward(0, k); }, [&](int k, bool steady) {
      b.Backward(ActionKind::kBackwardInput, 0, k);
      // Rank r keeps the first r weight passes for the cool-down, where it would otherwise wait.
      if (steady && k < r && DeferMore(o, deferred.size())) {
        deferred.push_back(k);
      } else {
        b.Emit(ActionKind::kBackwardWeight, 0, k);
      }
    });
    for (int k : deferred) b.Emit(ActionKind::kBackwardWeight, 0, k);
  }
  return Finish(s, o, true);
}

Schedule Zero3(int m, const Zero3Plan& p, const GenOptions& o) {
  const int k_units = p.units;
  CheckCommon("zero3", 1, k_units, m);
  Require(p.prefetch_depth >= 0, absl::StrCat("zero3: prefetch_depth(", p.prefetch_depth, ") must be >= 0"));
  Require(p.max_live_units >= 0, absl::StrCat("zero3: max_live_units(", p.max_live_units, ") must be >= 0"));
  Require(p.needs.empty() || static_cast<int>(p.needs.size()) == k_units,
          absl::StrCat("zero3: needs has ", p.needs.size(), " entries, expected units(", k_units, ")"));
  Schedule s = Blank("zero3", 1, k_units, m, 0);
  s.needs = p.needs;
  // The last unit's backward follows its forward at once: recomputing it would only run its
  // forward (the LM head's product and loss) twice for no memory, so it keeps its activations.
  if (p.recompute) {
    s.recompute.assign(1, std::vector<bool>(k_units, true));
    s.recompute[0][k_units - 1] = false;
  }
  auto need = [&](int k) {
    std::vector<int> v = s.Needs(k);
    for (int d : v) Require(d >= 0 && d < k_units && d != k, absl::StrCat("zero3: unit ", k, " needs unit ", d));
    v.push_back(k);
    return v;
  };
  size_t most = 0;
  for (int k = 0; k < k_units; ++k) most = std::max(most, need(k).size());
  const int cap = p.max_live_units;
  Require(cap == 0 || cap >= static_cast<int>(most),
          absl::StrCat("zero3: max_live_units(", cap, ") is below 1 + the most tied-parameter dependencies of a unit (",
                       most, ")"));
  Require(cap == 0 || p.reshard_after_forward || cap >= k_units,
          absl::StrCat("zero3: reshard_after_forward=false keeps all ", k_units,
                       " units unsharded until backward; max_live_units(", cap, ") must be 0 or >= ", k_units));
  // The lowest-index unit among u and its users completes u's gradient.
  std::vector<int> last_writer(k_units);
  for (int u = 0; u < k_units; ++u) last_writer[u] = u;
  for (int j = 0; j < k_units; ++j) {
    for (int d : s.Needs(j)) last_writer[d] = std::min(last_writer[d], j);
  }
  auto& out = s.ranks[0];
  std::vector<bool> live(k_units, false);
  int n_live = 0;
  auto emit = [&](ActionKind kind, int c, int mb = -1) { out.push_back(Action{kind, c, mb, -1}); };
  auto contains = [](const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); };
  auto release_except = [&](const std::vector<int>& keep) {
    for (int u = 0; u < k_units; ++u) {
      if (live[u] && !contains(keep, u)) {
        emit(ActionKind::kRelease, u);
        live[u] = false;
        --n_live;
      }
    }
  };
  auto gather = [&](int u) {
    emit(ActionKind::kGather, u);
    live[u] = true;
    ++n_live;
  };
  auto ensure = [&](int k) {
    const std::vector<int> n = need(k);
    for (int u : n) {
      if (live[u]) continue;
      if (cap > 0 && n_live >= cap) release_except(n);
      gather(u);
    }
  };
  auto prefetch = [&](int k, int dir) {
    for (int d = 1; d <= p.prefetch_depth; ++d) {
      const int j = k + dir * d;
      if (j < 0 || j >= k_units) return;
      const std::vector<int> n = need(j);
      int sharded = 0;
      for (int u : n) sharded += live[u] ? 0 : 1;
      if (cap > 0 && n_live + sharded > cap) return;
      for (int u : n) {
        if (!live[u]) gather(u);
      }
    }
  };
  for (int mb = 0; mb < m; ++mb) {
    const bool last_mb = mb == m - 1;
    for (int k = 0; k < k_units; ++k) {
      ensure(k);
      prefetch(k, +1);
      emit(ActionKind::kForward, k, mb);
      if (p.reshard_after_forward && k + 1 < k_units) release_except(need(k + 1));
    }
    for (int k = k_units - 1; k >= 0; --k) {
      ensure(k);
      prefetch(k, -1);
      emit(ActionKind::kBackward, k, mb);
      if (!p.no_sync) {
        for (int u = 0; u < k_units; ++u) {
          if (last_writer[u] == k) emit(ActionKind::kReduceGrad, u);
        }
      }
      std::vector<int> keep;
      if (k > 0) {
        keep = need(k - 1);
        // Without resharding after forward, units still ahead in backward stay gathered.
        if (!p.reshard_after_forward) {
          for (int u = 0; u < k - 1; ++u) keep.push_back(u);
        }
      } else if (!last_mb) {
        keep = need(0);
      }
      release_except(keep);
    }
  }
  if (p.no_sync) {
    for (int u = 0; u < k_units; ++u) emit(ActionKind::kReduceGrad, u);
  }
  emit(ActionKind::kOptimizerStep, -1);
  return s;
}

Schedule ZeroPP(int pp, int v, int m, int u, const GenOptions& o) {
  CheckCommon("zeropp", pp, v, m);
  Require(u >= 1, absl::StrCat("zeropp: U(", u, ") must be >= 1"));
  CheckDeferral("zeropp", o);
  std::vector<std::vector<int>> units;
  for (int start = 0; start < m; start += u) {
    units.emplace_back();
    for (int i = start; i < std::min(m, start + u); ++i) units.back().push_back(i);
  }
  for (size_t i = 0; i < units.size(); ++i) {
    Require(static_cast<int>(units[i].size()) >= pp,
            absl::StrCat("zeropp: unit ", i, " has ", units[i].size(), " micro-batches (m(", m, ") split by U(", u,
                         ")) but every unit needs at least pp(", pp, ")"));
  }
  Schedule s = Blank("zeropp", pp, v, m, u);
  for (int r = 0; r < pp; ++r) {
    auto& out = s.ranks[r];
    RankBuilder b(pp, v, r, &out);
    int current = -1;  // chunk whose weights are gathered
    auto use = [&](int c) {
      if (current == c) return;
      if (current >= 0) b.Emit(ActionKind::kRelease, current);
      b.Emit(ActionKind::kGather, c);
      current = c;
    };
    for (const auto& mbs : units) {
      const int un = static_cast<int>(mbs.size());
      const int n = un * v;
      const int warm = std::min(2 * (pp - 1 - r) + (v - 1) * un, n);
      std::vector<std::pair<int, int>> stack;  // deferred W: (chunk, mb), LIFO
      std::vector<int> w_left(v, 0);           // W's still to run per chunk in this unit
      for (int c = 0; c < v; ++c) w_left[c] = un;
      auto fwd = [&](int step) {
        int c = step / un;
        use(c);
        b.Forward(c, mbs[step % un]);
      };
      auto weight = [&](int c, int mb) {
        b.Emit(ActionKind::kBackwardWeight, c, mb);
        if (--w_left[c] == 0) b.Emit(ActionKind::kReduceGrad, c);
      };
      auto bwd = [&](int step) {
        int c = v - 1 - step / un;
        use(c);
        b.Backward(ActionKind::kBackwardInput, c, mbs[step % un]);
        return std::make_pair(c, mbs[step % un]);
      };
      WarmSteadyCool(warm, n, fwd, [&](int k, bool steady) {
        auto done = bwd(k);
        if (steady && k <= 2 * r && DeferMore(o, stack.size())) {
          stack.push_back(done);
        } else {
          weight(done.first, done.second);
        }
      });
      while (!stack.empty()) {
        weight(stack.back().first, stack.back().second);
        stack.pop_back();
      }
    }
    if (current >= 0) b.Emit(ActionKind::kRelease, current);
    b.Emit(ActionKind::kOptimizerStep);
  }
  return Finish(s, o, false);
}

Schedule ForwardOnly(const Schedule& s) {
  Schedule f = s;
  f.name = s.name + "-forward";
  f.forward_only = true;
  f.recompute.clear();
  for (auto& actions : f.ranks) {
    std::vector<Action> kept;
    for (const Action& a : actions) {
      const bool keep = a.kind == ActionKind::kGather || a.kind == ActionKind::kRelease ||
                        a.kind == ActionKind::kForward || a.kind == ActionKind::kSendAct ||
                        a.kind == ActionKind::kRecvAct;
      if (keep) kept.push_back(a);
    }
    // Drop a gather whose chunk no forward uses (itself, or through needs) before its release (or
    // the end), and that release.
    auto uses = [&](const Action& a, int c) {
      if (a.kind != ActionKind::kForward) return false;
      const auto& n = f.Needs(a.chunk);
      return a.chunk == c || std::find(n.begin(), n.end(), c) != n.end();
    };
    std::vector<bool> drop(kept.size(), false);
    for (size_t i = 0; i < kept.size(); ++i) {
      if (kept[i].kind != ActionKind::kGather) continue;
      const int c = kept[i].chunk;
      size_t j = i + 1;
      bool used = false;
      while (j < kept.size() && !(kept[j].kind == ActionKind::kRelease && kept[j].chunk == c)) {
        used = used || uses(kept[j], c);
        ++j;
      }
      if (used) continue;
      drop[i] = true;
      if (j < kept.size()) drop[j] = true;
    }
    std::vector<Action> out;
    for (size_t i = 0; i < kept.size(); ++i) {
      if (!drop[i]) out.push_back(kept[i]);
    }
    actions = std::move(out);
  }
  return f;
}

Schedule Generate(const std::string& name, int pp, int v, int m, int u, const GenOptions& o) {
  auto only_v1 = [&] { Require(v == 1, absl::StrCat(name, ": v(", v, ") must be 1 (use interleaved or zeropp)")); };
  if (name == "gpipe") return only_v1(), GPipe(pp, m, o);
  if (name == "1f1b") return only_v1(), OneFOneB(pp, m, o);
  if (name == "interleaved") return Interleaved(pp, v, m, o);
  if (name == "zeropp") return ZeroPP(pp, v, m, u, o);
  if (name == "zb-h1") return only_v1(), ZbH1(pp, m, o);
  if (name == "deepspeed") return only_v1(), DeepSpeed1F1B(pp, m, o);
  if (name == "zero3") {
    Require(pp == 1 && v == 1, absl::StrCat("zero3: pp(", pp, ") and v(", v, ") must be 1"));
    return Zero3(m, Zero3Plan{}, o);
  }
  throw std::invalid_argument("schedule: got '" + name + "', expected one of: gpipe, 1f1b, interleaved, zeropp, zb-h1, deepspeed, zero3");
}

}  // namespace scheduler
}  // namespace zeropp
