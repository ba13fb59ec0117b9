#include "scheduler/runtime/executor.h"

#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <exception>
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
#include "scheduler/runtime/split_backward.h"
#include "scheduler/validator.h"

namespace zeropp {

namespace scheduler {
namespace {

using Clock = std::chrono::steady_clock;

enum TagKind { kActHeader = 0, kActData = 1, kGrad = 2, kTied = 3 };
int Tag(TagKind kind, int chunk, int mb) { return (kind << 26) | ((chunk & 63) << 20) | (mb & 0xFFFFF); }
// An activation whose shape differs from its link's reference (see Impl::act_link) travels under
// this micro-batch bit, so it never matches a receive posted with the reference shape.
constexpr int kFreshShape = 1 << 19;

constexpr int kHeader = 10;  // dtype, ndim, up to 8 dims

at::Tensor Header(const at::Tensor& t) {
  at::Tensor h = at::zeros({kHeader}, at::TensorOptions().dtype(at::kLong));
  int64_t* p = h.data_ptr<int64_t>();
  p[0] = static_cast<int64_t>(t.scalar_type());
  p[1] = t.dim();
  for (int64_t d = 0; d < t.dim() && d < kHeader - 2; ++d) p[2 + d] = t.size(d);
  return h;
}

// An uninitialised tensor of the dtype and shape a header (as Header writes it) describes.
at::Tensor EmptyFromHeader(const std::vector<int64_t>& h, c10::Device device) {
  return at::empty(std::vector<int64_t>(h.begin() + 2, h.begin() + 2 + h[1]),
                   at::TensorOptions().device(device).dtype(static_cast<at::ScalarType>(h[0])));
}

}  // namespace

struct Executor::Impl {
  ProcessGroups* groups = nullptr;
  int r = 0, pp = 1, v = 1, stages = 1;
  bool split_backward = true;
  bool measure_heap = false;
  std::vector<std::vector<int>> chunk_units;  // per chunk of this rank
  // Per schedule (train, eval): for each Gather action, the chunk of the next Gather (or -1).
  std::vector<int> next_gather_train, next_gather_eval;
  bool offload_activations = false;
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
  std::map<std::pair<int, int>, std::pair<at::Tensor, std::shared_ptr<CommWork>>> grad_recv;
  // Activations arrive as a header (dtype and shape) and the data. A receive must not block on the
  // header (it would stall the W's and other work a zero-bubble schedule puts before the consuming
  // forward), so each link keeps a reference header: that of its first message, usable from the
  // next step on (both sides count steps alike). Then the receiver posts the data receive at once
  // with the reference shape and waits for the header only when the forward needs the input; a
  // sender whose shape differs from the reference sends a placeholder of the reference shape (so the
  // posted receive completes) and the data under kFreshShape, as every message of the first step
  // travels. Keyed by (peer, sender's chunk).
  struct LinkReference {
    std::vector<int64_t> header;
    int64_t since_run = 0;
  };
  std::map<std::pair<int, int>, LinkReference> act_link;
  int64_t run_index = 0;
  const LinkReference* UsableReference(int peer, int chunk) const {
    auto it = act_link.find({peer, chunk});
    return it != act_link.end() && it->second.since_run < run_index ? &it->second : nullptr;
  }
  struct PendingAct {
    at::Tensor header;
    std::shared_ptr<CommWork> header_work;
    at::Tensor data;  // posted with the reference shape; undefined while the link has no usable reference
    std::shared_ptr<CommWork> data_work;
    int peer = 0, chunk = 0, mb = 0;
  };
  std::map<std::pair<int, int>, PendingAct> act_pending;
  std::vector<std::pair<std::shared_ptr<CommWork>, at::Tensor>> sends;
};

namespace {

std::vector<int> NextGathers(const Schedule& s, int rank) {
  const auto& acts = s.ranks[rank];
  std::vector<int> next(acts.size(), -1);
  int upcoming = -1;
  for (size_t i = acts.size(); i-- > 0;) {
    if (acts[i].kind == ActionKind::kGather) {
      next[i] = upcoming;
      upcoming = acts[i].chunk;
    }
  }
  return next;
}

}  // namespace

Executor::Executor(Engine& engine, ProcessGroups& groups, Schedule schedule, const UnitPlan& plan,
                   std::vector<int> stage_of_unit, ExecutorOptions options)
    : impl_(std::make_unique<Impl>()), engine_(engine), schedule_(std::move(schedule)),
      stage_of_unit_(std::move(stage_of_unit)) {
  Impl& im = *impl_;
  im.groups = &groups;
  const ParallelConfig& cfg = groups.config();
  im.pp = cfg.pp;
  im.v = schedule_.v;
  im.r = cfg.CoordOf(groups.rank()).pp_index;
  im.stages = im.pp * im.v;
  im.split_backward = options.split_backward;
  im.measure_heap = options.measure_heap;
  if (schedule_.pp != im.pp) {
    throw std::invalid_argument(absl::StrCat("executor: schedule ", schedule_.name, " has pp(", schedule_.pp,
                                             ") but the layout has pp(", im.pp, ")"));
  }
  if (schedule_.m >= kFreshShape) {
    throw std::invalid_argument(absl::StrCat("executor: ", schedule_.m, " micro-batches; at most ", kFreshShape - 1,
                                             " are supported"));
  }
  ValidationReport rep = Validate(schedule_);
  if (!rep.ok) throw std::logic_error(rep.error);
  eval_schedule_ = ForwardOnly(schedule_);
  rep = Validate(eval_schedule_);
  if (!rep.ok) throw std::logic_error(rep.error);
  im.next_gather_train = NextGathers(schedule_, im.r);
  im.next_gather_eval = NextGathers(eval_schedule_, im.r);
  const int pp = im.pp, me = im.r;
  const int k = engine_.num_units();
  if (static_cast<int>(stage_of_unit_.size()) != k) {
    throw std::invalid_argument(absl::StrCat("executor: ", stage_of_unit_.size(), " stage entries for ", k, " units"));
  }
  im.chunk_units.resize(im.v);
  for (int i = 0; i < k; ++i) {
    if (stage_of_unit_[i] < 0 || stage_of_unit_[i] >= im.stages) {
      throw std::invalid_argument(absl::StrCat("executor: unit ", i, " on virtual stage ", stage_of_unit_[i],
                                               ", expected 0..", im.stages - 1));
    }
    if (engine_.owned(i) != (stage_of_unit_[i] % pp == me)) {
      throw std::invalid_argument(absl::StrCat("executor: unit ", i, " is on virtual stage ", stage_of_unit_[i],
                                               " but the engine ", engine_.owned(i) ? "holds" : "does not hold", " it"));
    }
    if (engine_.owned(i)) im.chunk_units[stage_of_unit_[i] / pp].push_back(i);
  }
  for (int i = 0; i < k; ++i) {
    if (!engine_.owned(i)) continue;
    const int ci = stage_of_unit_[i] / pp;
    for (int d : engine_.unit(i).deps()) {
      const int cd = stage_of_unit_[d] / pp;
      const auto& needs = schedule_.Needs(ci);
      if (cd != ci && std::find(needs.begin(), needs.end(), cd) == needs.end()) {
        throw std::invalid_argument(absl::StrCat("executor: unit ", i, " uses a tensor of unit ", d, " on chunk ", cd,
                                                 " of the same rank, which the schedule does not gather with chunk ",
                                                 ci, " (its needs)"));
      }
    }
  }
  im.offload_activations = engine_.options().offload.activations != OffloadTarget::kNone;
  if (im.offload_activations) {
    for (int c = 0; c < im.v; ++c) {
      if (im.chunk_units[c].size() != 1 || im.pp != 1) {
        throw std::invalid_argument(
            "executor: activation offload parks one saved input per unit, so it needs pp=1 (one unit per chunk)");
      }
    }
  }
  // Tensors held by this rank and by another pipeline rank (unit_plan.h): their gradients are
  // summed between the two before reduction.
  for (const auto& [ti, peer] : CrossStageTies(plan, stage_of_unit_, pp, me)) {
    const TiedTensor& t = plan.tied[ti];
    const int holder = TiedHolder(t, [&] {
      std::vector<bool> owned(k);
      for (int i = 0; i < k; ++i) owned[i] = engine_.owned(i);
      return owned;
    }());
    const FlatParam* f = holder >= 0 ? engine_.unit(holder).flat() : nullptr;
    if (!f) throw std::logic_error("executor: tied tensor " + t.name + " has no holder on this rank");
    for (const auto& e : f->entries()) {
      if (e.param.unsafeGetTensorImpl() != t.impl) continue;
      im.tied.push_back({holder, e.offset, e.numel, peer});
      if (std::find(im.deferred_units.begin(), im.deferred_units.end(), holder) == im.deferred_units.end()) {
        im.deferred_units.push_back(holder);
      }
    }
  }
}

Executor::~Executor() = default;

StepResult Executor::Step(const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& targets,
                                  const LossFn& loss_fn) {
  return Run(schedule_, /*train=*/true, inputs, targets, loss_fn);
}

double Executor::Evaluate(const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& targets,
                                  const LossFn& loss_fn) {
  c10::NoGradGuard no_grad;
  return Run(eval_schedule_, /*train=*/false, inputs, targets, loss_fn).loss;
}

StepResult Executor::Run(const Schedule& schedule, bool train, const std::vector<at::Tensor>& inputs,
                                 const std::vector<at::Tensor>& targets, const LossFn& loss_fn) {
  Impl& im = *impl_;
  Engine& e = engine_;
  const std::vector<int>& next_gather = &schedule == &schedule_ ? im.next_gather_train : im.next_gather_eval;
  Communicator& ppc = im.groups->pp();
  const int m = schedule_.m;
  const int me = im.r;
  const bool first_rank = me == 0, last_rank = me == im.pp - 1;
  if ((first_rank && static_cast<int>(inputs.size()) != m) || (last_rank && static_cast<int>(targets.size()) != m)) {
    throw std::invalid_argument(absl::StrCat("Step: got ", inputs.size(),
                                             " inputs and ", targets.size(), " targets, expected ", m,
                                             " micro-batches (the first stage needs inputs, the last targets)"));
  }
  // An evaluation pass takes no step: nothing to snapshot.
  const StepMarks marks = train ? e.BeginStep() : StepMarks{};
  auto heap = [] {
    const struct mallinfo2 mi = mallinfo2();
    return static_cast<int64_t>(mi.uordblks + mi.hblkhd);
  };
  const int64_t heap0 = im.measure_heap ? heap() : 0;
  trace_.clear();
  split_stats_ = {};
  ++im.run_index;
  const auto t0 = Clock::now();
  trace_origin_us_ = std::chrono::duration_cast<std::chrono::microseconds>(t0.time_since_epoch()).count();
  auto now = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  double loss_sum = 0;
  StepResult result;

  // The units a computation of chunk c touches: its own and those of the chunks it needs (ties).
  auto touched = [&](int c) {
    std::vector<int> us = im.chunk_units[c];
    for (int d : schedule.Needs(c)) us.insert(us.end(), im.chunk_units[d].begin(), im.chunk_units[d].end());
    return us;
  };
  auto wait_gathered = [&](int c) {
    for (int u : touched(c)) {
      if (e.unit(u).state() == ShardState::kUnsharding) e.WaitForUnshard(u);
      if (e.unit(u).state() != ShardState::kUnsharded) {
        throw std::logic_error(absl::StrCat("executor: chunk ", c, " computed while unit ", u, " is ",
                                            ShardStateName(e.unit(u).state())));
      }
    }
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
      r.y = e.RunUnit(us[i], r.y);
      if (i == 0 && us.size() > 1 && c * im.pp + me == 0 && split_first && c10::GradMode::is_enabled()) {
        r.head = r.y;
        r.y = r.cut = r.y.detach().requires_grad_(true);
      }
    }
    if (c * im.pp + me == im.stages - 1) r.y = loss_fn(r.y, targets[mb].to(e.options().device)) / m;
    return r;
  };
  // The input of a forward received from another rank (see Impl::act_link): waits for the header,
  // then for the data posted with the reference shape, or, when the shape differs or the link has no
  // usable reference yet, for the data sent under kFreshShape (after the placeholder, if one was posted).
  auto take_activation = [&](std::pair<int, int> key) {
    Impl::PendingAct pa = std::move(im.act_pending.at(key));
    im.act_pending.erase(key);
    pa.header_work->Wait();
    const int64_t* hp = pa.header.data_ptr<int64_t>();
    std::vector<int64_t> h(hp, hp + kHeader);
    im.act_link.insert({{pa.peer, pa.chunk}, Impl::LinkReference{h, im.run_index}});  // the first message's
    if (pa.data_work) {
      pa.data_work->Wait();
      if (im.act_link.at({pa.peer, pa.chunk}).header == h) return pa.data;
    }
    at::Tensor data = EmptyFromHeader(h, e.options().device);
    ppc.RecvTagged(data, pa.peer, Tag(kActData, pa.chunk, pa.mb | kFreshShape))->Wait();
    return data;
  };
  auto is_deferred = [&](int u) {
    return std::find(im.deferred_units.begin(), im.deferred_units.end(), u) != im.deferred_units.end();
  };

