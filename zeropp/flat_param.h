// flat_param.h: one scheduling unit's parameters flattened into one padded buffer, sharded.
//
// Layout: the unit's own parameters (tied tensors belong to the first unit that registers them)
// are laid out back to back in registration order; the total is padded to a multiple of
// `pad_multiple` (zero size, times dp size under ZeRO-1) so every rank holds an equal shard.
// Rank z of the zero group owns flat elements [z*shard_numel, (z+1)*shard_numel).
//
// Memory per rank, by state (Psi = padded_numel, N = zero size, b = bytes of param dtype):
//   always:           shard (Psi/N * b), fp32 master (Psi/N * 4; the shard itself when fp32;
//                     under ZeRO-1 with a separate master only the part this replica updates,
//                     Psi/(N*dp) * 4: SetMasterRange), gradient shard (Psi/N * bytes of reduce dtype)
//   while unsharded:  full buffer (Psi * b)      -- storage resized to 0 when sharded
//   during backward:  full gradient buffer (Psi * b), released after its reduce-scatter
// Module parameters are bound once (set_data) to views of the full buffer. Their gradients land in
// the full gradient buffer through a hook after autograd's accumulation (grad_sink.h): copied on
// the first backward since the buffer was allocated, added after, .grad left undefined.
//
// Device: shard, master, gradient shard and the full buffers live on `device` (cpu or cuda:i);
// `master_device` may be the host instead (optimizer offload on a GPU: the fp32 master sits with
// the CPU optimizer's moments and the compute shard is a separate tensor on the device).
//
// Offload: with a SwapManager, the shard, the fp32 master and the gradient shard live on its tier
// (cpu or nvme) and are reached only through Acquire*/Release* pairs (resident tensors otherwise,
// for which the pairs cost nothing).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "offload/swap_manager.h"
#include "zeropp/grad_sink.h"

namespace zeropp {

struct FlatEntry {
  std::string name;
  at::Tensor param;  // the module's parameter (a leaf variable)
  std::vector<int64_t> shape;
  int64_t offset = 0;
  int64_t numel = 0;
  bool trainable = true;  // requires_grad
  // A tied tensor also held by another pipeline stage that counts it: excluded from the gradient
  // norm here so that it is counted once.
  bool norm_excluded = false;
  // Held whole by every rank of a model-parallel group (Engine::SetModelParallel).
  bool replicated = false;
};

class FlatParam {
 public:
  // Lays out `entries` (offsets are assigned here). Does not touch the parameters yet.
  FlatParam(std::vector<FlatEntry> entries, int zero_size, int zero_rank, int64_t pad_multiple,
            at::ScalarType param_dtype, at::ScalarType reduce_dtype,
            c10::Device device = c10::Device(c10::kCPU), c10::Device master_device = c10::Device(c10::kCPU));
  // Removes the gradient hooks from the parameters (a model may outlive its engine).
  ~FlatParam();
  FlatParam(const FlatParam&) = delete;
  FlatParam& operator=(const FlatParam&) = delete;

  // The flat range [begin, end) (within this rank's shard) that the fp32 master holds, when it is a
  // tensor of its own: under ZeRO-1 the part of the shard this replica's optimizer updates. A
  // master that is the shard itself (fp32 compute, resident or offloaded) always spans the shard.
  // Call before InitFromFull; the default is the whole shard.
  void SetMasterRange(int64_t begin, int64_t end);
  // fp32 padded flat (on the host) of the parameters' current values (zeros in the padding).
  at::Tensor GatherLocalValues() const;
  // Takes this rank's shard of `full_fp32` (identical on all ranks), binds every parameter to a
  // view of the full buffer, and frees the buffer (the unit starts Sharded).
  void InitFromFull(const at::Tensor& full_fp32, offload::SwapManager* swap = nullptr,
                    offload::Tier tier = offload::Tier::kCpu);

