// The swap manager's prefetch is a hint: it starts a read only while the host pool can hold that
// tensor and one more of its size, so it never takes the room a later Acquire needs; a skipped
// prefetch costs nothing, and Acquire then reads the tensor itself, values intact.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "offload/host_pool.h"
#include "offload/io_engine.h"
#include "offload/swap_manager.h"
#include "tests/test_dirs.h"

namespace zeropp {
namespace offload {
namespace {

TEST(SwapManagerTest, PrefetchIsSkippedWithoutRoomAndAcquireStillReads) {
  constexpr int64_t kNumel = 256 * 1024;  // 1 MiB of fp32
  HostPool pool(3 << 20);
  IoOptions io_options;
  auto io = IoEngine::Create(io_options);
  SwapManager swap(io.get(), &pool, zeropp::testing::TestDir("swap_manager_test"));
  int ids[3];
  for (int i = 0; i < 3; ++i) {
    ids[i] = swap.Register("t" + std::to_string(i), at::full({kNumel}, 1.0f + i), Tier::kNvme);
  }
  swap.Flush();
  const int64_t read0 = swap.stats().bytes_read;
  swap.Prefetch(ids[0]);  // nothing in use: room for it and one more
  EXPECT_EQ(swap.stats().bytes_read - read0, 4 * kNumel);
  at::Tensor a = swap.Acquire(ids[0]);
  swap.Prefetch(ids[1]);  // 1 MiB in use, 1 + 2 <= 3: starts
  EXPECT_EQ(swap.stats().bytes_read - read0, 2 * 4 * kNumel);
  swap.Prefetch(ids[2]);  // 2 MiB in use, 2 + 2 > 3: skipped
  EXPECT_EQ(swap.stats().bytes_read - read0, 2 * 4 * kNumel);
  EXPECT_EQ(pool.in_use(), 2 << 20);
  swap.Release(ids[0], /*dirty=*/false);
  at::Tensor b = swap.Acquire(ids[1]);
  at::Tensor c = swap.Acquire(ids[2]);  // read now, by Acquire
  EXPECT_EQ(swap.stats().bytes_read - read0, 3 * 4 * kNumel);
  EXPECT_TRUE(b.eq(2.0f).all().item<bool>());
  EXPECT_TRUE(c.eq(3.0f).all().item<bool>());
  swap.Release(ids[1], /*dirty=*/false);
  swap.Release(ids[2], /*dirty=*/false);
}

}  // namespace
}  // namespace offload
}  // namespace zeropp