  const std::vector<Action>& actions = schedule.ranks[me];
  for (size_t ai = 0; ai < actions.size(); ++ai) {
    const Action& a = actions[ai];
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
    // An ATen error inside an action is rethrown naming the action and its units (one line); the
    // original, with its backtrace, stays nested for the program's error log.
    try {
    switch (a.kind) {
      case ActionKind::kGather:
        cat = "comm";
        for (int u : im.chunk_units[a.chunk]) {
          if (e.unit(u).state() == ShardState::kSharded) e.Unshard(u);
        }
        // Offloaded shards: start reading the chunk gathered next.
        if (next_gather[ai] >= 0) {
          for (int u : im.chunk_units[next_gather[ai]]) e.PrefetchShard(u);
        }
        break;
      case ActionKind::kRelease:
        cat = "comm";
        for (int u : im.chunk_units[a.chunk]) {
          if (e.unit(u).state() != ShardState::kSharded) e.Reshard(u);
        }
        break;
      case ActionKind::kRecvAct: {
        cat = "p2p";
        // The sender's chunk a.chunk feeds this rank's chunk one virtual stage up.
        const int mine = (a.chunk * im.pp + a.peer + 1) / im.pp;
        Impl::PendingAct pa;
        pa.peer = a.peer;
        pa.chunk = a.chunk;
        pa.mb = a.mb;
        pa.header = at::empty({kHeader}, at::TensorOptions().dtype(at::kLong));
        pa.header_work = ppc.RecvTagged(pa.header, a.peer, Tag(kActHeader, a.chunk, a.mb));
        if (const Impl::LinkReference* ref = im.UsableReference(a.peer, a.chunk)) {
          pa.data = EmptyFromHeader(ref->header, e.options().device);
          pa.data_work = ppc.RecvTagged(pa.data, a.peer, Tag(kActData, a.chunk, a.mb));
        }
        im.act_pending[{mine, a.mb}] = std::move(pa);
        break;
      }
      case ActionKind::kForward: {
        wait_gathered(a.chunk);
        waited("wait-gather", "comm");
        at::Tensor input;
        if (stage == 0) {
          input = inputs[a.mb].to(e.options().device);
        } else if ((stage - 1) % im.pp == me) {
          input = im.out.at({a.chunk - 1, a.mb});
          if (!train) im.out.erase({a.chunk - 1, a.mb});
        } else {
          input = take_activation(cm);
          waited("wait-recv", "p2p");
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
        // A recomputed chunk's saved input goes to the offload tier (the last stage's backward
        // follows at once).
        if (im.offload_activations && schedule.Recompute(me, a.chunk) && stage + 1 < im.stages) {
          e.OffloadActivation(im.chunk_units[a.chunk][0], &im.x_in[cm]);
        }
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
        const int64_t* hp = header.data_ptr<int64_t>();
        std::vector<int64_t> h(hp, hp + kHeader);
        im.sends.push_back({ppc.SendTagged(header, a.peer, Tag(kActHeader, a.chunk, a.mb)), header});
        const Impl::LinkReference* ref = im.UsableReference(a.peer, a.chunk);
        if (ref && ref->header == h) {
          im.sends.push_back({ppc.SendTagged(t, a.peer, Tag(kActData, a.chunk, a.mb)), t});
        } else {
          if (ref) {  // completes the receive posted with the reference shape
            at::Tensor placeholder = EmptyFromHeader(ref->header, t.device());
            im.sends.push_back({ppc.SendTagged(placeholder, a.peer, Tag(kActData, a.chunk, a.mb)), placeholder});
          }
          im.sends.push_back({ppc.SendTagged(t, a.peer, Tag(kActData, a.chunk, a.mb | kFreshShape)), t});
        }
        im.act_link.insert({{a.peer, a.chunk}, Impl::LinkReference{h, im.run_index}});  // the first message's
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
        for (int u : touched(a.chunk)) e.AllocateGrad(u);
        ChunkRun run;
        if (im.offload_activations && schedule.Recompute(me, a.chunk) && stage + 1 < im.stages) {
          if (a.chunk > 0) e.PrefetchActivation(im.chunk_units[a.chunk - 1][0]);
          im.x_in[cm] = e.FetchActivation(im.chunk_units[a.chunk][0]);
        }
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
        for (int u : touched(a.chunk)) e.AllocateGrad(u);
        auto it = im.weight_pass.find(cm);
        if (it == im.weight_pass.end()) {
          throw std::logic_error(absl::StrCat("executor: W(", a.chunk, ",", a.mb, ") without its B"));
        }
        if (it->second->split()) {
          bool released = false;
          for (int u : im.chunk_units[a.chunk]) released = released || e.unit(u).state() == ShardState::kSharded;
          split_stats_.w_released += released ? 1 : 0;
        }
        it->second->RunWeightPass();
        im.weight_pass.erase(it);
        break;
      }
      case ActionKind::kReduceGrad:
        cat = "comm";
        for (int u : im.chunk_units[a.chunk]) {
          if (!is_deferred(u)) e.ReduceGrad(u);
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
          at::Tensor g = e.UnshardedGrad(t.unit).narrow(0, t.offset, t.numel);
          at::Tensor mine = g.clone(), theirs = at::empty_like(g);
          ex.push_back({ppc.SendTagged(mine, t.peer, Tag(kTied, 0, static_cast<int>(i))), mine});
          ex.push_back({ppc.RecvTagged(theirs, t.peer, Tag(kTied, 0, static_cast<int>(i))), theirs});
          adds.push_back({g, theirs});
        }
        for (auto& w : ex) w.first->Wait();
        for (auto& ga : adds) ga.first.add_(ga.second);
        for (int u : im.deferred_units) e.ReduceGrad(u);
        // The optimizer runs here: replicas, global-norm clipping over all stages, AdamW.
        if (train) result = e.FinishStep(loss_sum, {&ppc}, {&ppc}, marks);
        break;
      }
    }
    } catch (const c10::Error& err) {
      std::string first = err.what_without_backtrace();
      first = first.substr(0, first.find('\n'));
      std::string units;
      if (a.chunk >= 0) {
        for (int u : im.chunk_units[a.chunk]) absl::StrAppend(&units, units.empty() ? "" : ",", u);
      }
      std::throw_with_nested(std::runtime_error(absl::StrCat("[rank ", im.groups->rank(), "] action ", a.ToString(),
                                                             " (units ", units, ") failed: ", first)));
    }
    trace_.push_back({im.groups->rank(), a.ToString(), cat, start, now()});
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
  return result;
}

bool Executor::ReducesAtStepEnd(int u) const {
  return std::find(impl_->deferred_units.begin(), impl_->deferred_units.end(), u) != impl_->deferred_units.end();
}

}  // namespace scheduler
}  // namespace zeropp
