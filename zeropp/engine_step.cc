// engine_step.cc: the Engine's step boundary: BeginStep marks the counters, FinishStep lands the
// gradient reductions, averages across replicas, clips by the global norm, runs AdamW on each
// owned shard (overlapping offload I/O) and reports the step's counters (StepResult).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <stdexcept>
#include <vector>

#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/zeros.h>

#include "absl/strings/str_cat.h"
#include "zeropp/engine.h"
#include "zeropp/host_staging.h"

namespace zeropp {

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

}  // namespace zeropp
