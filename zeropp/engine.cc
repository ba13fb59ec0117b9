#include "zeropp/engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <stdexcept>

#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/zeros.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace zeropp {
namespace {

uint64_t Fnv(uint64_t h, const std::string& s) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

bool Contains(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

}  // namespace

std::string MemoryStats::ToString() const {
  return absl::StrCat("param_shard=", param_shard_bytes, " master=", master_bytes, " grad_shard=",
                      grad_shard_bytes, " optim=", optim_state_bytes, " unsharded_peak=",
                      unsharded_peak_bytes, " grad_unsharded_peak=", grad_unsharded_peak_bytes);
}

Engine::Engine(std::shared_ptr<torch::nn::Module> model, ProcessGroups& groups, EngineOptions options,
               UnitFilter owns)
    : groups_(groups), options_(std::move(options)), owns_(std::move(owns)), optimizer_(options_.adamw) {
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
  BuildUnits();
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

std::string Engine::Where() const { return absl::StrCat("[rank ", groups_.rank(), "]"); }

void Engine::BuildUnits() {
  const int children = static_cast<int>(seq_->size());
  // Unit boundaries.
  std::vector<int> starts;
  const UnitPolicy& pol = options_.units;
  if (pol.kind == UnitPolicy::Kind::kPerChild) {
    for (int i = 0; i < children; ++i) starts.push_back(i);
  } else if (pol.kind == UnitPolicy::Kind::kExplicit) {
    starts = pol.starts;
    if (starts.back() >= children) {
      throw std::invalid_argument(absl::StrCat(Where(), " EngineOptions: units.starts([",
                                               absl::StrJoin(starts, ","), "]) has a unit starting at child ",
                                               starts.back(), " but the Sequential has ", children, " children"));
    }
  } else {
    int64_t acc = 0;
    starts.push_back(0);
    for (int i = 0; i < children; ++i) {
      for (const auto& p : seq_->ptr(i)->parameters()) acc += p.numel();
      if (acc >= pol.target_numel && i + 1 < children) {
        starts.push_back(i + 1);
        acc = 0;
      }
    }
  }
  // Parameters per unit; tied tensors belong to the first unit that registers them.
  const auto& cfg = groups_.config();
  const int zero = cfg.zero;
  const int zero_rank = cfg.CoordOf(groups_.rank()).zero_index;
  const int64_t pad = cfg.dp_mode == DpMode::kZero1 ? static_cast<int64_t>(zero) * cfg.dp : zero;
  std::map<const void*, int> owner;        // among this rank's units
  std::map<const void*, int> first_unit;   // among all units
  for (size_t u = 0; u < starts.size(); ++u) {
    owned_.push_back(!owns_ || owns_(static_cast<int>(u), starts));
  }
  for (size_t u = 0; u < starts.size(); ++u) {
    const int begin = starts[u];
    const int end = u + 1 < starts.size() ? starts[u + 1] : children;
    std::vector<FlatEntry> entries;
    std::vector<int> deps;
    for (int c = begin; c < end; ++c) {
      const std::string child_name = seq_->named_children()[c].key();
      for (const auto& kv : seq_->ptr(c)->named_parameters(/*recurse=*/true)) {
        const void* impl = kv.value().unsafeGetTensorImpl();
        const bool first_anywhere = first_unit.emplace(impl, static_cast<int>(u)).second;
        if (!owned_[u]) continue;
        auto it = owner.find(impl);
        if (it != owner.end()) {
          if (it->second != static_cast<int>(u) && !Contains(deps, it->second)) deps.push_back(it->second);
          continue;
        }
        owner[impl] = static_cast<int>(u);
        FlatEntry e;
        e.name = absl::StrCat(child_name, ".", kv.key());
        e.param = kv.value();
        e.shape = kv.value().sizes().vec();
        e.numel = kv.value().numel();
        e.trainable = kv.value().requires_grad();
        e.norm_excluded = !first_anywhere && !owned_[first_unit[impl]];
        if (kv.value().scalar_type() != at::kFloat) {
          throw std::invalid_argument(absl::StrCat(Where(), " Engine: parameter ", e.name, " is ",
                                                   c10::toString(kv.value().scalar_type()),
                                                   ", expected float32 (the engine casts to param_dtype itself)"));
        }
        param_order_.push_back(e.name);
        entries.push_back(std::move(e));
      }
    }
    std::unique_ptr<FlatParam> flat;
    if (!entries.empty()) {
      flat = std::make_unique<FlatParam>(std::move(entries), zero, zero_rank, pad, options_.param_dtype,
                                         options_.reduce_dtype);
    }
    units_.push_back(std::make_unique<SchedulingUnit>(static_cast<int>(u), begin, end, std::move(flat), deps));
  }
  if (seq_->parameters(/*recurse=*/true).empty()) {
    throw std::invalid_argument(Where() + " Engine: the model has no parameters to train");
  }
  // Who completes each unit's gradient: the lowest-index unit among it and its users.
  const int k = num_units();
  last_grad_writer_.resize(k);
  for (int u = 0; u < k; ++u) last_grad_writer_[u] = u;
  for (int j = 0; j < k; ++j) {
    for (int d : units_[j]->deps()) last_grad_writer_[d] = std::min(last_grad_writer_[d], j);
  }
  // Live-unit cap must fit the schedule.
  if (options_.max_live_units > 0) {
    size_t max_deps = 0;
    for (const auto& u : units_) max_deps = std::max(max_deps, u->deps().size());
    if (options_.max_live_units < static_cast<int>(1 + max_deps)) {
      throw std::invalid_argument(absl::StrCat(Where(), " EngineOptions: max_live_units(", options_.max_live_units,
                                               ") is below 1 + the most tied-parameter dependencies of a unit (",
                                               1 + max_deps, ")"));
    }
    if (!options_.reshard_after_forward && options_.max_live_units < k) {
      throw std::invalid_argument(absl::StrCat(Where(), " EngineOptions: reshard_after_forward=false keeps all ", k,
                                               " units unsharded until backward; max_live_units(",
                                               options_.max_live_units, ") must be 0 or >= ", k));
    }
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
  const bool offload_params = options_.offload.params != "none";
  for (auto& u : units_) {
    if (!u->flat()) continue;
    if (offload_params) {
      u->flat()->InitFromFull(u->flat()->GatherLocalValues(), swap_.get(), offload::ParseTier(options_.offload.params));
    } else {
      u->flat()->InitFromFull(u->flat()->GatherLocalValues());
    }
  }
  for (auto& b : seq_->buffers(/*recurse=*/true)) {
    if (b.is_contiguous()) world.Broadcast(b, 0)->Wait();
  }
  const auto& cfg = groups_.config();
  const int dp_index = cfg.CoordOf(groups_.rank()).dp_index;
  for (auto& u : units_) {
    FlatParam* f = u->flat();
    if (!f) continue;
    int64_t own_begin = f->shard_begin(), own_end = f->shard_begin() + f->shard_numel();
    if (cfg.dp_mode == DpMode::kZero1 && cfg.dp > 1) {
      const int64_t sub = f->shard_numel() / cfg.dp;
      own_begin = f->shard_begin() + dp_index * sub;
      own_end = own_begin + sub;
    }
    optimizer_.AddUnit(f, own_begin, own_end);
  }
}

int64_t Engine::num_parameters() const {
  int64_t n = 0;
  for (const auto& u : units_) n += u->flat() ? u->flat()->numel() : 0;
  return n;
}

int Engine::LiveUnits() const {
  int n = 0;
  for (const auto& u : units_) n += u->live() ? 1 : 0;
  return n;
}

void Engine::NoteUnshard(int u) {
  unsharded_live_ += units_[u]->unsharded_bytes();
  unsharded_peak_ = std::max(unsharded_peak_, unsharded_live_);
}

void Engine::Require(int k) {
  std::vector<int> need = UnitAndDeps(k);
  for (int u : need) {
    if (units_[u]->state() != ShardState::kSharded) continue;
    if (options_.max_live_units > 0 && LiveUnits() >= options_.max_live_units) ReleaseExcept(need);
    if (options_.max_live_units > 0 && LiveUnits() >= options_.max_live_units) {
      throw std::logic_error(absl::StrCat(Where(), " Engine: unit ", u, " needed but ", LiveUnits(),
                                          " units are live at max_live_units(", options_.max_live_units, ")"));
    }
    units_[u]->Unshard(groups_.zero());
    NoteUnshard(u);
  }
  const auto t0 = std::chrono::steady_clock::now();
  for (int u : need) {
    if (units_[u]->state() == ShardState::kUnsharding) units_[u]->WaitForUnshard();
  }
  gather_wait_us_ += std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count();
}

void Engine::Prefetch(int k, int direction) {
  for (int d = 1; d <= options_.prefetch_depth; ++d) {
    const int j = k + direction * d;
    if (j < 0 || j >= num_units()) return;
    std::vector<int> need = UnitAndDeps(j);
    int sharded = 0;
    for (int u : need) sharded += units_[u]->state() == ShardState::kSharded ? 1 : 0;
    if (options_.max_live_units > 0 && LiveUnits() + sharded > options_.max_live_units) return;
    for (int u : need) {
      if (units_[u]->state() == ShardState::kSharded) {
        units_[u]->Unshard(groups_.zero());
        NoteUnshard(u);
      }
    }
    // Offloaded shards: start reading the one after the prefetch window.
    const int next = j + direction;
    if (next >= 0 && next < num_units() && units_[next]->flat() && units_[next]->state() == ShardState::kSharded) {
      units_[next]->flat()->PrefetchShard();
    }
  }
}

std::vector<int> Engine::UnitAndDeps(int k) const {
  std::vector<int> v = units_[k]->deps();
  v.push_back(k);
  return v;
}

void Engine::ReleaseExcept(const std::vector<int>& keep) {
  for (auto& u : units_) {
    if (u->state() == ShardState::kUnsharded && !Contains(keep, u->index())) {
      u->Reshard();
      unsharded_live_ -= u->unsharded_bytes();
    }
  }
}

at::Tensor Engine::RunUnit(int k, const at::Tensor& x) {
  at::Tensor y = x;
  for (int c = units_[k]->first_child(); c < units_[k]->end_child(); ++c) {
    y = (seq_->begin() + c)->forward(y);
  }
  return y;
}

void Engine::ReduceGrad(int u) {
  FlatParam* f = units_[u]->flat();
  if (!f || !f->has_grad_full()) return;
  at::Tensor src = f->grad_full();
  if (f->reduce_dtype() != f->param_dtype()) src = src.to(f->reduce_dtype());
  at::Tensor out = at::empty({f->shard_numel()}, at::TensorOptions().dtype(f->reduce_dtype()));
  PendingReduce p{u, groups_.zero().ReduceScatter(out, src, ReduceOp::kAvg), out, f->full_bytes()};
  ++reduce_scatters_;
  f->ReleaseGradFull();
  pending_.push_back(std::move(p));
  FinishReductions(false);
}

void Engine::FinishReductions(bool block) {
  std::vector<PendingReduce> left;
  for (auto& p : pending_) {
    if (!block && !p.work->IsCompleted()) {
      left.push_back(std::move(p));
      continue;
    }
    p.work->Wait();
    units_[p.unit]->flat()->AccumulateGradShard(p.out);
    grad_live_ -= p.held_bytes;
  }
  pending_ = std::move(left);
}

void Engine::RunMicroBatch(const at::Tensor& input, const at::Tensor& target, const LossFn& loss_fn,
                           int num_micro, bool last_micro, double* loss_sum) {
  const int k_units = num_units();
  std::vector<at::Tensor> unit_in(k_units), unit_out(k_units);
  at::Tensor x = input;
  for (int k = 0; k < k_units; ++k) {
    Require(k);
    Prefetch(k, +1);
    at::Tensor xin = k == 0 ? x : x.detach().requires_grad_(true);
    at::Tensor out;
    if (options_.recompute) {
      c10::NoGradGuard no_grad;
      out = RunUnit(k, xin);
    } else {
      out = RunUnit(k, xin);
    }
    unit_in[k] = xin;
    unit_out[k] = out;
    x = out;
    // The last unit's backward follows at once; earlier recomputed units may park their input.
    if (options_.offload.activations != "none" && k + 1 < k_units) OffloadActivation(k, &unit_in[k]);
    if (options_.reshard_after_forward && k + 1 < k_units) {
      std::vector<int> keep = UnitAndDeps(k + 1);
      ReleaseExcept(keep);
    }
  }
  at::Tensor grad_next;
  for (int k = k_units - 1; k >= 0; --k) {
    Require(k);
    Prefetch(k, -1);
    std::vector<int> writers = UnitAndDeps(k);
    for (int u : writers) {
      FlatParam* f = units_[u]->flat();
      if (f && !f->has_grad_full()) {
        f->AllocateGradFull();
        grad_live_ += f->full_bytes();
        grad_peak_ = std::max(grad_peak_, grad_live_);
      }
    }
    at::Tensor out = unit_out[k];
    if (options_.offload.activations != "none" && k + 1 < k_units) {
      if (k >= 1 && act_slot_[k - 1] >= 0) swap_->Prefetch(act_slot_[k - 1]);
      unit_in[k] = FetchActivation(k);
    }
    if (options_.recompute) out = RunUnit(k, unit_in[k]);
    if (k == k_units - 1) {
      at::Tensor loss = loss_fn(out, target) / num_micro;
      *loss_sum += loss.item<double>();
      torch::autograd::backward({loss});
    } else {
      if (!grad_next.defined()) {
        throw std::logic_error(absl::StrCat(Where(), " Engine: unit ", k + 1, " produced no gradient for its input"));
      }
      torch::autograd::backward({out}, {grad_next});
    }
    grad_next = k > 0 ? unit_in[k].grad() : at::Tensor();
    unit_in[k] = at::Tensor();
    unit_out[k] = at::Tensor();
    if (!options_.no_sync) {
      for (int u = 0; u < k_units; ++u) {
        if (last_grad_writer_[u] == k) ReduceGrad(u);
      }
    }
    std::vector<int> keep;
    if (k > 0) {
      keep = UnitAndDeps(k - 1);
      // Without resharding after forward, units still ahead in backward stay gathered.
      if (!options_.reshard_after_forward) {
        for (int u = 0; u < k - 1; ++u) keep.push_back(u);
      }
    } else if (!last_micro) {
      keep = UnitAndDeps(0);
    }
    ReleaseExcept(keep);
  }
  if (options_.no_sync && last_micro) {
    for (int u = 0; u < k_units; ++u) ReduceGrad(u);
  }
}

double Engine::Evaluate(const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& targets,
                        const LossFn& loss_fn) {
  if (inputs.empty() || inputs.size() != targets.size()) {
    throw std::invalid_argument(absl::StrCat(Where(), " Engine::Evaluate: got ", inputs.size(), " inputs and ",
                                             targets.size(), " targets, expected the same number >= 1"));
  }
  if (owns_) {
    throw std::logic_error(absl::StrCat(Where(), " Engine::Evaluate: this engine holds one pipeline stage; use "
                                        "PipelineExecutor::Evaluate"));
  }
  c10::NoGradGuard no_grad;
  const int k_units = num_units();
  double loss_sum = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    at::Tensor x = inputs[i];
    for (int k = 0; k < k_units; ++k) {
      Require(k);
      Prefetch(k, +1);
      x = RunUnit(k, x);
      if (k + 1 < k_units) {
        std::vector<int> keep = UnitAndDeps(k + 1);
        ReleaseExcept(keep);
      }
    }
    loss_sum += loss_fn(x, targets[i]).item<double>() / static_cast<double>(inputs.size());
  }
  ReleaseExcept({});
  return SumOverRanks(groups_.world(), loss_sum) / groups_.world().size();
}

StepResult Engine::Step(const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& targets,
                        const LossFn& loss_fn) {
  if (inputs.empty() || inputs.size() != targets.size()) {
    throw std::invalid_argument(absl::StrCat(Where(), " Engine::Step: got ", inputs.size(), " inputs and ",
                                             targets.size(), " targets, expected the same number >= 1"));
  }
  const StepMarks marks = BeginStep();
  double loss_sum = 0;
  const int m = static_cast<int>(inputs.size());
  for (int i = 0; i < m; ++i) RunMicroBatch(inputs[i], targets[i], loss_fn, m, i == m - 1, &loss_sum);
  return FinishStep(loss_sum, {}, {}, marks);
}

Engine::StepMarks Engine::BeginStep() {
  StepMarks marks;
  marks.zero = groups_.zero().Stats();
  marks.dp = groups_.dp().Stats();
  for (const auto& u : units_) {
    marks.gathers += u->gathers();
    if (u->flat()) u->flat()->StartStep();
  }
  marks.reduce_scatters = reduce_scatters_;
  marks.gather_wait_us = gather_wait_us_;
  return marks;
}

StepResult Engine::FinishStep(double loss_sum, const std::vector<Communicator*>& loss_sum_groups,
                              const std::vector<Communicator*>& norm_groups, const StepMarks& marks) {
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
  for (size_t i = 0; i < flats.size(); ++i) {
    FlatParam* f = flats[i];
    f->EnsureGradWritten();
    at::Tensor g = f->AcquireGradShard();
    const int64_t b = optimizer_.own_begin(i) - f->shard_begin();
    const int64_t n = optimizer_.own_end(i) - optimizer_.own_begin(i);
    if (cfg.dp > 1 && cfg.dp_mode == DpMode::kDp) {
      dp.AllReduce(g, ReduceOp::kAvg)->Wait();
    } else if (zero1) {
      at::Tensor sub = at::empty({n}, g.options());
      dp.ReduceScatter(sub, g, ReduceOp::kAvg)->Wait();
      g.narrow(0, b, n).copy_(sub);
    }
    sumsq += optimizer_.SquaredNorm(i, g.narrow(0, b, n).to(at::kFloat).contiguous());
    f->ReleaseGradShard(/*dirty=*/cfg.dp > 1);
  }
  at::Tensor norm_t = at::full({1}, sumsq, at::TensorOptions().dtype(at::kDouble));
  zero.AllReduce(norm_t)->Wait();
  if (zero1) dp.AllReduce(norm_t)->Wait();
  for (Communicator* g : norm_groups) g->AllReduce(norm_t)->Wait();
  const double grad_norm = std::sqrt(norm_t.item<double>());
  float scale = 1.0f;
  if (options_.max_grad_norm > 0) {
    const double coef = options_.max_grad_norm / (grad_norm + 1e-6);
    if (coef < 1.0) scale = static_cast<float>(coef);
  }
  // Pass 2: AdamW unit by unit, reading unit i+1's state while unit i updates and unit i-1 is
  // written back; then the compute-dtype shard, re-assembled across replicas under ZeRO-1.
  optimizer_.BeginStep();
  optimizer_.Prefetch(0);
  for (size_t i = 0; i < flats.size(); ++i) {
    FlatParam* f = flats[i];
    optimizer_.Prefetch(i + 1);
    const int64_t b = optimizer_.own_begin(i) - f->shard_begin();
    const int64_t n = optimizer_.own_end(i) - optimizer_.own_begin(i);
    at::Tensor g = f->AcquireGradShard();
    at::Tensor owned = g.narrow(0, b, n).to(at::kFloat).contiguous();
    at::Tensor master = f->AcquireMaster();
    optimizer_.StepUnit(i, master, owned, scale);
    f->ReleaseGradShard(/*dirty=*/false);
    if (f->master_is_shard()) {
      if (zero1) dp.AllGather(master, master.narrow(0, b, n).clone())->Wait();
    } else {
      at::Tensor shard = f->AcquireShard();
      shard.narrow(0, b, n).copy_(master.narrow(0, b, n));
      if (zero1) {
        dp.AllGather(shard, shard.narrow(0, b, n).clone())->Wait();
        master.copy_(shard);
      }
      f->ReleaseShard(/*dirty=*/true);
    }
    f->ReleaseMaster(/*dirty=*/true);
  }
  if (swap_) swap_->Flush();
  // Report the loss averaged over every data-parallel rank.
  at::Tensor loss_t = at::full({1}, loss_sum, at::TensorOptions().dtype(at::kDouble));
  for (Communicator* g : loss_sum_groups) g->AllReduce(loss_t)->Wait();
  zero.AllReduce(loss_t, ReduceOp::kAvg)->Wait();
  if (cfg.dp > 1) dp.AllReduce(loss_t, ReduceOp::kAvg)->Wait();

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
  r.gather_busy_us = r.zero_comm[OpKind::kAllGather].busy_us;
  return r;
}

std::vector<std::pair<std::string, at::Tensor>> Engine::FullParameters() {
  std::map<std::string, at::Tensor> by_name;
  for (auto& u : units_) {
    FlatParam* f = u->flat();
    if (!f) continue;
    at::Tensor full = at::empty({f->padded_numel()}, at::TensorOptions().dtype(at::kFloat));
    at::Tensor shard = f->AcquireMaster();
    groups_.zero().AllGather(full, shard.contiguous())->Wait();
    f->ReleaseMaster(/*dirty=*/false);
    for (const auto& e : f->entries()) by_name[e.name] = full.narrow(0, e.offset, e.numel).view(e.shape).clone();
  }
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& n : param_order_) out.emplace_back(n, by_name[n]);
  return out;
}

}  // namespace zeropp
