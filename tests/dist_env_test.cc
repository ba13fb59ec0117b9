// DistEnv: the torchrun environment, valid and malformed.
#include "zeropp/dist_env.h"

#include <map>

#include <gtest/gtest.h>

namespace zeropp {
namespace {

DistEnv Parse(const std::map<std::string, std::string>& vars) {
  return DistEnv::FromLookup([&](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

const std::map<std::string, std::string> kGood = {
    {"RANK", "3"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "2"},
    {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29501"}};

std::string ErrorOf(std::map<std::string, std::string> vars) {
  try {
    Parse(vars);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(DistEnvTest, ParsesTorchrunVariables) {
  DistEnv env = Parse(kGood);
  EXPECT_EQ(env.rank, 3);
  EXPECT_EQ(env.world_size, 4);
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.local_world_size, 2);
  EXPECT_EQ(env.master_addr, "10.0.0.1");
  EXPECT_EQ(env.master_port, 29501);
}

TEST(DistEnvTest, RejectsBadValuesNamingVariableValueAndRank) {
  struct Case {
    std::string var, value, expected;
  };
  const std::vector<Case> cases = {
      {"RANK", "x", "RANK='x' (expected an integer in [0, "},
      {"WORLD_SIZE", "0", "WORLD_SIZE='0' (expected an integer in [1, "},
      {"MASTER_PORT", "70000", "MASTER_PORT='70000' (expected an integer in [1, 65535])"},
      {"MASTER_PORT", "29500abc", "MASTER_PORT='29500abc'"},
      {"LOCAL_RANK", "-1", "LOCAL_RANK='-1'"},
      {"RANK", "4", "RANK=4 (expected < WORLD_SIZE=4)"},
      {"LOCAL_RANK", "2", "LOCAL_RANK=2 (expected < LOCAL_WORLD_SIZE=2)"},
  };
  for (const auto& c : cases) {
    auto vars = kGood;
    vars[c.var] = c.value;
    std::string err = ErrorOf(vars);
    EXPECT_NE(err.find(c.expected), std::string::npos) << c.var << "=" << c.value << ": " << err;
    EXPECT_NE(err.find("[rank "), std::string::npos) << err;
  }
}

TEST(DistEnvTest, ListsEveryMissingVariable) {
  std::string err = ErrorOf({});
  for (const char* v : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"}) {
    EXPECT_NE(err.find(std::string(v) + " is not set"), std::string::npos) << v << ": " << err;
  }
  EXPECT_NE(err.find("[rank ?]"), std::string::npos) << err;
}

}  // namespace
}  // namespace zeropp
