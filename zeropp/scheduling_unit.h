// scheduling_unit.h: a contiguous run of the Sequential's children with its FlatParam and the
// shard state machine that says where its parameters are.
//
// States and transitions (each asserts its source state; the error names expected vs actual):
//
//   state        | memory held beyond the shard        | transitions
//   -------------+-------------------------------------+-------------------------------------------
//   kSharded     | none                                | Unshard        -> kUnsharding
//   kUnsharding  | full buffer (being filled)          | WaitForUnshard -> kUnsharded
//   kUnsharded   | full buffer (valid)                 | Reshard        -> kSharded
//
// Where the shard itself lives (device, host pool or NVMe file) is the FlatParam's residency,
// orthogonal to this table. The gradient state of a unit is a second machine:
//
//   grad state     | memory held                          | transitions
//   ---------------+--------------------------------------+-----------------------------------------
//   kNone          | the gradient shard only              | BeginGrad   -> kAccumulating
//   kAccumulating  | + the unsharded gradient (autograd   | StartReduce -> kReducing
//                  |   accumulates every backward into it)| FinishReduce (of an older reduction) stays
//   kReducing      | + the reduce-scatter's output        | FinishReduce -> kNone (shard updated)
//                  |                                      | BeginGrad   -> kAccumulating (a new
//                  |                                      |   accumulation while the last lands:
//                  |                                      |   ZeroPP reduces once per unit)
// kReducing lasts until every reduction started for the unit has landed.
//
// A unit without own parameters (only tied ones) has no FlatParam; its
// transitions then only track state. `deps` lists the units owning tied parameters this unit
// uses: they must be unsharded whenever this one computes.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "zeropp/communicator.h"
#include "zeropp/flat_param.h"

namespace zeropp {

enum class ShardState { kSharded, kUnsharding, kUnsharded };
const char* ShardStateName(ShardState s);
enum class GradState { kNone, kAccumulating, kReducing };
const char* GradStateName(GradState s);

class SchedulingUnit {
 public:
  SchedulingUnit(int index, int first_child, int end_child, std::unique_ptr<FlatParam> flat,
                 std::vector<int> deps);

  // kSharded -> kUnsharding: allocates the full buffer and starts the all-gather on `zero`'s
  // comm thread. Non-blocking.
  void Unshard(Communicator& zero);
  // kUnsharding -> kUnsharded: blocks until the all-gather landed; throws CommError on failure.
  void WaitForUnshard();
  // kUnsharded -> kSharded: frees the full buffer.
  void Reshard();

  // Gradient transitions (bookkeeping only; the engine moves the buffers). Each asserts its source.
  void BeginGrad();
  void StartReduce();
  void FinishReduce();

  ShardState state() const { return state_; }
  GradState grad_state() const { return grad_state_; }
  bool live() const { return state_ != ShardState::kSharded; }
  int index() const { return index_; }
  int first_child() const { return first_child_; }
  int end_child() const { return end_child_; }
  const std::vector<int>& deps() const { return deps_; }
  FlatParam* flat() { return flat_.get(); }
  const FlatParam* flat() const { return flat_.get(); }
  int64_t unsharded_bytes() const { return flat_ ? flat_->full_bytes() : 0; }
  int64_t gathers() const { return gathers_; }
  std::string Describe() const;

 private:
  void Expect(ShardState expected, const char* transition) const;
  void ExpectGrad(GradState expected, const char* transition) const;

  int index_;
  int first_child_;
  int end_child_;
  std::unique_ptr<FlatParam> flat_;
  std::vector<int> deps_;
  ShardState state_ = ShardState::kSharded;
  GradState grad_state_ = GradState::kNone;
  int reductions_in_flight_ = 0;  // started and not yet landed (several when reduced per micro-batch)
  std::shared_ptr<CommWork> gather_;
  int64_t gathers_ = 0;
};

}  // namespace zeropp
