// grad_sink.h: where autograd leaves the gradient of a parameter whose unit owns a flat gradient
// buffer. A hook after autograd's accumulation (PyTorch's post-accumulate-grad hook, the one that
// optimizer-in-backward uses) moves the parameter's .grad into its slice of the buffer and clears
// .grad: the first gradient since the buffer was allocated is copied there, later ones are added.
//
// Binding .grad to a view of a zeroed buffer instead (what FlatParam did before, and FSDP1's
// flat parameter) costs a pass that writes zeros over the whole buffer and turns the first
// gradient's landing into an add (two reads and a write) instead of a copy (one of each); FSDP2
// lets gradients land as separate tensors and copies them into the reduce-scatter input, holding
// both at once. Here the buffer and one parameter's gradient are live at a time.
//
// Slices nothing was written to since the allocation (parameters unused in this backward, frozen
// ones, the padding) hold undefined values until GradLanding::Finish zeroes them.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

namespace zeropp {

// Appends [begin, end) to `ranges` (ascending), merged into the last range when they touch; empty
// ranges are skipped. Shared by GradLanding::Finish and FlatParam::TrainableRanges.
void AppendRange(std::vector<std::pair<int64_t, int64_t>>* ranges, int64_t begin, int64_t end);

// One flat gradient buffer and which of its slices were written since it was allocated. Shared by
// the buffer's owner and the hooks of its parameters (a hook outliving the owner finds no buffer).
class GradLanding {
 public:
  struct Slice {
    int64_t offset = 0;
    int64_t numel = 0;
    std::vector<int64_t> shape;
  };
  explicit GradLanding(std::vector<Slice> slices) : slices_(std::move(slices)), written_(slices_.size(), 0) {}

  // Takes `buffer` (uninitialised) as the landing place; every slice starts unwritten.
  void Open(at::Tensor buffer);
  // Drops the buffer (the caller may keep its own reference).
  void Close() { buffer_ = at::Tensor(); }
  bool open() const { return buffer_.defined(); }
  // Zeroes what was not written since Open (unused or frozen slices, the padding) and marks it
  // written, so that later landings add to zeros. Returns the buffer. Idempotent.
  const at::Tensor& Finish();
  const at::Tensor& buffer() const { return buffer_; }

  // Lands a gradient for slice i: copied when the slice is unwritten, else added.
  void Land(size_t i, const at::Tensor& grad);
  // Slice i's view for a caller that computes the gradient into it (the split backward's weight
  // GEMM); *overwrite says whether to write (unwritten slice) or add. Marks the slice written:
  // the caller must write it before anything reads the buffer. Undefined when no buffer is open.
  at::Tensor Target(size_t i, bool* overwrite);

 private:
  at::Tensor View(size_t i) const;
  std::vector<Slice> slices_;
  std::vector<uint8_t> written_;
  bool padding_written_ = false;
  at::Tensor buffer_;
};

// Installs on `param` (a leaf) the hook that lands its accumulated gradient in slice `index` of
// `landing` while that is open (otherwise .grad is left as autograd made it). Replaces any
// post-accumulate-grad hook the parameter had.
void InstallGradSink(const at::Tensor& param, std::shared_ptr<GradLanding> landing, size_t index);
// Removes the hook if it is one installed above.
void RemoveGradSink(const at::Tensor& param);
// Where a caller that computes `param`'s gradient itself should write it: the open landing
// slice of its sink (GradLanding::Target), or an undefined tensor when it has none.
at::Tensor GradSinkTarget(const at::Tensor& param, bool* overwrite);

}  // namespace zeropp
