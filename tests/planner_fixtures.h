// planner_fixtures.h: the small hardware description and model the planner tests compute by hand
// (planner_test, op_profile_test), and helpers that add fields to that description. The layouts
// and plan request the whole-layout tests share are in planner_layouts.h.
#pragma once

#include <string>

#include "scheduler/planner/hardware.h"
#include "scheduler/planner/model_shape.h"

namespace zeropp {
namespace planner {
namespace fixtures {

inline constexpr const char* kHw = R"({
  "name": "toy", "devices_per_node": 4, "shared_compute_units": 0,
  "peak_tflops": {"bf16": 100, "fp32": 10},
  "matmul": {"max_efficiency": 0.5, "half_dim": 0}, "attention_efficiency": 0.25,
  "memory": {"capacity_gb": 80, "bandwidth_gbps": 1000, "efficiency": 0.5, "reserved_gb": 1},
  "intra_node": {"bandwidth_gbps": 100, "latency_us": 10, "efficiency": 0.5},
  "inter_node": {"bandwidth_gbps": 40, "latency_us": 20, "efficiency": 1.0},
  "allreduce_algorithm": "ring",
  "host": {"memory_bandwidth_gbps": 50, "pcie_gbps": 20, "nvme_gbps": 5}})";

inline Hardware Toy() { return ParseHardware(kHw, "toy"); }

// `json` with `field` ("key": value) added before its closing brace.
inline std::string WithField(std::string json, const std::string& field) {
  json.insert(json.rfind('}'), ", " + field);
  return json;
}

// A link field `key` of `gbps` and `latency_us`, efficiency 1.
inline std::string LinkField(const std::string& key, const std::string& gbps, int latency_us) {
  return "\"" + key + "\": {\"bandwidth_gbps\": " + gbps + ", \"latency_us\": " + std::to_string(latency_us) +
         ", \"efficiency\": 1}";
}

inline ModelShape Small() {
  ModelShape m;
  m.name = "small";
  m.hidden = 64, m.layers = 4, m.heads = 4, m.kv_heads = 4, m.ffn = 256, m.vocab = 128, m.seq = 32;
  m.tied_embedding = true;
  m.flash_attention = false;
  m.dropout = true;  // Megatron's GPT: the hand-computed activations below are Korthikanti et al.'s
  return m;
}

}  // namespace fixtures
}  // namespace planner
}  // namespace zeropp
