#include "zeropp/engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <stdexcept>
#include <unordered_set>

#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/zeros.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "xxhash.h"
#include "zeropp/host_staging.h"

namespace zeropp {
namespace {

uint64_t Fnv(uint64_t h, const std::string& s) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}


}  // namespace

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
  std::string desc;
  uint64_t h = 1469598103934665603ull;
  for (const auto& u : units_) {
    h = Fnv(h, absl::StrCat("unit", u->index(), ":", u->first_child(), "-", u->end_child(), ";"));
  }
  for (const auto& kv : seq_->named_parameters(/*recurse=*/true)) {
    const at::Tensor& t = kv.value();
    h = Fnv(h, absl::StrCat(kv.key(), "[", absl::StrJoin(t.sizes(), "x"), "]", c10::toString(t.scalar_type()),
                            t.requires_grad() ? "" : "(frozen)", ";"));
  }
  h = Fnv(h, absl::StrCat(c10::toString(options_.param_dtype), c10::toString(options_.reduce_dtype)));
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

StepMarks Engine::BeginStep() {
  StepMarks marks;
  marks.zero = groups_.zero().Stats();
  marks.dp = groups_.dp().Stats();
  for (const auto& u : units_) {
    marks.gathers += u->gathers();
    if (u->flat()) u->flat()->StartStep();
  }
  marks.reduce_scatters = reduce_scatters_;
  marks.gather_wait_us = gather_wait_us_;
  marks.reduce_wait_us = reduce_wait_us_;
  return marks;
}

