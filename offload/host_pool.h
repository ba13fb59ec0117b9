// host_pool.h: page-aligned host buffers for offload I/O, reused by size, under a hard budget.
// In --config=cuda builds on a machine with a GPU they are page-locked (cudaHostAlloc), so copies
// to and from the device run as DMA; elsewhere 4096-aligned host memory.
//
//   HostPool pool(8ull << 30);
//   HostBuffer b = pool.Allocate(1 << 20);   // returned to the pool when b goes away
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace zeropp {
namespace offload {

class HostPool;

// Owns one buffer from a pool; movable. Returns it to the pool on destruction.
class HostBuffer {
 public:
  HostBuffer() = default;
  HostBuffer(HostBuffer&& o) noexcept { *this = std::move(o); }
  HostBuffer& operator=(HostBuffer&& o) noexcept;
  ~HostBuffer();
  void* data() const { return data_; }
  int64_t bytes() const { return bytes_; }

 private:
  friend class HostPool;
  HostPool* pool_ = nullptr;
  void* data_ = nullptr;
  int64_t bytes_ = 0;
};

class HostPool {
 public:
  explicit HostPool(int64_t budget_bytes) : budget_(budget_bytes) {}
  ~HostPool();
  // Sizes round up to 4096. Throws std::runtime_error naming the request, the bytes in use and the
  // budget when the budget would be exceeded. Thread-safe.
  HostBuffer Allocate(int64_t bytes);
  // The size a request of `bytes` takes from the budget (4096-byte multiples).
  static int64_t Rounded(int64_t bytes) { return (bytes + 4095) / 4096 * 4096; }
  int64_t in_use() const;
  int64_t reserved() const;  // in use + cached for reuse
  int64_t budget() const { return budget_; }

 private:
  friend class HostBuffer;
  void Release(void* p, int64_t bytes);
  const int64_t budget_;
  mutable std::mutex mu_;
  int64_t in_use_ = 0, cached_ = 0;
  std::multimap<int64_t, void*> free_;  // by size
};

}  // namespace offload
}  // namespace zeropp
