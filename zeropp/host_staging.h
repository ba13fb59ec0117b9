// host_staging.h: ZeRO-Offload's copies between a GPU and the CPU optimizer, pipelined over units.
//
// With the optimizer offloaded on a GPU, the fp32 master and AdamW moments live in host memory.
// Each unit's gradient travels device-to-host on the copy stream into one of two page-locked
// buffers while the CPU updates the previous unit, and each updated compute shard travels
// host-to-device on the copy stream (cast to the compute dtype there) while the CPU moves on:
// copies, CPU compute and NVMe I/O (the swap manager's prefetch) overlap. Ordering by events only;
// Finish makes the compute stream wait for the last copy back.
//
//   HostStaging st(device, max_numel);
//   st.Fetch(0, grad0);
//   for (k...) { st.Fetch(k + 1, grad[k+1]); at::Tensor g = st.Take(k); cpu_adamw(g); st.Put(shard_k, master_k); }
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
  // Starts copying `grad` (on the device, any float dtype, <= max_numel elements) to the host as
  // fp32, into buffer k % 2 (whose previous contents, fetch k - 2, must have been taken and used).
  void Fetch(int64_t k, const at::Tensor& grad);
  // Host fp32 values of fetch k, once they landed (blocks on that copy's event only).
  at::Tensor Take(int64_t k);
  // Copies host fp32 `src` (page-locked for an asynchronous copy) into device `dst`, cast there.
  void Put(const at::Tensor& dst, const at::Tensor& src);
  // The compute stream waits for every Put; the host waits for the last (the masters are then free
  // to change).
  void Finish();

 private:
  c10::Device device_;
  StreamEvent ready_;
  at::Tensor pinned_[2];
  at::Tensor device_tmp_[2];  // the fp32 cast of a fetched gradient, alive until taken
  StreamEvent fetched_[2];
  int64_t numel_[2] = {0, 0};
  std::vector<at::Tensor> in_flight_;  // device copies of Put sources, alive until Finish
  StreamEvent put_;
};

}  // namespace zeropp
