// engine.h: the sharded training state of one rank, for an unmodified torch::nn::Sequential.
//
// The Sequential's children are grouped into scheduling units (planned by PlanUnits,
// unit_plan.h); each unit this rank holds has its parameters in one padded flat buffer sharded
// across the zero group (FlatParam). The engine schedules nothing itself: the executor
// (scheduler/runtime/executor.h) runs a schedule and drives units through the public
// transitions below, and the engine keeps the memory accounting inside those transitions.
//   shard state : Unshard -> WaitForUnshard -> Reshard     (scheduling_unit.h's table)
//   grad state  : AllocateGrad -> ReduceGrad -> (reduction lands) FinishReductions
//   step        : BeginStep ... FinishStep: gradients averaged over the zero group, then across
//                 replicas (dp: all-reduce; zero1: reduce-scatter, each replica updating 1/dp of
//                 the shard, then all-gather); global-norm clipping; AdamW on fp32 master shards
//                 (under zero1 a separate master and the moments hold only the replica's 1/dp).
// Tied parameters (one tensor registered in two children) belong to the first unit that holds
// them on this rank; later units that use them depend on it (SchedulingUnit::deps). Frozen
// parameters are sharded but never updated. Buffers are broadcast from rank 0 at construction.
//
// Construction is collective: call it on every rank with the same model, options and plan. A
// rank with a different model (names, shapes, dtypes, unit layout) makes every rank throw the
// same message at construction, before any other collective. Users do not construct engines:
// zeropp.h's Trainer does.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "zeropp/comm_stats.h"
#include "zeropp/device.h"
#include "zeropp/engine_options.h"
#include "zeropp/process_groups.h"
#include "zeropp/scheduling_unit.h"
#include "offload/host_pool.h"
#include "offload/io_engine.h"
#include "offload/swap_manager.h"
#include "zeropp/sharded_adamw.h"
#include "zeropp/unit_plan.h"

namespace torch {
namespace nn {
class Module;
class SequentialImpl;
}  // namespace nn
}  // namespace torch

namespace zeropp {

// Bytes held per rank, from the engine's own accounting.
struct MemoryStats {
  int64_t param_shard_bytes = 0;   // compute-dtype shards (the fp32 master itself when fp32)
  int64_t master_bytes = 0;        // fp32 master shards beyond the above (0 when fp32)
  int64_t grad_shard_bytes = 0;    // reduce-dtype gradient shards
  int64_t optim_state_bytes = 0;   // AdamW moments over the owned range
  int64_t unsharded_live_bytes = 0;
  int64_t unsharded_peak_bytes = 0;
  int64_t grad_unsharded_live_bytes = 0;
  int64_t grad_unsharded_peak_bytes = 0;
  int64_t nvme_bytes = 0;          // of the above model state, held in offload files
  int64_t host_pool_bytes = 0;     // host pool in use + cached (cpu tier and I/O staging)
  offload::SwapStats io;           // bytes read/written by the offload tiers, time waited
  DeviceMemory device;             // the GPU's caching allocator (zeros on cpu)
  int64_t ModelStateBytes() const {
    return param_shard_bytes + master_bytes + grad_shard_bytes + optim_state_bytes;
  }
  std::string ToString() const;
};

struct StepResult {
  int64_t step = 0;
  double loss = 0;       // mean over micro-batches and data-parallel ranks
  double grad_norm = 0;  // global 2-norm before clipping
  CommStats zero_comm;   // this step's traffic in the zero group
  CommStats dp_comm;     // and across replicas
  int64_t gathers = 0;   // all-gathers issued this step
  int64_t reduce_scatters = 0;  // gradient reductions (in a zero group of one: into the shard, no collective)
  // Time the training thread waited for all-gathers (exposed), and the comm thread's all-gather
  // time; 1 - exposed/busy is the share of all-gather time hidden behind compute.
  int64_t gather_wait_us = 0;
  int64_t gather_busy_us = 0;
  int64_t reduce_wait_us = 0;  // time the training thread waited for gradient reductions
  // The step's end (FinishStep: pending reductions, clipping, AdamW, write-backs) on the training
  // thread, and the part of it spent waiting on offload I/O.
  int64_t finish_us = 0;
  int64_t finish_io_wait_us = 0;
  // Parts of finish_us, for an offloaded optimizer's step end: the gradient pass (pending
  // reductions, averaging across replicas, the norm, read once), the time the training thread
  // waited for gradients on their way to the host, and the AdamW updates (host or device kernels as
  // issued; on the host, their run time) over `updated_params` parameters.
  int64_t finish_norm_us = 0;
  int64_t finish_grad_wait_us = 0;
  int64_t finish_adamw_us = 0;
  int64_t updated_params = 0;
};

using LossFn = std::function<at::Tensor(const at::Tensor& output, const at::Tensor& target)>;

// The offload tier of a target other than kNone.
inline offload::Tier ToTier(OffloadTarget t) {
  return t == OffloadTarget::kNvme ? offload::Tier::kNvme : offload::Tier::kCpu;
}

// Counters at the start of a step, so that FinishStep reports this step's share.
struct StepMarks {
  CommStats zero, dp;
  int64_t gathers = 0, reduce_scatters = 0, gather_wait_us = 0, reduce_wait_us = 0;
};

class Engine {
 public:
  // Throws std::invalid_argument (bad model or options, same on every rank) or CommError.
  // `plan` says which children form each unit and which tensors are tied (PlanUnits, made from
  // this very model); `owned[u]` says whether this rank
  // materialises unit u (a pipeline stage holds some; empty = all). A tensor tied between an
  // owned and a non-owned unit is held by both stages (the executor combines their gradients).
  Engine(std::shared_ptr<torch::nn::Module> model, ProcessGroups& groups, EngineOptions options,
         const UnitPlan& plan, std::vector<bool> owned = {});
  ~Engine();

