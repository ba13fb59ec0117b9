#include "scheduler/pipeline_executor.h"

#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <stdexcept>
#include <tuple>

#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/zeros.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>

#include "absl/strings/str_cat.h"
#include "scheduler/generators.h"
#include "scheduler/split_backward.h"
#include "scheduler/stage_partition.h"
#include "scheduler/validator.h"

namespace zeropp {

// The engine internals the pipeline executor drives (Engine befriends this class).
class PipelineAccess {
 public:
  static std::vector<std::unique_ptr<SchedulingUnit>>& Units(Engine& e) { return e.units_; }
  static bool Owned(Engine& e, int u) { return e.owned_[u]; }
  static std::shared_ptr<torch::nn::SequentialImpl> Seq(Engine& e) { return e.seq_; }
  static at::Tensor RunUnit(Engine& e, int k, const at::Tensor& x) { return e.RunUnit(k, x); }
  static void Unshard(Engine& e, int u) {
    e.units_[u]->Unshard(e.groups_.zero());
    e.NoteUnshard(u);
  }
  static void Reshard(Engine& e, int u) {
    e.units_[u]->Reshard();
    e.unsharded_live_ -= e.units_[u]->unsharded_bytes();
  }
  static void AllocateGrad(Engine& e, int u) {
    FlatParam* f = e.units_[u]->flat();
    if (!f || f->has_grad_full()) return;
    f->AllocateGradFull();
    e.grad_live_ += f->full_bytes();
    e.grad_peak_ = std::max(e.grad_peak_, e.grad_live_);
  }
  static void ReduceGrad(Engine& e, int u) { e.ReduceGrad(u); }
  static void AddWait(Engine& e, int64_t us) { e.gather_wait_us_ += us; }
  // An evaluation pass takes no step: nothing to snapshot.
  static Engine::StepMarks BeginStep(Engine& e, bool train) { return train ? e.BeginStep() : Engine::StepMarks{}; }
  static StepResult FinishStep(Engine& e, double loss_sum, Communicator& pp, const Engine::StepMarks& marks) {
    return e.FinishStep(loss_sum, {&pp}, {&pp}, marks);
  }
};

namespace scheduler {
namespace {

using Clock = std::chrono::steady_clock;

enum TagKind { kActHeader = 0, kActData = 1, kGrad = 2, kTied = 3 };
int Tag(TagKind kind, int chunk, int mb) { return (kind << 26) | ((chunk & 63) << 20) | (mb & 0xFFFFF); }

constexpr int kHeader = 10;  // dtype, ndim, up to 8 dims

at::Tensor Header(const at::Tensor& t) {
  at::Tensor h = at::zeros({kHeader}, at::TensorOptions().dtype(at::kLong));
  int64_t* p = h.data_ptr<int64_t>();
  p[0] = static_cast<int64_t>(t.scalar_type());
  p[1] = t.dim();
  for (int64_t d = 0; d < t.dim() && d < kHeader - 2; ++d) p[2 + d] = t.size(d);
  return h;
}

}  // namespace

struct PipelineExecutor::Impl {
  ProcessGroups* groups = nullptr;
  int r = 0, pp = 1, v = 1, stages = 1;
  bool split_backward = true;
  bool measure_heap = false;
  std::vector<std::vector<int>> chunk_units;  // per chunk of this rank
  std::vector<int> deferred_units;            // hold a cross-stage tied tensor: reduced at the step's end
  struct Tied {
    int unit;
    int64_t offset, numel;
    int peer;  // pp rank holding the other copy
  };
  std::vector<Tied> tied;
  // Per step.
  std::map<std::pair<int, int>, at::Tensor> x_in, out, grad_in;
  std::map<std::pair<int, int>, std::unique_ptr<SplitBackward>> weight_pass;  // B done, W pending
  std::map<std::pair<int, int>, std::pair<at::Tensor, at::Tensor>> cut;         // first stage: (head, cut)
  std::map<std::pair<int, int>, std::pair<at::Tensor, std::shared_ptr<CommWork>>> act_recv, grad_recv;
  std::vector<std::pair<std::shared_ptr<CommWork>, at::Tensor>> sends;
};

PipelineExecutor::PipelineExecutor(std::shared_ptr<torch::nn::Module> model, ProcessGroups& groups,
                                   EngineOptions engine_options, PipelineOptions options)
    : impl_(std::make_unique<Impl>()) {
  Impl& im = *impl_;
  im.groups = &groups;
  const ParallelConfig& cfg = groups.config();
  im.pp = cfg.pp;
  im.v = options.chunks;
  im.r = cfg.CoordOf(groups.rank()).pp_index;
  im.stages = im.pp * im.v;
  im.split_backward = options.split_backward;
  im.measure_heap = options.measure_heap;
  const int u = options.unit_size > 0 ? options.unit_size : options.microbatches;
  GenOptions go;
  if (options.recompute == "none") {
    go.recompute = RecomputePolicy::kNone;
  } else if (options.recompute == "all") {
    go.recompute = RecomputePolicy::kAll;
  } else if (options.recompute == "all-but-last") {
    go.recompute = RecomputePolicy::kAllButLast;
  } else if (options.recompute != "default") {
    throw std::invalid_argument("recompute: got '" + options.recompute +
                                "', expected one of: default, none, all-but-last, all");
  }
  schedule_ = Generate(options.schedule, im.pp, im.v, options.microbatches, options.schedule == "zeropp" ? u : 0, go);
  ValidationReport rep = Validate(schedule_);
  if (!rep.ok) throw std::logic_error(rep.error);
  eval_schedule_ = ForwardOnly(schedule_);
  rep = Validate(eval_schedule_);
  if (!rep.ok) throw std::logic_error(rep.error);
  const int stages = im.stages, pp = im.pp, me = im.r;
  // Units to virtual stages, decided once from the whole model (the same on every rank).
  auto partition = std::make_shared<std::vector<int>>();
  const std::string method = options.partition;
  UnitFilter owns = [partition, model, stages, pp, me, method](int unit, const std::vector<int>& starts) {
    if (partition->empty()) *partition = PartitionStages(UnitCosts(*model, starts), stages, method);
    return (*partition)[unit] % pp == me;
  };
  engine_ = std::make_unique<Engine>(model, groups, engine_options, owns);
  auto& units = PipelineAccess::Units(*engine_);
  const int k = static_cast<int>(units.size());
  im.chunk_units.resize(im.v);
  for (int i = 0; i < k; ++i) {
    stage_of_unit_.push_back((*partition)[i]);
    if (PipelineAccess::Owned(*engine_, i)) im.chunk_units[stage_of_unit_[i] / pp].push_back(i);
  }
  for (int i = 0; i < k; ++i) {
    for (int d : units[i]->deps()) {
      if (stage_of_unit_[d] != stage_of_unit_[i]) {
        throw std::invalid_argument(absl::StrCat("pipeline: unit ", i, " uses a tensor of unit ", d,
                                                 " on another virtual stage of the same rank; not supported"));
      }
    }
  }
  // Tensors held by this rank and by another pipeline rank: their gradients are exchanged.
  auto seq = PipelineAccess::Seq(*engine_);
  std::map<const void*, std::vector<int>> holders;  // tensor -> stages of units using it
  for (int i = 0; i < k; ++i) {
    for (int c = units[i]->first_child(); c < units[i]->end_child(); ++c) {
      for (const auto& p : seq->ptr(c)->parameters(/*recurse=*/true)) {
        auto& h = holders[p.unsafeGetTensorImpl()];
        if (std::find(h.begin(), h.end(), stage_of_unit_[i]) == h.end()) h.push_back(stage_of_unit_[i]);
      }
    }
  }
  for (const auto& p : seq->parameters(/*recurse=*/true)) {
    const auto& h = holders[p.unsafeGetTensorImpl()];
    std::vector<int> ranks;
    for (int st : h) {
      if (std::find(ranks.begin(), ranks.end(), st % pp) == ranks.end()) ranks.push_back(st % pp);
    }
    if (ranks.size() < 2 || std::find(ranks.begin(), ranks.end(), me) == ranks.end()) continue;
    if (ranks.size() > 2) throw std::invalid_argument("pipeline: a tensor tied across more than two ranks");
    const int peer = ranks[0] == me ? ranks[1] : ranks[0];
    bool found = false;
    for (int i = 0; i < k && !found; ++i) {
      FlatParam* f = units[i]->flat();
      if (!f) continue;
      for (const auto& e : f->entries()) {
        if (e.param.unsafeGetTensorImpl() == p.unsafeGetTensorImpl() && e.trainable) {
          bool seen = false;
          for (const auto& t : im.tied) seen = seen || (t.unit == i && t.offset == e.offset);
          if (seen) continue;
          im.tied.push_back({i, e.offset, e.numel, peer});
          if (std::find(im.deferred_units.begin(), im.deferred_units.end(), i) == im.deferred_units.end()) {
            im.deferred_units.push_back(i);
          }
          found = true;
          break;
        }
      }
    }
  }
}

PipelineExecutor::~PipelineExecutor() = default;

StepResult PipelineExecutor::Step(const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& targets,
                                  const LossFn& loss_fn) {
  return Run(schedule_, /*train=*/true, inputs, targets, loss_fn);
}

double PipelineExecutor::Evaluate(const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& targets,
                                  const LossFn& loss_fn) {
  c10::NoGradGuard no_grad;
  return Run(eval_schedule_, /*train=*/false, inputs, targets, loss_fn).loss;
}

StepResult PipelineExecutor::Run(const Schedule& schedule, bool train, const std::vector<at::Tensor>& inputs,
                                 const std::vector<at::Tensor>& targets, const LossFn& loss_fn) {
  Impl& im = *impl_;
  Engine& e = *engine_;
  auto& units = PipelineAccess::Units(e);
  Communicator& ppc = im.groups->pp();
  const int m = schedule_.m;
  const int me = im.r;
  const bool first_rank = me == 0, last_rank = me == im.pp - 1;
  if ((first_rank && static_cast<int>(inputs.size()) != m) || (last_rank && static_cast<int>(targets.size()) != m)) {
    throw std::invalid_argument(absl::StrCat("[rank ", im.groups->rank(), "] pipeline Step: got ", inputs.size(),
                                             " inputs and ", targets.size(), " targets, expected ", m,
                                             " micro-batches (the first stage needs inputs, the last targets)"));
  }
  const auto marks = PipelineAccess::BeginStep(e, train);
  auto heap = [] {
    const struct mallinfo2 mi = mallinfo2();
    return static_cast<int64_t>(mi.uordblks + mi.hblkhd);
  };
  const int64_t heap0 = im.measure_heap ? heap() : 0;
  trace_.clear();
  split_stats_ = {};
  const auto t0 = Clock::now();
  auto now = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  double loss_sum = 0;

  auto wait_gathered = [&](int c) {
    const auto w0 = Clock::now();
    for (int u : im.chunk_units[c]) {
      if (units[u]->state() == ShardState::kUnsharding) units[u]->WaitForUnshard();
      if (units[u]->state() != ShardState::kUnsharded) {
        throw std::logic_error(absl::StrCat("pipeline: chunk ", c, " computed while unit ", u, " is ",
                                            ShardStateName(units[u]->state())));
      }
    }
    PipelineAccess::AddWait(e, std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - w0).count());
  };
  // The chunk's units, and the loss on the last virtual stage. On the first virtual stage of a
  // split schedule the graph is cut after the first unit (the embedding): its input needs no
  // gradient, so Bi computes the gradient at the cut, which lets W defer the weight gradients of
  // the units after it; the first unit's own backward runs in Bi.
  const bool split_first = im.split_backward && std::any_of(schedule_.ranks[me].begin(), schedule_.ranks[me].end(),
                                                             [](const Action& x) {
                                                               return x.kind == ActionKind::kBackwardInput;
                                                             });
  struct ChunkRun {
    at::Tensor y;     // output or loss
    at::Tensor head;  // the first unit's output (with its graph) when cut, else undefined
    at::Tensor cut;   // the leaf the rest of the chunk starts from when cut
  };
  auto run_chunk = [&](int c, int mb, const at::Tensor& xin) {
    ChunkRun r;
    r.y = xin;
    const auto& us = im.chunk_units[c];
    for (size_t i = 0; i < us.size(); ++i) {
      r.y = PipelineAccess::RunUnit(e, us[i], r.y);
      if (i == 0 && us.size() > 1 && c * im.pp + me == 0 && split_first && c10::GradMode::is_enabled()) {
        r.head = r.y;
        r.y = r.cut = r.y.detach().requires_grad_(true);
      }
    }
    if (c * im.pp + me == im.stages - 1) r.y = loss_fn(r.y, targets[mb]) / m;
    return r;
  };
  auto is_deferred = [&](int u) {
    return std::find(im.deferred_units.begin(), im.deferred_units.end(), u) != im.deferred_units.end();
  };

