#include "scheduler/planner/hardware.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace zeropp {
namespace planner {
namespace {

using nlohmann::json;

class Reader {
 public:
  Reader(const json& root, std::string origin) : root_(root), origin_(std::move(origin)) {}

  double Number(const std::string& path, double lo, double hi) const {
    const json* v = Find(path);
    if (v == nullptr) Fail(path, "missing", "a number in [" + Fmt(lo) + ", " + Fmt(hi) + "]");
    if (!v->is_number()) Fail(path, v->dump(), "a number in [" + Fmt(lo) + ", " + Fmt(hi) + "]");
    const double x = v->get<double>();
    if (!std::isfinite(x) || x < lo || x > hi) Fail(path, v->dump(), "a number in [" + Fmt(lo) + ", " + Fmt(hi) + "]");
    return x;
  }
  bool Has(const std::string& path) const { return Find(path) != nullptr; }
  std::string String(const std::string& path, const std::string& fallback) const {
    const json* v = Find(path);
    if (v == nullptr) return fallback;
    if (!v->is_string()) Fail(path, v->dump(), "a string");
    return v->get<std::string>();
  }
  [[noreturn]] void Fail(const std::string& path, const std::string& got, const std::string& expected) const {
    throw std::invalid_argument(origin_ + ": field '" + path + "': got " + got + ", expected " + expected);
  }

  // A list of numbers, each in [lo, hi], of exactly `size` entries (0: any nonzero size).
  std::vector<double> Numbers(const std::string& path, double lo, double hi, size_t size) const {
    const json* v = Find(path);
    const std::string want = (size ? std::to_string(size) : std::string("one or more")) + " numbers in [" + Fmt(lo) +
                             ", " + Fmt(hi) + "]";
    if (v == nullptr) Fail(path, "missing", "a list of " + want);
    if (!v->is_array() || v->empty() || (size && v->size() != size)) {
      Fail(path, v->is_array() ? "a list of " + std::to_string(v->size()) : v->dump(), "a list of " + want);
    }
    std::vector<double> out;
    for (size_t i = 0; i < v->size(); ++i) {
      const json& x = (*v)[i];
      if (!x.is_number() || !std::isfinite(x.get<double>()) || x.get<double>() < lo || x.get<double>() > hi) {
        Fail(path + "[" + std::to_string(i) + "]", x.dump(), "a number in [" + Fmt(lo) + ", " + Fmt(hi) + "]");
      }
      out.push_back(x.get<double>());
    }
    return out;
  }