StepResult Engine::FinishStep(double loss_sum, const std::vector<Communicator*>& loss_sum_groups,
                              const std::vector<Communicator*>& norm_groups, const StepMarks& marks) {
  const auto finish_t0 = std::chrono::steady_clock::now();
  const int64_t finish_io0 = swap_ ? swap_->stats().wait_us : 0;
  Communicator& zero = groups_.zero();
  Communicator& dp = groups_.dp();
  FinishReductions(true);

  // Pass 1: average gradients across replicas and measure the global norm. Units are visited in
  // order; an offloaded gradient shard is read, reduced and written back.
  const auto& cfg = groups_.config();
  const bool zero1 = cfg.dp > 1 && cfg.dp_mode == DpMode::kZero1;
  std::vector<FlatParam*> flats;
  for (auto& u : units_) {
    if (u->flat()) flats.push_back(u->flat());
  }
  double sumsq = 0;
  at::Tensor device_sumsq;  // resident gradient shards on a GPU: read once, after the loop
  // Offloaded gradient shards: unit i+1's is read while unit i is reduced and measured.
  if (!flats.empty()) flats[0]->PrefetchGradShard();
  for (size_t i = 0; i < flats.size(); ++i) {
    FlatParam* f = flats[i];
    if (i + 1 < flats.size()) flats[i + 1]->PrefetchGradShard();
    f->EnsureGradWritten();
    at::Tensor g = f->AcquireGradShard();
    const int64_t b = optimizer_.own_begin(i) - f->shard_begin();
    const int64_t n = optimizer_.own_end(i) - optimizer_.own_begin(i);
    if (cfg.dp > 1 && cfg.dp_mode == DpMode::kDp) {
      CountedWait(dp.AllReduce(g, ReduceOp::kAvg));
    } else if (zero1) {
      at::Tensor sub = at::empty({n}, g.options());
      CountedWait(dp.ReduceScatter(sub, g, ReduceOp::kAvg));
      g.narrow(0, b, n).copy_(sub);
    }
    if (mp_group_ && mp_sum_replicated_) {
      // Sequence parallelism: each model-parallel rank saw part of the sequence.
      for (const FlatEntry& e : f->entries()) {
        const int64_t lo = std::max(e.offset, f->shard_begin()), hi = std::min(e.offset + e.numel, f->shard_begin() + f->shard_numel());
        if (!e.replicated || !e.trainable || lo >= hi) continue;
        at::Tensor part = g.narrow(0, lo - f->shard_begin(), hi - lo).contiguous();
        CountedWait(mp_group_->AllReduce(part));
        g.narrow(0, lo - f->shard_begin(), hi - lo).copy_(part);
      }
    }
    if (g.is_cpu()) {
      // fp32 and bf16 read as they are: a converted copy of a large unit is freshly mapped memory,
      // page-faulted every step (an offloaded 0.2B-parameter GPT on this project's CPU machine
      // spent 5x its AdamW time on such copies and the shard's copy-back).
      at::Tensor owned = g.narrow(0, b, n);
      if (owned.scalar_type() != at::kFloat && owned.scalar_type() != at::kBFloat16) owned = owned.to(at::kFloat);
      sumsq += optimizer_.SquaredNorm(i, owned.contiguous());
    } else {
      if (!device_sumsq.defined()) device_sumsq = at::zeros({1}, g.options().dtype(at::kDouble));
      optimizer_.AddSquaredNorm(i, g.narrow(0, b, n), device_sumsq);
    }
    f->ReleaseGradShard(/*dirty=*/cfg.dp > 1 || (mp_group_ && mp_sum_replicated_));
  }
  if (device_sumsq.defined()) sumsq += device_sumsq.item<double>();
  auto since_us = [](std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count();
  };
  const int64_t norm_us = since_us(finish_t0);
  int64_t grad_wait_us = 0, adamw_us = 0, updated = 0;
  at::Tensor norm_t = at::full({1}, sumsq, at::TensorOptions().dtype(at::kDouble));
  CountedWait(zero.AllReduce(norm_t));
  if (zero1) CountedWait(dp.AllReduce(norm_t));
  for (Communicator* g : norm_groups) CountedWait(g->AllReduce(norm_t));
  if (mp_group_) CountedWait(mp_group_->AllReduce(norm_t));
  const double grad_norm = std::sqrt(norm_t.item<double>());
  float scale = 1.0f;
  if (options_.max_grad_norm > 0) {
    const double coef = options_.max_grad_norm / (grad_norm + 1e-6);
    if (coef < 1.0) scale = static_cast<float>(coef);
  }
  // Pass 2: AdamW unit by unit, reading unit i+1's state while unit i updates and unit i-1 is
  // written back; then the compute-dtype shard, re-assembled across replicas under ZeRO-1.
  optimizer_.BeginStep();
  // Offloaded units: unit i+1's moments, master and gradient shard are read while unit i updates.
  auto prefetch_step = [&](size_t i) {
    if (i >= flats.size()) return;
    optimizer_.Prefetch(i);
    flats[i]->PrefetchMaster();
    flats[i]->PrefetchGradShard();
  };
  prefetch_step(0);
  // Optimizer offload on a GPU (ZeRO-Offload): gradients resident on the device, masters on the
  // host; copies both ways run on the copy stream, pipelined with the CPU updates, bf16 as bf16.
  // (Before, fp32 both ways, with a device-side fp32 copy of every updated master held to the
  // step's end: a 5.4B model's peak device memory was 41.6 GB, its bf16 parameters and gradients
  // 21.8 of it, on an H100: benchmarks/results/gpu-2026-11-27.txt.)
  std::unique_ptr<HostStaging> staging;
  auto owned_grad = [&](size_t i) {
    FlatParam* f = flats[i];
    at::Tensor g = f->AcquireGradShard();
    at::Tensor owned = g.narrow(0, optimizer_.own_begin(i) - f->shard_begin(),
                                optimizer_.own_end(i) - optimizer_.own_begin(i));
    f->ReleaseGradShard(/*dirty=*/false);
    return owned;
  };
  if (!flats.empty() && !options_.device.is_cpu() && MasterDevice().is_cpu() && !flats[0]->offloaded()) {
    int64_t most = 0;
    for (size_t i = 0; i < flats.size(); ++i) most = std::max(most, optimizer_.own_end(i) - optimizer_.own_begin(i));
    staging = std::make_unique<HostStaging>(options_.device, most);
    staging->Fetch(0, owned_grad(0));
  }
  for (size_t i = 0; i < flats.size(); ++i) {
    FlatParam* f = flats[i];
    prefetch_step(i + 1);
    const int64_t b = optimizer_.own_begin(i) - f->shard_begin();
    const int64_t n = optimizer_.own_end(i) - optimizer_.own_begin(i);
    at::Tensor master = f->AcquireMaster();
    at::Tensor owned, grad_shard;  // the gradient shard is held until the update has read it
    if (staging) {
      if (i + 1 < flats.size()) staging->Fetch(i + 1, owned_grad(i + 1));
      const auto wait_t0 = std::chrono::steady_clock::now();
      owned = staging->Take(i);
      grad_wait_us += since_us(wait_t0);
    } else {
      grad_shard = f->AcquireGradShard();
      owned = grad_shard.narrow(0, b, n);
      // The host update reads fp32 or bf16 as it is (see the norm's pass); the GPU kernel fp32.
      const bool as_is = owned.is_cpu() && master.is_cpu() &&
                         (owned.scalar_type() == at::kFloat || owned.scalar_type() == at::kBFloat16);
      if (!as_is) owned = owned.to(master.device(), at::kFloat);
      owned = owned.contiguous();
    }
    // A bf16 compute shard is written by the host update as it goes (no second pass): in place on
    // the host, or into a page-locked buffer that then travels to the GPU as bf16.
    at::Tensor shard, bf16_out;
    bool shard_written = false, staged_bf16 = false;
    if (!f->master_is_shard() && master.is_cpu()) {
      shard = f->AcquireShard();
      shard_written = !staging && shard.is_cpu() && shard.scalar_type() == at::kBFloat16;
      staged_bf16 = staging && shard.scalar_type() == at::kBFloat16;
      if (shard_written) bf16_out = shard.narrow(0, b, n);
      if (staged_bf16) bf16_out = staging->PutBuffer(static_cast<int64_t>(i), n);
    }
    const auto adamw_t0 = std::chrono::steady_clock::now();
    optimizer_.StepUnit(i, master, owned, scale, bf16_out);
    adamw_us += since_us(adamw_t0);
    updated += n;
    owned = at::Tensor();
    if (grad_shard.defined()) f->ReleaseGradShard(/*dirty=*/false);
    if (f->master_is_shard()) {
      if (zero1) CountedWait(dp.AllGather(master, master.narrow(0, b, n).clone()));
    } else {
      if (!shard.defined()) shard = f->AcquireShard();
      const int64_t mb = optimizer_.own_begin(i) - f->master_begin();  // the owned part in the master
      if (staged_bf16) {
        staging->PutFrom(static_cast<int64_t>(i), shard.narrow(0, b, n));
      } else if (staging) {
        staging->Put(shard.narrow(0, b, n), master.narrow(0, mb, n));
      } else if (!shard_written) {
        shard.narrow(0, b, n).copy_(master.narrow(0, mb, n));
      }
      if (zero1) {
        // The put above runs on the copy stream: the gather's clone (compute stream) reads after it.
        if (staging) staging->ComputeAfterPuts();
        CountedWait(dp.AllGather(shard, shard.narrow(0, b, n).clone()));
        // The master holds only the owned part, the fp32 truth (never rounded from the bf16 shard).
      }
      f->ReleaseShard(/*dirty=*/true);
    }
    f->ReleaseMaster(/*dirty=*/true);
  }
  if (staging) staging->Finish();
  if (swap_) swap_->Flush();
  // Report the loss averaged over every data-parallel rank.
  at::Tensor loss_t = at::full({1}, loss_sum, at::TensorOptions().dtype(at::kDouble));
  for (Communicator* g : loss_sum_groups) CountedWait(g->AllReduce(loss_t));
  CountedWait(zero.AllReduce(loss_t, ReduceOp::kAvg));
  if (cfg.dp > 1) CountedWait(dp.AllReduce(loss_t, ReduceOp::kAvg));

  if (options_.memory_budget_bytes > 0) {
    // Enforce the budget from the engine's own accounting: resident model state, the peaks of
    // unsharded parameters and gradients, and the host pool.
    MemoryStats mem = Memory();
    const int64_t used = mem.ModelStateBytes() - mem.nvme_bytes + mem.unsharded_peak_bytes +
                         mem.grad_unsharded_peak_bytes + mem.host_pool_bytes;
    if (used > options_.memory_budget_bytes) {
      throw std::runtime_error(absl::StrCat(Where(), " memory budget exceeded at step ", optimizer_.step(), ": ", used,
                                            " bytes accounted (", mem.ToString(), ", host pool ", mem.host_pool_bytes,
                                            ") > memory_budget_bytes ", options_.memory_budget_bytes));
    }
    // On a GPU the caching allocator's peak is the truth (activations and workspaces included).
    if (mem.device.peak_allocated_bytes > options_.memory_budget_bytes) {
      throw std::runtime_error(absl::StrCat(Where(), " memory budget exceeded at step ", optimizer_.step(), " on ",
                                            options_.device.str(), ": the caching allocator's peak is ",
                                            mem.device.peak_allocated_bytes, " bytes (reserved ",
                                            mem.device.reserved_bytes, ") > memory_budget_bytes ",
                                            options_.memory_budget_bytes));
    }
  }
  StepResult r;
  r.step = optimizer_.step();
  r.loss = loss_t.item<double>();
  r.grad_norm = grad_norm;
  r.zero_comm = zero.Stats().Since(marks.zero);
  r.dp_comm = dp.Stats().Since(marks.dp);
  for (const auto& u : units_) r.gathers += u->gathers();
  r.gathers -= marks.gathers;
  r.reduce_scatters = reduce_scatters_ - marks.reduce_scatters;
  r.gather_wait_us = gather_wait_us_ - marks.gather_wait_us;
  r.reduce_wait_us = reduce_wait_us_ - marks.reduce_wait_us;
  r.gather_busy_us = r.zero_comm[OpKind::kAllGather].busy_us;
  r.finish_us =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - finish_t0).count();
  r.finish_io_wait_us = (swap_ ? swap_->stats().wait_us : 0) - finish_io0;
  r.finish_norm_us = norm_us;
  r.finish_grad_wait_us = grad_wait_us;
  r.finish_adamw_us = adamw_us;
  r.updated_params = updated;
  return r;
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
