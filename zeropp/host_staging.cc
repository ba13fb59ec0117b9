#include "zeropp/host_staging.h"

#include <ATen/ops/empty.h>

namespace zeropp {

HostStaging::HostStaging(const c10::Device& device, int64_t max_numel)
    : device_(device), ready_(StreamEvent::RecordCurrent(device)) {
  for (auto& p : pinned_) {
    p = at::empty({max_numel}, at::TensorOptions().dtype(at::kFloat).pinned_memory(!device.is_cpu()));
  }
}

void HostStaging::Fetch(int64_t k, const at::Tensor& grad) {
  const int slot = static_cast<int>(k % 2);
  StreamScope scope(device_, StreamRole::kCopy);
  ready_.Block();
  device_tmp_[slot] = grad.to(at::kFloat).contiguous();
  numel_[slot] = grad.numel();
  pinned_[slot].narrow(0, 0, numel_[slot]).copy_(device_tmp_[slot], /*non_blocking=*/true);
  fetched_[slot] = StreamEvent::RecordCurrent(device_);
}

at::Tensor HostStaging::Take(int64_t k) {
  const int slot = static_cast<int>(k % 2);
  fetched_[slot].Synchronize();
  device_tmp_[slot] = at::Tensor();
  return pinned_[slot].narrow(0, 0, numel_[slot]);
}

void HostStaging::Put(const at::Tensor& dst, const at::Tensor& src) {
  StreamScope scope(device_, StreamRole::kCopy);
  at::Tensor on_device = src.to(device_, /*non_blocking=*/src.is_pinned());
  dst.copy_(on_device);
  in_flight_.push_back(on_device);
  put_ = StreamEvent::RecordCurrent(device_);
}

void HostStaging::Finish() {
  put_.Block();
  put_.Synchronize();
  in_flight_.clear();
}

}  // namespace zeropp
