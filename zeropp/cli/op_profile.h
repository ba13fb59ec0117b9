// op_profile.h: where a process's operator time goes, by kind (matrix products, attention, element-
// wise work, copies, communication, the optimizer, the rest), from PyTorch's own profiler (Kineto).
// `train --profile-ops` prints it per rank as an OPS line, beside which `plan --predict` prints what
// the planner charges for the same kinds (its PREDICT_OPS line), so a run shows which kind the cost
// model gets wrong instead of only that the step is off.
//
// How a kind's time is counted:
//  - host (CPU runs): the self time of its operators, an operator's span less the spans of the
//    operators it called on the same thread, summed over every thread of the process;
//  - device (CUDA runs): the kernels' device time, classified by kernel name (the host's operator
//    spans are launch times there). Kernels on different streams may overlap, so the kinds can sum
//    past the wall time.
// The matrix products' FLOPs are counted from the input shapes the profiler recorded (aten::mm,
// addmm, addmm_, bmm, baddbmm...: 2 x m x k x n per product), independent of the planner's and the
// model's formulas. (PyTorch's own count skips the in-place addmm_ that zeropp's split weight
// pass accumulates gradients with.)
//
// Usage:
//   OpProfiler profiler;
//   profiler.Start(/*cuda=*/false);
//   ... the steps to measure; on CUDA synchronise the device before Stop ...
//   std::printf("%s\n", FormatOpTotals(profiler.Stop(), rank, steps).c_str());
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace zeropp {
namespace cli {

enum class OpKind { kMatmul, kAttention, kElementwise, kCopy, kCommunication, kOptimizer, kOther };
inline constexpr int kOpKinds = 7;
const char* OpKindName(OpKind k);  // "matmul", "attention", "elementwise", "copy", "comm", "optimizer", "other"

// A host operator by its name (e.g. "aten::addmm"). kOther: views, composites that only call
// others (aten::linear, aten::matmul), autograd's wrappers and anything not an ATen operator.
OpKind ClassifyOperator(std::string_view name);
// A CUDA kernel (or memcpy/memset activity) by its name.
OpKind ClassifyKernel(std::string_view name);

struct OpTotals {
  std::array<double, kOpKinds> seconds{};  // per kind, over the profiled window
  double matmul_flops = 0;                 // the matrix products' FLOPs (MatmulFlops)
  double elementwise_values = 0;           // the values element-wise operators moved (ValuesMoved)
  int64_t operators = 0;                   // host operator events folded
  bool device = false;                     // seconds are CUDA kernel time
  // Per operator (host) or kernel (device) name: its seconds and calls, as the kinds count them.
  struct Named {
    OpKind kind = OpKind::kOther;
    double seconds = 0;
    int64_t calls = 0;
    // Device kernels: seconds by the host operator that launched them, with its input shapes
    // ("aten::add_[8,1024,2048][8,1024,2048]"), where the profiler linked them.
    std::map<std::string, double> launched_by;
  };
  std::map<std::string, Named> by_name;
  double Seconds(OpKind k) const { return seconds[static_cast<int>(k)]; }
  double TotalSeconds() const;
};

// One host operator's span, as the profiler recorded it.
struct OpSpan {
  uint64_t thread = 0;
  uint64_t start_ns = 0, end_ns = 0;
  std::string name;
  double flops = 0;   // matrix products (MatmulFlops)
  double values = 0;  // tensor values it moves (ValuesMoved)
};
// The FLOPs of one matrix-product operator from its input shapes; 0 for any other operator or
// shapes that do not fit.
double MatmulFlops(std::string_view name, const std::vector<std::vector<int64_t>>& shapes);
// The tensor values an element-wise operator moves, from its input shapes: every input read and
// one output of the largest input's size written (reductions, which write less, are counted as
// if they wrote that much).
double ValuesMoved(const std::vector<std::vector<int64_t>>& shapes);
// Self times by kind: each span less the spans nested directly inside it on its thread (a span
// inside another when it starts no earlier and ends no later); the element-wise values of the
// element-wise spans that call no other operator (a composite's callees do its work). Exposed for
// tests.
OpTotals FoldHostSpans(std::vector<OpSpan> spans);

// Not thread-safe; one per process at a time (PyTorch allows one active profiler).
class OpProfiler {
 public:
  OpProfiler() = default;
  OpProfiler(const OpProfiler&) = delete;
  OpProfiler& operator=(const OpProfiler&) = delete;
  ~OpProfiler();  // stops a profile still running, discarding it

  // Starts recording every thread's operators (with input shapes and FLOPs) and, with `cuda`, the
  // device's kernels. Throws std::runtime_error if a profiler is already running in this process.
  void Start(bool cuda);
  // Stops and folds the record (host self times, or with `cuda` the kernels' device time). The
  // caller synchronises the device first, or kernels still running are missed. Throws
  // std::logic_error if not started.
  OpTotals Stop();

 private:
  bool running_ = false, cuda_ = false;
};

// "OPS rank=R steps=N matmul_s=... attention_s=... elementwise_s=... copy_s=... comm_s=...
//  optimizer_s=... other_s=... matmul_gflop=... matmul_tflops=... elementwise_gvalues=...
//  time=host|device", seconds, GFLOP and 1e9 values per step; matmul_tflops is the matrix
// products' FLOPs over their time.
std::string FormatOpTotals(const OpTotals& t, int rank, int steps);
// The `top` names that took the most time, one line each, most first:
//   OPS_TOP rank=R kind=K seconds=S calls=C share=F [by=OP(SHARE)] name=NAME
// seconds and calls per step, share of all the kinds' time, the name cut to 160 characters; by=:
// a kernel's main launcher and its share of the kernel's time.
std::string FormatOpTop(const OpTotals& t, int rank, int steps, int top);

}  // namespace cli
}  // namespace zeropp