  // --- Transitions, called by the executor on the training thread. Each checks its source state.
  // Shard state kSharded -> kUnsharding: starts the all-gather (comm thread). Non-blocking.
  void Unshard(int u);
  // kUnsharding -> kUnsharded: blocks until the gather landed; the wait counts as exposed time.
  void WaitForUnshard(int u);
  // kUnsharded (or kUnsharding, after waiting) -> kSharded: frees the gathered buffer.
  void Reshard(int u);
  // Starts reading an offloaded shard ahead of its Unshard (no-op when not offloaded or gathered).
  void PrefetchShard(int u);
  // Grad state kNone -> kAccumulating: allocates the unsharded gradient autograd accumulates into
  // (no-op when already accumulating).
  void AllocateGrad(int u);
  // kAccumulating -> kReducing: starts the reduce-scatter of the unit's gradient and frees the
  // unsharded buffer; the shard is updated when the reduction lands (FinishReductions). No-op for
  // a unit that is not accumulating.
  void ReduceGrad(int u);
  // The unsharded gradient of a unit in grad state kAccumulating (throws std::logic_error else).
  at::Tensor UnshardedGrad(int u);
  // Lands finished reductions (all of them when `block`; otherwise waits for the oldest beyond
  // EngineOptions::max_pending_reductions): kReducing -> kNone.
  void FinishReductions(bool block);
  // Runs unit u's children on x (its shard state must be kUnsharded, with its deps).
  at::Tensor RunUnit(int u, const at::Tensor& x);
  // Activation offload of recomputed units (offload.activations): parks *saved (released),
  // starts reading it back ahead of use, and returns it (requires_grad for u > 0).
  void OffloadActivation(int u, at::Tensor* saved);
  void PrefetchActivation(int u);
  at::Tensor FetchActivation(int u);

  // Snapshots the counters and resets every unit's gradient-shard bookkeeping.
  StepMarks BeginStep();
  // Cross-replica reduction, global-norm clipping (over `norm_groups` besides zero/dp), AdamW,
  // write-back and the loss average (summed over `loss_sum_groups` first). Collective.
  StepResult FinishStep(double loss_sum, const std::vector<Communicator*>& loss_sum_groups,
                        const std::vector<Communicator*>& norm_groups, const StepMarks& marks);

