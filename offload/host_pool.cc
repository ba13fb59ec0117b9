#include "offload/host_pool.h"

#include <cstdlib>

#ifdef ZEROPP_CUDA
#include <cuda_runtime.h>
#endif
#include <stdexcept>
#include <string>

namespace zeropp {
namespace offload {
namespace {

// Page-locked memory where a CUDA device exists (DMA to and from the GPU without a bounce copy),
// 4096-aligned host memory otherwise (what O_DIRECT needs).
void* HostAlloc(int64_t size) {
#ifdef ZEROPP_CUDA
  int devices = 0;
  if (cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0) {
    void* p = nullptr;
    if (cudaHostAlloc(&p, static_cast<size_t>(size), cudaHostAllocDefault) == cudaSuccess) return p;
    return nullptr;
  }
#endif
  return std::aligned_alloc(4096, static_cast<size_t>(size));
}

void HostFree(void* p) {
#ifdef ZEROPP_CUDA
  cudaPointerAttributes attr;
  if (cudaPointerGetAttributes(&attr, p) == cudaSuccess && attr.type == cudaMemoryTypeHost) {
    cudaFreeHost(p);
    return;
  }
  cudaGetLastError();  // clear the error of a pointer CUDA does not know
#endif
  std::free(p);
}

}  // namespace

HostBuffer& HostBuffer::operator=(HostBuffer&& o) noexcept {
  if (this != &o) {
    if (pool_) pool_->Release(data_, bytes_);
    pool_ = o.pool_;
    data_ = o.data_;
    bytes_ = o.bytes_;
    o.pool_ = nullptr;
    o.data_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

HostBuffer::~HostBuffer() {
  if (pool_) pool_->Release(data_, bytes_);
}

HostPool::~HostPool() {
  for (auto& kv : free_) HostFree(kv.second);
}

HostBuffer HostPool::Allocate(int64_t bytes) {
  const int64_t size = Rounded(bytes);
  std::lock_guard<std::mutex> lock(mu_);
  HostBuffer b;
  auto it = free_.find(size);
  if (it != free_.end()) {
    b.data_ = it->second;
    free_.erase(it);
    cached_ -= size;
  } else {
    // Drop cached buffers of other sizes if the budget needs their room.
    while (in_use_ + cached_ + size > budget_ && !free_.empty()) {
      auto victim = free_.begin();
      cached_ -= victim->first;
      HostFree(victim->second);
      free_.erase(victim);
    }
    if (in_use_ + size > budget_) {
      throw std::runtime_error("host pool: request of " + std::to_string(size) + " bytes with " +
                               std::to_string(in_use_) + " in use exceeds the budget of " + std::to_string(budget_) +
                               " bytes");
    }
    b.data_ = HostAlloc(size);
    if (!b.data_) throw std::runtime_error("host pool: allocation of " + std::to_string(size) + " bytes failed");
  }
  in_use_ += size;
  b.pool_ = this;
  b.bytes_ = size;
  return b;
}

void HostPool::Release(void* p, int64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  in_use_ -= bytes;
  cached_ += bytes;
  free_.emplace(bytes, p);
}

int64_t HostPool::in_use() const {
  std::lock_guard<std::mutex> lock(mu_);
  return in_use_;
}

int64_t HostPool::reserved() const {
  std::lock_guard<std::mutex> lock(mu_);
  return in_use_ + cached_;
}

}  // namespace offload
}  // namespace zeropp
