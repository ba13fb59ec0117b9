#include "zeropp/flat_param.h"

#include <stdexcept>

#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/core/GradMode.h>

#include "absl/strings/str_cat.h"
#include "zeropp/storage_resize.h"

namespace zeropp {

FlatParam::FlatParam(std::vector<FlatEntry> entries, int zero_size, int zero_rank, int64_t pad_multiple,
                     at::ScalarType param_dtype, at::ScalarType reduce_dtype, c10::Device device,
                     c10::Device master_device)
    : entries_(std::move(entries)),
      zero_size_(zero_size),
      zero_rank_(zero_rank),
      param_dtype_(param_dtype),
      reduce_dtype_(reduce_dtype),
      elem_bytes_(static_cast<int64_t>(c10::elementSize(param_dtype))),
      device_(device),
      master_device_(master_device) {
  for (auto& e : entries_) {
    e.offset = numel_;
    numel_ += e.numel;
  }
  padded_numel_ = (numel_ + pad_multiple - 1) / pad_multiple * pad_multiple;
  shard_numel_ = padded_numel_ / zero_size_;
  std::vector<GradLanding::Slice> slices;
  for (const auto& e : entries_) slices.push_back({e.offset, e.numel, e.shape});
  landing_ = std::make_shared<GradLanding>(std::move(slices));
}

FlatParam::~FlatParam() {
  for (auto& e : entries_) {
    if (e.trainable && e.param.defined()) RemoveGradSink(e.param);
  }
}

void FlatParam::SetMasterRange(int64_t begin, int64_t end) {
  if (begin < shard_begin() || end > shard_begin() + shard_numel_ || begin >= end) {
    throw std::logic_error(absl::StrCat("FlatParam: master range [", begin, ", ", end, ") is not within the shard [",
                                        shard_begin(), ", ", shard_begin() + shard_numel_, ")"));
  }
  master_begin_ = begin;
  master_numel_ = end - begin;
}

at::Tensor FlatParam::GatherLocalValues() const {
  at::Tensor flat = at::zeros({padded_numel_}, at::TensorOptions().dtype(at::kFloat));
  c10::NoGradGuard no_grad;
  for (const auto& e : entries_) {
    flat.narrow(0, e.offset, e.numel).copy_(e.param.detach().reshape({-1}));
  }
  return flat;
}

void FlatParam::InitFromFull(const at::Tensor& full_fp32, offload::SwapManager* swap, offload::Tier tier) {
  at::Tensor mine = full_fp32.narrow(0, shard_begin(), shard_numel_);
  // Offloaded state lives on the swap tier (host memory or files): master and shard are one tensor
  // there when the compute dtype is fp32. Resident state: the master on master_device, the shard on
  // the device (one tensor when both coincide and the compute dtype is fp32).
  const c10::Device master_dev = swap != nullptr ? c10::Device(c10::kCPU) : master_device_;
  master_is_shard_ = param_dtype_ == at::kFloat && (swap != nullptr || master_dev == device_);
  if (master_is_shard_ || master_begin_ < 0) {
    master_begin_ = shard_begin();
    master_numel_ = shard_numel_;
  }
  const at::Tensor my_master = full_fp32.narrow(0, master_begin_, master_numel_);
  // Offloaded state is copied into the swap manager below, so no resident copy is made here.
  if (swap != nullptr) {
    master_ = my_master;
  } else if (master_dev.is_cpu() && !device_.is_cpu()) {
    // Optimizer offload on a GPU: page-locked, so updated shards copy back asynchronously.
    master_ = at::empty({master_numel_}, at::TensorOptions().dtype(at::kFloat).pinned_memory(true));
    master_.copy_(my_master);
  } else {
    master_ = my_master.to(master_dev, /*non_blocking=*/false, /*copy=*/true);
  }
  shard_ = master_is_shard() ? master_ : mine.to(swap != nullptr ? master_dev : device_, param_dtype_);
  const auto on_device = at::TensorOptions().device(device_);
  if (swap == nullptr) grad_shard_ = at::zeros({shard_numel_}, on_device.dtype(reduce_dtype_));
  full_is_shard_ = zero_size_ == 1 && swap == nullptr && shard_.device() == device_;
  full_ = full_is_shard_ ? shard_ : at::empty({padded_numel_}, on_device.dtype(param_dtype_));
  c10::NoGradGuard no_grad;
  for (size_t i = 0; i < entries_.size(); ++i) {
    FlatEntry& e = entries_[i];
    e.param.set_data(full_.narrow(0, e.offset, e.numel).view(e.shape));
    if (e.trainable) InstallGradSink(e.param, landing_, i);
  }
  FreeFull();
  if (swap != nullptr) {
    swap_ = swap;
    const std::string base = entries_.empty() ? "flat" : entries_.front().name;
    master_id_ = swap->Register(base + ".master", master_, tier);
    shard_id_ = master_is_shard() ? master_id_ : swap->Register(base + ".shard", shard_, tier);
    // The first reduction of every step overwrites the gradient shard: no initial contents.
    grad_id_ = swap->RegisterUninitialized(base + ".grad", {shard_numel_}, reduce_dtype_, tier);
    master_ = shard_ = grad_shard_ = at::Tensor();  // the swap manager holds them now
  }
}

void FlatParam::PrefetchShard() {
  if (swap_) swap_->Prefetch(shard_id_);
}

void FlatParam::PrefetchMaster() {
  if (swap_) swap_->Prefetch(master_id_);
}

void FlatParam::PrefetchGradShard() {
  if (swap_ && grad_written_) swap_->Prefetch(grad_id_);
}

at::Tensor FlatParam::AcquireShard() { return swap_ ? swap_->Acquire(shard_id_) : shard_; }

void FlatParam::ReleaseShard(bool dirty) {
  if (swap_) swap_->Release(shard_id_, dirty);
}

at::Tensor FlatParam::AcquireMaster() { return swap_ ? swap_->Acquire(master_id_) : master_; }

void FlatParam::ReleaseMaster(bool dirty) {
  if (swap_) swap_->Release(master_id_, dirty);
}

at::Tensor FlatParam::AcquireGradShard(bool read) {
  return swap_ ? swap_->Acquire(grad_id_, read) : grad_shard_;
}

void FlatParam::ReleaseGradShard(bool dirty) {
  if (swap_) swap_->Release(grad_id_, dirty);
}

void FlatParam::EnsureGradWritten() {
  if (grad_written_) return;
  AcquireGradShard(/*read=*/false).zero_();
  grad_written_ = true;
  ReleaseGradShard(/*dirty=*/true);
}

void FlatParam::AccumulateGradShard(const at::Tensor& reduced) {
  if (!grad_written_ && swap_ == nullptr && reduced.scalar_type() == grad_shard_.scalar_type() &&
      reduced.device() == grad_shard_.device() && reduced.numel() == shard_numel_ && reduced.is_contiguous()) {
    // The step's first reduction of a resident shard in its own dtype: the reduced buffer becomes
    // the shard (the previous one is freed) instead of being copied into it. The caller holds no
    // other use of it: a collective's output, or in a zero group of one the released unsharded
    // gradient (on the 2026-11-28 lease that copy was 3.95 ms of the bf16 1.2B GPT's 141 ms step).
    grad_shard_ = reduced;
    grad_written_ = true;
    return;
  }
  at::Tensor g = AcquireGradShard(/*read=*/grad_written_);
  if (grad_written_) {
    // An offloaded shard lives on the host while the reduced gradient comes from the device.
    g.add_(reduced.to(g.device()));  // no copy when already there
  } else {
    g.copy_(reduced);
  }
  grad_written_ = true;
  ReleaseGradShard(/*dirty=*/true);
}

void FlatParam::AllocateFull() {
  if (!full_is_shard_) ResizeStorageBytes(full_, static_cast<size_t>(full_bytes()));
}

void FlatParam::FreeFull() {
  if (!full_is_shard_) ResizeStorageBytes(full_, 0);
}

void FlatParam::AllocateGradFull() {
  // Uninitialised: each slice's first gradient is copied in, the rest zeroed when it is read.
  landing_->Open(at::empty({padded_numel_}, at::TensorOptions().device(device_).dtype(param_dtype_)));
  for (auto& e : entries_) {
    if (e.trainable) e.param.mutable_grad() = at::Tensor();
  }
}

void FlatParam::ReleaseGradFull() { landing_->Close(); }

std::vector<std::pair<int64_t, int64_t>> FlatParam::TrainableRanges(int64_t begin, int64_t end,
                                                                     bool for_norm) const {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const auto& e : entries_) {
    if (!e.trainable || (for_norm && e.norm_excluded)) continue;
    AppendRange(&out, std::max(begin, e.offset), std::min(end, e.offset + e.numel));
  }
  return out;
}

}  // namespace zeropp
