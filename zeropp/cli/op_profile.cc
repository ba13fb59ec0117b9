#include "zeropp/cli/op_profile.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdlib>
#include <set>
#include <stdexcept>

#include <absl/strings/str_format.h>
#include <absl/strings/str_join.h>
#include <kineto/ActivityType.h>
#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/csrc/profiler/orchestration/observer.h>

namespace zeropp {
namespace cli {
namespace {

namespace prof = torch::autograd::profiler;
namespace impl = torch::profiler::impl;

// Whether one of ours is running: PyTorch's own check sees only the calling thread's profiler, not
// one recording all threads.
std::atomic<bool> g_running{false};

// Three one-line string helpers rather than Abseil's AsciiStrToLower, StrContains and StartsWith:
// Debian's Abseil has its own string_view, not std::string_view, so every call would convert.
std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

bool Contains(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }

bool StartsWith(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

// One more call of `name` (of kind k) taking `seconds`, in a per-name table.
void Tally(std::map<std::string, OpTotals::Named>& by_name, const std::string& name, OpKind k, double seconds,
           const std::string& launcher = "") {
  OpTotals::Named& named = by_name[name];
  named.kind = k;
  named.seconds += seconds;
  ++named.calls;
  if (!launcher.empty()) named.launched_by[launcher] += seconds;
}

// "aten::add_[8,1024,2048][8,1024,2048]": an operator and its inputs' shapes, without spaces.
std::string OpKey(const std::string& name, const std::vector<std::vector<int64_t>>& shapes) {
  std::string key = name;
  for (const auto& s : shapes) key += "[" + absl::StrJoin(s, ",") + "]";
  std::replace(key.begin(), key.end(), ' ', '_');
  return key;
}

}  // namespace

const char* OpKindName(OpKind k) {
  static const char* const kNames[kOpKinds] = {"matmul", "attention", "elementwise", "copy",
                                               "comm",   "optimizer", "other"};
  return kNames[static_cast<int>(k)];
}

OpKind ClassifyOperator(std::string_view name) {
  static const std::set<std::string_view> kMatmul = {"aten::mm",       "aten::addmm",   "aten::addmm_",
                                                     "aten::bmm",      "aten::baddbmm", "aten::baddbmm_",
                                                     "aten::addbmm",   "aten::addbmm_", "aten::_addmm_activation"};
  static const std::set<std::string_view> kCopy = {"aten::copy_", "aten::_to_copy", "aten::clone", "aten::cat",
                                                   "aten::stack", "aten::index_copy_", "aten::narrow_copy"};
  // Views, allocations and composites that only call other operators: their self time is dispatch.
  static const std::set<std::string_view> kNoWork = {
      "aten::view",   "aten::reshape",     "aten::_reshape_alias", "aten::_unsafe_view", "aten::t",
      "aten::transpose", "aten::permute",  "aten::expand",         "aten::as_strided",   "aten::slice",
      "aten::select", "aten::unsqueeze",   "aten::squeeze",        "aten::detach",       "aten::detach_",
      "aten::alias",  "aten::empty",       "aten::empty_like",     "aten::empty_strided", "aten::resize_",
      "aten::split",  "aten::split_with_sizes", "aten::chunk",     "aten::unbind",       "aten::narrow",
      "aten::linear", "aten::matmul",      "aten::to",             "aten::contiguous",   "aten::lift_fresh",
      "aten::set_",   "aten::requires_grad_", "aten::numpy_T",     "aten::flatten",      "aten::expand_as",
      "aten::view_as", "aten::zeros",      "aten::zeros_like",     "aten::ones_like",    "aten::full",
      "aten::layer_norm", "aten::dropout", "aten::scalar_tensor",  "aten::result_type",  "aten::item",
      "aten::_local_scalar_dense", "aten::resolve_conj", "aten::resolve_neg", "aten::conj", "aten::_conj"};
  if (kMatmul.count(name)) return OpKind::kMatmul;
  const std::string low = Lower(name);
  if (Contains(low, "scaled_dot_product") || Contains(low, "flash_attention") || Contains(low, "efficient_attention") ||
      Contains(low, "cudnn_attention")) {
    return OpKind::kAttention;
  }
  if (Contains(low, "gloo") || Contains(low, "nccl") || StartsWith(low, "c10d") || Contains(low, "record_param_comms")) {
    return OpKind::kCommunication;
  }
  if (Contains(low, "adam") || StartsWith(low, "aten::_foreach_") || Contains(low, "optimizer")) return OpKind::kOptimizer;
  if (kCopy.count(name)) return OpKind::kCopy;
  if (!StartsWith(name, "aten::") || kNoWork.count(name)) return OpKind::kOther;
  return OpKind::kElementwise;
}

OpKind ClassifyKernel(std::string_view name) {
  const std::string low = Lower(name);
  if (Contains(low, "nccl")) return OpKind::kCommunication;
  if (Contains(low, "adam") || Contains(low, "multi_tensor_apply")) return OpKind::kOptimizer;
  if (Contains(low, "flash") || Contains(low, "fmha") || Contains(low, "attention") || Contains(low, "attn")) {
    return OpKind::kAttention;
  }
  // cuBLAS and CUTLASS products: "...gemm...", Hopper's "nvjet_..." and "sm90_xmma_...", and the
  // kernels cuBLAS runs beside a product as part of it: split-K's reduction ("splitKreduce_kernel")
  // and cuBLASLt's separate epilogue ("cublasLt::epilogue::...").
  if (Contains(low, "gemm") || StartsWith(low, "nvjet") || Contains(low, "xmma") || Contains(low, "splitkreduce") ||
      Contains(low, "cublaslt::epilogue")) {
    return OpKind::kMatmul;
  }
  if (Contains(low, "memcpy") || Contains(low, "memset") || Contains(low, "copy") || Contains(low, "tobf16") ||
      Contains(low, "tofloat")) {
    return OpKind::kCopy;
  }
  return OpKind::kElementwise;
}

double MatmulFlops(std::string_view name, const std::vector<std::vector<int64_t>>& shapes) {
  if (ClassifyOperator(name) != OpKind::kMatmul) return 0;
  // The two factors: the first two inputs of mm and bmm, the second and third of the rest
  // (self, then the factors).
  const size_t first = name == "aten::mm" || name == "aten::bmm" ? 0 : 1;
  if (shapes.size() < first + 2) return 0;
  const std::vector<int64_t>& a = shapes[first];
  const std::vector<int64_t>& b = shapes[first + 1];
  if (a.size() < 2 || b.size() != a.size()) return 0;
  double batch = 1;
  for (size_t i = 0; i + 2 < a.size(); ++i) batch *= static_cast<double>(a[i]);
  const double m = a[a.size() - 2], k = a.back(), n = b.back();
  return 2 * batch * m * k * n;
}

double ValuesMoved(const std::vector<std::vector<int64_t>>& shapes) {
  double read = 0, largest = 0;
  for (const std::vector<int64_t>& shape : shapes) {
    double n = 1;
    for (int64_t d : shape) n *= static_cast<double>(d);
    read += n;
    largest = std::max(largest, n);
  }
  return read + largest;
}

double OpTotals::TotalSeconds() const {
  double s = 0;
  for (double x : seconds) s += x;
  return s;
}

OpTotals FoldHostSpans(std::vector<OpSpan> spans) {
  // Per thread, by start (the longer first at a tie, so a parent precedes its first child); a
  // stack of the spans still open gives each span its direct parent.
  std::sort(spans.begin(), spans.end(), [](const OpSpan& a, const OpSpan& b) {
    if (a.thread != b.thread) return a.thread < b.thread;
    if (a.start_ns != b.start_ns) return a.start_ns < b.start_ns;
    return a.end_ns > b.end_ns;
  });
  std::vector<double> self(spans.size());
  std::vector<bool> calls(spans.size(), false);  // has a child
  std::vector<size_t> open;
  for (size_t i = 0; i < spans.size(); ++i) {
    const OpSpan& s = spans[i];
    self[i] = static_cast<double>(s.end_ns - s.start_ns) * 1e-9;
    while (!open.empty() && (spans[open.back()].thread != s.thread || spans[open.back()].end_ns < s.end_ns)) {
      open.pop_back();
    }
    if (!open.empty()) {
      self[open.back()] -= self[i];
      calls[open.back()] = true;
    }
    open.push_back(i);
  }
  OpTotals t;
  for (size_t i = 0; i < spans.size(); ++i) {
    const OpKind k = ClassifyOperator(spans[i].name);
    t.seconds[static_cast<int>(k)] += std::max(0.0, self[i]);
    if (k == OpKind::kMatmul) t.matmul_flops += spans[i].flops;
    if (k == OpKind::kElementwise && !calls[i]) t.elementwise_values += spans[i].values;
    Tally(t.by_name, spans[i].name, k, std::max(0.0, self[i]));
  }
  t.operators = static_cast<int64_t>(spans.size());
  return t;
}

OpProfiler::~OpProfiler() {
  if (!running_) return;
  try {
    prof::disableProfiler();
  } catch (...) {  // a destructor must not throw; the profile is discarded anyway
  }
  g_running = false;
}

void OpProfiler::Start(bool cuda) {
  if (running_ || impl::profilerEnabled() || g_running.exchange(true)) {
    throw std::runtime_error("op profile: a profiler is already running in this process");
  }
  impl::ExperimentalConfig experimental(/*profiler_metrics=*/{}, /*profiler_measure_per_kernel=*/false,
                                        /*verbose=*/false, /*performance_events=*/{},
                                        /*enable_cuda_sync_events=*/false, /*adjust_profiler_step=*/false,
                                        /*disable_external_correlation=*/false, /*profile_all_threads=*/true);
  const impl::ProfilerConfig config(impl::ProfilerState::KINETO, /*report_input_shapes=*/true,
                                    /*profile_memory=*/false, /*with_stack=*/false, /*with_flops=*/false,
                                    /*with_modules=*/false, experimental);
  // Without a GPU, Kineto's first use logs an ERROR line for the device count it cannot read;
  // a CPU profile needs no device, so its log is kept to nothing unless the user set a level.
  if (!cuda) setenv("KINETO_LOG_LEVEL", "5", /*overwrite=*/0);
  std::set<impl::ActivityType> activities = {impl::ActivityType::CPU};
  if (cuda) activities.insert(impl::ActivityType::CUDA);
  try {
    prof::prepareProfiler(config, activities);
    prof::enableProfiler(config, activities);
  } catch (...) {
    g_running = false;
    throw;
  }
  running_ = true;
  cuda_ = cuda;
}

OpTotals OpProfiler::Stop() {
  if (!running_) throw std::logic_error("op profile: Stop without Start");
  running_ = false;
  const std::unique_ptr<prof::ProfilerResult> result = prof::disableProfiler();
  g_running = false;
  std::vector<OpSpan> host;
  std::array<double, kOpKinds> device{};
  std::map<std::string, OpTotals::Named> kernels;
  const auto cpu_op = static_cast<uint8_t>(libkineto::ActivityType::CPU_OP);
  // Device work: kernels, copies and fills (not the device-side annotations or sync records).
  const std::set<uint8_t> device_work = {static_cast<uint8_t>(libkineto::ActivityType::CONCURRENT_KERNEL),
                                         static_cast<uint8_t>(libkineto::ActivityType::GPU_MEMCPY),
                                         static_cast<uint8_t>(libkineto::ActivityType::GPU_MEMSET)};
  // One pass: host operators (and, on a GPU, each one's name and input shapes by correlation id),
  // device work kept aside until every launcher is known.
  std::map<uint64_t, std::string> launcher;
  struct Work {
    std::string name;
    double seconds;
    uint64_t launched_by;
  };
  std::vector<Work> work;
  for (const prof::KinetoEvent& e : result->events()) {
    if (e.deviceType() == c10::DeviceType::CPU) {
      if (e.activityType() != cpu_op) continue;  // runtime calls (cudaLaunchKernel...), annotations
      const std::string name = e.name();
      std::vector<std::vector<int64_t>> shapes;
      if (e.hasShapes()) shapes.assign(e.shapes().begin(), e.shapes().end());
      if (cuda_) launcher[e.correlationId()] = OpKey(name, shapes);
      host.push_back({e.startThreadId(), e.startNs(), e.endNs(), name, MatmulFlops(name, shapes), ValuesMoved(shapes)});
    } else if (cuda_ && device_work.count(e.activityType())) {
      work.push_back({e.name(), static_cast<double>(e.durationNs()) * 1e-9, e.linkedCorrelationId()});
    }
  }
  for (const Work& w : work) {
    const OpKind k = ClassifyKernel(w.name);
    device[static_cast<int>(k)] += w.seconds;
    const auto by = launcher.find(w.launched_by);
    Tally(kernels, w.name, k, w.seconds, by == launcher.end() ? std::string() : by->second);
  }
  OpTotals t = FoldHostSpans(std::move(host));
  if (cuda_) {
    t.seconds = device;
    t.by_name = std::move(kernels);
    t.device = true;
  }
  return t;
}

std::string FormatOpTotals(const OpTotals& t, int rank, int steps) {
  const double n = std::max(1, steps);
  std::string out = absl::StrFormat("OPS rank=%d steps=%d", rank, steps);
  for (int k = 0; k < kOpKinds; ++k) {
    absl::StrAppendFormat(&out, " %s_s=%.6f", OpKindName(static_cast<OpKind>(k)), t.seconds[k] / n);
  }
  const double mm = t.Seconds(OpKind::kMatmul);
  absl::StrAppendFormat(&out, " matmul_gflop=%.3f matmul_tflops=%.3f elementwise_gvalues=%.4f time=%s",
                        t.matmul_flops / n / 1e9, mm > 0 ? t.matmul_flops / mm / 1e12 : 0.0,
                        t.elementwise_values / n / 1e9, t.device ? "device" : "host");
  return out;
}

std::string FormatOpTop(const OpTotals& t, int rank, int steps, int top) {
  std::vector<const std::pair<const std::string, OpTotals::Named>*> order;
  for (const auto& e : t.by_name) order.push_back(&e);
  std::sort(order.begin(), order.end(), [](const auto* a, const auto* b) {
    return a->second.seconds != b->second.seconds ? a->second.seconds > b->second.seconds : a->first < b->first;
  });
  const double n = std::max(1, steps), total = t.TotalSeconds();
  std::string out;
  for (size_t i = 0; i < order.size() && static_cast<int>(i) < top; ++i) {
    const OpTotals::Named& v = order[i]->second;
    std::string by;
    const auto main = std::max_element(v.launched_by.begin(), v.launched_by.end(),
                                       [](const auto& a, const auto& b) { return a.second < b.second; });
    if (main != v.launched_by.end()) {
      by = absl::StrFormat(" by=%s(%.2f)", main->first.substr(0, 200), v.seconds > 0 ? main->second / v.seconds : 0.0);
    }
    absl::StrAppendFormat(&out, "%sOPS_TOP rank=%d kind=%s seconds=%.6f calls=%.1f share=%.4f%s name=%s", i ? "\n" : "",
                          rank, OpKindName(v.kind), v.seconds / n, static_cast<double>(v.calls) / n,
                          total > 0 ? v.seconds / total : 0.0, by, order[i]->first.substr(0, 160));
  }
  return out;
}

}  // namespace cli
}  // namespace zeropp
