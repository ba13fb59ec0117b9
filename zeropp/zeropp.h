// zeropp.h: the public face of zeropp. Include this header and depend on //zeropp:zeropp.
//
// A Trainer trains an unmodified torch::nn::Sequential of the user's own modules with ZeRO-3
// inside a node, pipeline parallelism across nodes (ZeroPP scheduling units or the classic
// schedules) and DP or ZeRO-1 across pipeline replicas, on the ranks of a torchrun-style
// environment. It picks the layout's schedule (zero3 for pp = 1), owns the process groups,
// and says what this rank must feed.
//
// The model contract: every child takes one tensor and returns one tensor; scheduling units are
// contiguous runs of children (EngineOptions::units), pipeline stages contiguous runs of units.
// Parameters are float32 (the engine casts to param_dtype itself); a tensor registered by two
// children (a tied embedding and LM head) is trained once. Buffers are broadcast from rank 0.
//
//   zeropp::TrainerOptions o;
//   o.layout.pp = 2;                                  // zero = world / (pp * dp)
//   auto trainer = zeropp::Trainer::Create(model.ptr(), zeropp::DistEnv::FromEnvironment(), o);
//   for (step...) {
//     // micro-batch m of this rank's data-parallel shard dp_rank() of dp_size()
//     StepResult r = trainer->Step(inputs, targets, loss_fn);   // collective
//   }
//
// All methods that say "collective" must be called on every rank in the same order. Errors:
// std::invalid_argument for bad options or models (the same message on every rank, before any
// collective), CommError for a peer that failed or timed out (naming the missing ranks).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "zeropp/dist_env.h"
#include "zeropp/engine.h"
#include "zeropp/process_groups.h"
#include "zeropp/trainer_options.h"
#include "scheduler/trace.h"

namespace zeropp {
namespace scheduler {
class Executor;
struct BackwardSplitStats;
}  // namespace scheduler

class Trainer {
 public:
  // Validates `options` (TrainerOptions::Resolve) and generates the schedule before any process
  // group exists, then creates the groups from `env` (TCPStore at MASTER_ADDR:MASTER_PORT, Gloo).
  // Collective.
  static std::unique_ptr<Trainer> Create(std::shared_ptr<torch::nn::Module> model, const DistEnv& env,
                                         TrainerOptions options, const ProcessGroupsOptions& groups = {});
  // On process groups the caller made (tests: thread ranks over a FileStore). Collective.
  Trainer(std::shared_ptr<torch::nn::Module> model, std::unique_ptr<ProcessGroups> groups, TrainerOptions options);
  // Borrowing groups that outlive the Trainer (several trainers in turn on one set of groups).
  Trainer(std::shared_ptr<torch::nn::Module> model, ProcessGroups& groups, TrainerOptions options);
  ~Trainer();

  // This rank's shard of the global batch: ranks with different dp_rank() feed different
  // samples (the zero and dp axes both split the batch; pipeline stages share one shard).
  int dp_rank() const { return dp_rank_; }
  int dp_size() const { return dp_size_; }
  int microbatches() const { return options_.microbatches; }
  // What Step needs on this rank: inputs on the first pipeline stage, targets on the last (both
  // with pp = 1). A vector this rank does not need may be empty.
  bool needs_inputs() const;
  bool needs_targets() const;

  // One optimizer step over microbatches() micro-batches. The learning rate follows the options'
  // schedule. Returns the mean loss over micro-batches and data-parallel ranks. Collective.
  StepResult Step(const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& targets,
                  const LossFn& loss_fn);
  // The same loss on the same batch, forward only (no gradient, no optimizer state), over any
  // multiple of microbatches() micro-batches (a middle pipeline stage, which needs neither
  // vector, must be told how many by passing vectors of that size). Collective.
  double Evaluate(const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& targets,
                  const LossFn& loss_fn);
  // Saves the training state after steps_done() steps to DIR/step-N (zeropp/checkpoint/
  // checkpoint.h: sharded safetensors in PyTorch DCP's layout, a verified manifest, atomic commit,
  // `latest`); keep > 0 keeps only the newest `keep`. Returns the step directory. Collective.
  std::string Save(const std::string& dir, int keep = 0);
  // The same, asynchronous: returns once this rank's state is copied (the stall; returned in ms);
  // the files are written by a background thread while training goes on, and the save becomes
  // visible (manifest, `latest`) at the next SaveAsync or WaitForSave. Collective.
  double SaveAsync(const std::string& dir, int keep = 0);
  // Finishes a pending asynchronous save; returns its step directory ("" if none). Collective.
  // Call it before the end of training: a save not committed is not a checkpoint.
  std::string WaitForSave();
  // Loads a checkpoint saved under any layout (a step directory, or a save directory's latest);
  // the next Step continues at its step (learning rate, AdamW step and data position follow
  // steps_done()). Returns that step. Throws std::runtime_error naming the bad file. Collective.
  int64_t Load(const std::string& path);

  // For models that split parameters across ranks themselves (the repository's tensor-parallel
  // baseline): `group` joins the gradient norm, parameters for which `replicated(name)` holds count
  // once, and with `sum_replicated_grads` their gradients are summed over `group` before the
  // optimizer (Engine::SetModelParallel). Call on every rank before the first Step.
  void SetModelParallel(Communicator* group, const std::function<bool(const std::string&)>& replicated,
                        bool sum_replicated_grads) {
    engine_->SetModelParallel(group, replicated, sum_replicated_grads);
  }

  // Full fp32 values of every parameter this rank's stage holds. Collective over the zero group
  // (under ZeRO-1 with 16-bit parameters, over the dp group too).
  std::vector<std::pair<std::string, at::Tensor>> FullParameters();

  MemoryStats Memory() const;
  double learning_rate() const;           // of the next step
  int64_t steps_done() const { return steps_; }
  const TrainerOptions& options() const { return options_; }
  std::string ScheduleText() const;       // the schedule this rank runs, as text (schedule.h)
  std::string ScheduleName() const;
  std::string TraceJson() const;          // the last step's trace (Chrome trace JSON)
  // Where the last step's time went on this rank (seconds per kind of action; --profile).
  scheduler::TimeShares LastStepShares() const;
  ProcessGroups& groups() { return *groups_; }
  // Introspection for tests and benchmarks of this repository.
  const Engine& engine() const { return *engine_; }
  scheduler::Executor& executor() { return *executor_; }

 private:
  std::shared_ptr<torch::nn::Module> model_;
  void Build();
  std::string LayoutDescription() const;
  std::unique_ptr<ProcessGroups> owned_groups_;
  ProcessGroups* groups_;
  TrainerOptions options_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<scheduler::Executor> executor_;
  struct AsyncSave;
  std::unique_ptr<AsyncSave> async_save_;
  int dp_rank_ = 0, dp_size_ = 1;
  int64_t steps_ = 0;
};

}  // namespace zeropp
