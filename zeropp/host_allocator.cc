#include "zeropp/host_allocator.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace zeropp {
namespace {

// CPU tensors of [min_bytes, max_bytes) as page-aligned mmapped blocks, kept after they are freed
// and handed out again for a page-rounded size up to the block's and at least half of it;
// everything else goes to the allocator it replaces. Freed blocks beyond cap_bytes in all are
// unmapped, and kept ones are trimmed to the peak in use (host_allocator.h). Never destroyed
// (tensors may outlive static destruction).
class BlockCache final : public c10::Allocator {
 public:
  BlockCache(c10::Allocator* fallback, size_t min_bytes, size_t max_bytes, size_t cap_bytes)
      : fallback_(fallback), min_(min_bytes), max_(max_bytes), cap_(cap_bytes),
        page_(static_cast<size_t>(sysconf(_SC_PAGESIZE))) {}

  c10::DataPtr allocate(size_t n) override {
    if (n < min_ || n >= max_) {
      // The replaced allocator's memory, under this allocator's deleter so that its bytes are
      // counted out when freed (Free hands unknown pointers to the replaced allocator's deleter).
      c10::DataPtr d = fallback_->allocate(n);
      void* p = d.get();
      if (p == nullptr) return d;
      if (d.get_context() != p || d.get_deleter() != fallback_->raw_deleter()) return d;  // not a plain pointer
      d.release_context();  // ownership passes to the DataPtr below
      AddLive(HeapBytes(p));
      return {p, p, &Delete, c10::Device(c10::kCPU)};
    }
    const size_t bytes = (n + page_ - 1) / page_ * page_;
    size_t block = bytes;
    void* p = nullptr;
    std::vector<std::pair<void*, size_t>> evicted;
    {
      std::lock_guard<std::mutex> lock(mu_);
      // The smallest kept block that fits, up to twice the size: its pages are already resident,
      // so using it costs no memory that a fresh mapping would not.
      auto it = free_.lower_bound(bytes);
      if (it != free_.end() && it->first <= 2 * bytes) {
        p = it->second.back();
        block = it->first;
        it->second.pop_back();
        if (it->second.empty()) free_.erase(it);
        cached_ -= block;
        ++stats_.hits;
      } else {
        ++stats_.misses;
        // Before mapping more, the kept blocks are trimmed (largest first) so that blocks in use
        // and kept stay within the most ever in use plus an eighth (at least kMinSlack): what the
        // process holds follows what training holds, not every size it has ever asked for.
        const size_t in_use = mapped_live_ + bytes;
        peak_in_use_ = std::max(peak_in_use_, in_use);
        const size_t limit = peak_in_use_ + std::max(peak_in_use_ / 8, kMinSlack);
        while (cached_ > 0 && in_use + cached_ > limit) {
          auto last = std::prev(free_.end());
          evicted.emplace_back(last->second.back(), last->first);
          cached_ -= last->first;
          last->second.pop_back();
          if (last->second.empty()) free_.erase(last);
        }
      }
      mapped_live_ += block;
      peak_in_use_ = std::max(peak_in_use_, mapped_live_);
      stats_.live_bytes += bytes;
    }
    for (const auto& e : evicted) munmap(e.first, e.second);
    AddLive(static_cast<int64_t>(bytes));
    if (p == nullptr) {
      p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) {
        std::lock_guard<std::mutex> lock(mu_);
        stats_.live_bytes -= bytes;
        mapped_live_ -= bytes;
        AddLive(-static_cast<int64_t>(bytes));
        throw std::bad_alloc();
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      live_[p] = {block, bytes};
    }
    return {p, p, &Delete, c10::Device(c10::kCPU)};
  }

  // Allocator::raw_allocate/raw_deallocate (used by some kernels for workspaces) need one deleter
  // for every pointer: ours, which recognises its blocks and hands anything else to the replaced
  // allocator's deleter.
  c10::DeleterFnPtr raw_deleter() const override { return &Delete; }

  void copy_data(void* dest, const void* src, std::size_t count) const override { std::memcpy(dest, src, count); }

