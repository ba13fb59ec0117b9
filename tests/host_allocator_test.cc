// The host block cache (zeropp/host_allocator.h): a freed large CPU tensor's block is handed out
// again for the next tensor of that size, small tensors never reach the cache, data survives, and
// freed blocks beyond the cap are unmapped instead of kept.
#include "zeropp/host_allocator.h"

#include <vector>

#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <c10/core/CPUAllocator.h>

#include "gtest/gtest.h"

namespace zeropp {
namespace {

TEST(HostBlockCache, ReusesLargeBlocksAtTheirSize) {
  const HostAllocatorSettings s = TuneHostAllocator();
  ASSERT_EQ(s.large_block_bytes, int64_t{1} << 16);
  const int64_t n = (int64_t{3} << 20) / 4 + 5;  // 3 MiB + 20 bytes of fp32: rounded up to pages
  const BlockCacheStats before = HostBlockCacheStats();
  void* first = nullptr;
  {
    at::Tensor a = at::full({n}, 2.5f);
    first = a.data_ptr();
    EXPECT_FLOAT_EQ(a[n - 1].item<float>(), 2.5f);
  }
  const BlockCacheStats freed = HostBlockCacheStats();
  EXPECT_EQ(freed.misses, before.misses + 1);
  EXPECT_GE(freed.cached_bytes, before.cached_bytes + n * 4);
  at::Tensor b = at::empty({n});
  EXPECT_EQ(b.data_ptr(), first) << "a block of the same size should be reused";
  EXPECT_EQ(HostBlockCacheStats().hits, freed.hits + 1);
  b.fill_(-1.0f);
  EXPECT_FLOAT_EQ(b[0].item<float>(), -1.0f);
  // 256 KiB (a micro-batch's activation at width 256) is a block too, reused at its size.
  void* mid_block = nullptr;
  { mid_block = at::empty({65536}).data_ptr(); }
  EXPECT_EQ(at::empty({65536}).data_ptr(), mid_block);
  // Below the block size: the allocator it replaced, the cache's counters unchanged.
  const BlockCacheStats mid = HostBlockCacheStats();
  { at::Tensor small = at::full({1000}, 1.0f); }
  EXPECT_EQ(HostBlockCacheStats().hits + HostBlockCacheStats().misses, mid.hits + mid.misses);
}

// Kernels that take workspaces through Allocator::raw_allocate free them with the allocator's one
// raw deleter: it must take back both its own blocks and the replaced allocator's small ones.
TEST(HostBlockCache, RawAllocationsOfBothKindsRoundTrip) {
  TuneHostAllocator();
  c10::Allocator* a = c10::GetCPUAllocator();
  ASSERT_NE(a->raw_deleter(), nullptr);
  const BlockCacheStats before = HostBlockCacheStats();
  void* big = a->raw_allocate(size_t{2} << 20);
  void* small = a->raw_allocate(4096);
  static_cast<char*>(big)[(size_t{2} << 20) - 1] = 1;
  static_cast<char*>(small)[4095] = 1;
  EXPECT_EQ(HostBlockCacheStats().live_bytes, before.live_bytes + (int64_t{2} << 20));
  a->raw_deallocate(big);
  a->raw_deallocate(small);
  EXPECT_EQ(HostBlockCacheStats().live_bytes, before.live_bytes);
}

// The tensor counters see both kinds of CPU tensor (a block, and a small one from the replaced
// allocator, at least its requested size), drop them when freed, and keep the peak until reset.
TEST(HostBlockCache, CountsLiveAndPeakTensorBytes) {
  TuneHostAllocator();
  ResetHostTensorPeak();
  const BlockCacheStats before = HostBlockCacheStats();
  EXPECT_EQ(before.tensor_peak_bytes, before.tensor_live_bytes);
  int64_t held = 0;
  {
    at::Tensor big = at::empty({(int64_t{2} << 20) / 4});  // 2 MiB: a block
    at::Tensor small = at::empty({1000});                  // 4000 B: the replaced allocator
    held = HostBlockCacheStats().tensor_live_bytes - before.tensor_live_bytes;
    EXPECT_GE(held, (int64_t{2} << 20) + 4000);
    EXPECT_LT(held, (int64_t{2} << 20) + 4000 + 4096);  // malloc's rounding, not more
  }
  const BlockCacheStats after = HostBlockCacheStats();
  EXPECT_EQ(after.tensor_live_bytes, before.tensor_live_bytes);
  EXPECT_GE(after.tensor_peak_bytes, before.tensor_live_bytes + held);
  ResetHostTensorPeak();
  EXPECT_EQ(HostBlockCacheStats().tensor_peak_bytes, after.tensor_live_bytes);
}

TEST(HostBlockCache, KeepsNoMoreThanItsCap) {
  const HostAllocatorSettings s = TuneHostAllocator();
  const int64_t block = s.mmap_threshold - (int64_t{1} << 20);  // 31 MiB: the largest size cached
  std::vector<at::Tensor> held;
  const int count = static_cast<int>(s.cache_cap_bytes / block) + 3;  // more than the cap, untouched pages
  for (int i = 0; i < count; ++i) held.push_back(at::empty({block}, at::TensorOptions().dtype(at::kByte)));
  EXPECT_GE(HostBlockCacheStats().live_bytes, count * block);
  held.clear();
  const BlockCacheStats after = HostBlockCacheStats();
  EXPECT_LE(after.cached_bytes, s.cache_cap_bytes);
  EXPECT_GT(after.cached_bytes, s.cache_cap_bytes - 2 * block);
  EXPECT_EQ(after.live_bytes, 0);
}

}  // namespace
}  // namespace zeropp