  // Checkpoint access, unit by unit in order (units this rank holds, with parameters): the
  // FlatParam, the flat range [own_begin, own_end) this rank's optimizer owns, the fp32 master
  // (flat coordinates flat.master_begin() ..: the shard, or under ZeRO-1 with 16-bit parameters the
  // owned range) and the AdamW moments over the owned range ([2, own]: exp_avg, exp_avg_sq). With
  // `modify`, both are written back and the compute shard is refreshed from the master. Both are
  // host tensors (copies of device state, written back after `fn` with `modify`). Call between
  // steps (every unit sharded). Local, except that `modify` under ZeRO-1 with 16-bit parameters
  // all-gathers each refreshed compute shard over the dp group.
  using StateVisitor = std::function<void(const FlatParam& flat, int64_t own_begin, int64_t own_end,
                                          const at::Tensor& master, const at::Tensor& moments)>;
  void VisitState(bool modify, const StateVisitor& fn);
  int64_t optimizer_step() const { return optimizer_.step(); }
  void set_optimizer_step(int64_t step) { optimizer_.set_step(step); }
  // Identity of the model (every parameter's name, shape, dtype and frozen flag, in order): the
  // same on every rank and for every layout of the same model. Hex xxh64.
  std::string ModelFingerprint() const;

  // Parameters split by the model's own modules across `group` (a tensor-parallel baseline): the
  // global gradient norm adds `group`'s contributions, a parameter for which `replicated(name)`
  // holds counting on the group's rank 0 only; with `sum_replicated_grads` (sequence
  // parallelism) those parameters' gradients are summed over `group` before the optimizer. The
  // engine's names are "CHILD.KEY". Call before the first step. Local.
  void SetModelParallel(Communicator* group, const std::function<bool(const std::string&)>& replicated,
                        bool sum_replicated_grads);

  // The learning rate of the next FinishStep (learning-rate schedules).
  void SetLearningRate(float lr) { optimizer_.set_lr(lr); }

  // Full fp32 values of every unique parameter this rank holds, in the model's named_parameters
  // order. Collective over the zero group, and under ZeRO-1 with an fp32 master beside 16-bit
  // parameters over the dp group too (each replica's master holds only the part it updates).
  std::vector<std::pair<std::string, at::Tensor>> FullParameters();

  MemoryStats Memory() const;
  int num_units() const { return static_cast<int>(units_.size()); }
  const SchedulingUnit& unit(int k) const { return *units_[k]; }
  bool owned(int k) const { return owned_[k]; }
  int64_t num_parameters() const;  // unique, unpadded, held by this rank
  const EngineOptions& options() const { return options_; }
  torch::nn::SequentialImpl& model() { return *seq_; }

 private:
  // Waits for `work`, counting the time as exposed reduction/collective wait (StepResult).
  void CountedWait(const std::shared_ptr<CommWork>& work);
  // Unit u's reduced gradient into its shard: kReducing -> kNone, its held unsharded bytes freed.
  void LandReduction(int u, const at::Tensor& reduced, int64_t held_bytes);
  void BuildUnits(const UnitPlan& plan);
  void AgreeOnModel();
  void InitializeShards();
  void ReleaseUnownedParameters();
  void SetUpOffload();
  void EstimateAndCheckBudget();
  std::string Where() const;
  c10::Device MasterDevice() const;  // where fp32 master shards and AdamW moments live

  std::shared_ptr<torch::nn::SequentialImpl> seq_;
  ProcessGroups& groups_;
  EngineOptions options_;
  // Offload machinery (declared before the units so that it outlives them).
  std::unique_ptr<offload::IoEngine> io_;
  std::unique_ptr<offload::HostPool> host_pool_;
  std::unique_ptr<offload::SwapManager> swap_;
  std::vector<std::unique_ptr<SchedulingUnit>> units_;
  std::vector<int> act_slot_;                      // per unit: swap slot of its saved input
  std::vector<std::vector<int64_t>> act_shape_;    // the shape that slot was made for
  std::vector<std::string> param_order_;  // unique parameter names, model order
  std::vector<bool> owned_;
  ShardedAdamW optimizer_;

  struct PendingReduce {
    int unit;
    std::shared_ptr<CommWork> work;
    at::Tensor out;
    int64_t held_bytes;
  };
  std::vector<PendingReduce> pending_;
  Communicator* mp_group_ = nullptr;  // SetModelParallel
  bool mp_sum_replicated_ = false;
  int64_t unsharded_live_ = 0, unsharded_peak_ = 0;
  int64_t grad_live_ = 0, grad_peak_ = 0;
  int64_t reduce_scatters_ = 0;
  int64_t gather_wait_us_ = 0;
  int64_t reduce_wait_us_ = 0;  // waits on reductions and the step's tail collectives
};

}  // namespace zeropp