  // Shard (param dtype), master (fp32) and gradient shard (reduce dtype). Acquire blocks until the
  // tensor is in memory; the view is valid until the matching Release. Prefetch starts the read.
  void PrefetchShard();
  // The optimizer step's inputs of an offloaded unit: its fp32 master, and its gradient shard once
  // written this step (no-ops when resident).
  void PrefetchMaster();
  void PrefetchGradShard();
  at::Tensor AcquireShard();
  void ReleaseShard(bool dirty);
  at::Tensor AcquireMaster();
  void ReleaseMaster(bool dirty);
  // `read` = false skips reading the old contents (the caller overwrites all of them).
  at::Tensor AcquireGradShard(bool read = true);
  void ReleaseGradShard(bool dirty);
  bool offloaded() const { return swap_ != nullptr; }

  // Re-allocates the full buffer's storage (contents undefined until the all-gather lands).
  void AllocateFull();
  void FreeFull();
  // A group of one rank without parameter offload: the full buffer is the shard itself (as
  // FSDP's NO_SHARD), so a gather copies nothing and a release frees nothing.
  bool full_is_shard() const { return full_is_shard_; }

  // Allocates the full gradient buffer (uninitialised) where the parameters' gradients land from
  // now on, and clears their .grad (a stale one, from a backward while no buffer was open, would
  // otherwise be summed into the first landing; the hook leaves .grad undefined after each).
  void AllocateGradFull();
  // Drops the full gradient buffer (the reduce-scatter keeps its own reference).
  void ReleaseGradFull();
  bool has_grad_full() const { return landing_->open(); }
  // The full gradient buffer, with zeros wherever no gradient landed since AllocateGradFull
  // (GradLanding::Finish): what a reduction or a reader of the unsharded gradient takes.
  const at::Tensor& FinishedGradFull() { return landing_->Finish(); }

  // Flat-coordinate ranges of trainable parameters intersected with [begin, end).
  std::vector<std::pair<int64_t, int64_t>> TrainableRanges(int64_t begin, int64_t end,
                                                          bool for_norm = false) const;

  int64_t numel() const { return numel_; }
  int64_t padded_numel() const { return padded_numel_; }
  int64_t shard_numel() const { return shard_numel_; }
  int64_t shard_begin() const { return zero_rank_ * shard_numel_; }
  const std::vector<FlatEntry>& entries() const { return entries_; }
  std::vector<FlatEntry>& mutable_entries() { return entries_; }
  at::ScalarType param_dtype() const { return param_dtype_; }
  at::ScalarType reduce_dtype() const { return reduce_dtype_; }

  at::Tensor& full() { return full_; }
  // Gradient shard bookkeeping within a step: the first reduction overwrites, later ones add.
  void StartStep() { grad_written_ = false; }
  // A unit whose gradient received no reduction this step (none of its parameters were used) gets
  // zeros, so that the optimizer never reads a previous step's gradient.
  void EnsureGradWritten();
  // Adds a reduced gradient (shard-sized) into the gradient shard, converting its dtype. The step's
  // first one, when resident, contiguous and already in the shard's dtype, becomes the shard (no
  // copy): the caller must not use it afterwards.
  void AccumulateGradShard(const at::Tensor& reduced);

  int64_t full_bytes() const { return padded_numel_ * elem_bytes_; }
  int64_t shard_bytes() const { return shard_numel_ * elem_bytes_; }
  bool master_is_shard() const { return master_is_shard_; }
  // The master's flat range (valid after InitFromFull).
  int64_t master_begin() const { return master_begin_; }
  int64_t master_numel() const { return master_numel_; }
  const c10::Device& device() const { return device_; }

 private:
  std::vector<FlatEntry> entries_;
  int zero_size_;
  int zero_rank_;
  at::ScalarType param_dtype_;
  at::ScalarType reduce_dtype_;
  int64_t elem_bytes_;
  int64_t numel_ = 0;
  int64_t padded_numel_ = 0;
  int64_t shard_numel_ = 0;
  int64_t master_begin_ = -1, master_numel_ = 0;  // -1: the whole shard
  at::Tensor full_, shard_, master_, grad_shard_;
  std::shared_ptr<GradLanding> landing_;  // the full gradient buffer, shared with the hooks
  offload::SwapManager* swap_ = nullptr;
  int shard_id_ = -1, master_id_ = -1, grad_id_ = -1;
  bool grad_written_ = false;
  bool full_is_shard_ = false;
  bool master_is_shard_ = false;
  c10::Device device_;
  c10::Device master_device_;
};

}  // namespace zeropp
