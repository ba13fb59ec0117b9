// ParallelConfig::Validate and the rank layout, without any communication.
#include "zeropp/parallel_config.h"

#include <gtest/gtest.h>

namespace zeropp {
namespace {

struct Case {
  ParallelConfig cfg;
  int world;
  std::string expected;  // empty = valid; otherwise a substring of the message
};

TEST(ParallelConfigTest, ValidateTable) {
  const std::vector<Case> cases = {
      {{1, 1, 1, DpMode::kDp}, 1, ""},
      {{2, 2, 1, DpMode::kDp}, 4, ""},
      {{4, 2, 2, DpMode::kZero1}, 16, ""},
      {{1, 4, 1, DpMode::kDp}, 4, ""},
      {{4, 2, 2, DpMode::kDp}, 12, "pp(4)*zero(2)*dp(2)=16 != world_size(12)"},
      {{2, 2, 1, DpMode::kDp}, 3, "pp(2)*zero(2)*dp(1)=4 != world_size(3)"},
      {{0, 2, 1, DpMode::kDp}, 2, "pp(0) must be >= 1"},
      {{1, -1, 1, DpMode::kDp}, 1, "zero(-1) must be >= 1"},
      {{1, 1, 0, DpMode::kDp}, 1, "dp(0) must be >= 1"},
      {{1, 1, 1, DpMode::kDp}, 0, "world_size(0) must be >= 1"},
      {{2, 2, 1, DpMode::kZero1}, 4, "dp_mode(zero1) needs dp > 1, got dp(1)"},
  };
  for (const auto& c : cases) {
    std::string err = c.cfg.Validate(c.world);
    if (c.expected.empty()) {
      EXPECT_EQ(err, "") << c.cfg.ToString() << " world " << c.world;
    } else {
      EXPECT_NE(err.find(c.expected), std::string::npos)
          << c.cfg.ToString() << " world " << c.world << ": got '" << err << "'";
    }
  }
}

TEST(ParallelConfigTest, ReportsEveryProblemAtOnce) {
  ParallelConfig cfg{0, 0, 1, DpMode::kDp};
  std::string err = cfg.Validate(4);
  EXPECT_NE(err.find("pp(0)"), std::string::npos) << err;
  EXPECT_NE(err.find("zero(0)"), std::string::npos) << err;
  EXPECT_THROW(cfg.ValidateOrThrow(4), std::invalid_argument);
}

TEST(ParallelConfigTest, RankLayoutFormula) {
  ParallelConfig cfg{3, 2, 2, DpMode::kDp};
  ASSERT_EQ(cfg.Validate(12), "");
  for (int rank = 0; rank < 12; ++rank) {
    MeshCoord c = cfg.CoordOf(rank);
    EXPECT_EQ((c.dp_index * cfg.pp + c.pp_index) * cfg.zero + c.zero_index, rank);
    EXPECT_EQ(cfg.RankOf(c), rank);
  }
  // rank 7 = (dp 1, pp 0, zero 1)
  EXPECT_EQ(cfg.CoordOf(7), (MeshCoord{1, 0, 1}));
  EXPECT_EQ(cfg.ZeroGroupRanks(7), (std::vector<int>{6, 7}));
  EXPECT_EQ(cfg.PpGroupRanks(7), (std::vector<int>{7, 9, 11}));
  EXPECT_EQ(cfg.DpGroupRanks(7), (std::vector<int>{1, 7}));
  EXPECT_THROW(cfg.CoordOf(12), std::out_of_range);
}

TEST(ParallelConfigTest, GroupsPartitionTheWorld) {
  ParallelConfig cfg{2, 4, 2, DpMode::kZero1};
  const int world = cfg.WorldSize();
  for (auto groups_of : {&ParallelConfig::ZeroGroupRanks, &ParallelConfig::PpGroupRanks,
                         &ParallelConfig::DpGroupRanks}) {
    std::vector<int> seen(world, 0);
    for (int r = 0; r < world; ++r) {
      auto g = (cfg.*groups_of)(r);
      EXPECT_NE(std::find(g.begin(), g.end(), r), g.end());
      if (g.front() == r) {
        for (int m : g) seen[m]++;
      }
    }
    for (int r = 0; r < world; ++r) EXPECT_EQ(seen[r], 1) << "rank " << r;
  }
}

TEST(ParallelConfigTest, ParseDpMode) {
  EXPECT_EQ(ParseDpMode("dp"), DpMode::kDp);
  EXPECT_EQ(ParseDpMode("zero1"), DpMode::kZero1);
  try {
    ParseDpMode("zero2");
    FAIL() << "zero2 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("got 'zero2', expected one of: dp, zero1"), std::string::npos);
  }
}

}  // namespace
}  // namespace zeropp
