// trainer.cc: the Trainer (zeropp.h). Plans units and stages, generates and validates the
// layout's schedule, then builds the engine and the one executor that runs it.
#include <algorithm>
#include <chrono>
#include <thread>
#include <stdexcept>

#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>

#include "absl/strings/str_cat.h"
#include "scheduler/generators.h"
#include "scheduler/runtime/executor.h"
#include "scheduler/runtime/stage_partition.h"
#include "scheduler/trace.h"
#include "zeropp/checkpoint/checkpoint.h"
#include "zeropp/comm_stats.h"
#include "zeropp/device.h"
#include "zeropp/host_allocator.h"
#include "zeropp/unit_plan.h"
#include "zeropp/zeropp.h"

namespace zeropp {
namespace {

struct LayoutPlan {
  UnitPlan units;
  std::vector<int> stage_of_unit;
  scheduler::Schedule schedule;
};

torch::nn::SequentialImpl& AsSequential(const std::shared_ptr<torch::nn::Module>& model) {
  if (!model) throw std::invalid_argument("model: null (expected a torch::nn::Sequential)");
  auto* seq = dynamic_cast<torch::nn::SequentialImpl*>(model.get());
  if (!seq) {
    throw std::invalid_argument(absl::StrCat("model: got a ", model->name(),
                                             ", expected a torch::nn::Sequential of the model's children"));
  }
  return *seq;
}

// Pure: the model's structure and the options decide units, stages and the schedule. Throws
// std::invalid_argument naming every number of a layout that cannot be scheduled.
LayoutPlan PlanLayout(const std::shared_ptr<torch::nn::Module>& model, const TrainerOptions& o) {
  LayoutPlan plan;
  plan.units = PlanUnits(AsSequential(model), o.engine.units);
  const int k = plan.units.num_units();
  const int pp = o.layout.pp;
  const int m = o.microbatches;
  if (pp == 1) {
    scheduler::Zero3Plan z;
    z.units = k;
    z.needs = plan.units.needs;
    z.prefetch_depth = o.engine.prefetch_depth;
    z.max_live_units = o.engine.max_live_units;
    z.reshard_after_forward = o.engine.reshard_after_forward;
    z.no_sync = o.engine.no_sync;
    z.recompute = o.engine.recompute;
    plan.schedule = scheduler::Zero3(m, z);
    for (int u = 0; u < k; ++u) plan.stage_of_unit.push_back(u);
    return plan;
  }
  const PipelineOptions& po = o.pipeline;
  const int stages = pp * po.chunks;
  if (k < stages) {
    throw std::invalid_argument(absl::StrCat("layout: the model has ", k, " scheduling units but pp(", pp,
                                             ")*chunks(", po.chunks, ")=", stages,
                                             " virtual stages need at least one each"));
  }
  scheduler::GenOptions go;
  switch (po.recompute) {
    case PipelineRecompute::kDefault: go.recompute = scheduler::RecomputePolicy::kDefault; break;
    case PipelineRecompute::kNone: go.recompute = scheduler::RecomputePolicy::kNone; break;
    case PipelineRecompute::kAllButLast: go.recompute = scheduler::RecomputePolicy::kAllButLast; break;
    case PipelineRecompute::kAll: go.recompute = scheduler::RecomputePolicy::kAll; break;
  }
  go.max_deferred_w = po.max_deferred_w;
  const bool zeropp = po.schedule == PipelineSchedule::kZeroPP;
  plan.schedule = scheduler::Generate(Name(po.schedule), pp, po.chunks, m,
                                      zeropp ? (po.unit_size > 0 ? po.unit_size : m) : 0, go);
  plan.stage_of_unit = scheduler::PartitionStages(scheduler::UnitCosts(*model, plan.units.starts), stages,
                                                  Name(po.partition));
  return plan;
}

// Runs f; an std::invalid_argument that does not name its rank yet gets "[rank R] " in front.
template <typename F>
auto WithRank(int rank, F f) -> decltype(f()) {
  try {
    return f();
  } catch (const std::invalid_argument& e) {
    const std::string msg = e.what();
    if (msg.rfind("[rank", 0) == 0) throw;
    throw std::invalid_argument(absl::StrCat("[rank ", rank, "] ", msg));
  }
}

}  // namespace

std::unique_ptr<Trainer> Trainer::Create(std::shared_ptr<torch::nn::Module> model, const DistEnv& env,
                                         TrainerOptions options, const ProcessGroupsOptions& groups) {
  WithRank(env.rank, [&] {
    const std::string err = options.Resolve(env.world_size);
    if (!err.empty()) throw std::invalid_argument(err);
    PlanLayout(model, options);  // refuses an unschedulable layout before any group exists
    options.engine.device = ResolveDevice(options.device, env.local_rank, env.rank);
  });
  SetCurrentDevice(options.engine.device);  // NCCL binds the thread's current GPU
  ProcessGroupsOptions go = groups;
  go.backend = options.backend;
  return std::make_unique<Trainer>(model, ProcessGroups::Create(env, options.layout, go), options);
}

Trainer::Trainer(std::shared_ptr<torch::nn::Module> model, std::unique_ptr<ProcessGroups> groups,
                 TrainerOptions options)
    : model_(std::move(model)), owned_groups_(std::move(groups)), groups_(owned_groups_.get()),
      options_(std::move(options)) {
  Build();
}

Trainer::Trainer(std::shared_ptr<torch::nn::Module> model, ProcessGroups& groups, TrainerOptions options)
    : model_(std::move(model)), groups_(&groups), options_(std::move(options)) {
  Build();
}

void Trainer::Build() {
  if (options_.tune_host_allocator) TuneHostAllocator();
  options_.layout = groups_->config();  // the groups were made for their layout
  LayoutPlan plan = WithRank(groups_->rank(), [&] {
    const std::string err = options_.Resolve(groups_->world().size());
    if (!err.empty()) throw std::invalid_argument(err);
    return PlanLayout(model_, options_);
  });
  if (options_.device != "cpu" && options_.engine.device.is_cpu()) {
    // Groups made by the caller (ranks as threads of one process): rank r takes GPU r % count.
    options_.engine.device = WithRank(groups_->rank(), [&] {
      return ResolveDevice(options_.device, groups_->rank(), groups_->rank());
    });
  }
  SetCurrentDevice(options_.engine.device);
  const ParallelConfig& cfg = groups_->config();
  const MeshCoord me = cfg.CoordOf(groups_->rank());
  dp_rank_ = me.dp_index * cfg.zero + me.zero_index;
  dp_size_ = cfg.zero * cfg.dp;
  std::vector<bool> owned;
  for (int st : plan.stage_of_unit) owned.push_back(st % cfg.pp == me.pp_index);
  engine_ = WithRank(groups_->rank(), [&] {
    return std::make_unique<Engine>(model_, *groups_, options_.engine, plan.units, owned);
  });
  scheduler::ExecutorOptions eo;
  eo.split_backward = options_.pipeline.split_backward;
  eo.measure_heap = options_.pipeline.measure_heap;
  executor_ = std::make_unique<scheduler::Executor>(*engine_, *groups_, std::move(plan.schedule), plan.units,
                                                    std::move(plan.stage_of_unit), eo);
}


bool Trainer::needs_inputs() const { return groups_->config().CoordOf(groups_->rank()).pp_index == 0; }
bool Trainer::needs_targets() const {
  return groups_->config().CoordOf(groups_->rank()).pp_index == groups_->config().pp - 1;
}

double Trainer::learning_rate() const { return options_.lr.At(steps_, options_.engine.adamw.lr); }

StepResult Trainer::Step(const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& targets,
                         const LossFn& loss_fn) {
  engine_->SetLearningRate(static_cast<float>(learning_rate()));
  StepResult r = WithRank(groups_->rank(), [&] { return executor_->Step(inputs, targets, loss_fn); });
  ++steps_;
  return r;
}

double Trainer::Evaluate(const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& targets,
                         const LossFn& loss_fn) {
  // The schedule evaluates a step's worth of micro-batches at a time.
  const size_t m = static_cast<size_t>(options_.microbatches);
  // A middle pipeline stage needs neither vector: it evaluates one step's worth unless given more.
  size_t n = std::max(needs_inputs() ? inputs.size() : 0, needs_targets() ? targets.size() : 0);
  if (!needs_inputs() && !needs_targets()) n = std::max({inputs.size(), targets.size(), m});
  if (n == 0 || n % m != 0) {
    throw std::invalid_argument(absl::StrCat("[rank ", groups_->rank(), "] Evaluate: got ", inputs.size(), " inputs and ", targets.size(),
                                             " targets, expected a positive multiple of microbatches(", m, ")"));
  }
  double loss = 0;
  for (size_t b = 0; b < n; b += m) {
    auto slice = [&](const std::vector<at::Tensor>& v) {
      return v.size() >= b + m ? std::vector<at::Tensor>(v.begin() + b, v.begin() + b + m) : std::vector<at::Tensor>{};
    };
    loss += WithRank(groups_->rank(), [&] { return executor_->Evaluate(slice(inputs), slice(targets), loss_fn); });
  }
  return loss / static_cast<double>(n / m);
}

std::vector<std::pair<std::string, at::Tensor>> Trainer::FullParameters() { return engine_->FullParameters(); }

std::string Trainer::LayoutDescription() const {
  return absl::StrCat(options_.layout.ToString(), " schedule ", ScheduleName(), " chunks ", options_.pipeline.chunks,
                      " partition ", Name(options_.pipeline.partition));
}

std::string Trainer::Save(const std::string& dir, int keep) {
  return checkpoint::Save(*engine_, *groups_, dir, steps_, LayoutDescription(), keep).path;
}

struct Trainer::AsyncSave {
  checkpoint::PendingSave save;
  std::thread writer;
};

double Trainer::SaveAsync(const std::string& dir, int keep) {
  WaitForSave();  // the next save waits for the previous one
  const auto t0 = std::chrono::steady_clock::now();
  auto a = std::make_unique<AsyncSave>();
  a->save = checkpoint::PendingSave::Begin(*engine_, *groups_, dir, steps_, LayoutDescription(), keep);
  checkpoint::PendingSave* p = &a->save;
  a->writer = std::thread([p] { p->Write(); });
  async_save_ = std::move(a);
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

std::string Trainer::WaitForSave() {
  if (!async_save_) return "";
  std::unique_ptr<AsyncSave> a = std::move(async_save_);
  a->writer.join();
  return a->save.Commit(*groups_).path;
}

Trainer::~Trainer() {
  // An uncommitted asynchronous save stays invisible (committing needs every rank).
  if (async_save_ && async_save_->writer.joinable()) async_save_->writer.join();
}

int64_t Trainer::Load(const std::string& path) {
  steps_ = checkpoint::Load(*engine_, *groups_, path, LayoutDescription());
  return steps_;
}
MemoryStats Trainer::Memory() const { return engine_->Memory(); }
std::string Trainer::ScheduleText() const { return executor_->schedule().ToString(); }
std::string Trainer::ScheduleName() const { return executor_->schedule().name; }
scheduler::TimeShares Trainer::LastStepShares() const {
  scheduler::TimeShares t;
  t.Add(executor_->trace());
  return t;
}

std::string Trainer::TraceJson() const {
  // The executor's actions, and beside them what each group's communication thread ran during the
  // step (its OpLog: only operations that started after the step did and have finished; the log
  // keeps the last CommOptions::log_capacity of them, so a long step's early ones may be gone).
  std::vector<scheduler::TraceEvent> events = executor_->trace();
  const int64_t origin = executor_->trace_origin_us();
  for (const Communicator* c : {&groups_->zero(), &groups_->pp(), &groups_->dp(), &groups_->world()}) {
    if (c->size() < 2) continue;
    for (const OpRecord& r : c->RecentOps()) {
      if (r.start_us < origin || r.state != OpState::kDone) continue;
      events.push_back({c->global_rank(), absl::StrCat(OpKindName(r.kind), " ", c->name(), " #", r.seq, " ", r.bytes, "B"),
                        "comm", (r.start_us - origin) * 1e-6, (r.end_us - origin) * 1e-6, /*comm_stream=*/true});
    }
  }
  return scheduler::ChromeTraceJson(events);
}

}  // namespace zeropp
