// swap_manager.h: named flat tensors whose home is host memory or an NVMe file, brought into
// page-aligned host buffers on demand, with prefetch.
//
//   SwapManager swap(io, pool, "/mnt/nvme/run1");
//   int id = swap.Register("unit3.exp_avg", initial, Tier::kNvme);   // written to its file region
//   swap.Prefetch(id);                 // starts the read (non-blocking)
//   at::Tensor t = swap.Acquire(id);   // waits; valid until Release
//   ... update t ...
//   swap.Release(id, /*dirty=*/true);  // nvme: asynchronous write-back, buffer freed when done
//
// Tier::kCpu keeps the tensor resident in a pool buffer (Acquire/Release are free). Tier::kNvme
// keeps nothing resident between Acquire/Release pairs: every tensor has a 4096-aligned region of
// one O_DIRECT file in `dir`, removed with the manager. All calls come from one thread (the
// training thread); the I/O runs on the engine's threads. Failures surface as IoError naming the
// tensor, the file and the offset.
#pragma once

#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "offload/host_pool.h"
#include "offload/io_engine.h"
#include "offload/offload_file.h"

namespace zeropp {
namespace offload {

enum class Tier { kCpu, kNvme };
const char* TierName(Tier t);
Tier ParseTier(const std::string& text);  // cpu | nvme; throws std::invalid_argument

struct SwapStats {
  int64_t bytes_read = 0;
  int64_t bytes_written = 0;
  int64_t wait_us = 0;  // time Acquire/Flush blocked on I/O
};

class SwapManager {
 public:
  // `dir` is checked up front (IoError if missing or unwritable) when any tensor may use kNvme.
  SwapManager(IoEngine* io, HostPool* pool, const std::string& dir);
  ~SwapManager();

  // Copies `init` (contiguous) to the tensor's home. For kNvme, the write completes before return.
  int Register(const std::string& name, const at::Tensor& init, Tier tier);
  // A tensor whose first use overwrites it (Acquire(id, /*read=*/false)): nothing is written now.
  int RegisterUninitialized(const std::string& name, at::IntArrayRef shape, at::ScalarType dtype, Tier tier);
  // Starts the read of an nvme tensor (non-blocking). A hint: skipped while the host pool could not
  // hold it and one more buffer of its size (finished write-backs returned first), so a prefetch
  // never takes the room a later Acquire needs; that Acquire then reads it itself.
  void Prefetch(int id);
  // `read` = false: the caller overwrites every element, so an nvme tensor is not read first.
  at::Tensor Acquire(int id, bool read = true);
  void Release(int id, bool dirty);
  // Waits for every outstanding write-back.
  void Flush();
  const SwapStats& stats() const { return stats_; }
  int64_t file_bytes() const { return file_end_; }
  Tier tier(int id) const { return entries_[id].tier; }

 private:
  struct Entry {
    std::string name;
    Tier tier;
    at::ScalarType dtype;
    std::vector<int64_t> shape;
    int64_t bytes = 0, padded = 0, offset = 0;
    HostBuffer buffer;          // resident copy (kCpu always; kNvme between Prefetch and write-back)
    std::future<void> pending;  // read in flight
    bool acquired = false;
    // An nvme tensor neither in memory nor on its way there.
    bool NeedsRead() const { return tier != Tier::kCpu && buffer.data() == nullptr && !pending.valid(); }
  };
  struct WriteBack {
    std::future<void> done;
    HostBuffer buffer;
    int id;
  };
  void Reap(bool block);
  void StartRead(int id);  // Prefetch without the room check (Acquire's own read)
  // A tensor's region is rewritten or reread only after its last write-back landed.
  void WaitForWriteBack(int id);
  // A pool buffer; when the pool's budget is reached, waits for write-backs to free theirs first.
  HostBuffer Buffer(int64_t bytes);
  at::Tensor View(Entry& e);

  IoEngine* io_;
  HostPool* pool_;
  std::string dir_;
  std::unique_ptr<OffloadFile> file_;
  int64_t file_end_ = 0;
  std::vector<Entry> entries_;
  std::vector<WriteBack> writes_;
  SwapStats stats_;
};

}  // namespace offload
}  // namespace zeropp
