// sharded_adamw.h: AdamW over the fp32 master shards this rank owns.
//
// Each unit contributes its owned flat range [own_begin, own_end): the whole zero shard, or under
// ZeRO-1 a 1/dp slice of it. exp_avg and exp_avg_sq exist only for the owned range. Updates run
// the vectorised kernels/ AdamW (best path for this CPU) over each trainable sub-range (frozen
// parameters and padding are skipped).
// Not thread-safe; called from the training thread only.
#pragma once

#include <vector>

#include <ATen/core/Tensor.h>

#include "kernels/adamw.h"
#include "kernels/adamw_cpu.h"
#include "zeropp/flat_param.h"

namespace zeropp {

class ShardedAdamW {
 public:
  explicit ShardedAdamW(const kernels::AdamWHyper& hyper, int threads = 1)
      : hyper_(hyper), path_(kernels::BestCpuPath()), threads_(threads) {}

  // Registers a unit; allocates its zeroed moments for [own_begin, own_end).
  void AddUnit(FlatParam* flat, int64_t own_begin, int64_t own_end);

  // Sum of squares of the trainable owned gradient elements of unit i (fp32 owned gradient).
  double SquaredNorm(size_t i, const at::Tensor& owned_grad) const;
  // One AdamW step on every unit: owned_grads[i] is unit i's fp32 gradient over its owned range,
  // multiplied by `grad_scale` first (clipping). Updates the fp32 master in place.
  void Step(const std::vector<at::Tensor>& owned_grads, float grad_scale);

  int64_t step() const { return step_; }
  int64_t state_bytes() const;  // exp_avg + exp_avg_sq
  size_t num_units() const { return units_.size(); }
  int64_t own_begin(size_t i) const { return units_[i].own_begin; }
  int64_t own_end(size_t i) const { return units_[i].own_end; }

 private:
  struct Unit {
    FlatParam* flat;
    int64_t own_begin, own_end;
    std::vector<std::pair<int64_t, int64_t>> ranges;       // trainable, flat coordinates
    std::vector<std::pair<int64_t, int64_t>> norm_ranges;  // trainable and counted in the norm
    at::Tensor exp_avg, exp_avg_sq;
  };
  kernels::AdamWHyper hyper_;
  kernels::CpuPath path_;
  int threads_;
  std::vector<Unit> units_;
  int64_t step_ = 0;
};

}  // namespace zeropp
