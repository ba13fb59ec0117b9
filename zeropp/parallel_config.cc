#include "zeropp/parallel_config.h"

#include <stdexcept>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace zeropp {

const char* DpModeName(DpMode mode) { return mode == DpMode::kDp ? "dp" : "zero1"; }

DpMode ParseDpMode(const std::string& text) {
  if (text == "dp") return DpMode::kDp;
  if (text == "zero1") return DpMode::kZero1;
  throw std::invalid_argument(
      absl::StrCat("dp_mode: got '", text, "', expected one of: dp, zero1"));
}

std::string ParallelConfig::Validate(int world_size) const {
  std::vector<std::string> problems;
  if (world_size < 1) problems.push_back(absl::StrCat("world_size(", world_size, ") must be >= 1"));
  if (pp < 1) problems.push_back(absl::StrCat("pp(", pp, ") must be >= 1"));
  if (zero < 1) problems.push_back(absl::StrCat("zero(", zero, ") must be >= 1"));
  if (dp < 1) problems.push_back(absl::StrCat("dp(", dp, ") must be >= 1"));
  if (problems.empty() && static_cast<long long>(pp) * zero * dp != world_size) {
    problems.push_back(absl::StrCat("pp(", pp, ")*zero(", zero, ")*dp(", dp,
                                    ")=", static_cast<long long>(pp) * zero * dp,
                                    " != world_size(", world_size, ")"));
  }
  if (dp_mode == DpMode::kZero1 && dp == 1 && problems.empty()) {
    problems.push_back(absl::StrCat("dp_mode(zero1) needs dp > 1, got dp(", dp,
                                    "); use dp_mode(dp) for a single replica"));
  }
  return absl::StrJoin(problems, "; ");
}

void ParallelConfig::ValidateOrThrow(int world_size) const {
  std::string err = Validate(world_size);
  if (!err.empty()) throw std::invalid_argument("ParallelConfig: " + err);
}

MeshCoord ParallelConfig::CoordOf(int rank) const {
  if (rank < 0 || rank >= WorldSize()) {
    throw std::out_of_range(absl::StrCat("rank(", rank, ") outside world of ", WorldSize(),
                                         " ranks for ", ToString()));
  }
  MeshCoord c;
  c.zero_index = rank % zero;
  c.pp_index = (rank / zero) % pp;
  c.dp_index = rank / (zero * pp);
  return c;
}

std::vector<int> ParallelConfig::ZeroGroupRanks(int rank) const {
  MeshCoord c = CoordOf(rank);
  std::vector<int> out;
  for (c.zero_index = 0; c.zero_index < zero; ++c.zero_index) out.push_back(RankOf(c));
  return out;
}

std::vector<int> ParallelConfig::PpGroupRanks(int rank) const {
  MeshCoord c = CoordOf(rank);
  std::vector<int> out;
  for (c.pp_index = 0; c.pp_index < pp; ++c.pp_index) out.push_back(RankOf(c));
  return out;
}

std::vector<int> ParallelConfig::DpGroupRanks(int rank) const {
  MeshCoord c = CoordOf(rank);
  std::vector<int> out;
  for (c.dp_index = 0; c.dp_index < dp; ++c.dp_index) out.push_back(RankOf(c));
  return out;
}

std::string ParallelConfig::ToString() const {
  return absl::StrCat("pp(", pp, ")*zero(", zero, ")*dp(", dp, ") dp_mode(", DpModeName(dp_mode),
                      ")");
}

}  // namespace zeropp
