#include "zeropp/sharded_adamw.h"

#include <stdexcept>

#include <ATen/ops/empty.h>
#include <ATen/record_function.h>
#include <ATen/ops/zeros.h>

#ifdef ZEROPP_CUDA
#include <c10/cuda/CUDAStream.h>

#include "kernels/adamw_cuda.h"
#include "kernels/norm_cuda.h"
#endif

namespace zeropp {

namespace {

// The multi-tensor CUDA AdamW over a unit's trainable sub-ranges (all tensors on one GPU).
void StepOnDevice(float* master, const float* grad, float* exp_avg, float* exp_avg_sq,
                  const std::vector<std::pair<int64_t, int64_t>>& ranges, int64_t own_begin,
                  int64_t master_begin, const kernels::AdamWHyper& h, float grad_scale, const c10::Device& device) {
#ifdef ZEROPP_CUDA
  const int count = static_cast<int>(ranges.size());
  if (count == 0) return;
  std::vector<float*> p(count), m(count), v(count);
  std::vector<const float*> g(count);
  std::vector<int64_t> n(count);
  for (int i = 0; i < count; ++i) {
    const int64_t own = ranges[i].first - own_begin;
    p[i] = master + (ranges[i].first - master_begin);
    g[i] = grad + own;
    m[i] = exp_avg + own;
    v[i] = exp_avg_sq + own;
    n[i] = ranges[i].second - ranges[i].first;
  }
  // The pointer table goes to the device from page-locked memory on the current stream, without a
  // host wait (the caching host allocator keeps that block until the copy ran); the device copy is
  // allocated on that stream, so the caching allocator reuses it only after the kernel.
  const int64_t bytes = kernels::MultiTensorTableBytes(count);
  at::Tensor host = at::empty({bytes}, at::TensorOptions().dtype(at::kByte).pinned_memory(true));
  const int64_t total = kernels::FillMultiTensorTable(host.data_ptr(), p.data(), g.data(), m.data(), v.data(), n.data(),
                                                      count);
  at::Tensor table = at::empty({bytes}, at::TensorOptions().device(device).dtype(at::kByte));
  table.copy_(host, /*non_blocking=*/true);
  void* stream = c10::cuda::getCurrentCUDAStream(device.index()).stream();
  const int err = kernels::LaunchMultiTensorAdamWFromTable(table.data_ptr(), count, total, h, grad_scale, stream);
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
  const bool bf16 = owned_grad.scalar_type() == at::kBFloat16;
  if (!owned_grad.is_cpu() || !(bf16 || owned_grad.scalar_type() == at::kFloat) || !owned_grad.is_contiguous()) {
    throw std::logic_error("ShardedAdamW::SquaredNorm: unit " + std::to_string(i) + " expects a contiguous fp32 or "
                           "bf16 gradient on the host, got " + std::string(c10::toString(owned_grad.scalar_type())) +
                           " on " + owned_grad.device().str() + " (AddSquaredNorm is the device path)");
  }
  double sum = 0;
  for (const auto& r : u.norm_ranges) {
    const int64_t at = r.first - u.own_begin, n = r.second - r.first;
    sum += bf16 ? kernels::SumOfSquaresBf16(static_cast<const uint16_t*>(owned_grad.data_ptr()) + at, n, threads_)
                : kernels::SumOfSquares(owned_grad.data_ptr<float>() + at, n, threads_);
  }
  return sum;
}

void ShardedAdamW::AddSquaredNorm(size_t i, const at::Tensor& owned_grad, at::Tensor& acc) const {
  const bool bf16 = owned_grad.scalar_type() == at::kBFloat16;
  if (!(bf16 || owned_grad.scalar_type() == at::kFloat) || !owned_grad.is_contiguous() ||
      acc.scalar_type() != at::kDouble || acc.numel() != 1 || acc.device() != owned_grad.device()) {
    throw std::logic_error("ShardedAdamW::AddSquaredNorm: unit " + std::to_string(i) + " expects a contiguous fp32 or "
                           "bf16 gradient and one fp64 accumulator on its device, got " +
                           std::string(c10::toString(owned_grad.scalar_type())) + " on " + owned_grad.device().str() +
                           " and " + c10::toString(acc.scalar_type()) + " on " + acc.device().str());
  }
  if (owned_grad.is_cpu()) {
    acc.add_(SquaredNorm(i, owned_grad));
    return;
  }
#ifdef ZEROPP_CUDA
  const Unit& u = units_[i];
  at::Tensor partials = at::empty({kernels::NormPartialsBytes()}, owned_grad.options().dtype(at::kByte));
  void* stream = c10::cuda::getCurrentCUDAStream(owned_grad.device().index()).stream();
  for (const auto& r : u.norm_ranges) {
    const at::Tensor x = owned_grad.narrow(0, r.first - u.own_begin, r.second - r.first);
    const int err = kernels::LaunchAddSumOfSquaresCuda(x.data_ptr(), bf16, x.numel(), acc.data_ptr<double>(),
                                                       partials.data_ptr(), stream);
    if (err != 0) throw std::runtime_error("gradient norm CUDA kernel launch failed: cudaError " + std::to_string(err));
  }
#else
  throw std::invalid_argument("ShardedAdamW: a gradient on " + owned_grad.device().str() +
                              ", but this binary was built without CUDA (--config=cuda)");
#endif
}

void ShardedAdamW::Prefetch(size_t i) {
  if (swap_ && i < units_.size()) swap_->Prefetch(units_[i].swap_id);
}

void ShardedAdamW::StepUnit(size_t i, const at::Tensor& master_shard, const at::Tensor& owned_grad, float grad_scale,
                            const at::Tensor& bf16_out) {
  // Named for PyTorch's profiler (train --profile-ops counts it as optimizer time); free when off.
  RECORD_FUNCTION("zeropp::adamw_step", std::vector<c10::IValue>());
  Unit& u = units_[i];
  kernels::AdamWHyper h = hyper_;
  h.step = step_;
  // Both kernels apply the scale as they read each value (no scaled copy: allocating and writing one
  // cost as much as the update, traced on a clipped 0.1B run on the host and 3.2 ms of a 1.2B GPT's
  // step on an H100).
  const at::Tensor& g = owned_grad;
  const int64_t own = u.own_end - u.own_begin;
  const bool grad_bf16 = g.scalar_type() == at::kBFloat16;
  if ((!master_shard.is_cpu() && (grad_bf16 || bf16_out.defined())) ||
      !(grad_bf16 || g.scalar_type() == at::kFloat) || !g.is_contiguous() || g.numel() != own ||
      (bf16_out.defined() && (!bf16_out.is_cpu() || bf16_out.scalar_type() != at::kBFloat16 ||
                              !bf16_out.is_contiguous() || bf16_out.numel() != own))) {
    throw std::logic_error("ShardedAdamW: unit " + std::to_string(i) + " (" + std::to_string(own) +
                           " owned values) got a gradient of " + std::to_string(g.numel()) + " " +
                           c10::toString(g.scalar_type()) + (bf16_out.defined() ? " and a bf16 output" : "") +
                           ": expected contiguous fp32 (on the host also bf16, and a bf16 output there only)");
  }
  at::Tensor moments = swap_ ? swap_->Acquire(u.swap_id) : u.moments;
  if (moments.device() != master_shard.device() || g.device() != master_shard.device()) {
    throw std::logic_error("ShardedAdamW: unit " + std::to_string(i) + " has its master on " + master_shard.device().str() +
                           ", its moments on " + moments.device().str() + " and its gradient on " + g.device().str() +
                           ": the update needs all three on one device");
  }
  float* master = master_shard.data_ptr<float>();
  float* exp_avg = moments.data_ptr<float>();
  float* exp_avg_sq = exp_avg + (u.own_end - u.own_begin);
  const int64_t master_begin = u.flat->master_begin();  // the flat coordinate of master[0]
  if (!master_shard.is_cpu()) {
    StepOnDevice(master, g.data_ptr<float>(), exp_avg, exp_avg_sq, u.ranges, u.own_begin, master_begin, h, grad_scale,
                 master_shard.device());
    if (swap_) swap_->Release(u.swap_id, /*dirty=*/true);
    return;
  }
  for (const auto& r : u.ranges) {
    const int64_t at = r.first - u.own_begin;
    kernels::AdamWArgs args;
    args.param = master + (r.first - master_begin);
    if (grad_bf16) {
      args.grad_bf16 = static_cast<const uint16_t*>(g.data_ptr()) + at;
    } else {
      args.grad = g.data_ptr<float>() + at;
    }
    args.exp_avg = exp_avg + at;
    args.exp_avg_sq = exp_avg_sq + at;
    if (bf16_out.defined()) args.param_bf16_out = static_cast<uint16_t*>(bf16_out.data_ptr()) + at;
    args.n = r.second - r.first;
    args.grad_scale = grad_scale;
    kernels::AdamWCpu(args, h, path_, threads_);
  }
  // Frozen values and padding keep their master value: copied out as the update would write them.
  if (bf16_out.defined()) {
    int64_t at = 0;
    auto copy_gap = [&](int64_t lo, int64_t hi) {  // owned coordinates
      if (hi > lo) {
        bf16_out.narrow(0, lo, hi - lo).copy_(master_shard.narrow(0, u.own_begin - master_begin + lo, hi - lo));
      }
    };
    for (const auto& r : u.ranges) {
      copy_gap(at, r.first - u.own_begin);
      at = r.second - u.own_begin;
    }
    copy_gap(at, own);
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
