#include "benchmarks/baseline_3d/tp_ops.h"

#include <ATen/TensorOperators.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/log.h>
#include <ATen/ops/zeros_like.h>
#include <torch/csrc/autograd/custom_function.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <vector>

#include "zeropp/cli/proc_status.h"

namespace zeropp {
namespace baseline3d {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

std::atomic<int64_t> g_tp_wait_ns{0};
std::atomic<bool> g_log_on{false};
std::mutex g_log_mu;
std::vector<TpWait> g_log;  // guarded by g_log_mu

int64_t Ns(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

// Waits for a TP collective, adding the wall time to this process's TP wait (and, while logging,
// the wait's interval, the process CPU at its ends and `phase` to the log; the CPU clock is read
// only then).
template <typename Work>
void Waited(Work&& w, TpWait::Phase phase) {
  const bool log = g_log_on.load(std::memory_order_relaxed);
  const int64_t cpu0 = log ? cli::ProcessCpuNs() : 0;
  const auto t0 = std::chrono::steady_clock::now();
  w->Wait();
  const auto t1 = std::chrono::steady_clock::now();
  const int64_t cpu1 = log ? cli::ProcessCpuNs() : 0;
  g_tp_wait_ns += std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count();
  if (log) {
    std::lock_guard<std::mutex> lock(g_log_mu);
    g_log.push_back({Ns(t0), Ns(t1), cpu0, cpu1, phase});
  }
}

at::Tensor AllReduced(const at::Tensor& x, Communicator& tp, TpWait::Phase phase) {
  at::Tensor y = x.detach().contiguous().clone();
  Waited(tp.AllReduce(y), phase);
  return y;
}

Communicator& Comm(AutogradContext* ctx) {
  return *reinterpret_cast<Communicator*>(ctx->saved_data["tp"].toInt());
}

struct CopyToTpFn : torch::autograd::Function<CopyToTpFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t tp) {
    ctx->saved_data["tp"] = tp;
    return x.view_as(x);
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    return {AllReduced(g[0], Comm(ctx), TpWait::kBackward), at::Tensor()};
  }
};

struct ReduceFromTpFn : torch::autograd::Function<ReduceFromTpFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t tp) {
    ctx->saved_data["tp"] = tp;
    return AllReduced(x, *reinterpret_cast<Communicator*>(tp), TpWait::kForward);
  }
  static variable_list backward(AutogradContext* /*ctx*/, variable_list g) { return {g[0], at::Tensor()}; }
};

// Along dim 0: all-gather [n, ...] -> [tp * n, ...]; reduce-scatter [tp * n, ...] -> [n, ...].
at::Tensor SeqAllGather(const at::Tensor& x, Communicator& tp, TpWait::Phase phase) {
  std::vector<int64_t> shape = x.sizes().vec();
  shape[0] *= tp.size();
  at::Tensor out = at::empty(shape, x.options());
  Waited(tp.AllGather(out, x.detach().contiguous()), phase);  // the comm thread must see no autograd
  return out;
}
at::Tensor SeqReduceScatter(const at::Tensor& x, Communicator& tp, TpWait::Phase phase) {
  std::vector<int64_t> shape = x.sizes().vec();
  shape[0] /= tp.size();
  at::Tensor out = at::empty(shape, x.options());
  Waited(tp.ReduceScatter(out, x.detach().contiguous()), phase);
  return out;
}

struct GatherFromSeqFn : torch::autograd::Function<GatherFromSeqFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t tp) {
    ctx->saved_data["tp"] = tp;
    return SeqAllGather(x, *reinterpret_cast<Communicator*>(tp), TpWait::kForward);
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    return {SeqReduceScatter(g[0], Comm(ctx), TpWait::kBackward), at::Tensor()};
  }
};

struct ReduceScatterToSeqFn : torch::autograd::Function<ReduceScatterToSeqFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t tp) {
    ctx->saved_data["tp"] = tp;
    return SeqReduceScatter(x, *reinterpret_cast<Communicator*>(tp), TpWait::kForward);
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    return {SeqAllGather(g[0], Comm(ctx), TpWait::kBackward), at::Tensor()};
  }
};

