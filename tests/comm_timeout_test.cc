// A collective or receive whose peer never arrives fails within its timeout, naming the group,
// the operation, its sequence number and the rank that did not arrive.
#include <ATen/ops/zeros.h>

#include "tests/thread_ranks.h"

namespace zeropp {
namespace {

using testing::MakeComm;
using testing::RunRanks;

CommOptions Short() {
  CommOptions o;
  o.timeout = std::chrono::milliseconds(1500);
  o.heartbeat = std::chrono::milliseconds(50);
  return o;
}

TEST(CommTimeoutTest, MissingRankIsNamed) {
  std::atomic<int> finished{0};
  RunRanks(3, [&](int rank, const auto& store) {
    auto comm = MakeComm("tmo", rank, 3, store, Short());
    // All three complete collective #1; rank 2 then stays away from #2.
    comm->AllReduce(at::zeros({4}))->Wait();
    if (rank == 2) {
      while (finished.load() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      return;
    }
    try {
      comm->AllGather(at::zeros({6}), at::zeros({2}))->Wait();
      ADD_FAILURE() << "rank " << rank << ": all_gather completed without rank 2";
    } catch (const CommError& e) {
      std::string m = e.what();
      EXPECT_NE(m.find("group 'tmo' (3 ranks) all_gather #2"), std::string::npos) << m;
      EXPECT_NE(m.find("ranks that never arrived: 2 (last reached #1)"), std::string::npos) << m;
      EXPECT_EQ(m.find("0 (last reached"), std::string::npos) << m;
      EXPECT_NE(m.find("#1 all_reduce 16B done"), std::string::npos) << m;
      // The group is broken now: later operations fail fast with the cause.
      try {
        comm->Barrier()->Wait();
        ADD_FAILURE() << "barrier after failure succeeded";
      } catch (const CommError& e2) {
        EXPECT_NE(std::string(e2.what()).find("group failed earlier: all_gather #2"), std::string::npos)
            << e2.what();
      }
    }
    finished++;
  });
}

TEST(CommTimeoutTest, ReceiveFromSilentPeerIsNamed) {
  std::atomic<bool> done{false};
  RunRanks(2, [&](int rank, const auto& store) {
    auto comm = MakeComm("p2ptmo", rank, 2, store, Short());
    if (rank == 1) {
      while (!done.load()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      return;
    }
    try {
      comm->Recv(at::zeros({3}), 1)->Wait();
      ADD_FAILURE() << "recv completed without a sender";
    } catch (const CommError& e) {
      std::string m = e.what();
      EXPECT_NE(m.find("[rank 0] group 'p2ptmo' (2 ranks) recv"), std::string::npos) << m;
      EXPECT_NE(m.find("peer 1"), std::string::npos) << m;
      EXPECT_NE(m.find("ranks that never arrived: 1"), std::string::npos) << m;
    }
    done = true;
  });
}

}  // namespace
}  // namespace zeropp
