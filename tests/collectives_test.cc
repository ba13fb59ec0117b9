// Every Communicator operation on 1..4 ranks (threads over a FileStore): results equal the
// formula, and the byte counters equal the algorithm's theory.
#include <ATen/ops/arange.h>
#include <ATen/ops/full.h>
#include <ATen/ops/zeros.h>

#include "tests/thread_ranks.h"

namespace zeropp {
namespace {

using testing::MakeComm;
using testing::RunRanks;

class CollectivesTest : public ::testing::TestWithParam<int> {};

at::Tensor Arange(int64_t n, at::ScalarType t = at::kFloat) {
  return at::arange(n, at::TensorOptions().dtype(t));
}

TEST_P(CollectivesTest, AllGatherOddSizesAndCounters) {
  const int n = GetParam();
  RunRanks(n, [n](int rank, const auto& store) {
    auto comm = MakeComm("ag", rank, n, store);
    for (int64_t chunk : {1, 7, 1001}) {
      CommStats before = comm->Stats();
      at::Tensor in = Arange(chunk) + 1000.0 * (rank + 1);
      at::Tensor out = at::zeros({chunk * n});
      comm->AllGather(out, in)->Wait();
      for (int j = 0; j < n; ++j) {
        at::Tensor expect = Arange(chunk) + 1000.0 * (j + 1);
        ASSERT_TRUE(out.narrow(0, j * chunk, chunk).equal(expect)) << "chunk " << chunk << " from " << j;
      }
      KindStats d = comm->Stats().Since(before)[OpKind::kAllGather];
      const int64_t s = out.nbytes();
      EXPECT_EQ(d.bytes_sent, s * (n - 1) / n) << "S=" << s << " N=" << n;
      EXPECT_EQ(d.bytes_received, s * (n - 1) / n);
      EXPECT_EQ(d.ops, 1);
      EXPECT_FALSE(d.modeled);
    }
  });
}

TEST_P(CollectivesTest, ReduceScatterSumAvgAndCounters) {
  const int n = GetParam();
  RunRanks(n, [n](int rank, const auto& store) {
    auto comm = MakeComm("rs", rank, n, store);
    for (int64_t chunk : {1, 7, 999}) {
      CommStats before = comm->Stats();
      // in_r[i] = (r+1) * (i+1)  =>  sum over ranks = n(n+1)/2 * (i+1)
      at::Tensor in = (Arange(chunk * n, at::kDouble) + 1) * (rank + 1);
      at::Tensor out = at::zeros({chunk}, at::TensorOptions().dtype(at::kDouble));
      comm->ReduceScatter(out, in)->Wait();
      at::Tensor expect = (Arange(chunk, at::kDouble) + rank * chunk + 1) * (n * (n + 1) / 2.0);
      ASSERT_TRUE(out.equal(expect)) << "chunk " << chunk;
      KindStats d = comm->Stats().Since(before)[OpKind::kReduceScatter];
      EXPECT_EQ(d.bytes_sent, static_cast<int64_t>(in.nbytes()) * (n - 1) / n);
      EXPECT_EQ(d.bytes_received, static_cast<int64_t>(in.nbytes()) * (n - 1) / n);
    }
    at::Tensor in = at::full({5 * n}, 2.0f * (rank + 1));
    at::Tensor out = at::zeros({5});
    comm->ReduceScatter(out, in, ReduceOp::kAvg)->Wait();
    EXPECT_TRUE(out.allclose(at::full({5}, 2.0f * (n + 1) / 2.0f)));
  });
}

TEST_P(CollectivesTest, AllReduceUnevenChunksAndExactBytes) {
  const int n = GetParam();
  RunRanks(n, [n](int rank, const auto& store) {
    auto comm = MakeComm("ar", rank, n, store);
    for (int64_t numel : {1, 2, 13, 1027}) {
      CommStats before = comm->Stats();
      at::Tensor t = Arange(numel) * (rank + 1);
      comm->AllReduce(t)->Wait();
      ASSERT_TRUE(t.equal(Arange(numel) * (n * (n + 1) / 2))) << "numel " << numel;
      // Ring: rank r sends every chunk but its own in reduce-scatter and every chunk but chunk r+1
      // in all-gather (chunk i has numel/n elements, one more for i < numel % n).
      auto chunk_bytes = [&](int i) { return (numel / n + (i < numel % n ? 1 : 0)) * 4; };
      const int64_t s = numel * 4;
      int64_t expect = n == 1 ? 0 : (s - chunk_bytes(rank)) + (s - chunk_bytes((rank + 1) % n));
      KindStats d = comm->Stats().Since(before)[OpKind::kAllReduce];
      EXPECT_EQ(d.bytes_sent, expect) << "numel " << numel;
      if (numel % n == 0) {
        EXPECT_EQ(d.bytes_sent, 2 * s * (n - 1) / n);
      }
    }
    at::Tensor t = at::full({6}, static_cast<float>(rank));
    comm->AllReduce(t, ReduceOp::kAvg)->Wait();
    EXPECT_TRUE(t.allclose(at::full({6}, (n - 1) / 2.0f)));
  });
}

TEST_P(CollectivesTest, BroadcastChainFromEveryRoot) {
  const int n = GetParam();
  RunRanks(n, [n](int rank, const auto& store) {
    CommOptions opts;
    opts.broadcast_chunk_bytes = 4096;  // several pipelined pieces
    auto comm = MakeComm("bc", rank, n, store, opts);
    for (int root = 0; root < n; ++root) {
      CommStats before = comm->Stats();
      const int64_t numel = 3001;
      at::Tensor t = rank == root ? Arange(numel) * 3 + root : at::zeros({numel});
      comm->Broadcast(t, root)->Wait();
      ASSERT_TRUE(t.equal(Arange(numel) * 3 + root)) << "root " << root;
      KindStats d = comm->Stats().Since(before)[OpKind::kBroadcast];
      int pos = (rank - root + n) % n;
      EXPECT_EQ(d.bytes_sent, pos < n - 1 ? numel * 4 : 0);
      EXPECT_EQ(d.bytes_received, pos > 0 ? numel * 4 : 0);
    }
  });
}

TEST_P(CollectivesTest, SendRecvRingAndBarrier) {
  const int n = GetParam();
  if (n == 1) GTEST_SKIP() << "send/recv needs a peer";
  RunRanks(n, [n](int rank, const auto& store) {
    auto comm = MakeComm("p2p", rank, n, store);
    at::Tensor out = Arange(5) + 10 * rank;
    at::Tensor in = at::zeros({5});
    // Post both, then wait in the opposite order from the neighbour: no deadlock either way.
    auto r = comm->Recv(in, (rank + n - 1) % n);
    auto s = comm->Send(out, (rank + 1) % n);
    if (rank % 2) {
      s->Wait();
      r->Wait();
    } else {
      r->Wait();
      s->Wait();
    }
    EXPECT_TRUE(in.equal(Arange(5) + 10 * ((rank + n - 1) % n)));
    CommStats st = comm->Stats();
    EXPECT_EQ(st[OpKind::kSend].bytes_sent, 20);
    EXPECT_EQ(st[OpKind::kRecv].bytes_received, 20);
    comm->Barrier()->Wait();
    EXPECT_EQ(st[OpKind::kAllGather].ops, 0);
  });
}

TEST_P(CollectivesTest, AsyncOpsCompleteInIssueOrderAndOverlapCaller) {
  const int n = GetParam();
  RunRanks(n, [n](int rank, const auto& store) {
    auto comm = MakeComm("async", rank, n, store);
    std::vector<at::Tensor> outs;
    std::vector<std::shared_ptr<CommWork>> works;
    for (int k = 0; k < 6; ++k) {
      at::Tensor in = at::full({3}, static_cast<float>(k * 10 + rank));
      outs.push_back(at::zeros({3 * n}));
      works.push_back(comm->AllGather(outs.back(), in));  // `in` kept alive by the operation
    }
    for (int k = 5; k >= 0; --k) works[k]->Wait();
    for (int k = 0; k < 6; ++k) {
      for (int j = 0; j < n; ++j) {
        EXPECT_EQ(outs[k][j * 3].item<float>(), k * 10 + j);
      }
    }
    auto ops = comm->RecentOps();
    ASSERT_EQ(ops.size(), 6u);
    for (size_t i = 0; i < ops.size(); ++i) {
      EXPECT_EQ(ops[i].seq, i + 1);
      EXPECT_EQ(ops[i].state, OpState::kDone);
    }
  });
}

TEST_P(CollectivesTest, NativeGlooMatchesRingResultsAndModelsDoubleReduceScatterTraffic) {
  const int n = GetParam();
  // LibTorch 2.11's own Gloo reduce-scatter, with several thread-ranks in one process, now and then
  // segfaults (3 ranks: 3 of 24 runs, also at the commit before the GPU work) or hangs (4 ranks:
  // 1 of 12). zeropp's ring, the default on Gloo, is not involved; the comparison runs on 1-2 ranks.
  if (n > 2) GTEST_SKIP() << "LibTorch's native Gloo reduce-scatter is unreliable with " << n << " thread-ranks";
  RunRanks(n, [n](int rank, const auto& store) {
    CommOptions opts;
    opts.algorithm = Algorithm::kNative;
    auto comm = MakeComm("native", rank, n, store, opts);
    at::Tensor in = (Arange(7 * n) + 1) * (rank + 1);
    at::Tensor out = at::zeros({7});
    comm->ReduceScatter(out, in)->Wait();
    EXPECT_TRUE(out.equal((Arange(7) + rank * 7 + 1) * (n * (n + 1) / 2)));
    KindStats rs = comm->Stats()[OpKind::kReduceScatter];
    EXPECT_TRUE(rs.modeled);
    EXPECT_EQ(rs.bytes_sent, 2 * static_cast<int64_t>(in.nbytes()) * (n - 1) / n);
    at::Tensor g = at::zeros({7 * n});
    comm->AllGather(g, at::full({7}, static_cast<float>(rank)))->Wait();
    for (int j = 0; j < n; ++j) EXPECT_EQ(g[j * 7].item<float>(), j);
  });
}

TEST(CollectivesErrorsTest, ShapeMismatchIsRefusedOnTheCallingRank) {
  RunRanks(2, [](int rank, const auto& store) {
    auto comm = MakeComm("shape", rank, 2, store);
    try {
      comm->AllGather(at::zeros({5}), at::zeros({3}));
      FAIL() << "accepted a bad all_gather";
    } catch (const CommError& e) {
      std::string m = e.what();
      EXPECT_NE(m.find("[rank " + std::to_string(rank) + "] group 'shape' all_gather: output has 5"),
                std::string::npos) << m;
      EXPECT_NE(m.find("expected input numel(3)*size(2)=6"), std::string::npos) << m;
    }
    EXPECT_THROW(comm->Send(at::zeros({1}), rank), CommError);
    EXPECT_THROW(comm->Broadcast(at::zeros({1}), 2), CommError);
    comm->Barrier()->Wait();  // no rank tears down its connections while a peer still connects
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, CollectivesTest, ::testing::Values(1, 2, 3, 4),
                         [](const auto& info) { return "n" + std::to_string(info.param); });

}  // namespace
}  // namespace zeropp
