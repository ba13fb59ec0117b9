#include "zeropp/sharded_adamw.h"

#include <stdexcept>

#include <ATen/ops/empty.h>
#include <ATen/record_function.h>
#include <ATen/ops/zeros.h>

#ifdef ZEROPP_CUDA
#include <c10/cuda/CUDAStream.h>

#include "kernels/adamw_cuda.h"
#endif

namespace zeropp {

namespace {

// The multi-tensor CUDA AdamW over a unit's trainable sub-ranges (all tensors on one GPU).
void StepOnDevice(float* master, const float* grad, float* exp_avg, float* exp_avg_sq,
                  const std::vector<std::pair<int64_t, int64_t>>& ranges, int64_t own_begin,
                  int64_t shard_begin, const kernels::AdamWHyper& h, const c10::Device& device) {
#ifdef ZEROPP_CUDA
  const int count = static_cast<int>(ranges.size());
  if (count == 0) return;
  std::vector<float*> p(count), m(count), v(count);
  std::vector<const float*> g(count);
  std::vector<int64_t> n(count);
  for (int i = 0; i < count; ++i) {
    const int64_t own = ranges[i].first - own_begin;
    p[i] = master + (ranges[i].first - shard_begin);
    g[i] = grad + own;
    m[i] = exp_avg + own;
    v[i] = exp_avg_sq + own;
    n[i] = ranges[i].second - ranges[i].first;
  }
  // The pointer table lives on the device until the kernel has read it: allocated on the current
  // stream, so the caching allocator reuses it only after the kernel.
  at::Tensor table = at::empty({kernels::MultiTensorTableBytes(count)},
                               at::TensorOptions().device(device).dtype(at::kByte));
  void* stream = c10::cuda::getCurrentCUDAStream(device.index()).stream();
  const int err = kernels::LaunchMultiTensorAdamWCuda(p.data(), g.data(), m.data(), v.data(), n.data(), count,
                                                      h, table.data_ptr(), stream);
  if (err != 0) throw std::runtime_error("AdamW CUDA kernel launch failed: cudaError " + std::to_string(err));
#else
  throw std::invalid_argument("AdamW: the master shard is on " + device.str() +
                              ", but this binary was built without CUDA (--config=cuda)");
#endif
}

}  // namespace

void ShardedAdamW::AddUnit(FlatParam* flat, int64_t own_begin, int64_t own_end, c10::Device device) {
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
    u.moments = at::zeros({2, own_end - own_begin}, at::TensorOptions().device(device).dtype(at::kFloat));
  }
  units_.push_back(std::move(u));
}

void ShardedAdamW::RefreshNormRanges() {
  for (Unit& u : units_) u.norm_ranges = u.flat->TrainableRanges(u.own_begin, u.own_end, /*for_norm=*/true);
}

double ShardedAdamW::SquaredNorm(size_t i, const at::Tensor& owned_grad) const {
  const Unit& u = units_[i];
  if (!owned_grad.is_cpu()) {
    // On a device: one reduction per range, summed in double there; one host read per unit.
    at::Tensor acc = at::zeros({1}, owned_grad.options().dtype(at::kDouble));
    for (const auto& r : u.norm_ranges) {
      acc.add_(owned_grad.narrow(0, r.first - u.own_begin, r.second - r.first).to(at::kDouble).square().sum());
    }
    return acc.item<double>();
  }
  const float* g = owned_grad.data_ptr<float>();
  double sum = 0;
  for (const auto& r : u.norm_ranges) sum += kernels::SumOfSquares(g + (r.first - u.own_begin), r.second - r.first, threads_);
  return sum;
}

void ShardedAdamW::Prefetch(size_t i) {
  if (swap_ && i < units_.size()) swap_->Prefetch(units_[i].swap_id);
}

void ShardedAdamW::StepUnit(size_t i, const at::Tensor& master_shard, const at::Tensor& owned_grad, float grad_scale) {
  // Named for PyTorch's profiler (train --profile-ops counts it as optimizer time); free when off.
  RECORD_FUNCTION("zeropp::adamw_step", std::vector<c10::IValue>());
  Unit& u = units_[i];
  kernels::AdamWHyper h = hyper_;
  h.step = step_;
  // On the host the kernel applies the scale as it reads each value (no scaled copy: allocating and
  // writing one cost as much as the update, traced on a clipped 0.1B run); on a GPU a scaled copy.
  at::Tensor g = grad_scale != 1.0f && !master_shard.is_cpu() ? owned_grad.mul(grad_scale) : owned_grad;
  at::Tensor moments = swap_ ? swap_->Acquire(u.swap_id) : u.moments;
  if (moments.device() != master_shard.device() || g.device() != master_shard.device()) {
    throw std::logic_error("ShardedAdamW: unit " + std::to_string(i) + " has its master on " + master_shard.device().str() +
                           ", its moments on " + moments.device().str() + " and its gradient on " + g.device().str() +
                           ": the update needs all three on one device");
  }
  float* master = master_shard.data_ptr<float>();
  float* exp_avg = moments.data_ptr<float>();
  float* exp_avg_sq = exp_avg + (u.own_end - u.own_begin);
  const int64_t shard_begin = u.flat->shard_begin();
  if (!master_shard.is_cpu()) {
    StepOnDevice(master, g.data_ptr<float>(), exp_avg, exp_avg_sq, u.ranges, u.own_begin, shard_begin, h,
                 master_shard.device());
    if (swap_) swap_->Release(u.swap_id, /*dirty=*/true);
    return;
  }
  for (const auto& r : u.ranges) {
    const int64_t own = r.first - u.own_begin;
    kernels::AdamWArgs args;
    args.param = master + (r.first - shard_begin);
    args.grad = g.data_ptr<float>() + own;
    args.exp_avg = exp_avg + own;
    args.exp_avg_sq = exp_avg_sq + own;
    args.n = r.second - r.first;
    args.grad_scale = grad_scale;
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