 private:
  static std::string Fmt(double x) {
    std::ostringstream o;
    o << x;
    return o.str();
  }
  const json* Find(const std::string& path) const {
    const json* cur = &root_;
    std::istringstream parts(path);
    std::string part;
    while (std::getline(parts, part, '.')) {
      if (!cur->is_object() || !cur->contains(part)) return nullptr;
      cur = &(*cur)[part];
    }
    return cur;
  }
  const json& root_;
  std::string origin_;
};

LinkSpec ReadLink(const Reader& r, const std::string& key) {
  LinkSpec l;
  l.bytes_per_s = r.Number(key + ".bandwidth_gbps", 1e-6, 1e6) * 1e9;
  l.latency_s = r.Number(key + ".latency_us", 0, 1e6) * 1e-6;
  l.efficiency = r.Number(key + ".efficiency", 1e-3, 1);
  if (r.Has(key + ".wire_latency_us")) {
    l.wire_latency_s = r.Number(key + ".wire_latency_us", 0, l.latency_s * 1e6) * 1e-6;
  }
  return l;
}

MatmulTable ReadMatmulTable(const Reader& r) {
  MatmulTable t;
  t.tokens = r.Numbers("matmul.table.tokens", 1, 1e9, 0);
  t.dims = r.Numbers("matmul.table.dims", 1, 1e9, 0);
  for (const auto* axis : {&t.tokens, &t.dims}) {
    for (size_t i = 1; i < axis->size(); ++i) {
      if ((*axis)[i] <= (*axis)[i - 1]) {
        r.Fail(std::string("matmul.table.") + (axis == &t.tokens ? "tokens" : "dims"),
               "a list not strictly increasing at entry " + std::to_string(i), "strictly increasing sizes");
      }
    }
  }
  const size_t n = t.tokens.size() * t.dims.size() * t.dims.size();
  const char* names[] = {"forward", "input_grad", "weight_grad"};
  for (int p = 0; p < 3; ++p) t.efficiency[p] = r.Numbers(std::string("matmul.table.") + names[p], 1e-6, 10, n);
  return t;
}

}  // namespace

Hardware ParseHardware(const std::string& json_text, const std::string& origin) {
  json root;
  try {
    root = json::parse(json_text);
  } catch (const json::parse_error& e) {
    throw std::invalid_argument(origin + ": not valid JSON: " + e.what());
  }
  const Reader r(root, origin);
  Hardware h;
  h.name = r.String("name", origin);
  h.source = r.String("source", "");
  h.devices_per_node = static_cast<int>(r.Number("devices_per_node", 1, 1024));
  h.shared_compute_units = static_cast<int>(r.Number("shared_compute_units", 0, 4096));
  h.bf16_flops = r.Number("peak_tflops.bf16", 1e-6, 1e6) * 1e12;
  h.fp32_flops = r.Number("peak_tflops.fp32", 1e-6, 1e6) * 1e12;
  const std::string dtype = r.String("compute_dtype", "bf16");
  if (dtype != "bf16" && dtype != "fp32") r.Fail("compute_dtype", "\"" + dtype + "\"", "\"bf16\" or \"fp32\"");
  h.value_bytes = dtype == "bf16" ? 2 : 4;
  h.matmul_max_efficiency = r.Number("matmul.max_efficiency", 1e-3, 1);
  h.matmul_half_dim = r.Number("matmul.half_dim", 0, 1e6);
  if (r.Has("matmul.table")) h.matmul_table = ReadMatmulTable(r);
  h.attention_efficiency = r.Number("attention_efficiency", 1e-3, 1);
  h.attention_efficiency_flash_v1 = r.Has("attention_efficiency_flash_v1")
                                        ? r.Number("attention_efficiency_flash_v1", 1e-3, 1)
                                        : h.attention_efficiency;
  h.compute_overhead = r.Has("compute_overhead") ? r.Number("compute_overhead", 0.1, 100) : 1.0;
  if (r.Has("matmul.cold_weight_gbps")) h.cold_weight_bytes_per_s = r.Number("matmul.cold_weight_gbps", 1e-3, 1e6) * 1e9;
  if (r.Has("layer_overhead_us")) h.layer_overhead_s = r.Number("layer_overhead_us", 0, 1e6) * 1e-6;
  if (r.Has("action_overhead_us")) h.action_overhead_s = r.Number("action_overhead_us", 0, 1e6) * 1e-6;
  if (r.Has("layer_dispatch_us")) h.layer_dispatch_s = r.Number("layer_dispatch_us", 0, 1e6) * 1e-6;
  if (r.Has("optimizer_mparams_per_s")) h.optimizer_params_per_s = r.Number("optimizer_mparams_per_s", 1e-3, 1e9) * 1e6;
  if (r.Has("grad_handling_ns_per_param")) {
    h.grad_handling_s_per_param = r.Number("grad_handling_ns_per_param", 0, 1e6) * 1e-9;
  }
  if (r.Has("compute_cv")) h.compute_cv = r.Number("compute_cv", 0, 10);
  if (r.Has("comm_cv")) h.comm_cv = r.Number("comm_cv", 0, 10);
  h.memory_bytes = r.Number("memory.capacity_gb", 1e-3, 1e6) * 1e9;
  h.memory_bytes_per_s = r.Number("memory.bandwidth_gbps", 1e-3, 1e6) * 1e9;
  h.memory_efficiency = r.Number("memory.efficiency", 1e-3, 1);
  h.elementwise_efficiency = r.Has("memory.elementwise_efficiency") ? r.Number("memory.elementwise_efficiency", 1e-3, 1)
                                                                      : h.memory_efficiency;
  h.reserved_bytes = r.Number("memory.reserved_gb", 0, 1e6) * 1e9;
  h.intra = ReadLink(r, "intra_node");
  h.inter = ReadLink(r, "inter_node");
  if (r.Has("inter_node_idle")) h.inter_idle = ReadLink(r, "inter_node_idle");
  if (r.Has("intra_node_oversubscribed")) h.intra_oversubscribed = ReadLink(r, "intra_node_oversubscribed");
  if (r.Has("intra_node_oversubscribed_gather")) {
    h.intra_oversubscribed_gather = ReadLink(r, "intra_node_oversubscribed_gather");
  }
  if (r.Has("intra_node_tp_filled")) h.intra_tp_filled = ReadLink(r, "intra_node_tp_filled");
  if (r.Has("intra_node_p2p")) h.intra_p2p = ReadLink(r, "intra_node_p2p");
  if (r.Has("oversubscribed_compute_factor")) {
    h.oversubscribed_compute_factor = r.Number("oversubscribed_compute_factor", 1, 100);
  }
  if (r.Has("comm_cpu_gbps")) h.comm_cpu_bytes_per_s = r.Number("comm_cpu_gbps", 1e-6, 1e6) * 1e9;
  if (r.Has("comm_cpu_inter_node_gbps")) {
    h.comm_cpu_inter_bytes_per_s = r.Number("comm_cpu_inter_node_gbps", 1e-6, 1e6) * 1e9;
  }
  if (r.Has("comm_cpu_us_per_message")) {
    h.comm_cpu_s_per_message = r.Number("comm_cpu_us_per_message", 0, 1e6) * 1e-6;
  }
  if (r.Has("comm_cpu_messages_per_tp_collective")) {
    h.comm_cpu_messages_per_tp_collective = r.Number("comm_cpu_messages_per_tp_collective", 0, 1000);
  }
  if (r.Has("tp_peer_skew")) h.tp_peer_skew = r.Number("tp_peer_skew", 0, 10);
  if (r.Has("overlap_compute_slowdown")) {
    h.overlap_compute_slowdown = r.Number("overlap_compute_slowdown", 0, 10);
  }
  h.allreduce_algorithm = r.String("allreduce_algorithm", "auto");
  if (h.allreduce_algorithm != "ring" && h.allreduce_algorithm != "tree" && h.allreduce_algorithm != "auto") {
    r.Fail("allreduce_algorithm", "\"" + h.allreduce_algorithm + "\"", "\"ring\", \"tree\" or \"auto\"");
  }
  h.host_bytes_per_s = r.Number("host.memory_bandwidth_gbps", 1e-3, 1e6) * 1e9;
  h.pcie_bytes_per_s = r.Number("host.pcie_gbps", 1e-3, 1e6) * 1e9;
  h.nvme_bytes_per_s = r.Number("host.nvme_gbps", 1e-3, 1e6) * 1e9;
  if (r.Has("host.capacity_gb")) h.host_capacity_bytes = r.Number("host.capacity_gb", 1e-3, 1e9) * 1e9;
  if (r.Has("host.adamw_mparams_per_s")) {
    h.host_adamw_params_per_s = r.Number("host.adamw_mparams_per_s", 1e-3, 1e9) * 1e6;
  }
  return h;
}

std::vector<std::string> ShippedHardwareNames() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("scheduler/planner/hardware", ec)) {
    if (e.path().extension() == ".json") names.push_back(e.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

Hardware LoadHardware(const std::string& path) {
  std::ifstream in(path);
  std::string resolved = path;
  if (!in) {
    resolved = "scheduler/planner/hardware/" + path + (path.find(".json") == std::string::npos ? ".json" : "");
    in.open(resolved);
  }
  if (!in) {
    std::string list;  // the names actually shipped
    for (const std::string& n : ShippedHardwareNames()) list += (list.empty() ? "" : ", ") + n;
    throw std::invalid_argument("--hardware: '" + path +
                                "' is neither a readable file nor a name under scheduler/planner/hardware/ (" +
                                (list.empty() ? "none found from here" : list) + ")");
  }
  std::stringstream text;
  text << in.rdbuf();
  return ParseHardware(text.str(), resolved);
}

}  // namespace planner
}  // namespace zeropp
