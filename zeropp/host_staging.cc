#include "zeropp/host_staging.h"

#include <stdexcept>
#include <string>

#include <ATen/ops/empty.h>

namespace zeropp {

HostStaging::HostStaging(const c10::Device& device, int64_t max_numel)
    : device_(device), max_numel_(max_numel), ready_(StreamEvent::RecordCurrent(device)) {}

at::Tensor HostStaging::Pinned(at::ScalarType dtype) const {
  return at::empty({max_numel_}, at::TensorOptions().dtype(dtype).pinned_memory(!device_.is_cpu()));
}

void HostStaging::Fetch(int64_t k, const at::Tensor& grad) {
  if (grad.numel() > max_numel_) {
    throw std::logic_error("HostStaging: fetch " + std::to_string(k) + " of " + std::to_string(grad.numel()) +
                           " values, more than the " + std::to_string(max_numel_) + " it was sized for");
  }
  const int slot = static_cast<int>(k % 2);
  StreamScope scope(device_, StreamRole::kCopy);
  ready_.Block();
  const at::ScalarType dtype = grad.scalar_type() == at::kBFloat16 ? at::kBFloat16 : at::kFloat;
  device_tmp_[slot] = grad.to(dtype).contiguous();  // no copy for a contiguous bf16 or fp32 gradient
  if (!fetch_[slot].defined() || fetch_[slot].scalar_type() != dtype) fetch_[slot] = Pinned(dtype);
  numel_[slot] = grad.numel();
  fetch_[slot].narrow(0, 0, numel_[slot]).copy_(device_tmp_[slot], /*non_blocking=*/true);
  fetched_[slot] = StreamEvent::RecordCurrent(device_);
}

at::Tensor HostStaging::Take(int64_t k) {
  const int slot = static_cast<int>(k % 2);
  fetched_[slot].Synchronize();
  device_tmp_[slot] = at::Tensor();
  return fetch_[slot].narrow(0, 0, numel_[slot]);
}

void HostStaging::Put(const at::Tensor& dst, const at::Tensor& src) {
  StreamScope scope(device_, StreamRole::kCopy);
  at::Tensor on_device = src.to(device_, /*non_blocking=*/src.is_pinned());
  dst.copy_(on_device);
  in_flight_.push_back(on_device);
  put_ = StreamEvent::RecordCurrent(device_);
}

at::Tensor HostStaging::PutBuffer(int64_t k, int64_t numel) {
  if (numel > max_numel_) {
    throw std::logic_error("HostStaging: put " + std::to_string(k) + " of " + std::to_string(numel) +
                           " values, more than the " + std::to_string(max_numel_) + " it was sized for");
  }
  const int slot = static_cast<int>(k % 2);
  put_done_[slot].Synchronize();
  if (!put_bf16_[slot].defined()) put_bf16_[slot] = Pinned(at::kBFloat16);
  return put_bf16_[slot].narrow(0, 0, numel);
}

void HostStaging::PutFrom(int64_t k, const at::Tensor& dst) {
  const int slot = static_cast<int>(k % 2);
  if (!put_bf16_[slot].defined() || dst.scalar_type() != at::kBFloat16 || dst.numel() > max_numel_) {
    throw std::logic_error("HostStaging: PutFrom " + std::to_string(k) + " needs PutBuffer first and a bf16 "
                           "destination of at most " + std::to_string(max_numel_) + " values");
  }
  StreamScope scope(device_, StreamRole::kCopy);
  dst.copy_(put_bf16_[slot].narrow(0, 0, dst.numel()), /*non_blocking=*/true);
  put_done_[slot] = StreamEvent::RecordCurrent(device_);
  put_ = put_done_[slot];
}

void HostStaging::ComputeAfterPuts() const { put_.Block(); }

void HostStaging::Finish() {
  put_.Block();
  put_.Synchronize();
  in_flight_.clear();
}

}  // namespace zeropp
