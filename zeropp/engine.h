// engine.h: ZeRO-3 training of an unmodified torch::nn::Sequential.
//
// The Sequential's children are grouped into scheduling units (EngineOptions::units); each
// unit's parameters become one padded flat buffer sharded across the zero group (FlatParam). The
// engine drives units itself, micro-batch by micro-batch:
//   forward  : unit k computes while units k+1..k+prefetch_depth are all-gathered on the comm
//              thread; after its forward a unit is resharded (reshard_after_forward) except the
//              last, whose backward follows at once.
//   backward : units in reverse, each re-gathered with prefetch of the next; the unit's gradient
//              (accumulated by autograd straight into its flat gradient buffer) is reduce-scattered
//              as soon as its backward and that of every unit sharing its tied parameters is done,
//              overlapping the next unit's backward.
//   step     : gradients averaged over the zero group, then across replicas (dp: all-reduce;
//              zero1: reduce-scatter, each replica updating 1/dp of the shard, then all-gather);
//              global-norm clipping; AdamW on the fp32 master shards.
// Tied parameters (one tensor registered in two children) belong to the first unit; later units
// that use them depend on it. Frozen parameters are sharded but never updated. Buffers are
// broadcast from rank 0 at construction.
//
// Construction and Step are collective: call them on every rank with the same model and options.
// A rank with a different model (names, shapes, dtypes, unit layout) makes every rank throw the
// same message at construction, before any other collective.
//
//   Engine engine(model, groups, options);
//   StepResult r = engine.Step(inputs, targets, loss_fn);   // one optimizer step
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "zeropp/comm_stats.h"
#include "zeropp/engine_options.h"
#include "zeropp/process_groups.h"
#include "zeropp/scheduling_unit.h"
#include "offload/host_pool.h"
#include "offload/io_engine.h"
#include "offload/swap_manager.h"
#include "zeropp/sharded_adamw.h"

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
  int64_t reduce_scatters = 0;
  // Time the training thread waited for all-gathers (exposed), and the comm thread's all-gather
  // time; 1 - exposed/busy is the share of all-gather time hidden behind compute.
  int64_t gather_wait_us = 0;
  int64_t gather_busy_us = 0;
};

using LossFn = std::function<at::Tensor(const at::Tensor& output, const at::Tensor& target)>;

// Which scheduling units this rank materialises (pipeline stages); empty = all of them. Called
// with the child index each unit starts at (one entry per unit).
using UnitFilter = std::function<bool(int unit, const std::vector<int>& unit_starts)>;

class Engine {
 public:
  // Throws std::invalid_argument (bad model or options, same on every rank) or CommError.
  // With `owns`, only the units it accepts get FlatParams on this rank (a pipeline stage); a
  // tensor tied between an owned and a non-owned unit is then held by both stages (see
  // pipeline_executor.h for how their gradients are combined).
  Engine(std::shared_ptr<torch::nn::Module> model, ProcessGroups& groups, EngineOptions options,
         UnitFilter owns = nullptr);
  ~Engine();

  // One optimizer step over inputs.size() micro-batches (targets aligned). The loss of each
  // micro-batch is divided by the number of micro-batches. Collective.
  StepResult Step(const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& targets,
                  const LossFn& loss_fn);

  // The mean loss over the micro-batches and data-parallel ranks, forward only: units are
  // gathered (with prefetch) and released as in Step's forward, no gradient or optimizer state is
  // touched. Collective; every rank gets the same value.
  double Evaluate(const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& targets,
                  const LossFn& loss_fn);

  // Full fp32 values of every unique parameter, in the model's named_parameters order.
  // Collective over the zero group.
  std::vector<std::pair<std::string, at::Tensor>> FullParameters();

  MemoryStats Memory() const;
  int num_units() const { return static_cast<int>(units_.size()); }
  const SchedulingUnit& unit(int k) const { return *units_[k]; }
  int64_t num_parameters() const;  // unique, unpadded
  const EngineOptions& options() const { return options_; }

 private:
  friend class PipelineAccess;
  // Counters at the start of a step, so that FinishStep reports this step's share.
  struct StepMarks {
    CommStats zero, dp;
    int64_t gathers = 0, reduce_scatters = 0, gather_wait_us = 0;
  };
  // Snapshots the counters and resets every unit's gradient-shard bookkeeping; shared by Step and
  // the pipeline executor.
  StepMarks BeginStep();
  // Cross-replica reduction, global-norm clipping (over `norm_groups` besides zero/dp), AdamW,
  // write-back and the loss average; shared by Step and the pipeline executor.
  StepResult FinishStep(double loss_sum, const std::vector<Communicator*>& loss_sum_groups,
                        const std::vector<Communicator*>& norm_groups, const StepMarks& marks);
  void BuildUnits();
  void AgreeOnModel();
  void InitializeShards();
  at::Tensor RunUnit(int k, const at::Tensor& x);
  void RunMicroBatch(const at::Tensor& input, const at::Tensor& target, const LossFn& loss_fn,
                     int num_micro, bool last_micro, double* loss_sum);
  void SetUpOffload();
  void EstimateAndCheckBudget();
  void OffloadActivation(int k, at::Tensor* saved);
  at::Tensor FetchActivation(int k);
  void Require(int k);
  void Prefetch(int k, int direction);
  void ReleaseExcept(const std::vector<int>& keep);
  // Unit k and the units whose tensors it uses: what must be gathered to run it.
  std::vector<int> UnitAndDeps(int k) const;
  void ReduceGrad(int u);
  void FinishReductions(bool block);
  void NoteUnshard(int u);
  int LiveUnits() const;
  std::string Where() const;

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
  std::vector<int> last_grad_writer_;  // unit whose backward completes unit u's gradient
  std::vector<std::string> param_order_;  // unique parameter names, model order
  UnitFilter owns_;
  std::vector<bool> owned_;
  ShardedAdamW optimizer_;

  struct PendingReduce {
    int unit;
    std::shared_ptr<CommWork> work;
    at::Tensor out;
    int64_t held_bytes;
  };
  std::vector<PendingReduce> pending_;
  int64_t unsharded_live_ = 0, unsharded_peak_ = 0;
  int64_t grad_live_ = 0, grad_peak_ = 0;
  int64_t reduce_scatters_ = 0;
  int64_t gather_wait_us_ = 0;
};

}  // namespace zeropp
