// device.h: where a rank's tensors live and how work on different streams is ordered.
//
// Device-generic through c10's accelerator interfaces (at::accelerator, c10::Stream, c10::Event):
// the same code runs on CPU (no streams: every call here is a no-op there) and, in builds that
// link the wheel's CUDA libraries (--config=cuda), on the GPU of each rank's LOCAL_RANK.
//
// Streams follow FSDP2's pattern: compute on the thread's current stream; all-gathers on an
// unshard stream, reduce-scatters and all-reduces on a reduce stream, pipeline send/recv on a p2p
// stream, host<->device copies on a copy stream; ordering between them by events only (a stream
// waits on an event recorded on another; no device-wide synchronisation).
//
//   c10::Device dev = ResolveDevice("cuda", local_rank);   // throws with one clear line
//   StreamEvent ready = StreamEvent::RecordCurrent(dev);   // on the producer's stream
//   { StreamScope s(dev, StreamRole::kUnshard); ready.Block(); ... issue the gather ... }
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <c10/core/Device.h>

namespace zeropp {

enum class StreamRole { kUnshard, kReduce, kP2P, kCopy };

// "cpu" or "cuda" -> the device this rank uses: cuda:(local_rank % visible GPUs). Throws
// std::invalid_argument naming the field, the value, what was expected and the rank: an unknown
// kind, or cuda in a build without CUDA or on a machine where no GPU is visible.
c10::Device ResolveDevice(const std::string& kind, int local_rank, int rank);
// "" when `kind` can be used here, else why not (the message ResolveDevice would throw).
std::string DeviceUnavailableReason(const std::string& kind);
// Number of GPUs visible to this process (0 in CPU-only builds).
int CudaDeviceCount();
// The calling thread's current GPU (cuda:0 when none was set).
c10::Device CurrentCudaDevice();
// Makes `device` the current device of the calling thread (no-op on CPU).
void SetCurrentDevice(const c10::Device& device);

// An event recorded on a stream; a null event (CPU) is always complete.
class StreamEvent {
 public:
  StreamEvent() = default;
  // Records on the calling thread's current stream of `device` (null on CPU).
  static StreamEvent RecordCurrent(const c10::Device& device);
  // Makes the calling thread's current stream wait for the event (device-side, non-blocking).
  void Block() const;
  // Blocks the host until the event completed.
  void Synchronize() const;
  bool null() const { return impl_ == nullptr; }

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

// Sets the calling thread's current stream of `device` to the stream of `role` (one per role and
// device, from the backend's pool) for the scope; restores the previous one. No-op on CPU.
class StreamScope {
 public:
  StreamScope(const c10::Device& device, StreamRole role);
  ~StreamScope();
  StreamScope(const StreamScope&) = delete;
  StreamScope& operator=(const StreamScope&) = delete;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The caching allocator's view of a device (all zero on CPU).
struct DeviceMemory {
  int64_t allocated_bytes = 0;   // in live tensors now
  int64_t reserved_bytes = 0;    // held by the caching allocator
  int64_t peak_allocated_bytes = 0;
  int64_t total_bytes = 0;       // the device's capacity
};
DeviceMemory QueryDeviceMemory(const c10::Device& device);
void ResetDevicePeak(const c10::Device& device);

}  // namespace zeropp
