// Stage partitioning: the dynamic program's most expensive stage equals a brute-force search over
// every contiguous split; "uniform" is the unit-count split; GPT unit costs follow the parameter
// formulas (embedding lookups cost nothing, the tied head vocab*width, a block 12w^2+13w).
#include "scheduler/runtime/stage_partition.h"

#include <algorithm>
#include <functional>
#include <random>
#include <stdexcept>

#include <torch/nn/modules/container/sequential.h>

#include "gtest/gtest.h"
#include "models/gpt.h"

namespace zeropp {
namespace scheduler {
namespace {

int64_t MaxStage(const std::vector<int64_t>& costs, const std::vector<int>& stage, int stages) {
  std::vector<int64_t> sum(stages, 0);
  for (size_t u = 0; u < costs.size(); ++u) sum[stage[u]] += costs[u];
  return *std::max_element(sum.begin(), sum.end());
}

// The best maximum over all ways to cut k units into `stages` non-empty contiguous runs.
int64_t BruteForce(const std::vector<int64_t>& costs, int stages) {
  const int k = static_cast<int>(costs.size());
  int64_t best = -1;
  std::function<void(int, int, int64_t)> go = [&](int start, int left, int64_t worst) {
    if (left == 1) {
      int64_t s = 0;
      for (int u = start; u < k; ++u) s += costs[u];
      const int64_t w = std::max(worst, s);
      if (best < 0 || w < best) best = w;
      return;
    }
    int64_t s = 0;
    for (int end = start + 1; end <= k - (left - 1); ++end) {
      s += costs[end - 1];
      go(end, left - 1, std::max(worst, s));
    }
  };
  go(0, stages, 0);
  return best;
}

TEST(StagePartitionTest, MatchesBruteForceAndIsContiguous) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    const int k = 1 + static_cast<int>(rng() % 9);
    const int stages = 1 + static_cast<int>(rng() % k);
    std::vector<int64_t> costs(k);
    for (auto& c : costs) c = static_cast<int64_t>(rng() % 50);
    const std::vector<int> st = PartitionStages(costs, stages, "parameters");
    ASSERT_EQ(st.size(), costs.size());
    EXPECT_EQ(st.front(), 0);
    EXPECT_EQ(st.back(), stages - 1);
    for (int u = 1; u < k; ++u) EXPECT_TRUE(st[u] == st[u - 1] || st[u] == st[u - 1] + 1) << "trial " << trial;
    EXPECT_EQ(MaxStage(costs, st, stages), BruteForce(costs, stages)) << "trial " << trial;
  }
}

TEST(StagePartitionTest, UniformSplitsByUnitCount) {
  const std::vector<int64_t> costs(11, 1);
  const std::vector<int> st = PartitionStages(costs, 4, "uniform");
  for (int u = 0; u < 11; ++u) EXPECT_EQ(st[u], u * 4 / 11);
}

TEST(StagePartitionTest, RefusesTooFewUnitsAndUnknownMethods) {
  try {
    PartitionStages({1, 2, 3}, 4, "parameters");
    FAIL() << "3 units on 4 stages accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("3 scheduling units but 4 virtual stages"), std::string::npos) << e.what();
  }
  try {
    PartitionStages({1, 2, 3}, 2, "layers");
    FAIL() << "unknown method accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("partition: got 'layers'"), std::string::npos) << e.what();
  }
}

TEST(StagePartitionTest, GptUnitCostsAndBalancedStages) {
  models::GptConfig g;
  g.vocab = 64;
  g.context = 16;
  g.width = 32;
  g.depth = 6;
  g.heads = 4;
  torch::nn::Sequential seq = models::MakeGpt(g);
  std::vector<int> starts;
  for (int c = 0; c < static_cast<int>(seq->size()); ++c) starts.push_back(c);
  const std::vector<int64_t> costs = UnitCosts(*seq, starts);
  const int64_t w = g.width, block = 12 * w * w + 13 * w;
  ASSERT_EQ(costs.size(), static_cast<size_t>(g.depth + 3));
  EXPECT_EQ(costs[0], 0) << "embedding lookups are not matmuls";
  for (int b = 1; b <= g.depth; ++b) EXPECT_EQ(costs[b], block) << "block " << b - 1;
  EXPECT_EQ(costs[g.depth + 1], 2 * w) << "final layer norm";
  EXPECT_EQ(costs[g.depth + 2], g.vocab * w) << "tied head";
  // 4 stages: 6 blocks cannot split evenly; the best keeps every stage at 2 blocks or less.
  const std::vector<int> st = PartitionStages(costs, 4, "parameters");
  EXPECT_EQ(MaxStage(costs, st, 4), 2 * block);
}

}  // namespace
}  // namespace scheduler
}  // namespace zeropp
