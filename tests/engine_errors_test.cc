// Bad input to the engine: a clear error on every rank, and no hang.
#include "tests/engine_harness.h"

namespace zeropp {
namespace {

// Runs `make_and_use` on n thread-ranks and returns each rank's error message ("" = none).
using Groups = std::unique_ptr<ProcessGroups>;
std::vector<std::string> Errors(int n, const std::function<void(int, Groups)>& body) {
  std::vector<std::string> errors(n);
  testing::RunRanks(n, [&](int rank, const auto& store) {
    auto groups = ProcessGroups::CreateWithStore(store, rank, n, {1, n, 1, DpMode::kDp}, {});
    try {
      body(rank, std::move(groups));
    } catch (const std::exception& e) {
      errors[rank] = e.what();
    }
  });
  return errors;
}

TrainerOptions Opts(const EngineOptions& e) {
  TrainerOptions o;
  o.engine = e;
  return o;
}

void ExpectAll(const std::vector<std::string>& errors, const std::string& what) {
  for (size_t r = 0; r < errors.size(); ++r) {
    EXPECT_NE(errors[r].find("[rank " + std::to_string(r) + "]"), std::string::npos) << errors[r];
    EXPECT_NE(errors[r].find(what), std::string::npos) << "rank " << r << ": '" << errors[r] << "'";
  }
}

TEST(EngineErrorsTest, EmptyModel) {
  ExpectAll(Errors(2, [](int, Groups g) { Trainer e(torch::nn::Sequential().ptr(), std::move(g), Opts(EngineOptions{})); }),
            "the Sequential is empty (expected at least one child module)");
}

TEST(EngineErrorsTest, NotASequential) {
  ExpectAll(Errors(2, [](int, Groups g) { Trainer e(torch::nn::Linear(3, 4).ptr(), std::move(g), Opts(EngineOptions{})); }),
            "model: got a torch::nn::LinearImpl, expected a torch::nn::Sequential");
}

TEST(EngineErrorsTest, UnitPolicyThatCannotBeMet) {
  ExpectAll(Errors(2,
                   [](int, Groups g) {
                     EngineOptions o;
                     o.units.kind = UnitPolicy::Kind::kExplicit;
                     o.units.starts = {0, 9};
                     Trainer e(testing::MakeModel(testing::ModelKind::kMlp).ptr(), std::move(g), Opts(o));
                   }),
            "units.starts([0,9]): expected 0 first and every start below the model's 5 children");
  ExpectAll(Errors(2,
                   [](int, Groups g) {
                     EngineOptions o;
                     o.units.kind = UnitPolicy::Kind::kExplicit;
                     o.units.starts = {0, 3, 2};
                     Trainer e(testing::MakeModel(testing::ModelKind::kMlp).ptr(), std::move(g), Opts(o));
                   }),
            "units.starts([0,3,2]) must be strictly increasing");
  ExpectAll(Errors(2,
                   [](int, Groups g) {
                     EngineOptions o;
                     o.max_live_units = 1;
                     Trainer e(testing::MakeModel(testing::ModelKind::kGpt).ptr(), std::move(g), Opts(o));
                   }),
            "max_live_units(1) is below 1 + the most tied-parameter dependencies of a unit (2)");
}

TEST(EngineErrorsTest, DifferentModelsOnDifferentRanksFailEverywhere) {
  std::vector<torch::nn::Sequential> models;
  for (int r = 0; r < 3; ++r) {
    models.push_back(r == 1 ? torch::nn::Sequential(torch::nn::Linear(7, 16), torch::nn::Linear(16, 5))
                            : torch::nn::Sequential(torch::nn::Linear(7, 15), torch::nn::Linear(15, 5)));
  }
  auto errors = Errors(3, [&](int rank, Groups g) { Trainer e(models[rank].ptr(), std::move(g), Opts(EngineOptions{})); });
  ExpectAll(errors, "the model differs across ranks");
  for (const auto& e : errors) {
    EXPECT_NE(e.find("ranks [0,2] fingerprint"), std::string::npos) << e;
    EXPECT_NE(e.find("ranks [1] fingerprint"), std::string::npos) << e;
  }
}

TEST(EngineErrorsTest, StepWithMismatchedBatches) {
  ExpectAll(Errors(2,
                   [](int, Groups g) {
                     Trainer e(testing::MakeModel(testing::ModelKind::kMlp).ptr(), std::move(g), Opts(EngineOptions{}));
                     e.Step({at::zeros({2, 7})}, {}, [](const at::Tensor& o, const at::Tensor&) { return o.sum(); });
                   }),
            "Step: got 1 inputs and 0 targets, expected 1 micro-batches");
}

// An ATen error inside an action names the rank, the action and its units in one line; the
// original error (with its backtrace) stays nested for the program's log.
TEST(EngineErrorsTest, AtenErrorNamesTheActionAndUnit) {
  auto errors = Errors(2, [](int, Groups g) {
    Trainer t(testing::MakeModel(testing::ModelKind::kMlp).ptr(), std::move(g), Opts(EngineOptions{}));
    try {
      // The first Linear takes 7 features; 8 fail inside ATen during F0.0.
      t.Step({at::zeros({2, 8})}, {at::zeros({2, 5})}, [](const at::Tensor& o, const at::Tensor& y) {
        return (o - y).pow(2).mean();
      });
    } catch (const std::runtime_error& e) {
      try {
        std::rethrow_if_nested(e);
      } catch (const c10::Error&) {
        throw std::runtime_error(std::string(e.what()) + " [nested c10::Error]");
      }
      throw;
    }
  });
  for (size_t r = 0; r < errors.size(); ++r) {
    EXPECT_EQ(errors[r].rfind("[rank " + std::to_string(r) + "] action F0.0 (units 0) failed: ", 0), 0u) << errors[r];
    EXPECT_NE(errors[r].find("[nested c10::Error]"), std::string::npos) << errors[r];
    EXPECT_EQ(errors[r].find('\n'), std::string::npos) << "one line: " << errors[r];
  }
}

TEST(EngineErrorsTest, BadOptionsNameTheField) {
  ExpectAll(Errors(1,
                   [](int, Groups g) {
                     EngineOptions o;
                     o.prefetch_depth = -1;
                     o.adamw.beta1 = 1.5f;
                     Trainer e(testing::MakeModel(testing::ModelKind::kMlp).ptr(), std::move(g), Opts(o));
                   }),
            "prefetch_depth(-1) must be >= 0; adamw.beta1(1.5) must be in [0, 1)");
}

}  // namespace
}  // namespace zeropp
