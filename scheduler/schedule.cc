#include "scheduler/schedule.h"

#include <sstream>
#include <stdexcept>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace zeropp {
namespace scheduler {
namespace {

struct Spelling {
  ActionKind kind;
  const char* prefix;
};
// Longest prefixes first so that parsing is unambiguous.
const Spelling kSpellings[] = {
    {ActionKind::kBackwardInput, "Bi"}, {ActionKind::kSendAct, "SA"},  {ActionKind::kRecvAct, "RA"},
    {ActionKind::kSendGrad, "SG"},      {ActionKind::kRecvGrad, "RG"}, {ActionKind::kReduceGrad, "RS"},
    {ActionKind::kOptimizerStep, "OPT"}, {ActionKind::kGather, "G"},   {ActionKind::kRelease, "X"},
    {ActionKind::kForward, "F"},        {ActionKind::kBackward, "B"},  {ActionKind::kBackwardWeight, "W"},
};

const char* Prefix(ActionKind k) {
  for (const auto& s : kSpellings)
    if (s.kind == k) return s.prefix;
  return "?";
}

}  // namespace

const char* ActionKindName(ActionKind k) {
  switch (k) {
    case ActionKind::kGather: return "gather";
    case ActionKind::kRelease: return "release";
    case ActionKind::kForward: return "forward";
    case ActionKind::kBackward: return "backward";
    case ActionKind::kBackwardInput: return "backward_input";
    case ActionKind::kBackwardWeight: return "backward_weight";
    case ActionKind::kSendAct: return "send_act";
    case ActionKind::kRecvAct: return "recv_act";
    case ActionKind::kSendGrad: return "send_grad";
    case ActionKind::kRecvGrad: return "recv_grad";
    case ActionKind::kReduceGrad: return "reduce_grad";
    case ActionKind::kOptimizerStep: return "optimizer_step";
  }
  return "?";
}

std::string Action::ToString() const {
  std::string s = Prefix(kind);
  if (kind == ActionKind::kOptimizerStep) return s;
  absl::StrAppend(&s, chunk);
  if (mb >= 0) absl::StrAppend(&s, ".", mb);
  if (kind == ActionKind::kSendAct || kind == ActionKind::kSendGrad) absl::StrAppend(&s, ">", peer);
  if (kind == ActionKind::kRecvAct || kind == ActionKind::kRecvGrad) absl::StrAppend(&s, "<", peer);
  return s;
}

std::string Action::RecomputeName() const { return absl::StrCat("R", chunk, ".", mb); }

Action Action::Parse(const std::string& token) {
  auto bad = [&](const std::string& why) {
    return std::invalid_argument(absl::StrCat("schedule: bad action '", token, "': ", why));
  };
  for (const auto& sp : kSpellings) {
    const std::string p = sp.prefix;
    if (token.compare(0, p.size(), p) != 0) continue;
    Action a;
    a.kind = sp.kind;
    if (a.kind == ActionKind::kOptimizerStep) {
      if (token != "OPT") throw bad("expected OPT");
      return a;
    }
    std::string rest = token.substr(p.size());
    size_t peer_at = rest.find_first_of("<>");
    if (peer_at != std::string::npos) {
      if (!absl::SimpleAtoi(rest.substr(peer_at + 1), &a.peer)) throw bad("peer is not an integer");
      rest = rest.substr(0, peer_at);
    }
    std::vector<std::string> parts = absl::StrSplit(rest, '.');
    if (parts.empty() || !absl::SimpleAtoi(parts[0], &a.chunk)) throw bad("chunk is not an integer");
    if (parts.size() > 1 && !absl::SimpleAtoi(parts[1], &a.mb)) throw bad("micro-batch is not an integer");
    return a;
  }
  throw bad("unknown kind");
}

std::string Schedule::ToString() const {
  std::string s = absl::StrCat("schedule ", name, " pp=", pp, " v=", v, " m=", m, " u=", u,
                               forward_only ? " forward=1" : "", "\n");
  if (!recompute.empty()) {
    s += "recompute:";
    for (const auto& r : recompute) {
      s += " ";
      for (bool b : r) s += b ? "1" : "0";
    }
    s += "\n";
  }
  bool any_needs = false;
  for (const auto& n : needs) any_needs = any_needs || !n.empty();
  if (any_needs) {
    s += "needs:";
    for (size_t c = 0; c < needs.size(); ++c) {
      for (int d : needs[c]) absl::StrAppend(&s, " ", c, ">", d);
    }
    s += "\n";
  }
  for (size_t r = 0; r < ranks.size(); ++r) {
    absl::StrAppend(&s, "rank ", r, ":");
    for (const auto& a : ranks[r]) absl::StrAppend(&s, " ", a.ToString());
    s += "\n";
  }
  return s;
}

Schedule Schedule::Parse(const std::string& text) {
  Schedule sch;
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line)) throw std::invalid_argument("schedule: empty text");
  std::istringstream head(line);
  std::string word;
  head >> word >> sch.name;
  while (head >> word) {
    auto eq = word.find('=');
    int value = 0;
    if (eq == std::string::npos || !absl::SimpleAtoi(word.substr(eq + 1), &value)) {
      throw std::invalid_argument("schedule: bad header field '" + word + "'");
    }
    const std::string key = word.substr(0, eq);
    if (key == "pp") sch.pp = value;
    else if (key == "v") sch.v = value;
    else if (key == "m") sch.m = value;
    else if (key == "u") sch.u = value;
    else if (key == "forward") sch.forward_only = value != 0;
  }
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line.rfind("recompute:", 0) == 0) {
      std::istringstream flags(line.substr(10));
      while (flags >> word) {
        sch.recompute.emplace_back();
        for (char ch : word) sch.recompute.back().push_back(ch == '1');
      }
      continue;
    }
    if (line.rfind("needs:", 0) == 0) {
      std::istringstream pairs(line.substr(6));
      while (pairs >> word) {
        const auto gt = word.find('>');
        int c = 0, d = 0;
        if (gt == std::string::npos || !absl::SimpleAtoi(word.substr(0, gt), &c) ||
            !absl::SimpleAtoi(word.substr(gt + 1), &d) || c < 0 || d < 0 || c >= (1 << 20)) {
          throw std::invalid_argument("schedule: bad needs entry '" + word + "', expected CHUNK>CHUNK");
        }
        if (static_cast<int>(sch.needs.size()) <= c) sch.needs.resize(c + 1);
        sch.needs[c].push_back(d);
      }
      continue;
    }
    auto colon = line.find(':');
    std::istringstream body(line.substr(colon + 1));
    sch.ranks.emplace_back();
    while (body >> word) sch.ranks.back().push_back(Action::Parse(word));
  }
  return sch;
}

bool Schedule::operator==(const Schedule& o) const {
  return name == o.name && pp == o.pp && v == o.v && m == o.m && u == o.u && ranks == o.ranks &&
         recompute == o.recompute && forward_only == o.forward_only && needs == o.needs;
}

int Schedule::Count(int rank, ActionKind kind) const {
  int n = 0;
  for (const auto& a : ranks[rank]) n += a.kind == kind ? 1 : 0;
  return n;
}

}  // namespace scheduler
}  // namespace zeropp
