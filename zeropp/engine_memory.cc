// engine_memory.cc: the Engine's memory side: offload set-up, the budget check before training,
// activation parking on the offload tiers, and the byte accounting (MemoryStats).
#include <algorithm>
#include <stdexcept>
#include <vector>

#include "absl/strings/str_cat.h"
#include "offload/offload_file.h"
#include "zeropp/engine.h"

namespace zeropp {

void Engine::SetUpOffload() {
  const OffloadOptions& o = options_.offload;
  if (!o.any()) return;
  // Refuse an unusable directory before anything is written or trained.
  if (o.any_nvme()) {
    try {
      offload::OffloadFile::CheckDirectory(o.dir);
    } catch (const std::exception& e) {
      throw std::invalid_argument(absl::StrCat(Where(), " EngineOptions: ", e.what()));
    }
  }
  offload::IoOptions io;
  io.queue_depth = o.queue_depth;
  io_ = offload::IoEngine::Create(io);
  host_pool_ = std::make_unique<offload::HostPool>(o.host_budget_bytes);
  swap_ = std::make_unique<offload::SwapManager>(io_.get(), host_pool_.get(), o.dir);
  if (o.optimizer != OffloadTarget::kNone) optimizer_.SetSwap(swap_.get(), ToTier(o.optimizer));
}

void Engine::EstimateAndCheckBudget() {
  if (options_.memory_budget_bytes <= 0) return;
  // Resident bytes of the plan: model state not on nvme, the unsharded units that can be live at
  // once (all of them without resharding after forward) and one unsharded gradient per live unit
  // (every unit under no_sync), plus the host pool's budget when offloading.
  MemoryStats m = Memory();
  std::vector<int64_t> unit_bytes;
  for (const auto& u : units_) unit_bytes.push_back(u->unsharded_bytes());
  std::sort(unit_bytes.rbegin(), unit_bytes.rend());
  int live = options_.max_live_units > 0 ? options_.max_live_units : 2 + options_.prefetch_depth;
  if (!options_.reshard_after_forward) live = static_cast<int>(unit_bytes.size());
  int64_t unsharded = 0;
  for (int i = 0; i < live && i < static_cast<int>(unit_bytes.size()); ++i) unsharded += unit_bytes[i];
  int64_t grads = 0;
  // One accumulating, one tied unit accumulating from its user's backward (the head's gradient
  // lands in the embedding's unit), and up to max_pending_reductions being reduced.
  const int pending = options_.max_pending_reductions > 0 ? options_.max_pending_reductions
                                                          : static_cast<int>(unit_bytes.size());
  const int grad_units = options_.no_sync ? static_cast<int>(unit_bytes.size())
                                          : std::min<int>(2 + pending, unit_bytes.size());
  for (int i = 0; i < grad_units; ++i) grads += unit_bytes[i];
  const int64_t resident_state = m.ModelStateBytes() - m.nvme_bytes;
  const int64_t pool = host_pool_ ? options_.offload.host_budget_bytes : 0;
  const int64_t total = resident_state + unsharded + grads + pool;
  if (total > options_.memory_budget_bytes) {
    throw std::invalid_argument(absl::StrCat(
        Where(), " memory budget: the plan needs about ", total, " bytes but memory_budget_bytes is ",
        options_.memory_budget_bytes, " (resident model state ", resident_state, ", unsharded parameters ", unsharded,
        " for ", live, " live units, unsharded gradients ", grads, ", host pool ", pool,
        "); offload more (offload.params/optimizer = nvme), lower max_live_units or raise the budget"));
  }
}

void Engine::OffloadActivation(int k, at::Tensor* saved) {
  if (act_slot_.empty()) {
    act_slot_.assign(num_units(), -1);
    act_shape_.resize(num_units());
  }
  at::Tensor t = saved->detach().to(at::kCPU).contiguous();  // the tiers hold host memory
  if (act_slot_[k] < 0 || act_shape_[k] != t.sizes().vec()) {
    act_slot_[k] = swap_->Register(absl::StrCat("unit", k, ".input"), t, ToTier(options_.offload.activations));
    act_shape_[k] = t.sizes().vec();
  } else {
    at::Tensor slot = swap_->Acquire(act_slot_[k], /*read=*/false);
    slot.copy_(t);
    swap_->Release(act_slot_[k], /*dirty=*/true);
  }
  *saved = at::Tensor();  // the only in-memory copy is released
}

void Engine::PrefetchActivation(int k) {
  if (k >= 0 && k < static_cast<int>(act_slot_.size()) && act_slot_[k] >= 0) swap_->Prefetch(act_slot_[k]);
}

at::Tensor Engine::FetchActivation(int k) {
  at::Tensor t = swap_->Acquire(act_slot_[k]).to(options_.device, /*non_blocking=*/false, /*copy=*/true);
  swap_->Release(act_slot_[k], /*dirty=*/false);
  return k == 0 || !t.is_floating_point() ? t : t.requires_grad_(true);
}

MemoryStats Engine::Memory() const {
  MemoryStats s;
  for (const auto& u : units_) {
    const FlatParam* f = u->flat();
    if (!f) continue;
    s.param_shard_bytes += f->shard_bytes();
    if (!f->master_is_shard()) s.master_bytes += f->master_numel() * 4;
    s.grad_shard_bytes += f->shard_numel() * static_cast<int64_t>(c10::elementSize(f->reduce_dtype()));
  }
  s.optim_state_bytes = optimizer_.state_bytes();
  if (options_.offload.params == OffloadTarget::kNvme) s.nvme_bytes += s.param_shard_bytes + s.master_bytes + s.grad_shard_bytes;
  if (options_.offload.optimizer == OffloadTarget::kNvme) s.nvme_bytes += s.optim_state_bytes;
  if (host_pool_) s.host_pool_bytes = host_pool_->reserved();
  if (swap_) s.io = swap_->stats();
  s.unsharded_live_bytes = unsharded_live_;
  s.unsharded_peak_bytes = unsharded_peak_;
  s.grad_unsharded_live_bytes = grad_live_;
  s.grad_unsharded_peak_bytes = grad_peak_;
  s.device = QueryDeviceMemory(options_.device);
  return s;
}

}  // namespace zeropp
