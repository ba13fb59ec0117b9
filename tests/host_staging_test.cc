// HostStaging's bookkeeping, on the CPU "device" (every copy synchronous there; the asynchronous
// ordering runs on a GPU in engine_offload_test's cuda cases): gradients come back as bf16 when
// they are bf16 and as fp32 otherwise, in alternating buffers; bf16 puts land in their destination
// from alternating page-locked buffers; sizes beyond what it was made for are refused.
#include "zeropp/host_staging.h"

#include <gtest/gtest.h>
#include <ATen/ATen.h>

namespace zeropp {
namespace {

TEST(HostStagingTest, FetchesKeepBf16AndPutsLandFromAlternatingBuffers) {
  const c10::Device cpu(c10::kCPU);
  HostStaging st(cpu, 100);
  const at::Tensor g0 = at::arange(100, at::kFloat).to(at::kBFloat16), g1 = at::arange(60, at::kDouble) * 0.5;
  st.Fetch(0, g0);
  st.Fetch(1, g1);
  const at::Tensor t0 = st.Take(0), t1 = st.Take(1);
  EXPECT_EQ(t0.scalar_type(), at::kBFloat16);
  EXPECT_TRUE(at::equal(t0, g0));
  EXPECT_EQ(t1.scalar_type(), at::kFloat);  // not bf16: as fp32
  EXPECT_TRUE(at::equal(t1, g1.to(at::kFloat)));
  // Buffer 0 again (fetch 2), now for an fp32 gradient.
  st.Fetch(2, at::ones({30}));
  EXPECT_TRUE(at::equal(st.Take(2), at::ones({30})));

  at::Tensor shards = at::zeros({3, 50}, at::kBFloat16);
  for (int64_t k = 0; k < 3; ++k) {
    at::Tensor buf = st.PutBuffer(k, 50);
    EXPECT_EQ(buf.scalar_type(), at::kBFloat16);
    buf.copy_(at::full({50}, static_cast<double>(k + 1)));
    st.PutFrom(k, shards[k]);
  }
  st.Finish();
  for (int64_t k = 0; k < 3; ++k) EXPECT_TRUE(at::equal(shards[k], at::full({50}, k + 1.0, at::kBFloat16))) << k;
  // Buffers alternate: put 2 reuses put 0's buffer, put 1's is another.
  EXPECT_EQ(st.PutBuffer(4, 10).data_ptr(), st.PutBuffer(2, 10).data_ptr());
  EXPECT_NE(st.PutBuffer(3, 10).data_ptr(), st.PutBuffer(2, 10).data_ptr());

  EXPECT_THROW(st.Fetch(5, at::zeros({101})), std::logic_error);
  EXPECT_THROW(st.PutBuffer(5, 101), std::logic_error);
  EXPECT_THROW(st.PutFrom(5, at::zeros({10})), std::logic_error);  // fp32 destination
}

}  // namespace
}  // namespace zeropp
