// PlanUnits is a pure function of the model's structure: units, ties and their needs are known
// before any engine, process group or executor exists.
#include "zeropp/unit_plan.h"

#include <gtest/gtest.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>

#include "models/gpt.h"

namespace zeropp {
namespace {

TEST(UnitPlanTest, TiedEmbeddingAndHeadOfTheGpt) {
  models::GptConfig c;
  c.vocab = 29;
  c.context = 6;
  c.width = 12;
  c.depth = 2;
  c.heads = 2;
  auto gpt = models::MakeGpt(c);
  const UnitPlan plan = PlanUnits(*gpt, UnitPolicy{});
  const int k = plan.num_units();
  ASSERT_EQ(k, static_cast<int>(gpt->size()));  // one unit per child by default
  // The head (last child) uses the embedding's weight: it needs unit 0, nothing else needs anything.
  for (int u = 0; u + 1 < k; ++u) EXPECT_TRUE(plan.needs[u].empty()) << u;
  EXPECT_EQ(plan.needs[k - 1], std::vector<int>{0});
  ASSERT_EQ(plan.tied.size(), 1u);
  EXPECT_EQ(plan.tied[0].units, (std::vector<int>{0, k - 1}));
  EXPECT_TRUE(plan.tied[0].trainable);
}

TEST(UnitPlanTest, PoliciesAndRefusals) {
  torch::nn::Sequential mlp(torch::nn::Linear(7, 15), torch::nn::Linear(15, 9), torch::nn::Linear(9, 5));
  UnitPolicy by_size;
  by_size.kind = UnitPolicy::Kind::kBySize;
  by_size.target_numel = 100;  // 7*15+15 = 120 closes unit 0; 15*9+9 = 144 closes unit 1
  EXPECT_EQ(PlanUnits(*mlp, by_size).starts, (std::vector<int>{0, 1, 2}));
  by_size.target_numel = 1000;
  EXPECT_EQ(PlanUnits(*mlp, by_size).starts, (std::vector<int>{0}));
  UnitPolicy expl;
  expl.kind = UnitPolicy::Kind::kExplicit;
  expl.starts = {0, 2};
  EXPECT_EQ(PlanUnits(*mlp, expl).starts, (std::vector<int>{0, 2}));
  expl.starts = {0, 3};
  try {
    PlanUnits(*mlp, expl);
    FAIL() << "a start past the last child was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "units.starts([0,3]): expected 0 first and every start below the model's 3 children");
  }
  torch::nn::Sequential empty;
  EXPECT_THROW(PlanUnits(*empty, UnitPolicy{}), std::invalid_argument);
}

}  // namespace
}  // namespace zeropp