  for (const Action& a : schedule.ranks[me]) {
    double start = now();
    // Time a computation spent waiting for a gather or a transfer is traced apart from it.
    auto waited = [&](const char* what, const char* cat) {
      const double t = now();
      if (t - start > 1e-5) trace_.push_back({im.groups->rank(), absl::StrCat(what, " ", a.ToString()), cat, start, t});
      start = t;
    };
    const std::pair<int, int> cm{a.chunk, a.mb};
    const int stage = a.chunk * im.pp + me;
    std::string cat = "compute";
    switch (a.kind) {
      case ActionKind::kGather:
        cat = "comm";
        for (int u : im.chunk_units[a.chunk]) {
          if (units[u]->state() == ShardState::kSharded) PipelineAccess::Unshard(e, u);
        }
        break;
      case ActionKind::kRelease:
        cat = "comm";
        for (int u : im.chunk_units[a.chunk]) {
          if (units[u]->state() == ShardState::kUnsharding) units[u]->WaitForUnshard();
          if (units[u]->state() == ShardState::kUnsharded) PipelineAccess::Reshard(e, u);
        }
        break;
      case ActionKind::kRecvAct: {
        cat = "p2p";
        // The sender's chunk a.chunk feeds this rank's chunk one virtual stage up.
        const int mine = (a.chunk * im.pp + a.peer + 1) / im.pp;
        at::Tensor header = at::empty({kHeader}, at::TensorOptions().dtype(at::kLong));
        ppc.RecvTagged(header, a.peer, Tag(kActHeader, a.chunk, a.mb))->Wait();
        const int64_t* h = header.data_ptr<int64_t>();
        std::vector<int64_t> shape(h + 2, h + 2 + h[1]);
        at::Tensor data = at::empty(shape, at::TensorOptions().dtype(static_cast<at::ScalarType>(h[0])));
        im.act_recv[{mine, a.mb}] = {data, ppc.RecvTagged(data, a.peer, Tag(kActData, a.chunk, a.mb))};
        break;
      }
      case ActionKind::kForward: {
        wait_gathered(a.chunk);
        waited("wait-gather", "comm");
        at::Tensor input;
        if (stage == 0) {
          input = inputs[a.mb];
        } else if ((stage - 1) % im.pp == me) {
          input = im.out.at({a.chunk - 1, a.mb});
          if (!train) im.out.erase({a.chunk - 1, a.mb});
        } else {
          auto& rv = im.act_recv.at(cm);
          rv.second->Wait();
          waited("wait-recv", "p2p");
          input = rv.first;
          im.act_recv.erase(cm);
        }
        at::Tensor xin = stage == 0 ? input : input.detach().requires_grad_(true);
        ChunkRun run;
        {
          // A recomputed chunk builds no graph now; B runs the forward again.
          c10::AutoGradMode grad_mode(train && !schedule.Recompute(me, a.chunk));
          run = run_chunk(a.chunk, a.mb, xin);
        }
        if (stage == im.stages - 1) loss_sum += run.y.item<double>();
        if (!train) {
          if (stage != im.stages - 1) im.out[cm] = run.y;
          break;
        }
        im.x_in[cm] = xin;
        im.out[cm] = run.y;
        if (run.head.defined()) im.cut[cm] = {run.head, run.cut};
        // Post the receive of this output's gradient now: a transfer then completes as soon as
        // the next stage sends, instead of waiting for both sides' progress threads at B time
        // (which on an oversubscribed CPU costs about one peer action per transfer).
        if (stage != im.stages - 1 && (stage + 1) % im.pp != me) {
          const int peer = (me + 1) % im.pp;
          at::Tensor buf = at::empty(run.y.sizes(), run.y.options());
          im.grad_recv[cm] = {buf, ppc.RecvTagged(buf, peer, Tag(kGrad, (stage + 1) / im.pp, a.mb))};
        }
        break;
      }
      case ActionKind::kSendAct: {
        cat = "p2p";
        at::Tensor t = im.out.at(cm).detach().contiguous();
        at::Tensor header = Header(t);
        im.sends.push_back({ppc.SendTagged(header, a.peer, Tag(kActHeader, a.chunk, a.mb)), header});
        im.sends.push_back({ppc.SendTagged(t, a.peer, Tag(kActData, a.chunk, a.mb)), t});
        if (!train) im.out.erase(cm);
        break;
      }
      case ActionKind::kRecvGrad: {
        cat = "p2p";
        const int mine = (a.chunk * im.pp + a.peer - 1) / im.pp;
        if (im.grad_recv.count({mine, a.mb})) break;  // posted with the forward
        at::Tensor buf = at::empty(im.out.at({mine, a.mb}).sizes(), im.out.at({mine, a.mb}).options());
        im.grad_recv[{mine, a.mb}] = {buf, ppc.RecvTagged(buf, a.peer, Tag(kGrad, a.chunk, a.mb))};
        break;
      }
      case ActionKind::kBackward:
      case ActionKind::kBackwardInput: {
        wait_gathered(a.chunk);
        waited("wait-gather", "comm");
        for (int u : im.chunk_units[a.chunk]) PipelineAccess::AllocateGrad(e, u);
        ChunkRun run;
        if (schedule.Recompute(me, a.chunk)) {
          run = run_chunk(a.chunk, a.mb, im.x_in.at(cm));
          trace_.push_back({im.groups->rank(), a.RecomputeName(), "compute", start, now()});
          start = now();
        } else {
          run.y = im.out.at(cm);
          if (im.cut.count(cm)) std::tie(run.head, run.cut) = im.cut.at(cm);
        }
        at::Tensor g;  // undefined on the last virtual stage: y is the loss
        if (stage != im.stages - 1) {
          if ((stage + 1) % im.pp == me) {
            g = im.grad_in.at({a.chunk + 1, a.mb});
            im.grad_in.erase({a.chunk + 1, a.mb});
          } else {
            auto& rv = im.grad_recv.at(cm);
            rv.second->Wait();
            waited("wait-recv", "p2p");
            g = rv.first;
            im.grad_recv.erase(cm);
          }
        }
        auto split = std::make_unique<SplitBackward>();
        const bool defer_w = a.kind == ActionKind::kBackwardInput;
        at::Tensor gx = split->RunInputPass(run.y, g, run.head.defined() ? run.cut : im.x_in.at(cm),
                                            defer_w && im.split_backward);
        if (run.head.defined()) torch::autograd::backward({run.head}, {gx});  // the first unit, now
        if (split->split()) {
          ++split_stats_.split;
          split_stats_.deferred_nodes += split->deferred_nodes();
        } else {
          ++split_stats_.whole;
        }
        if (defer_w) im.weight_pass[cm] = std::move(split);
        if (stage > 0) im.grad_in[cm] = gx;
        im.x_in.erase(cm);
        im.out.erase(cm);
        im.cut.erase(cm);
        break;
      }
      case ActionKind::kSendGrad: {
        cat = "p2p";
        at::Tensor g = im.grad_in.at(cm).contiguous();
        im.sends.push_back({ppc.SendTagged(g, a.peer, Tag(kGrad, a.chunk, a.mb)), g});
        im.grad_in.erase(cm);
        break;
      }
      case ActionKind::kBackwardWeight: {
        // Reads only saved activations and gradients: the chunk's weights may be released.
        for (int u : im.chunk_units[a.chunk]) PipelineAccess::AllocateGrad(e, u);
        auto it = im.weight_pass.find(cm);
        if (it == im.weight_pass.end()) {
          throw std::logic_error(absl::StrCat("pipeline: W(", a.chunk, ",", a.mb, ") without its B"));
        }
        if (it->second->split()) {
          bool released = false;
          for (int u : im.chunk_units[a.chunk]) released = released || units[u]->state() == ShardState::kSharded;
          split_stats_.w_released += released ? 1 : 0;
        }
        it->second->RunWeightPass();
        im.weight_pass.erase(it);
        break;
      }
      case ActionKind::kReduceGrad:
        cat = "comm";
        for (int u : im.chunk_units[a.chunk]) {
          if (!is_deferred(u)) PipelineAccess::ReduceGrad(e, u);
        }
        break;
      case ActionKind::kOptimizerStep: {
        for (auto& s : im.sends) s.first->Wait();
        im.sends.clear();
        // Sum the two copies' gradients of every cross-stage tied tensor, then reduce them.
        std::vector<std::pair<std::shared_ptr<CommWork>, at::Tensor>> ex;
        std::vector<std::pair<at::Tensor, at::Tensor>> adds;
        for (size_t i = 0; i < im.tied.size(); ++i) {
          const auto& t = im.tied[i];
          at::Tensor g = units[t.unit]->flat()->grad_full().narrow(0, t.offset, t.numel);
          at::Tensor mine = g.clone(), theirs = at::empty_like(g);
          ex.push_back({ppc.SendTagged(mine, t.peer, Tag(kTied, 0, static_cast<int>(i))), mine});
          ex.push_back({ppc.RecvTagged(theirs, t.peer, Tag(kTied, 0, static_cast<int>(i))), theirs});
          adds.push_back({g, theirs});
        }
        for (auto& w : ex) w.first->Wait();
        for (auto& ga : adds) ga.first.add_(ga.second);
        for (int u : im.deferred_units) PipelineAccess::ReduceGrad(e, u);
        break;
      }
    }
    if (a.kind != ActionKind::kOptimizerStep) trace_.push_back({im.groups->rank(), a.ToString(), cat, start, now()});
    if (im.measure_heap) split_stats_.heap_peak_growth = std::max(split_stats_.heap_peak_growth, heap() - heap0);
  }
  if (!train) {
    for (auto& snd : im.sends) snd.first->Wait();
    im.sends.clear();
    // The last stage's ranks (one per data-parallel replica) hold the losses.
    const ParallelConfig& cfg = im.groups->config();
    StepResult r;
    r.loss = SumOverRanks(im.groups->world(), loss_sum) / (cfg.zero * cfg.dp);
    return r;
  }
  const double finish_start = now();
  StepResult r = PipelineAccess::FinishStep(e, loss_sum, ppc, marks);
  trace_.push_back({im.groups->rank(), "OPT", "compute", finish_start, now()});
  return r;
}

}  // namespace scheduler
}  // namespace zeropp
