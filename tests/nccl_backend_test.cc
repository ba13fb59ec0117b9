// The NCCL backend through the Communicator (native algorithms): all-reduce, all-gather and
// reduce-scatter on every visible GPU, one thread per rank. Skips, saying why, without GPUs.
#include <ATen/ops/arange.h>
#include <ATen/ops/zeros.h>

#include "tests/thread_ranks.h"
#include "zeropp/backend_factory.h"

#ifdef ZEROPP_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime.h>
#endif

namespace zeropp {
namespace {

TEST(NcclBackendTest, CollectivesOnGpus) {
  if (!HasNcclBackend()) {
    GTEST_SKIP() << "built without CUDA: build with --config=cuda and run on a machine with GPUs";
  }
#ifdef ZEROPP_CUDA
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    GTEST_SKIP() << "no CUDA GPU on this machine: the NCCL path was compiled and linked, not run";
  }
  const int n = devices;
  testing::RunRanks(n, [n](int rank, const auto& store) {
    c10::cuda::CUDAGuard guard(rank);
    auto pg_store = c10::make_intrusive<c10d::PrefixStore>("nccl/pg", store);
    auto comm_store = c10::make_intrusive<c10d::PrefixStore>("nccl/comm", store);
    std::vector<int> ranks(n);
    for (int i = 0; i < n; ++i) ranks[i] = i;
    CommOptions opts;
    opts.algorithm = Algorithm::kNative;
    Communicator comm("nccl", rank, ranks, comm_store,
                      MakeBackend("nccl", pg_store, rank, n, std::chrono::milliseconds(60000)), opts);
    auto dev = at::TensorOptions().device(at::Device(at::kCUDA, rank));
    at::Tensor t = at::arange(13, dev.dtype(at::kFloat)) * (rank + 1);
    comm.AllReduce(t)->Wait();
    cudaDeviceSynchronize();
    EXPECT_TRUE(t.cpu().equal(at::arange(13).to(at::kFloat) * (n * (n + 1) / 2)));
    at::Tensor out = at::zeros({7 * n}, dev);
    comm.AllGather(out, at::zeros({7}, dev) + rank)->Wait();
    cudaDeviceSynchronize();
    for (int j = 0; j < n; ++j) EXPECT_EQ(out[j * 7].item<float>(), j);
    // A finished run's orderly end (ProcessGroups::Shutdown) returns; the destructor follows.
    comm.Barrier()->Wait();
    comm.ShutdownBackend();
  });
#endif
}

}  // namespace
}  // namespace zeropp
