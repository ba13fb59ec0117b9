// The host block cache's reuse across sizes and its trimming (zeropp/host_allocator.h), in a
// process of its own: the peak in use only grows, so no other test's blocks may set it.
#include <algorithm>
#include <vector>

#include <ATen/ops/empty.h>

#include "gtest/gtest.h"
#include "zeropp/host_allocator.h"

namespace zeropp {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

at::Tensor Bytes(int64_t n) { return at::empty({n}, at::TensorOptions().dtype(at::kByte)); }

// A kept block serves a request of at least half its size (its pages are resident already), not
// a smaller one.
TEST(HostBlockCacheTrim, ReusesAKeptBlockForUpToTwiceTheSize) {
  TuneHostAllocator();
  void* block = nullptr;
  { block = Bytes(10 * kMiB).data_ptr(); }
  const BlockCacheStats kept = HostBlockCacheStats();
  at::Tensor seven = Bytes(7 * kMiB);
  EXPECT_EQ(seven.data_ptr(), block);
  EXPECT_EQ(HostBlockCacheStats().hits, kept.hits + 1);
  EXPECT_EQ(HostBlockCacheStats().live_bytes, kept.live_bytes + 7 * kMiB);  // the bytes asked for
  seven = at::Tensor();
  at::Tensor four = Bytes(4 * kMiB);  // 10 MiB is over twice 4 MiB: a fresh block
  EXPECT_NE(four.data_ptr(), block);
  EXPECT_EQ(HostBlockCacheStats().misses, kept.misses + 1);
}

// Kept blocks that no request fits are unmapped, largest first, before the cache maps more:
// blocks in use and kept never exceed the most in use plus an eighth (at least 4 MiB).
TEST(HostBlockCacheTrim, KeepsNoMoreThanThePeakInUseAndASlack) {
  TuneHostAllocator();
  auto limit = [](const BlockCacheStats& s) {
    return s.blocks_peak_bytes + std::max(s.blocks_peak_bytes / 8, 4 * kMiB);
  };
  std::vector<at::Tensor> held;
  int64_t sum = 0;
  for (int i = 0; i < 16; ++i) {  // 16 sizes of 1-2 MiB, all in use at once
    held.push_back(Bytes(kMiB + i * 64 * 1024));
    sum += kMiB + i * 64 * 1024;
  }
  const BlockCacheStats peak = HostBlockCacheStats();
  ASSERT_GE(peak.blocks_peak_bytes, sum);
  held.clear();
  const BlockCacheStats kept = HostBlockCacheStats();
  EXPECT_GE(kept.cached_bytes, sum);
  // 5 MiB requests no kept block serves (all under half of them): each maps a new block after trimming.
  for (int i = 0; i < 6; ++i) {
    held.push_back(Bytes(5 * kMiB));
    const BlockCacheStats s = HostBlockCacheStats();
    EXPECT_LE(s.live_bytes + s.cached_bytes, limit(s)) << "after " << i + 1 << " requests of 5 MiB";
  }
  const BlockCacheStats end = HostBlockCacheStats();
  EXPECT_LT(end.cached_bytes, kept.cached_bytes) << "the kept 1-2 MiB blocks should have been trimmed";
  EXPECT_GT(end.blocks_peak_bytes, peak.blocks_peak_bytes);  // 30 MiB in use now
}

}  // namespace
}  // namespace zeropp
