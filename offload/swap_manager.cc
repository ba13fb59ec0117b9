#include "offload/swap_manager.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <stdexcept>

#include <ATen/ops/from_blob.h>

namespace zeropp {
namespace offload {
namespace {

using Clock = std::chrono::steady_clock;

int64_t Us(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count();
}

}  // namespace

const char* TierName(Tier t) { return t == Tier::kCpu ? "cpu" : "nvme"; }

Tier ParseTier(const std::string& text) {
  if (text == "cpu") return Tier::kCpu;
  if (text == "nvme") return Tier::kNvme;
  throw std::invalid_argument("offload tier: got '" + text + "', expected one of: none, cpu, nvme");
}

SwapManager::SwapManager(IoEngine* io, HostPool* pool, const std::string& dir) : io_(io), pool_(pool), dir_(dir) {}

SwapManager::~SwapManager() {
  try {
    Flush();
  } catch (...) {
  }
}

HostBuffer SwapManager::Buffer(int64_t bytes) {
  try {
    return pool_->Allocate(bytes);
  } catch (const std::runtime_error&) {
    // Back-pressure: buffers of finished write-backs return to the pool.
    Reap(/*block=*/true);
    return pool_->Allocate(bytes);
  }
}

at::Tensor SwapManager::View(Entry& e) {
  return at::from_blob(e.buffer.data(), e.shape, at::TensorOptions().dtype(e.dtype));
}

int SwapManager::Register(const std::string& name, const at::Tensor& init, Tier tier) {
  Entry e;
  e.name = name;
  e.tier = tier;
  e.dtype = init.scalar_type();
  e.shape = init.sizes().vec();
  e.bytes = init.nbytes();
  e.padded = (e.bytes + kIoAlignment - 1) / kIoAlignment * kIoAlignment;
  at::Tensor src = init.contiguous();
  HostBuffer b = Buffer(std::max<int64_t>(e.padded, kIoAlignment));
  std::memcpy(b.data(), src.data_ptr(), e.bytes);
  if (tier == Tier::kCpu) {
    e.buffer = std::move(b);
  } else {
    if (!file_) {
      static std::atomic<int> serial{0};  // several managers (ranks as threads) share one process
      file_ = std::make_unique<OffloadFile>(dir_, "zeropp-swap-" + std::to_string(getpid()) + "-" +
                                                      std::to_string(serial++) + ".bin");
    }
    e.offset = file_end_;
    file_end_ += e.padded;
    if (e.padded > e.bytes) std::memset(static_cast<char*>(b.data()) + e.bytes, 0, e.padded - e.bytes);
    io_->Write(file_->fd(), b.data(), e.padded, e.offset, file_->path() + " (" + name + ")").get();
    stats_.bytes_written += e.padded;
  }
  entries_.push_back(std::move(e));
  return static_cast<int>(entries_.size()) - 1;
}

int SwapManager::RegisterUninitialized(const std::string& name, at::IntArrayRef shape, at::ScalarType dtype, Tier tier) {
  Entry e;
  e.name = name;
  e.tier = tier;
  e.dtype = dtype;
  e.shape = shape.vec();
  int64_t numel = 1;
  for (int64_t d : e.shape) numel *= d;
  e.bytes = numel * static_cast<int64_t>(c10::elementSize(dtype));
  e.padded = (e.bytes + kIoAlignment - 1) / kIoAlignment * kIoAlignment;
  if (tier == Tier::kCpu) {
    e.buffer = Buffer(std::max<int64_t>(e.padded, kIoAlignment));
  } else {
    if (!file_) {
      static std::atomic<int> serial{0};
      file_ = std::make_unique<OffloadFile>(dir_, "zeropp-swap-" + std::to_string(getpid()) + "-u" +
                                                      std::to_string(serial++) + ".bin");
    }
    e.offset = file_end_;
    file_end_ += e.padded;
  }
  entries_.push_back(std::move(e));
  return static_cast<int>(entries_.size()) - 1;
}

void SwapManager::WaitForWriteBack(int id) {
  for (auto& w : writes_) {
    if (w.id == id) {
      auto t0 = Clock::now();
      w.done.get();
      stats_.wait_us += Us(t0);
      w.id = -1;
    }
  }
}

void SwapManager::Prefetch(int id) {
  Entry& e = entries_[id];
  if (!e.NeedsRead()) return;
  Reap(/*block=*/false);
  if (pool_->in_use() + 2 * HostPool::Rounded(e.padded) > pool_->budget()) return;
  StartRead(id);
}

void SwapManager::StartRead(int id) {
  Entry& e = entries_[id];
  if (!e.NeedsRead()) return;
  WaitForWriteBack(id);
  e.buffer = Buffer(e.padded);
  e.pending = io_->Read(file_->fd(), e.buffer.data(), e.padded, e.offset, file_->path() + " (" + e.name + ")");
  stats_.bytes_read += e.padded;
}

at::Tensor SwapManager::Acquire(int id, bool read) {
  Entry& e = entries_[id];
  if (e.acquired) throw std::logic_error("SwapManager: " + e.name + " acquired twice");
  if (!read && e.NeedsRead()) {
    WaitForWriteBack(id);
    e.buffer = Buffer(e.padded);
    e.acquired = true;
    return View(e);
  }
  StartRead(id);
  if (e.pending.valid()) {
    auto t0 = Clock::now();
    e.pending.get();
    stats_.wait_us += Us(t0);
  }
  e.acquired = true;
  return View(e);
}

void SwapManager::Release(int id, bool dirty) {
  Entry& e = entries_[id];
  if (!e.acquired) throw std::logic_error("SwapManager: " + e.name + " released without Acquire");
  e.acquired = false;
  if (e.tier == Tier::kCpu) return;
  if (dirty) {
    WriteBack w;
    w.done = io_->Write(file_->fd(), e.buffer.data(), e.padded, e.offset, file_->path() + " (" + e.name + ")");
    w.buffer = std::move(e.buffer);
    w.id = id;
    stats_.bytes_written += e.padded;
    writes_.push_back(std::move(w));
  } else {
    e.buffer = HostBuffer();
  }
  Reap(false);
}

void SwapManager::Reap(bool block) {
  std::vector<WriteBack> left;
  for (auto& w : writes_) {
    if (w.id >= 0 && !block && w.done.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
      left.push_back(std::move(w));
      continue;
    }
    if (w.id >= 0) {
      auto t0 = Clock::now();
      w.done.get();
      stats_.wait_us += Us(t0);
    }
  }
  writes_ = std::move(left);
}

void SwapManager::Flush() { Reap(true); }

}  // namespace offload
}  // namespace zeropp
