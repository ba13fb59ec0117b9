// The device layer (zeropp/device.h) and the Communicator's staging across devices.
//
// CPU: device names are checked with one clear line; events and stream scopes are no-ops; the
// caching allocator's view is empty. CUDA cases (skip, saying why, without a GPU): streams ordered
// by events only, the allocator's counters, and Gloo collectives on GPU tensors (host staging, the
// several-ranks-on-one-GPU path) equal to the same collectives on host tensors, bytes included.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "tests/thread_ranks.h"
#include "zeropp/backend_factory.h"
#include "zeropp/communicator.h"
#include "zeropp/device.h"

namespace zeropp {
namespace {

TEST(DeviceTest, NamesAreCheckedWithOneClearLine) {
  EXPECT_TRUE(ResolveDevice("cpu", 3, 3).is_cpu());
  try {
    ResolveDevice("tpu", 0, 5);
    FAIL() << "tpu accepted";
  } catch (const std::invalid_argument& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("[rank 5]"), std::string::npos) << m;
    EXPECT_NE(m.find("device: got 'tpu', expected one of: cpu, cuda"), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
  if (CudaDeviceCount() == 0) {
    const std::string why = DeviceUnavailableReason("cuda");
    EXPECT_NE(why.find("device: got 'cuda'"), std::string::npos) << why;
    EXPECT_THROW(ResolveDevice("cuda", 0, 0), std::invalid_argument);
  }
}

TEST(DeviceTest, CpuHasNoStreamsAndNoAllocatorCounters) {
  const c10::Device cpu(c10::kCPU);
  StreamEvent e = StreamEvent::RecordCurrent(cpu);
  EXPECT_TRUE(e.null());
  e.Block();
  e.Synchronize();
  { StreamScope s(cpu, StreamRole::kUnshard); }
  DeviceMemory m = QueryDeviceMemory(cpu);
  EXPECT_EQ(m.allocated_bytes, 0);
  EXPECT_EQ(m.total_bytes, 0);
}

bool NoGpu(std::string* why) {
  *why = DeviceUnavailableReason("cuda");
  return !why->empty();
}

TEST(DeviceTest, CudaStreamsOrderedByEventsAndAllocatorCounters) {
  std::string why;
  if (NoGpu(&why)) GTEST_SKIP() << "needs a GPU: " << why;
  const c10::Device dev = ResolveDevice("cuda", 0, 0);
  SetCurrentDevice(dev);
  const int64_t before = QueryDeviceMemory(dev).allocated_bytes;
  at::Tensor big = at::empty({16 << 20}, at::TensorOptions().device(dev).dtype(at::kFloat));  // 64 MiB
  DeviceMemory m = QueryDeviceMemory(dev);
  EXPECT_GE(m.allocated_bytes - before, int64_t{64} << 20);
  EXPECT_GE(m.peak_allocated_bytes, m.allocated_bytes);
  EXPECT_GE(m.reserved_bytes, m.allocated_bytes);
  EXPECT_GT(m.total_bytes, m.allocated_bytes);
  // Producer on the compute stream, consumer on the unshard stream, ordered by one event: a long
  // chain of work precedes the value the consumer reads.
  at::Tensor x = at::zeros({1 << 20}, big.options());
  for (int i = 0; i < 50; ++i) x.add_(1);
  StreamEvent ready = StreamEvent::RecordCurrent(dev);
  at::Tensor y;
  StreamEvent done;
  {
    StreamScope s(dev, StreamRole::kUnshard);
    ready.Block();
    y = x * 2;
    done = StreamEvent::RecordCurrent(dev);
  }
  done.Block();
  EXPECT_EQ(y.min().item<float>(), 100.0f);
  EXPECT_EQ(y.max().item<float>(), 100.0f);
}

// The same collectives on `device` tensors and on host tensors give the same values and counters.
void CollectivesOn(const std::string& device, int n, std::vector<std::vector<float>>* values,
                   std::vector<CommStats>* stats) {
  values->assign(n, {});
  stats->assign(n, {});
  testing::RunRanks(n, [&](int rank, const c10::intrusive_ptr<c10d::Store>& store) {
    const c10::Device dev = ResolveDevice(device, rank, rank);
    SetCurrentDevice(dev);
    std::vector<int> ranks(n);
    for (int i = 0; i < n; ++i) ranks[i] = i;
    auto pg = c10::make_intrusive<c10d::PrefixStore>("g/pg", store);
    auto cs = c10::make_intrusive<c10d::PrefixStore>("g/comm", store);
    Communicator comm("g", rank, ranks, cs, MakeBackend("gloo", pg, rank, n, std::chrono::milliseconds(60000)), {});
    auto opt = at::TensorOptions().device(dev).dtype(at::kFloat);
    at::Tensor shard = at::arange(5, opt) + 10 * rank;
    at::Tensor full = at::empty({5 * n}, opt);
    comm.AllGather(full, shard)->Wait();
    at::Tensor grads = at::arange(5 * n, opt) * (rank + 1);
    at::Tensor mine = at::empty({5}, opt);
    comm.ReduceScatter(mine, grads, ReduceOp::kAvg)->Wait();
    at::Tensor ar = at::arange(7, opt) + rank;
    comm.AllReduce(ar)->Wait();
    at::Tensor bc = at::full({3}, static_cast<double>(rank + 1), opt);
    comm.Broadcast(bc, n - 1)->Wait();
    at::Tensor got = at::empty({4}, opt);
    auto s = comm.Send(at::full({4}, static_cast<double>(rank), opt), (rank + 1) % n);
    comm.Recv(got, (rank + n - 1) % n)->Wait();
    s->Wait();
    at::Tensor all = at::cat({full, mine, ar, bc, got}).to(at::kCPU);
    (*values)[rank] = std::vector<float>(all.data_ptr<float>(), all.data_ptr<float>() + all.numel());
    (*stats)[rank] = comm.Stats();
  });
}

TEST(DeviceTest, CudaGlooCollectivesMatchHostTensors) {
  std::string why;
  if (NoGpu(&why)) GTEST_SKIP() << "needs a GPU: " << why;
  const int n = 3;  // three ranks on however many GPUs there are (one is enough: host staging)
  std::vector<std::vector<float>> host, gpu;
  std::vector<CommStats> host_stats, gpu_stats;
  CollectivesOn("cpu", n, &host, &host_stats);
  CollectivesOn("cuda", n, &gpu, &gpu_stats);
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(gpu[r], host[r]) << "rank " << r;
    EXPECT_EQ(gpu_stats[r].TotalSent(), host_stats[r].TotalSent()) << "rank " << r;
  }
}

}  // namespace
}  // namespace zeropp
