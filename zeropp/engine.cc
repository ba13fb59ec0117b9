#include "zeropp/engine.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <stdexcept>
#include <unordered_set>

#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/zeros.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "xxhash.h"

namespace zeropp {

std::string MemoryStats::ToString() const {
  std::string s = absl::StrCat("param_shard=", param_shard_bytes, " master=", master_bytes, " grad_shard=",
                               grad_shard_bytes, " optim=", optim_state_bytes, " unsharded_peak=",
                               unsharded_peak_bytes, " grad_unsharded_peak=", grad_unsharded_peak_bytes);
  if (device.total_bytes > 0) {
    absl::StrAppend(&s, " device_allocated=", device.allocated_bytes, " device_reserved=", device.reserved_bytes,
                    " device_peak=", device.peak_allocated_bytes, " device_total=", device.total_bytes);
  }
  return s;
}

Engine::Engine(std::shared_ptr<torch::nn::Module> model, ProcessGroups& groups, EngineOptions options,
               const UnitPlan& plan, std::vector<bool> owned)
    : groups_(groups),
      options_(std::move(options)),
      owned_(std::move(owned)),
      // The host AdamW uses host_threads (./zpp train --host-threads; by default there, on a GPU,
      // the process's cores over its local ranks), else the rank's intra-op threads: on a GPU with
      // the optimizer offloaded, one thread made it the whole step (6 s for 5.4B parameters on a
      // lent H100's host, benchmarks/results/gpu-2026-11-27b.txt). Elementwise in blocks: the same
      // bits at any thread count.
      optimizer_(options_.adamw, options_.host_threads > 0 ? options_.host_threads : at::get_num_threads()) {
  const std::string where = Where();
  if (!model) throw std::invalid_argument(where + " Engine: model is null");
  seq_ = std::dynamic_pointer_cast<torch::nn::SequentialImpl>(model);
  if (!seq_) {
    throw std::invalid_argument(absl::StrCat(where, " Engine: model is a ", model->name(),
                                             ", expected a torch::nn::Sequential of the model's children"));
  }
  if (seq_->size() == 0) {
    throw std::invalid_argument(where + " Engine: the Sequential is empty (expected at least one child module)");
  }
  std::string err = options_.Validate();
  if (!err.empty()) throw std::invalid_argument(absl::StrCat(where, " EngineOptions: ", err));
  BuildUnits(plan);
  AgreeOnModel();
  SetUpOffload();
  InitializeShards();
  EstimateAndCheckBudget();
}

Engine::~Engine() {
  try {
    FinishReductions(true);
  } catch (...) {
  }
}

c10::Device Engine::MasterDevice() const {
  // ZeRO-Offload on a GPU: the fp32 master and the moments stay on the host, AdamW runs there.
  // Offloaded parameters keep their master on the host too (FlatParam::InitFromFull), so the
  // moments and the update follow it there.
  if (!options_.device.is_cpu() &&
      (options_.offload.optimizer != OffloadTarget::kNone || options_.offload.params != OffloadTarget::kNone)) {
    return c10::Device(c10::kCPU);
  }
  return options_.device;
}

std::string Engine::Where() const { return absl::StrCat("[rank ", groups_.rank(), "]"); }

void Engine::BuildUnits(const UnitPlan& plan) {
  const std::vector<int>& starts = plan.starts;
  const int children = static_cast<int>(seq_->size());
  if (starts.empty() || starts[0] != 0 || starts.back() >= children ||
      !std::is_sorted(starts.begin(), starts.end()) ||
      std::adjacent_find(starts.begin(), starts.end()) != starts.end()) {
    throw std::invalid_argument(absl::StrCat(Where(), " Engine: unit starts [", absl::StrJoin(starts, ","),
                                             "] must begin at 0, increase strictly and stay below ", children,
                                             " children (use PlanUnits)"));
  }
  if (owned_.empty()) owned_.assign(starts.size(), true);
  if (owned_.size() != starts.size()) {
    throw std::invalid_argument(absl::StrCat(Where(), " Engine: ", owned_.size(), " ownership flags for ",
                                             starts.size(), " units"));
  }
  // Parameters per unit; tied tensors belong to the first unit that registers them.
  const auto& cfg = groups_.config();
  const int zero = cfg.zero;
  const int zero_rank = cfg.CoordOf(groups_.rank()).zero_index;
  const int64_t pad = cfg.dp_mode == DpMode::kZero1 ? static_cast<int64_t>(zero) * cfg.dp : zero;
  // Ties come from the plan (unit_plan.h): a tied tensor lives in its holder's FlatParam only, the
  // other units registering it depend on the holder, and when the first unit registering it is
  // held by another stage, this copy is left out of the norm (counted once, there).
  std::map<const void*, const TiedTensor*> tied;
  for (const TiedTensor& t : plan.tied) tied[t.impl] = &t;
  const std::vector<std::vector<int>> needs = HeldNeeds(plan, owned_);
  for (size_t u = 0; u < starts.size(); ++u) {
    const int begin = starts[u];
    const int end = u + 1 < starts.size() ? starts[u + 1] : children;
    std::vector<FlatEntry> entries;
    std::vector<const void*> added;
    for (int c = begin; c < end && owned_[u]; ++c) {
      const std::string child_name = seq_->named_children()[c].key();
      for (const auto& kv : seq_->ptr(c)->named_parameters(/*recurse=*/true)) {
        const void* impl = kv.value().unsafeGetTensorImpl();
        if (std::find(added.begin(), added.end(), impl) != added.end()) continue;  // twice in this unit
        auto t = tied.find(impl);
        if (t != tied.end() && TiedHolder(*t->second, owned_) != static_cast<int>(u)) continue;
        added.push_back(impl);
        FlatEntry e;
        e.name = absl::StrCat(child_name, ".", kv.key());
        e.param = kv.value();
        e.shape = kv.value().sizes().vec();
        e.numel = kv.value().numel();
        e.trainable = kv.value().requires_grad();
        e.norm_excluded = t != tied.end() && !owned_[t->second->units[0]];
        if (kv.value().scalar_type() != at::kFloat) {
          throw std::invalid_argument(absl::StrCat(Where(), " Engine: parameter ", e.name, " is ",
                                                   c10::toString(kv.value().scalar_type()),
                                                   ", expected float32 (the engine casts to param_dtype itself)"));
        }
        // A tied tensor is named as its first registration names it, on every stage.
        if (t != tied.end()) e.name = t->second->name;
        param_order_.push_back(e.name);
        entries.push_back(std::move(e));
      }
    }
    std::unique_ptr<FlatParam> flat;
    if (!entries.empty()) {
      flat = std::make_unique<FlatParam>(std::move(entries), zero, zero_rank, pad, options_.param_dtype,
                                         options_.reduce_dtype, options_.device, MasterDevice());
    }
    units_.push_back(std::make_unique<SchedulingUnit>(static_cast<int>(u), begin, end, std::move(flat), needs[u]));
  }
  if (seq_->parameters(/*recurse=*/true).empty()) {
    throw std::invalid_argument(Where() + " Engine: the model has no parameters to train");
  }
}

void Engine::AgreeOnModel() {
  // Every rank hashes the same description of its model; the hashes are compared, not the strings.
  std::string desc;
  for (const auto& u : units_) {
    absl::StrAppend(&desc, "unit", u->index(), ":", u->first_child(), "-", u->end_child(), ";");
  }
  for (const auto& kv : seq_->named_parameters(/*recurse=*/true)) {
    const at::Tensor& t = kv.value();
    absl::StrAppend(&desc, kv.key(), "[", absl::StrJoin(t.sizes(), "x"), "]", c10::toString(t.scalar_type()),
                    t.requires_grad() ? "" : "(frozen)", ";");
  }
  absl::StrAppend(&desc, c10::toString(options_.param_dtype), c10::toString(options_.reduce_dtype));
  const uint64_t h = XXH64(desc.data(), desc.size(), 0);
  Communicator& world = groups_.world();
  at::Tensor all = at::zeros({world.size()}, at::TensorOptions().dtype(at::kLong));
  at::Tensor mine = at::full({1}, static_cast<int64_t>(h), at::TensorOptions().dtype(at::kLong));
  world.AllGather(all, mine)->Wait();
  std::vector<std::string> groups_of_ranks;
  std::map<int64_t, std::vector<int>> by_hash;
  for (int r = 0; r < world.size(); ++r) by_hash[all[r].item<int64_t>()].push_back(r);
  if (by_hash.size() > 1) {
    for (const auto& kv : by_hash) {
      groups_of_ranks.push_back(absl::StrCat("ranks [", absl::StrJoin(kv.second, ","), "] fingerprint ",
                                             static_cast<uint64_t>(kv.first)));
    }
    throw std::invalid_argument(absl::StrCat(
        Where(), " Engine: the model differs across ranks (parameter names, shapes, dtypes, frozen flags, unit "
                 "layout and precision must agree): ",
        absl::StrJoin(groups_of_ranks, "; "), ". This rank has ", num_units(), " units and ",
        num_parameters(), " parameters"));
  }
}

void Engine::InitializeShards() {
  Communicator& world = groups_.world();
  // Identical initial weights everywhere: rank 0's values of every unique parameter (every rank
  // takes part, whichever units it owns), then each owned unit takes its shard.
  {
    c10::NoGradGuard no_grad;
    std::vector<const void*> seen;
    for (auto& p : seq_->parameters(/*recurse=*/true)) {
      const void* impl = p.unsafeGetTensorImpl();
      if (std::find(seen.begin(), seen.end(), impl) != seen.end()) continue;
      seen.push_back(impl);
      at::Tensor flat = p.detach().contiguous().view({-1});
      world.Broadcast(flat, 0)->Wait();
      if (!p.is_contiguous()) p.detach().copy_(flat.view(p.sizes()));
    }
  }
  // The flat range each unit's optimizer owns: the whole zero shard, or under ZeRO-1 this replica's
  // 1/dp of it, which is all a separate fp32 master holds (the other replicas keep theirs).
  const auto& cfg = groups_.config();
  const int dp_index = cfg.CoordOf(groups_.rank()).dp_index;
  std::vector<std::pair<int64_t, int64_t>> owned;
  for (auto& u : units_) {
    FlatParam* f = u->flat();
    if (!f) continue;
    int64_t own_begin = f->shard_begin(), own_end = f->shard_begin() + f->shard_numel();
    if (cfg.dp_mode == DpMode::kZero1 && cfg.dp > 1) {
      const int64_t sub = f->shard_numel() / cfg.dp;
      own_begin = f->shard_begin() + dp_index * sub;
      own_end = own_begin + sub;
      f->SetMasterRange(own_begin, own_end);
    }
    owned.emplace_back(own_begin, own_end);
  }
  const bool offload_params = options_.offload.params != OffloadTarget::kNone;
  for (auto& u : units_) {
    if (!u->flat()) continue;
    if (offload_params) {
      u->flat()->InitFromFull(u->flat()->GatherLocalValues(), swap_.get(), ToTier(options_.offload.params));
    } else {
      u->flat()->InitFromFull(u->flat()->GatherLocalValues());
    }
  }
  ReleaseUnownedParameters();
  for (auto& b : seq_->buffers(/*recurse=*/true)) {
    if (b.is_contiguous()) world.Broadcast(b, 0)->Wait();
    if (b.device() != options_.device) {
      c10::NoGradGuard no_grad;
      b.set_data(b.to(options_.device));
    }
  }
  size_t i = 0;
  for (auto& u : units_) {
    if (!u->flat()) continue;
    optimizer_.AddUnit(u->flat(), owned[i].first, owned[i].second, MasterDevice());
    ++i;
  }
}

void Engine::ReleaseUnownedParameters() {
  // A pipeline stage never runs the other stages' children, so their weights (the model as the
  // caller built it, fp32 on the host) are not kept: a stage of a model larger than one rank's
  // memory must not hold the whole model. Each keeps its shape, on one value's storage; the
  // owned ones live in their FlatParam (set_data above).
  std::unordered_set<const void*> kept;
  for (const auto& u : units_) {
    if (!u->flat()) continue;
    for (const auto& e : u->flat()->entries()) kept.insert(e.param.unsafeGetTensorImpl());
  }
  c10::NoGradGuard no_grad;
  for (auto& p : seq_->parameters(/*recurse=*/true)) {
    if (kept.count(p.unsafeGetTensorImpl()) > 0 || p.numel() <= 1) continue;
    p.set_data(at::zeros({1}, p.options()).expand(p.sizes()));
  }
}

int64_t Engine::num_parameters() const {
  int64_t n = 0;
  for (const auto& u : units_) n += u->flat() ? u->flat()->numel() : 0;
  return n;
}

void Engine::Unshard(int u) {
  units_[u]->Unshard(groups_.zero());
  unsharded_live_ += units_[u]->unsharded_bytes();
  unsharded_peak_ = std::max(unsharded_peak_, unsharded_live_);
}

void Engine::CountedWait(const std::shared_ptr<CommWork>& work) {
  const auto t0 = std::chrono::steady_clock::now();
  work->Wait();
  reduce_wait_us_ +=
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count();
}

void Engine::WaitForUnshard(int u) {
  const auto t0 = std::chrono::steady_clock::now();
  units_[u]->WaitForUnshard();
  gather_wait_us_ +=
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count();
}

void Engine::Reshard(int u) {
  if (units_[u]->state() == ShardState::kUnsharding) WaitForUnshard(u);
  units_[u]->Reshard();
  unsharded_live_ -= units_[u]->unsharded_bytes();
}

void Engine::PrefetchShard(int u) {
  if (units_[u]->flat() && units_[u]->state() == ShardState::kSharded) units_[u]->flat()->PrefetchShard();
}

void Engine::AllocateGrad(int u) {
  FlatParam* f = units_[u]->flat();
  if (!f || units_[u]->grad_state() == GradState::kAccumulating) return;
  units_[u]->BeginGrad();
  f->AllocateGradFull();
  grad_live_ += f->full_bytes();
  grad_peak_ = std::max(grad_peak_, grad_live_);
}

at::Tensor Engine::RunUnit(int k, const at::Tensor& x) {
  at::Tensor y = x;
  for (int c = units_[k]->first_child(); c < units_[k]->end_child(); ++c) {
    y = (seq_->begin() + c)->forward(y);
  }
  return y;
}

at::Tensor Engine::UnshardedGrad(int u) {
  if (!units_[u]->flat() || units_[u]->grad_state() != GradState::kAccumulating) {
    throw std::logic_error(absl::StrCat(Where(), " ", units_[u]->Describe(), ": UnshardedGrad expects gradient state ",
                                        "Accumulating, found ", GradStateName(units_[u]->grad_state())));
  }
  return units_[u]->flat()->FinishedGradFull();
}

void Engine::ReduceGrad(int u) {
  FlatParam* f = units_[u]->flat();
  if (!f || units_[u]->grad_state() != GradState::kAccumulating) return;
  units_[u]->StartReduce();
  ++reduce_scatters_;
  if (groups_.zero().size() == 1) {
    // A zero group of one: the reduce-scatter's result is the unsharded gradient itself, so it is
    // added to the shard in one pass that converts its dtype too, or in the shard's dtype becomes
    // the shard (FlatParam::AccumulateGradShard). Through the collective it took a converted copy
    // (reduce dtype wider than the parameters'), the collective's copy, a division by one and the
    // copy into the shard, with two unit-sized transient buffers (the last three up to 8.9 ms of a
    // bf16 1.2B GPT's 141 ms step on an H100: benchmarks/results/gpu-2026-11-28.txt's OPS_TOP).
    at::Tensor grad = f->FinishedGradFull();
    f->ReleaseGradFull();
    LandReduction(u, grad, f->full_bytes());
    return;
  }
  at::Tensor src = f->FinishedGradFull();
  if (f->reduce_dtype() != f->param_dtype()) src = src.to(f->reduce_dtype());
  at::Tensor out = at::empty({f->shard_numel()}, src.options());
  PendingReduce p{u, groups_.zero().ReduceScatter(out, src, ReduceOp::kAvg), out, f->full_bytes()};
  f->ReleaseGradFull();
  pending_.push_back(std::move(p));
  FinishReductions(false);
}

void Engine::FinishReductions(bool block) {
  // Reductions complete in the order they were issued (one communication thread per group). Each
  // holds its unit's unsharded gradient until it lands, so beyond max_pending_reductions in flight
  // the oldest are waited for: a compute thread running ahead of a slow link would otherwise hold
  // one unsharded gradient per reduction it issued (FSDP's reduce-scatter and DeepSpeed's bucketed
  // reduction bound this the same way).
  const size_t cap = block ? 0
                     : options_.max_pending_reductions > 0 ? static_cast<size_t>(options_.max_pending_reductions)
                                                             : pending_.size();
  const size_t must = pending_.size() > cap ? pending_.size() - cap : 0;
  std::vector<PendingReduce> left;
  for (size_t i = 0; i < pending_.size(); ++i) {
    PendingReduce& p = pending_[i];
    if (i >= must && !p.work->IsCompleted()) {
      left.push_back(std::move(p));
      continue;
    }
    CountedWait(p.work);
    LandReduction(p.unit, p.out, p.held_bytes);
  }
  pending_ = std::move(left);
}

void Engine::LandReduction(int u, const at::Tensor& reduced, int64_t held_bytes) {
  units_[u]->flat()->AccumulateGradShard(reduced);
  units_[u]->FinishReduce();
  grad_live_ -= held_bytes;
}

void Engine::SetModelParallel(Communicator* group, const std::function<bool(const std::string&)>& replicated,
                              bool sum_replicated_grads) {
  mp_group_ = group;
  mp_sum_replicated_ = sum_replicated_grads;
  for (auto& u : units_) {
    if (!u->flat()) continue;
    for (FlatEntry& e : u->flat()->mutable_entries()) {
      e.replicated = replicated(e.name);
      if (e.replicated && group->rank() != 0) e.norm_excluded = true;
    }
  }
  optimizer_.RefreshNormRanges();
}

void Engine::VisitState(bool modify, const StateVisitor& fn) {
  size_t i = 0;
  for (auto& u : units_) {
    FlatParam* f = u->flat();
    if (!f) continue;
    if (u->state() != ShardState::kSharded) {
      throw std::logic_error(absl::StrCat(Where(), " VisitState: ", u->Describe(), " is ", ShardStateName(u->state()),
                                          ", expected Sharded (call between steps)"));
    }
    at::Tensor master = f->AcquireMaster();
    at::Tensor moments = optimizer_.AcquireMoments(i);
    // The visitor reads and writes host memory (checkpoint files); device state goes through copies.
    at::Tensor host_master = master.is_cpu() ? master : master.to(at::kCPU);
    at::Tensor host_moments = moments.is_cpu() ? moments : moments.to(at::kCPU);
    fn(*f, optimizer_.own_begin(i), optimizer_.own_end(i), host_master, host_moments);
    if (modify && !master.is_cpu()) master.copy_(host_master);
    if (modify && !moments.is_cpu()) moments.copy_(host_moments);
    optimizer_.ReleaseMoments(i, modify);
    if (modify && !f->master_is_shard()) {
      // The compute shard from the master; a ZeRO-1 master holds only this replica's part, so the
      // replicas exchange theirs (a collective over dp, every replica visiting the same units).
      at::Tensor shard = f->AcquireShard();
      const int64_t b = f->master_begin() - f->shard_begin(), n = f->master_numel();
      shard.narrow(0, b, n).copy_(master);
      if (n < f->shard_numel()) groups_.dp().AllGather(shard, shard.narrow(0, b, n).clone())->Wait();
      f->ReleaseShard(/*dirty=*/true);
    }
    f->ReleaseMaster(modify);
    ++i;
  }
  if (modify && swap_) swap_->Flush();
}

std::string Engine::ModelFingerprint() const {
  std::string desc;
  for (const auto& kv : seq_->named_parameters(/*recurse=*/true)) {
    const at::Tensor& t = kv.value();
    absl::StrAppend(&desc, kv.key(), "[", absl::StrJoin(t.sizes(), "x"), "]", c10::toString(t.scalar_type()),
                    t.requires_grad() ? "" : "(frozen)", ";");
  }
  return absl::StrCat(absl::Hex(XXH64(desc.data(), desc.size(), 0), absl::kZeroPad16));
}

std::vector<std::pair<std::string, at::Tensor>> Engine::FullParameters() {
  std::map<std::string, at::Tensor> by_name;
  for (auto& u : units_) {
    FlatParam* f = u->flat();
    if (!f) continue;
    at::Tensor shard = f->AcquireMaster();
    if (f->master_numel() < f->shard_numel()) {
      // A ZeRO-1 master holds this replica's part of the shard: the replicas gather theirs.
      at::Tensor whole = at::empty({f->shard_numel()}, shard.options());
      groups_.dp().AllGather(whole, shard.contiguous())->Wait();
      shard = whole;
    }
    at::Tensor full = at::empty({f->padded_numel()}, shard.options());
    groups_.zero().AllGather(full, shard.contiguous())->Wait();
    f->ReleaseMaster(/*dirty=*/false);
    full = full.to(at::kCPU);  // values for the caller, on the host
    for (const auto& e : f->entries()) by_name[e.name] = full.narrow(0, e.offset, e.numel).view(e.shape).clone();
  }
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& n : param_order_) out.emplace_back(n, by_name[n]);
  return out;
}

}  // namespace zeropp
