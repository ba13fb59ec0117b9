// parallel_config.h: the 3-axis rank mesh (pp x zero x dp) and its validation.
//
// Layout: rank = (dp_index * pp + pp_index) * zero + zero_index. zero is innermost, so a ZeRO-3
// group is a run of consecutive ranks (one node); pipeline stages step by `zero`; data-parallel
// replicas step by `pp * zero`.
//
// Validate() is a pure function: it needs no process group and reports every number involved.
//
//   ParallelConfig cfg{/*pp=*/2, /*zero=*/2, /*dp=*/1, DpMode::kDp};
//   if (auto err = cfg.Validate(world_size); !err.empty()) throw std::invalid_argument(err);
//   MeshCoord me = cfg.CoordOf(rank);
#pragma once

#include <string>
#include <vector>

namespace zeropp {

// How pipeline replicas share work across the dp axis.
enum class DpMode {
  kDp,     // replicas all-reduce gradients; each keeps full optimizer state for its shard
  kZero1,  // replicas also shard optimizer state across the dp axis
};

const char* DpModeName(DpMode mode);
// Parses "dp" or "zero1"; throws std::invalid_argument naming the value and the choices.
DpMode ParseDpMode(const std::string& text);

struct MeshCoord {
  int dp_index = 0;
  int pp_index = 0;
  int zero_index = 0;
  bool operator==(const MeshCoord& o) const {
    return dp_index == o.dp_index && pp_index == o.pp_index && zero_index == o.zero_index;
  }
};

struct ParallelConfig {
  int pp = 1;
  int zero = 1;
  int dp = 1;
  DpMode dp_mode = DpMode::kDp;

  // Empty when the layout fits `world_size`; otherwise one message listing every problem.
  std::string Validate(int world_size) const;
  // Throws std::invalid_argument with Validate's message.
  void ValidateOrThrow(int world_size) const;

  int WorldSize() const { return pp * zero * dp; }
  int RankOf(const MeshCoord& c) const { return (c.dp_index * pp + c.pp_index) * zero + c.zero_index; }
  MeshCoord CoordOf(int rank) const;

  // Global ranks of the groups `rank` belongs to, in group-rank order.
  std::vector<int> ZeroGroupRanks(int rank) const;  // same (dp, pp), all zero indices
  std::vector<int> PpGroupRanks(int rank) const;    // same (dp, zero), all pipeline stages
  std::vector<int> DpGroupRanks(int rank) const;    // same (pp, zero), all replicas

  std::string ToString() const;
};

}  // namespace zeropp
