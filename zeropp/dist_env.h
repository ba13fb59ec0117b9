// dist_env.h: the torchrun-compatible process environment of one rank.
//
// Read from RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, exactly as
// torchrun (and ./zpp run) set them, and the optional ZEROPP_RENDEZVOUS_TIMEOUT. Every malformed or
// missing variable is reported at once,
// naming the variable, the value found and what was expected.
//
//   DistEnv env = DistEnv::FromEnvironment();   // throws std::invalid_argument on bad input
#pragma once

#include <functional>
#include <string>

namespace zeropp {

struct DistEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  // ZEROPP_RENDEZVOUS_TIMEOUT (seconds, optional): how long a rank waits for the store and the
  // other ranks before it fails naming them; 0 = the caller's default (60 s).
  int rendezvous_timeout_s = 0;

  // Reads the process environment. Throws std::invalid_argument listing every bad variable.
  static DistEnv FromEnvironment();
  // Same, from any lookup (nullptr result = unset); used by tests.
  static DistEnv FromLookup(const std::function<const char*(const char*)>& getenv_fn);

  // "rank 3/4 (local 1/2) master 127.0.0.1:29500"
  std::string ToString() const;
};

}  // namespace zeropp
