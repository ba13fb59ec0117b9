// diagnose: reads the flight records every rank dumped (zeropp/flight_recorder.h) and says, in
// one paragraph per group, the first collective where the ranks diverge: who entered it, who never
// arrived (and their last operation), or which ranks issued a different collective there.
//
//   ./zpp diagnose /tmp/zeropp-flight          (ZEROPP_FLIGHT_DIR of the failed run)
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "zeropp/cli/cli_main.h"

namespace zeropp {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

struct Op {
  std::string kind, state;
  int64_t bytes = 0;
};

std::string OpText(uint64_t seq, const Op& op) {
  return absl::StrCat("#", seq, " ", op.kind, " (", op.bytes, " bytes, ", op.state, ")");
}

int Main(int argc, char** argv) {
  if (argc != 2) throw std::invalid_argument("usage: diagnose DIR (the flight records of a failed run)");
  const std::string dir = argv[1];
  std::map<int, std::string> why;                                   // rank -> reason of its dump
  std::map<std::string, std::vector<int>> members;                  // group -> global ranks
  std::map<std::string, std::map<int, std::map<uint64_t, Op>>> ops;  // group -> rank -> seq -> op
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("rank", 0) != 0 || e.path().extension() != ".json") continue;
    Json j;
    try {
      j = Json::parse(std::ifstream(e.path()));
    } catch (const std::exception& ex) {
      throw std::invalid_argument(absl::StrCat("diagnose: ", e.path().string(), ": not valid JSON: ", ex.what()));
    }
    const int rank = j.value("rank", -1);
    why[rank] = j.value("why", "");
    for (const auto& g : j["groups"]) {
      const std::string gname = g.value("name", "");
      members[gname] = g["ranks"].get<std::vector<int>>();
      auto& mine = ops[gname][rank];
      for (const auto& o : g["ops"]) {
        const std::string kind = o.value("kind", "");
        if (kind == "send" || kind == "recv") continue;  // point-to-point: numbered per rank
        mine[o.value("seq", uint64_t{0})] = {kind, o.value("state", ""), o.value("bytes", int64_t{0})};
      }
    }
  }
  if (ec || why.empty()) throw std::invalid_argument("diagnose: no flight records (rank*.json) in '" + dir + "'");
  int problems = 0;
  for (const auto& [gname, ranks] : members) {
    const auto& by_rank = ops[gname];
    std::vector<int> no_record;
    uint64_t last = 0;
    for (int r : ranks) {
      auto it = by_rank.find(r);
      if (it == by_rank.end()) {
        no_record.push_back(r);
      } else if (!it->second.empty()) {
        last = std::max(last, it->second.rbegin()->first);
      }
    }
    // The first sequence number at which the ranks' records disagree or an operation did not finish.
    for (uint64_t s = 1; s <= last; ++s) {
      std::vector<std::string> entered, absent, different;
      const Op* first = nullptr;
      bool unfinished = false;
      for (int r : ranks) {
        auto it = by_rank.find(r);
        if (it == by_rank.end()) continue;
        auto op = it->second.find(s);
        if (op == it->second.end()) {
          if (it->second.empty() || it->second.rbegin()->first < s) {
            absent.push_back(absl::StrCat("rank ", r, it->second.empty() ? " (no operation recorded)"
                                                                          : absl::StrCat(" (last: ", OpText(it->second.rbegin()->first, it->second.rbegin()->second), ")")));
          }
          continue;  // older than the log holds
        }
        if (!first) first = &op->second;
        if (op->second.kind != first->kind || op->second.bytes != first->bytes) {
          different.push_back(absl::StrCat("rank ", r, " ran ", OpText(s, op->second)));
        }
        unfinished = unfinished || op->second.state != "done";
        entered.push_back(absl::StrCat("rank ", r, " (", op->second.state, ")"));
      }
      if (absent.empty() && different.empty() && !unfinished) continue;
      ++problems;
      std::string p = absl::StrCat("group '", gname, "' (ranks ", absl::StrJoin(ranks, ","), "): the first operation where the ranks diverge is ",
                                   first ? OpText(s, *first) : absl::StrCat("#", s), ". ");
      if (!entered.empty()) absl::StrAppend(&p, "Entered by ", absl::StrJoin(entered, ", "), ". ");
      if (!absent.empty()) absl::StrAppend(&p, "Never arrived: ", absl::StrJoin(absent, ", "), ". ");
      if (!different.empty()) {
        absl::StrAppend(&p, "Different collectives at the same point: ", absl::StrJoin(different, "; "),
                        " (the ranks issued different operations). ");
      }
      if (absent.empty() && different.empty()) absl::StrAppend(&p, "Every rank entered it; it did not finish (a peer died or is slow inside it). ");
      std::vector<std::string> reasons;
      for (int r : ranks) {
        if (why.count(r)) reasons.push_back(absl::StrCat("rank ", r, ": ", why[r]));
      }
      absl::StrAppend(&p, "Why each rank dumped: ", absl::StrJoin(reasons, " | "));
      if (!no_record.empty()) absl::StrAppend(&p, ". No flight record from ranks ", absl::StrJoin(no_record, ","));
      std::printf("%s\n", p.c_str());
      break;
    }
  }
  if (problems == 0) std::printf("diagnose: the %zu ranks' records agree; every recorded collective finished\n", why.size());
  return 0;
}

}  // namespace
}  // namespace zeropp

int main(int argc, char** argv) { return zeropp::cli::RunMain(argc, argv, zeropp::Main); }
