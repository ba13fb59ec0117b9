#include "zeropp/dist_env.h"

#include <cstdlib>
#include <stdexcept>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace zeropp {
namespace {

// Parses an integer variable into *out; appends a problem description when it is bad.
void ReadInt(const std::function<const char*(const char*)>& get, const char* name, long lo, long hi,
             int* out, std::vector<std::string>* problems) {
  const char* raw = get(name);
  if (raw == nullptr) {
    problems->push_back(absl::StrCat(name, " is not set (expected an integer in [", lo, ", ", hi, "])"));
    return;
  }
  long value = 0;
  if (!absl::SimpleAtoi(raw, &value) || value < lo || value > hi) {
    problems->push_back(
        absl::StrCat(name, "='", raw, "' (expected an integer in [", lo, ", ", hi, "])"));
    return;
  }
  *out = static_cast<int>(value);
}

}  // namespace

DistEnv DistEnv::FromLookup(const std::function<const char*(const char*)>& get) {
  DistEnv env;
  std::vector<std::string> problems;
  ReadInt(get, "WORLD_SIZE", 1, 1 << 20, &env.world_size, &problems);
  ReadInt(get, "RANK", 0, 1 << 20, &env.rank, &problems);
  ReadInt(get, "LOCAL_WORLD_SIZE", 1, 1 << 20, &env.local_world_size, &problems);
  ReadInt(get, "LOCAL_RANK", 0, 1 << 20, &env.local_rank, &problems);
  ReadInt(get, "MASTER_PORT", 1, 65535, &env.master_port, &problems);
  if (get("ZEROPP_RENDEZVOUS_TIMEOUT") != nullptr) {
    ReadInt(get, "ZEROPP_RENDEZVOUS_TIMEOUT", 1, 86400, &env.rendezvous_timeout_s, &problems);
  }
  const char* addr = get("MASTER_ADDR");
  if (addr == nullptr || addr[0] == '\0') {
    problems.push_back("MASTER_ADDR is not set (expected a host name or IP address)");
  } else {
    env.master_addr = addr;
  }
  if (problems.empty()) {
    if (env.rank >= env.world_size) {
      problems.push_back(absl::StrCat("RANK=", env.rank, " (expected < WORLD_SIZE=", env.world_size, ")"));
    }
    if (env.local_rank >= env.local_world_size) {
      problems.push_back(absl::StrCat("LOCAL_RANK=", env.local_rank, " (expected < LOCAL_WORLD_SIZE=",
                                      env.local_world_size, ")"));
    }
    if (env.local_world_size > env.world_size) {
      problems.push_back(absl::StrCat("LOCAL_WORLD_SIZE=", env.local_world_size,
                                      " (expected <= WORLD_SIZE=", env.world_size, ")"));
    }
  }
  if (!problems.empty()) {
    const char* rank = get("RANK");
    throw std::invalid_argument(absl::StrCat("[rank ", rank ? rank : "?",
                                             "] bad distributed environment: ",
                                             absl::StrJoin(problems, "; ")));
  }
  return env;
}

DistEnv DistEnv::FromEnvironment() {
  return FromLookup([](const char* name) { return std::getenv(name); });
}

std::string DistEnv::ToString() const {
  return absl::StrCat("rank ", rank, "/", world_size, " (local ", local_rank, "/", local_world_size,
                      ") master ", master_addr, ":", master_port);
}

}  // namespace zeropp