struct ColumnParallelLinearSeqFn : torch::autograd::Function<ColumnParallelLinearSeqFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x_local, const at::Tensor& w, const at::Tensor& b,
                            int64_t tp) {
    ctx->saved_data["tp"] = tp;
    ctx->save_for_backward({x_local, w});  // the local shard only: backward gathers it again
    return at::linear(SeqAllGather(x_local, *reinterpret_cast<Communicator*>(tp), TpWait::kForward), w, b);
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    const auto saved = ctx->get_saved_variables();
    Communicator& tp = Comm(ctx);
    const at::Tensor total = SeqAllGather(saved[0], tp, TpWait::kBackward);
    const at::Tensor g2 = g[0].reshape({-1, g[0].size(-1)});
    const at::Tensor grad_w = g2.t().mm(total.reshape({-1, total.size(-1)}));
    const at::Tensor grad_b = g2.sum(0);
    const at::Tensor grad_x = SeqReduceScatter(g[0].matmul(saved[1]), tp, TpWait::kBackward);
    return {grad_x, grad_w, grad_b, at::Tensor()};
  }
};

int64_t Handle(Communicator& tp) { return reinterpret_cast<int64_t>(&tp); }

}  // namespace

double TpWaitSeconds() { return g_tp_wait_ns.load() / 1e9; }

void SetTpWaitLogging(bool on) { g_log_on = on; }

std::vector<TpWait> TakeTpWaitLog() {
  std::lock_guard<std::mutex> lock(g_log_mu);
  std::vector<TpWait> out;
  out.swap(g_log);
  return out;
}

at::Tensor CopyToTp(const at::Tensor& x, Communicator& tp) { return CopyToTpFn::apply(x, Handle(tp)); }

at::Tensor ReduceFromTp(const at::Tensor& x, Communicator& tp) { return ReduceFromTpFn::apply(x, Handle(tp)); }

at::Tensor GatherFromSeq(const at::Tensor& x, Communicator& tp) { return GatherFromSeqFn::apply(x, Handle(tp)); }

at::Tensor ReduceScatterToSeq(const at::Tensor& x, Communicator& tp) {
  return ReduceScatterToSeqFn::apply(x, Handle(tp));
}

at::Tensor ColumnParallelLinearSeq(const at::Tensor& x_local, const at::Tensor& weight, const at::Tensor& bias,
                                   Communicator& tp) {
  return ColumnParallelLinearSeqFn::apply(x_local, weight, bias, Handle(tp));
}

at::Tensor VocabParallelCrossEntropy(const at::Tensor& local, const at::Tensor& targets, int64_t vocab_begin,
                                     Communicator& tp) {
  const int64_t n = local.size(0), v = local.size(1);
  // The row maxima over the whole vocabulary (a constant for the gradient): all-gather the local
  // maxima, take the max.
  at::Tensor lmax = std::get<0>(local.detach().max(1)).contiguous();
  at::Tensor all = at::empty({tp.size() * n}, lmax.options());
  Waited(tp.AllGather(all, lmax), TpWait::kForward);
  const at::Tensor gmax = std::get<0>(all.view({tp.size(), n}).max(0));
  const at::Tensor z = local - gmax.unsqueeze(1);
  const at::Tensor sum_exp = ReduceFromTp(at::exp(z).sum(1), tp);
  const at::Tensor in_range = (targets >= vocab_begin) & (targets < vocab_begin + v);
  const at::Tensor idx = (targets - vocab_begin).clamp(0, v - 1).unsqueeze(1);
  const at::Tensor target_z = ReduceFromTp(z.gather(1, idx).squeeze(1) * in_range.to(z.scalar_type()), tp);
  return (at::log(sum_exp) - target_z).mean();
}

}  // namespace baseline3d
}  // namespace zeropp
