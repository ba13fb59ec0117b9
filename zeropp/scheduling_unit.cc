#include "zeropp/scheduling_unit.h"

#include <stdexcept>

#include "absl/strings/str_cat.h"

namespace zeropp {

const char* ShardStateName(ShardState s) {
  switch (s) {
    case ShardState::kSharded: return "Sharded";
    case ShardState::kUnsharding: return "Unsharding";
    case ShardState::kUnsharded: return "Unsharded";
  }
  return "?";
}

const char* GradStateName(GradState s) {
  switch (s) {
    case GradState::kNone: return "None";
    case GradState::kAccumulating: return "Accumulating";
    case GradState::kReducing: return "Reducing";
  }
  return "?";
}

SchedulingUnit::SchedulingUnit(int index, int first_child, int end_child, std::unique_ptr<FlatParam> flat,
                               std::vector<int> deps)
    : index_(index), first_child_(first_child), end_child_(end_child), flat_(std::move(flat)), deps_(std::move(deps)) {}

std::string SchedulingUnit::Describe() const {
  return absl::StrCat("unit ", index_, " (children ", first_child_, "..", end_child_ - 1, ", ",
                      flat_ ? flat_->numel() : 0, " params)");
}

void SchedulingUnit::Expect(ShardState expected, const char* transition) const {
  if (state_ != expected) {
    throw std::logic_error(absl::StrCat(Describe(), ": ", transition, " expects state ",
                                        ShardStateName(expected), ", found ", ShardStateName(state_)));
  }
}

void SchedulingUnit::ExpectGrad(GradState expected, const char* transition) const {
  if (grad_state_ != expected) {
    throw std::logic_error(absl::StrCat(Describe(), ": ", transition, " expects gradient state ",
                                        GradStateName(expected), ", found ", GradStateName(grad_state_)));
  }
}

void SchedulingUnit::BeginGrad() {
  if (grad_state_ == GradState::kAccumulating) ExpectGrad(GradState::kNone, "BeginGrad");
  grad_state_ = GradState::kAccumulating;
}

void SchedulingUnit::StartReduce() {
  ExpectGrad(GradState::kAccumulating, "StartReduce");
  grad_state_ = GradState::kReducing;
  ++reductions_in_flight_;
}

void SchedulingUnit::FinishReduce() {
  if (reductions_in_flight_ == 0) {
    throw std::logic_error(absl::StrCat(Describe(), ": FinishReduce with no reduction in flight (gradient state ",
                                        GradStateName(grad_state_), ")"));
  }
  if (--reductions_in_flight_ == 0 && grad_state_ == GradState::kReducing) grad_state_ = GradState::kNone;
}

void SchedulingUnit::Unshard(Communicator& zero) {
  Expect(ShardState::kSharded, "Unshard");
  if (flat_ && !flat_->full_is_shard()) {
    flat_->AllocateFull();
    gather_ = zero.AllGather(flat_->full(), flat_->AcquireShard());
    ++gathers_;
  }
  state_ = ShardState::kUnsharding;
}

void SchedulingUnit::WaitForUnshard() {
  Expect(ShardState::kUnsharding, "WaitForUnshard");
  if (gather_) {
    auto work = std::move(gather_);
    gather_.reset();
    work->Wait();
    flat_->ReleaseShard(/*dirty=*/false);
  }
  state_ = ShardState::kUnsharded;
}

void SchedulingUnit::Reshard() {
  Expect(ShardState::kUnsharded, "Reshard");
  if (flat_) flat_->FreeFull();
  state_ = ShardState::kSharded;
}

}  // namespace zeropp