  BlockCacheStats Stats() {
    std::lock_guard<std::mutex> lock(mu_);
    BlockCacheStats s = stats_;
    s.cached_bytes = static_cast<int64_t>(cached_);
    s.blocks_peak_bytes = static_cast<int64_t>(peak_in_use_);
    s.tensor_live_bytes = tensor_live_.load();
    s.tensor_peak_bytes = tensor_peak_.load();
    return s;
  }

  void ResetPeak() { tensor_peak_.store(tensor_live_.load()); }

 private:
  static void Delete(void* p);

  // The bytes the replaced allocator holds for p: malloc_usable_size where the C library has it
  // (glibc, and jemalloc when preloaded), else not counted.
  static int64_t HeapBytes(void* p) {
#if defined(__GLIBC__)
    return static_cast<int64_t>(malloc_usable_size(p));
#else
    return 0;
#endif
  }

  void AddLive(int64_t bytes) {
    const int64_t now = tensor_live_.fetch_add(bytes) + bytes;
    int64_t peak = tensor_peak_.load();
    while (now > peak && !tensor_peak_.compare_exchange_weak(peak, now)) {
    }
  }

  void Free(void* p) {
    size_t bytes = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = live_.find(p);
      if (it != live_.end()) {
        bytes = it->second.first;
        const size_t asked = it->second.second;
        live_.erase(it);
        mapped_live_ -= bytes;
        stats_.live_bytes -= asked;
        AddLive(-static_cast<int64_t>(asked));
        if (cached_ + bytes <= cap_) {
          free_[bytes].push_back(p);
          cached_ += bytes;
          return;
        }
      }
    }
    if (bytes > 0) {
      munmap(p, bytes);
    } else if (c10::DeleterFnPtr d = fallback_->raw_deleter()) {
      AddLive(-HeapBytes(p));
      d(p);  // a tensor or raw allocation the replaced allocator made
    }
  }

  c10::Allocator* fallback_;
  const size_t min_, max_, cap_, page_;
  std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_;  // freed blocks by size
  std::unordered_map<void*, std::pair<size_t, size_t>> live_;  // blocks in use: mapped and asked bytes
  static constexpr size_t kMinSlack = size_t{4} << 20;
  size_t cached_ = 0;
  size_t mapped_live_ = 0, peak_in_use_ = 0;  // mapped bytes of blocks in use, now and at most
  BlockCacheStats stats_;
  std::atomic<int64_t> tensor_live_{0}, tensor_peak_{0};  // blocks and the replaced allocator's tensors
};

BlockCache* g_cache = nullptr;

void BlockCache::Delete(void* p) { g_cache->Free(p); }

}  // namespace

HostAllocatorSettings TuneHostAllocator() {
  static const HostAllocatorSettings settings = [] {
    HostAllocatorSettings s;
#if defined(__GLIBC__)
    s.mmap_threshold = int64_t{32} << 20;
    s.trim_threshold = int64_t{1} << 30;
    s.applied = mallopt(M_MMAP_THRESHOLD, static_cast<int>(s.mmap_threshold)) == 1 &&
                mallopt(M_TRIM_THRESHOLD, static_cast<int>(s.trim_threshold)) == 1;
#endif
    s.large_block_bytes = int64_t{1} << 16;
    s.cache_cap_bytes = int64_t{512} << 20;
    const int64_t below = s.mmap_threshold > 0 ? s.mmap_threshold : int64_t{32} << 20;
    g_cache = new BlockCache(c10::GetCPUAllocator(), static_cast<size_t>(s.large_block_bytes),
                             static_cast<size_t>(below), static_cast<size_t>(s.cache_cap_bytes));
    c10::SetCPUAllocator(g_cache, /*priority=*/1);
    return s;
  }();
  return settings;
}

BlockCacheStats HostBlockCacheStats() { return g_cache ? g_cache->Stats() : BlockCacheStats{}; }

void ResetHostTensorPeak() {
  if (g_cache) g_cache->ResetPeak();
}

}  // namespace zeropp
