// PlanUnits is a pure function of the model's structure: units, ties and their needs are known
// before any engine, process group or executor exists.
#include "zeropp/unit_plan.h"

#include <gtest/gtest.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>

#include "models/gpt.h"

namespace zeropp {
namespace {

// A child that registers another child's Linear again (a tie).
struct ReuseImpl : torch::nn::Module {
  explicit ReuseImpl(torch::nn::Linear l) : inner(register_module("inner", l)) {}
  at::Tensor forward(const at::Tensor& x) { return inner->forward(x); }
  torch::nn::Linear inner;
};
TORCH_MODULE(Reuse);

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

// One tensor registered by three children (units 0, 2, 4): which unit holds it on a rank that
// holds only some units, and which pipeline ranks share it.
TEST(UnitPlanTest, TiesUnderPartialOwnershipAndAcrossStages) {
  torch::nn::Linear shared(4, 4);
  torch::nn::Sequential model(shared, torch::nn::Linear(4, 4), Reuse(shared), torch::nn::Linear(4, 4), Reuse(shared));
  const UnitPlan plan = PlanUnits(*model, UnitPolicy{});
  ASSERT_EQ(plan.tied.size(), 2u);  // weight and bias
  EXPECT_EQ(plan.tied[0].units, (std::vector<int>{0, 2, 4}));
  EXPECT_EQ(plan.needs[2], std::vector<int>{0});
  EXPECT_EQ(plan.needs[4], std::vector<int>{0});
  // A rank holding units 2..4 only: unit 2 holds the tensor, unit 4 needs unit 2.
  const std::vector<bool> late = {false, false, true, true, true};
  EXPECT_EQ(TiedHolder(plan.tied[0], late), 2);
  EXPECT_EQ(HeldNeeds(plan, late)[4], std::vector<int>{2});
  EXPECT_TRUE(HeldNeeds(plan, late)[2].empty());
  // Two pipeline ranks: stages 0,0,1,1,1 -> ranks 0 and 1 share both tensors.
  const std::vector<int> two = {0, 0, 1, 1, 1};
  const auto ties = CrossStageTies(plan, two, 2, 1);
  ASSERT_EQ(ties.size(), 2u);
  EXPECT_EQ(ties[0], std::make_pair(0, 0));
  // Three ranks holding one tensor is refused, naming it.
  try {
    CrossStageTies(plan, {0, 0, 1, 1, 2}, 3, 0);
    FAIL() << "a tensor on three pipeline ranks was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("is tied across 3 pipeline ranks (units 0,2,4)"), std::string::npos) << e.what();
  }
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
