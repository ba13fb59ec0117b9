// host_staging.h: ZeRO-Offload's copies between a GPU and the CPU optimizer, pipelined over units.
//
// With the optimizer offloaded on a GPU, the fp32 master and AdamW moments live in host memory.
// Each unit's gradient travels device-to-host on the copy stream into one of two page-locked
// buffers while the CPU updates the previous unit; a bf16 gradient travels as it is (the host
// AdamW reads bf16), other dtypes as fp32. Each updated compute shard travels host-to-device on the
// copy stream: a bf16 shard from one of two page-locked bf16 buffers that the host AdamW fills as
// it updates (PutBuffer/PutFrom: 2 bytes a value over PCIe, no device-side temporary), any other
// shard as fp32 cast on the device (Put). Copies, CPU compute and NVMe I/O (the swap manager's
// prefetch) overlap. Ordering by events only; Finish makes the compute stream wait for the last
// copy back. On a CPU "device" every copy is synchronous (the tests' path).
//
//   HostStaging st(device, max_numel);
//   st.Fetch(0, grad0);
//   for (k...) {
//     st.Fetch(k + 1, grad[k+1]); at::Tensor g = st.Take(k);
//     cpu_adamw(g, /*bf16 out*/ st.PutBuffer(k, n)); st.PutFrom(k, shard_k);
//   }
//   st.Finish();
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include "zeropp/device.h"

namespace zeropp {

class HostStaging {
 public:
  // Records the current (compute) stream's position: fetched gradients are read after it.
  HostStaging(const c10::Device& device, int64_t max_numel);
  // Starts copying `grad` (on the device, any float dtype, <= max_numel elements) to the host, bf16
  // as it is and anything else as fp32, into buffer k % 2 (whose previous contents, fetch k - 2,
  // must have been taken and used).
  void Fetch(int64_t k, const at::Tensor& grad);
  // Host values of fetch k (bf16 or fp32), once they landed (blocks on that copy's event only).
  at::Tensor Take(int64_t k);
  // Copies host fp32 `src` (page-locked for an asynchronous copy) into device `dst`, cast there.
  void Put(const at::Tensor& dst, const at::Tensor& src);
  // A page-locked bf16 buffer of `numel` (<= max_numel) values for put k: buffer k % 2, once the
  // copy out of it for put k - 2 has finished (the host waits for that copy only).
  at::Tensor PutBuffer(int64_t k, int64_t numel);
  // Copies PutBuffer(k)'s first dst.numel() values into device bf16 `dst` on the copy stream.
  void PutFrom(int64_t k, const at::Tensor& dst);
  // The calling thread's current (compute) stream waits for every put so far; the host does not.
  // Whatever reads an updated shard on the device before Finish (ZeRO-1's all-gather) needs it.
  void ComputeAfterPuts() const;
  // The compute stream waits for every put; the host waits for the last (the masters and the put
  // buffers are then free to change).
  void Finish();

 private:
  at::Tensor Pinned(at::ScalarType dtype) const;

  c10::Device device_;
  int64_t max_numel_;
  StreamEvent ready_;
  at::Tensor fetch_[2];       // page-locked, the dtype of the last gradient fetched into it
  at::Tensor device_tmp_[2];  // the device tensor a fetch reads, alive until taken
  StreamEvent fetched_[2];
  int64_t numel_[2] = {0, 0};
  at::Tensor put_bf16_[2];    // page-locked bf16 sources of PutFrom
  StreamEvent put_done_[2];
  std::vector<at::Tensor> in_flight_;  // device copies of Put sources, alive until Finish
  StreamEvent put_;
};

}  // namespace zeropp
