#include "zeropp/grad_sink.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include "absl/strings/str_cat.h"

namespace zeropp {

void AppendRange(std::vector<std::pair<int64_t, int64_t>>* ranges, int64_t begin, int64_t end) {
  if (begin >= end) return;
  if (!ranges->empty() && ranges->back().second == begin) {
    ranges->back().second = end;
  } else {
    ranges->emplace_back(begin, end);
  }
}

void GradLanding::Open(at::Tensor buffer) {
  buffer_ = std::move(buffer);
  std::fill(written_.begin(), written_.end(), 0);
  padding_written_ = false;
}

at::Tensor GradLanding::View(size_t i) const {
  const Slice& s = slices_.at(i);
  return buffer_.narrow(0, s.offset, s.numel).view(s.shape);
}

const at::Tensor& GradLanding::Finish() {
  if (!open()) throw std::logic_error("GradLanding::Finish: no buffer is open");
  // The unwritten ranges, neighbours merged (slices lie back to back in offset order), so that a
  // run of frozen parameters is one fill and not one per tensor.
  std::vector<std::pair<int64_t, int64_t>> zero;
  int64_t end = 0;
  for (size_t i = 0; i < slices_.size(); ++i) {
    end = std::max(end, slices_[i].offset + slices_[i].numel);
    if (!written_[i]) AppendRange(&zero, slices_[i].offset, slices_[i].offset + slices_[i].numel);
    written_[i] = 1;
  }
  if (!padding_written_) AppendRange(&zero, end, buffer_.numel());
  padding_written_ = true;
  for (const auto& [b, e] : zero) buffer_.narrow(0, b, e - b).zero_();
  return buffer_;
}

void GradLanding::Land(size_t i, const at::Tensor& grad) {
  at::Tensor v = View(i);
  if (written_.at(i)) {
    v.add_(grad);
  } else {
    v.copy_(grad);
    written_[i] = 1;
  }
}

at::Tensor GradLanding::Target(size_t i, bool* overwrite) {
  if (!open()) return at::Tensor();
  *overwrite = !written_.at(i);
  written_[i] = 1;
  return View(i);
}

namespace {

class GradSink : public torch::autograd::PostAccumulateGradHook {
 public:
  GradSink(std::shared_ptr<GradLanding> landing, size_t index) : landing_(std::move(landing)), index_(index) {}

  void operator()(const torch::autograd::Variable& param) override {
    if (!landing_->open()) return;  // no buffer: .grad stays as autograd left it
    at::Tensor& grad = param.mutable_grad();
    if (!grad.defined()) return;
    landing_->Land(index_, grad);
    grad = at::Tensor();  // autograd's buffer (usually the product it stole) is freed here
  }

  GradLanding& landing() { return *landing_; }
  size_t index() const { return index_; }

 private:
  std::shared_ptr<GradLanding> landing_;
  size_t index_;
};

GradSink* SinkOf(const at::Tensor& param) {
  auto& hook = torch::autograd::impl::post_acc_grad_hooks(param);
  return hook ? dynamic_cast<GradSink*>(hook.get()) : nullptr;
}

}  // namespace

void InstallGradSink(const at::Tensor& param, std::shared_ptr<GradLanding> landing, size_t index) {
  if (!param.is_leaf() || !param.requires_grad()) {
    throw std::logic_error(absl::StrCat("InstallGradSink: expects a leaf that requires grad (slice ", index, ")"));
  }
  torch::autograd::impl::set_post_acc_grad_hooks(param, std::make_unique<GradSink>(std::move(landing), index));
}

void RemoveGradSink(const at::Tensor& param) {
  if (SinkOf(param) != nullptr) torch::autograd::impl::set_post_acc_grad_hooks(param, nullptr);
}

at::Tensor GradSinkTarget(const at::Tensor& param, bool* overwrite) {
  GradSink* sink = SinkOf(param);
  return sink == nullptr ? at::Tensor() : sink->landing().Target(sink->index(), overwrite);
}

}  // namespace zeropp
