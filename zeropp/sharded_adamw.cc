#include "zeropp/sharded_adamw.h"

#include <ATen/ops/zeros.h>

namespace zeropp {

void ShardedAdamW::AddUnit(FlatParam* flat, int64_t own_begin, int64_t own_end) {
  Unit u;
  u.flat = flat;
  u.own_begin = own_begin;
  u.own_end = own_end;
  u.ranges = flat->TrainableRanges(own_begin, own_end);
  u.norm_ranges = flat->TrainableRanges(own_begin, own_end, /*for_norm=*/true);
  if (swap_) {
    // Zeroed through a staging buffer rather than a resident tensor.
    u.swap_id = swap_->RegisterUninitialized("adamw.moments." + std::to_string(units_.size()),
                                             {2, own_end - own_begin}, at::kFloat, tier_);
    swap_->Acquire(u.swap_id, /*read=*/false).zero_();
    swap_->Release(u.swap_id, /*dirty=*/true);
  } else {
    u.moments = at::zeros({2, own_end - own_begin}, at::TensorOptions().dtype(at::kFloat));
  }
  units_.push_back(std::move(u));
}

double ShardedAdamW::SquaredNorm(size_t i, const at::Tensor& owned_grad) const {
  const Unit& u = units_[i];
  const float* g = owned_grad.data_ptr<float>();
  double sum = 0;
  for (const auto& r : u.norm_ranges) {
    for (int64_t k = r.first; k < r.second; ++k) {
      double x = g[k - u.own_begin];
      sum += x * x;
    }
  }
  return sum;
}

void ShardedAdamW::Prefetch(size_t i) {
  if (swap_ && i < units_.size()) swap_->Prefetch(units_[i].swap_id);
}

void ShardedAdamW::StepUnit(size_t i, const at::Tensor& master_shard, const at::Tensor& owned_grad, float grad_scale) {
  Unit& u = units_[i];
  kernels::AdamWHyper h = hyper_;
  h.step = step_;
  at::Tensor g = grad_scale != 1.0f ? owned_grad.mul(grad_scale) : owned_grad;
  at::Tensor moments = swap_ ? swap_->Acquire(u.swap_id) : u.moments;
  float* master = master_shard.data_ptr<float>();
  float* exp_avg = moments.data_ptr<float>();
  float* exp_avg_sq = exp_avg + (u.own_end - u.own_begin);
  const int64_t shard_begin = u.flat->shard_begin();
  for (const auto& r : u.ranges) {
    const int64_t own = r.first - u.own_begin;
    kernels::AdamWArgs args;
    args.param = master + (r.first - shard_begin);
    args.grad = g.data_ptr<float>() + own;
    args.exp_avg = exp_avg + own;
    args.exp_avg_sq = exp_avg_sq + own;
    args.n = r.second - r.first;
    kernels::AdamWCpu(args, h, path_, threads_);
  }
  if (swap_) swap_->Release(u.swap_id, /*dirty=*/true);
}

at::Tensor ShardedAdamW::AcquireMoments(size_t i) {
  return swap_ ? swap_->Acquire(units_[i].swap_id) : units_[i].moments;
}

void ShardedAdamW::ReleaseMoments(size_t i, bool dirty) {
  if (swap_) swap_->Release(units_[i].swap_id, dirty);
}

int64_t ShardedAdamW::state_bytes() const {
  int64_t b = 0;
  for (const auto& u : units_) b += 2 * (u.own_end - u.own_begin) * 4;
  return b;
}

}  // namespace zeropp
