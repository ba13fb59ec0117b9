#include "zeropp/device.h"

#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <utility>

#include <ATen/Context.h>
#include <ATen/DeviceAccelerator.h>
#include <c10/core/Event.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include "absl/strings/str_cat.h"

namespace zeropp {
namespace {

bool CudaUsable() {
  auto acc = at::accelerator::getAccelerator(/*checked=*/false);
  return acc.has_value() && *acc == c10::DeviceType::CUDA && at::accelerator::deviceCount() > 0;
}

// One pool stream per (device, role), taken on first use and kept for the process.
c10::Stream RoleStream(const c10::Device& device, StreamRole role) {
  static std::mutex mu;
  static std::map<std::pair<int, int>, c10::Stream> streams;
  std::lock_guard<std::mutex> lock(mu);
  auto key = std::make_pair(static_cast<int>(device.index()), static_cast<int>(role));
  auto it = streams.find(key);
  if (it != streams.end()) return it->second;
  c10::impl::VirtualGuardImpl impl(device.type());
  c10::Stream s = impl.getStreamFromGlobalPool(device, /*isHighPriority=*/false);
  streams.emplace(key, s);
  return s;
}

}  // namespace

int CudaDeviceCount() { return CudaUsable() ? static_cast<int>(at::accelerator::deviceCount()) : 0; }

std::string DeviceUnavailableReason(const std::string& kind) {
  if (kind == "cpu") return "";
  if (kind != "cuda") return absl::StrCat("device: got '", kind, "', expected one of: cpu, cuda");
#ifndef ZEROPP_CUDA
  return "device: got 'cuda', but this binary was built without CUDA (build with --config=cuda: "
         "./zpp build-cuda, or run the GPU bundle from ./zpp gpu-bundle)";
#else
  if (!CudaUsable()) return "device: got 'cuda', but no CUDA GPU is visible to this process";
  return "";
#endif
}

c10::Device ResolveDevice(const std::string& kind, int local_rank, int rank) {
  std::string why = DeviceUnavailableReason(kind);
  if (!why.empty()) throw std::invalid_argument(absl::StrCat("[rank ", rank, "] ", why));
  if (kind == "cpu") return c10::Device(c10::kCPU);
  const int count = CudaDeviceCount();
  return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>((local_rank < 0 ? 0 : local_rank) % count));
}

c10::Device CurrentCudaDevice() {
  return c10::Device(c10::kCUDA, CudaUsable() ? at::accelerator::getDeviceIndex() : 0);
}

void SetCurrentDevice(const c10::Device& device) {
  if (device.is_cpu()) return;
  at::accelerator::setDeviceIndex(device.index());
}

struct StreamEvent::Impl {
  explicit Impl(c10::DeviceType t) : event(t) {}
  c10::Event event;
};

StreamEvent StreamEvent::RecordCurrent(const c10::Device& device) {
  StreamEvent e;
  if (device.is_cpu()) return e;
  e.impl_ = std::make_shared<Impl>(device.type());
  e.impl_->event.record(at::accelerator::getCurrentStream(device.index()));
  return e;
}

void StreamEvent::Block() const {
  if (!impl_) return;
  impl_->event.block(at::accelerator::getCurrentStream(impl_->event.device_index()));
}

void StreamEvent::Synchronize() const {
  if (impl_) impl_->event.synchronize();
}

struct StreamScope::Impl {
  explicit Impl(c10::Stream s) : guard(s) {}
  c10::StreamGuard guard;
};

StreamScope::StreamScope(const c10::Device& device, StreamRole role) {
  if (!device.is_cpu()) impl_ = std::make_unique<Impl>(RoleStream(device, role));
}

StreamScope::~StreamScope() = default;

DeviceMemory QueryDeviceMemory(const c10::Device& device) {
  DeviceMemory m;
  if (device.is_cpu() || !CudaUsable()) return m;
  // The caching allocator's statistics exist only once CUDA is initialised; a query before the
  // process's first allocation would otherwise throw "Invalid device argument".
  at::globalContext().lazyInitDevice(c10::DeviceType::CUDA);
  const auto stats = at::accelerator::getDeviceStats(device.index());
  const size_t agg = 0;  // StatType::AGGREGATE
  m.allocated_bytes = stats.allocated_bytes[agg].current;
  m.peak_allocated_bytes = stats.allocated_bytes[agg].peak;
  m.reserved_bytes = stats.reserved_bytes[agg].current;
  m.total_bytes = static_cast<int64_t>(at::accelerator::getMemoryInfo(device.index()).second);
  return m;
}

void ResetDevicePeak(const c10::Device& device) {
  if (device.is_cpu() || !CudaUsable()) return;
  at::globalContext().lazyInitDevice(c10::DeviceType::CUDA);
  at::accelerator::resetPeakStats(device.index());
}

}  // namespace zeropp
