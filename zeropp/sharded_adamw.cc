#include "zeropp/sharded_adamw.h"

#include <ATen/ops/zeros.h>

#include "kernels/adamw_cpu.h"

namespace zeropp {

void ShardedAdamW::AddUnit(FlatParam* flat, int64_t own_begin, int64_t own_end) {
  Unit u;
  u.flat = flat;
  u.own_begin = own_begin;
  u.own_end = own_end;
  u.ranges = flat->TrainableRanges(own_begin, own_end);
  u.norm_ranges = flat->TrainableRanges(own_begin, own_end, /*for_norm=*/true);
  auto f32 = at::TensorOptions().dtype(at::kFloat);
  u.exp_avg = at::zeros({own_end - own_begin}, f32);
  u.exp_avg_sq = at::zeros({own_end - own_begin}, f32);
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

void ShardedAdamW::Step(const std::vector<at::Tensor>& owned_grads, float grad_scale) {
  ++step_;
  kernels::AdamWHyper h = hyper_;
  h.step = step_;
  for (size_t i = 0; i < units_.size(); ++i) {
    Unit& u = units_[i];
    at::Tensor g = owned_grads[i];
    if (grad_scale != 1.0f) g = g.mul(grad_scale);
    float* master = u.flat->master().data_ptr<float>();
    const int64_t shard_begin = u.flat->shard_begin();
    for (const auto& r : u.ranges) {
      const int64_t own = r.first - u.own_begin;
      kernels::AdamWArgs args;
      args.param = master + (r.first - shard_begin);
      args.grad = g.data_ptr<float>() + own;
      args.exp_avg = u.exp_avg.data_ptr<float>() + own;
      args.exp_avg_sq = u.exp_avg_sq.data_ptr<float>() + own;
      args.n = r.second - r.first;
      kernels::AdamWCpu(args, h, path_, threads_);
    }
  }
}

int64_t ShardedAdamW::state_bytes() const {
  int64_t b = 0;
  for (const auto& u : units_) b += u.exp_avg.nbytes() + u.exp_avg_sq.nbytes();
  return b;
}

}  // namespace zeropp
