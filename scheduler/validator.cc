#include "scheduler/validator.h"

#include <map>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace zeropp {
namespace scheduler {
namespace {

using Key = std::tuple<int, int, int, int, int>;  // (is_grad, src, dst, chunk, mb)

bool IsSend(ActionKind k) { return k == ActionKind::kSendAct || k == ActionKind::kSendGrad; }
bool IsRecv(ActionKind k) { return k == ActionKind::kRecvAct || k == ActionKind::kRecvGrad; }
bool IsGrad(ActionKind k) { return k == ActionKind::kSendGrad || k == ActionKind::kRecvGrad; }

// (receiver's chunk, mb) of a receive of the sender's (chunk, mb): activations go one virtual
// stage up, gradients one down.
std::pair<int, int> ReceiverChunk(const Schedule& s, int receiver, const Action& recv, int mb) {
  const int sender_stage = recv.chunk * s.pp + recv.peer;
  const int mine = IsGrad(recv.kind) ? sender_stage - 1 : sender_stage + 1;
  (void)receiver;
  return {mine / s.pp, mb};
}

struct RankState {
  size_t pc = 0;
  std::set<int> gathered;
  std::set<std::pair<int, int>> forwarded, backwarded, pending_w, weighted;
  std::set<std::pair<int, int>> got_act, got_grad;  // (chunk on this rank, mb) whose input arrived
  std::map<int, int> last_backward_pos;             // chunk -> index of its last B/W
  int kept = 0;                                      // stashed forwards of chunks not recomputed
  RankReport report;
};

}  // namespace

ValidationReport Validate(const Schedule& s, P2PMode mode) {
  ValidationReport rep;
  const int pp = static_cast<int>(s.ranks.size());
  std::vector<RankState> st(pp);
  std::multiset<Key> in_flight;  // sent, not yet received (eager)
  std::vector<std::vector<char>> matched(pp);  // rendezvous: transfer already paired
  for (int r = 0; r < pp && r < static_cast<int>(s.ranks.size()); ++r) matched[r].assign(s.ranks[r].size(), 0);
  auto fail = [&](const std::string& msg) {
    if (rep.ok) {
      rep.ok = false;
      rep.error = absl::StrCat("schedule ", s.name, " (pp=", s.pp, " v=", s.v, " m=", s.m, " u=", s.u, "): ", msg);
    }
  };
  if (pp != s.pp) fail(absl::StrCat("has ", pp, " rank lists, expected pp=", s.pp));
  auto vstage = [&](int r, int c) { return c * s.pp + r; };
  const int last_stage = s.v * s.pp - 1;
  // Rank/chunk of virtual stage x.
  auto where = [&](int x) { return std::make_pair(x % s.pp, x / s.pp); };
  auto key_of = [&](int r, const Action& a) {
    // Sends carry the sender's chunk; receives name the sender's chunk too.
    return IsSend(a.kind) ? Key{IsGrad(a.kind), r, a.peer, a.chunk, a.mb} : Key{IsGrad(a.kind), a.peer, r, a.chunk, a.mb};
  };
  // Runs local action a on rank r (all preconditions except transfers); false = error recorded.
  auto run_local = [&](int r, const Action& a) {
    RankState& x = st[r];
    const std::string at = absl::StrCat("rank ", r, " action #", x.pc, " ", a.ToString(), ": ");
    const std::pair<int, int> cm{a.chunk, a.mb};
    auto gathered = [&] {
      if (!x.gathered.count(a.chunk)) fail(at + "chunk not gathered");
      for (int d : s.Needs(a.chunk)) {
        if (!x.gathered.count(d)) fail(absl::StrCat(at, "chunk ", d, " (whose tied parameters it uses) not gathered"));
      }
    };
    switch (a.kind) {
      case ActionKind::kGather:
        if (x.gathered.count(a.chunk)) fail(at + "chunk already gathered");
        x.gathered.insert(a.chunk);
        x.report.gathers++;
        x.report.peak_gathered = std::max<int>(x.report.peak_gathered, x.gathered.size());
        break;
      case ActionKind::kRelease:
        if (!x.gathered.erase(a.chunk)) fail(at + "chunk was not gathered");
        break;
      case ActionKind::kForward: {
        gathered();
        if (x.forwarded.count(cm)) fail(at + "second forward of this micro-batch");
        const int stage = vstage(r, a.chunk);
        if (stage > 0) {
          auto [pr, pc] = where(stage - 1);
          bool have = pr == r ? st[r].forwarded.count({pc, a.mb}) > 0 : x.got_act.count(cm) > 0;
          if (!have) fail(at + "input activation not available (missing receive or earlier forward)");
        }
        x.forwarded.insert(cm);
        x.report.peak_activations = std::max<int>(x.report.peak_activations, x.forwarded.size() - x.backwarded.size());
        if (!s.Recompute(r, a.chunk)) x.report.peak_kept_activations = std::max(x.report.peak_kept_activations, ++x.kept);
        break;
      }
      case ActionKind::kBackward:
      case ActionKind::kBackwardInput: {
        gathered();
        if (!x.forwarded.count(cm)) fail(at + "backward before forward");
        if (x.backwarded.count(cm)) fail(at + "second backward of this micro-batch");
        const int stage = vstage(r, a.chunk);
        if (stage < last_stage) {
          auto [nr, nc] = where(stage + 1);
          bool have = nr == r ? st[r].backwarded.count({nc, a.mb}) > 0 : x.got_grad.count(cm) > 0;
          if (!have) fail(at + "output gradient not available (missing receive or later backward)");
        }
        x.backwarded.insert(cm);
        if (!s.Recompute(r, a.chunk)) --x.kept;
        if (a.kind == ActionKind::kBackwardInput) {
          x.pending_w.insert(cm);
          x.report.peak_pending_w = std::max<int>(x.report.peak_pending_w, x.pending_w.size());
        } else {
          x.weighted.insert(cm);
          x.last_backward_pos[a.chunk] = static_cast<int>(x.pc);
          for (int d : s.Needs(a.chunk)) x.last_backward_pos[d] = static_cast<int>(x.pc);
        }
        break;
      }
      case ActionKind::kBackwardWeight:
        if (!x.pending_w.erase(cm)) fail(at + "weight gradient without a pending input-gradient pass");
        x.weighted.insert(cm);
        x.last_backward_pos[a.chunk] = static_cast<int>(x.pc);
        break;
      case ActionKind::kReduceGrad:
        x.report.reduce_grads++;
        break;
      case ActionKind::kOptimizerStep:
        if (x.pc + 1 != s.ranks[r].size()) fail(at + "optimizer step is not the last action");
        break;
      default:
        break;
    }
  };
  // Main loop.
  bool progress = true;
  while (rep.ok && progress) {
    progress = false;
    for (int r = 0; r < pp && rep.ok; ++r) {
      while (rep.ok && st[r].pc < s.ranks[r].size()) {
        const Action& a = s.ranks[r][st[r].pc];
        if (IsSend(a.kind) || IsRecv(a.kind)) {
          if (a.peer < 0 || a.peer >= pp || a.peer == r) {
            fail(absl::StrCat("rank ", r, " action #", st[r].pc, " ", a.ToString(), ": bad peer"));
            break;
          }
          Key k = key_of(r, a);
          if (mode == P2PMode::kRendezvous) {
            // Batched posting (Megatron's batch_isend_irecv): the run of transfers at the head is
            // posted together; each completes only once its partner is posted in the peer's run.
            size_t end = st[r].pc;
            while (end < s.ranks[r].size() && (IsSend(s.ranks[r][end].kind) || IsRecv(s.ranks[r][end].kind))) ++end;
            bool all = true;
            for (size_t i = st[r].pc; i < end; ++i) {
              if (matched[r][i]) continue;
              const Action& mine = s.ranks[r][i];
              const int p = mine.peer;
              bool found = false;
              for (size_t j = st[p].pc; j < s.ranks[p].size(); ++j) {
                const Action& theirs = s.ranks[p][j];
                if (!(IsSend(theirs.kind) || IsRecv(theirs.kind))) break;
                if (!matched[p][j] && theirs.peer == r && IsSend(theirs.kind) != IsSend(mine.kind) &&
                    key_of(p, theirs) == key_of(r, mine)) {
                  matched[p][j] = matched[r][i] = 1;
                  const Action& recv = IsRecv(mine.kind) ? mine : theirs;
                  const int receiver = IsRecv(mine.kind) ? r : p;
                  (IsGrad(recv.kind) ? st[receiver].got_grad : st[receiver].got_act)
                      .insert(ReceiverChunk(s, receiver, recv, recv.mb));
                  found = true;
                  break;
                }
              }
              all = all && found;
            }
            if (!all) break;
            st[r].pc = end;
            progress = true;
            continue;
          }
          if (IsSend(a.kind)) {
            in_flight.insert(k);
          } else {
            auto it = in_flight.find(k);
            if (it == in_flight.end()) break;
            in_flight.erase(it);
            (IsGrad(a.kind) ? st[r].got_grad : st[r].got_act).insert(ReceiverChunk(s, r, a, a.mb));
          }
        } else {
          run_local(r, a);
        }
        st[r].pc++;
        progress = true;
      }
    }
  }
  if (rep.ok) {
    std::vector<std::string> stuck;
    for (int r = 0; r < pp; ++r) {
      if (st[r].pc < s.ranks[r].size()) {
        stuck.push_back(absl::StrCat("rank ", r, " at #", st[r].pc, " ", s.ranks[r][st[r].pc].ToString()));
      }
    }
    if (!stuck.empty()) fail(absl::StrCat("deadlock: ", absl::StrJoin(stuck, "; ")));
  }
  if (rep.ok && !in_flight.empty()) fail(absl::StrCat(in_flight.size(), " send(s) never received"));
  for (int r = 0; r < pp && rep.ok; ++r) {
    RankState& x = st[r];
    for (int c = 0; c < s.v; ++c) {
      for (int mb = 0; mb < s.m; ++mb) {
        if (!x.forwarded.count({c, mb}) || (!s.forward_only && !x.weighted.count({c, mb}))) {
          fail(absl::StrCat("rank ", r, " chunk ", c, " micro-batch ", mb, " lacks its forward or full backward"));
        }
      }
      // The chunk's last reduce must follow its last backward/weight pass.
      int last_rs = -1;
      for (size_t i = 0; i < s.ranks[r].size(); ++i) {
        if (s.ranks[r][i].kind == ActionKind::kReduceGrad && s.ranks[r][i].chunk == c) last_rs = static_cast<int>(i);
      }
      if (!s.forward_only && last_rs < x.last_backward_pos[c]) {
        fail(absl::StrCat("rank ", r, " chunk ", c, ": no gradient reduction after its last backward"));
      }
    }
    if (!x.gathered.empty()) fail(absl::StrCat("rank ", r, " ends with gathered chunks"));
    rep.ranks.push_back(x.report);
  }
  return rep;
}

}  // namespace scheduler
}  // namespace zeropp
