// sharded_adamw.h: AdamW over the fp32 master shards this rank owns.
//
// Each unit contributes its owned flat range [own_begin, own_end): the whole zero shard, or under
// ZeRO-1 a 1/dp slice of it. exp_avg and exp_avg_sq exist only for the owned range, as one [2, n]
// tensor per unit, resident (beside the fp32 master: host or GPU) or on an offload tier (SetSwap).
// Updates run the vectorised kernels/ AdamW (best path for this CPU) over each trainable sub-range
// (frozen parameters and padding are skipped); a master on a GPU is updated by the multi-tensor
// CUDA kernel (kernels/adamw_cuda.h), one launch per unit over all its sub-ranges, on the current
// stream. Not thread-safe; called from the training thread only, units in order, so that the
// states of unit i+1 are read while unit i updates and unit i-1 is written back.
#pragma once

#include <vector>

#include <ATen/core/Tensor.h>

#include "kernels/adamw.h"
#include "kernels/adamw_cpu.h"
#include "offload/swap_manager.h"
#include "zeropp/flat_param.h"

namespace zeropp {

class ShardedAdamW {
 public:
  explicit ShardedAdamW(const kernels::AdamWHyper& hyper, int threads = 1)
      : hyper_(hyper), path_(kernels::BestCpuPath()), threads_(threads) {}
  // The learning rate of the following steps (a schedule sets it before each step).
  void set_lr(float lr) { hyper_.lr = lr; }

  // Keep the moments on `tier` through `swap` (call before AddUnit).
  void SetSwap(offload::SwapManager* swap, offload::Tier tier) {
    swap_ = swap;
    tier_ = tier;
  }
  // Registers a unit; its zeroed moments cover [own_begin, own_end).
  void AddUnit(FlatParam* flat, int64_t own_begin, int64_t own_end,
               c10::Device device = c10::Device(c10::kCPU));

  // Recomputes which owned elements count in the gradient norm (after FlatEntry::norm_excluded
  // changed).
  void RefreshNormRanges();
  // Sum of squares of the trainable owned gradient elements of unit i (a contiguous fp32 or bf16
  // owned gradient on the host, read as it is), accumulated in fp64.
  double SquaredNorm(size_t i, const at::Tensor& owned_grad) const;
  // The same added to `acc` (a one-element fp64 tensor on the gradient's device) without a host
  // read, so that a step reads the norm once. On a GPU one pass per range over the gradient as it
  // is (bf16 or fp32), accumulated in fp64 in a fixed order (kernels/norm_cuda.h): the host's sum
  // to fp64 rounding, so an offloaded unit gets the same clipping factor. (Converting the gradient
  // to fp64 first cost three passes over it, 9% of a 1.2B GPT's step on an H100, gpu-2026-11-27.txt;
  // ATen's fp32 norm, which replaced it, was off in the last bits, gpu-2026-11-27b.txt.)
  void AddSquaredNorm(size_t i, const at::Tensor& owned_grad, at::Tensor& acc) const;
  void BeginStep() { ++step_; }
  void Prefetch(size_t i);
  // One AdamW update of unit i: `master_shard` is the unit's fp32 master (acquired by the
  // caller), `owned_grad` its gradient over the owned range (fp32; on the host bf16 too, read as it
  // is), scaled by `grad_scale` first. On the host, a defined `bf16_out` (the owned range of the
  // unit's bf16 compute shard, host memory) receives the updated values in the same pass.
  void StepUnit(size_t i, const at::Tensor& master_shard, const at::Tensor& owned_grad, float grad_scale,
                const at::Tensor& bf16_out = at::Tensor());

  int64_t step() const { return step_; }
  void set_step(int64_t step) { step_ = step; }  // resuming from a checkpoint
  // The moments of unit i, [2, own] (exp_avg, exp_avg_sq), until ReleaseMoments (checkpoints).
  at::Tensor AcquireMoments(size_t i);
  void ReleaseMoments(size_t i, bool dirty);
  int64_t state_bytes() const;  // exp_avg + exp_avg_sq, wherever they live
  size_t num_units() const { return units_.size(); }
  int64_t own_begin(size_t i) const { return units_[i].own_begin; }
  int64_t own_end(size_t i) const { return units_[i].own_end; }

 private:
  struct Unit {
    FlatParam* flat;
    int64_t own_begin, own_end;
    std::vector<std::pair<int64_t, int64_t>> ranges;       // trainable, flat coordinates
    std::vector<std::pair<int64_t, int64_t>> norm_ranges;  // trainable and counted in the norm
    at::Tensor moments;                                    // [2, own] when resident
    int swap_id = -1;
  };
  kernels::AdamWHyper hyper_;
  kernels::CpuPath path_;
  int threads_;
  offload::SwapManager* swap_ = nullptr;
  offload::Tier tier_ = offload::Tier::kCpu;
  std::vector<Unit> units_;
  int64_t step_ = 0;
};

}  // namespace zeropp
