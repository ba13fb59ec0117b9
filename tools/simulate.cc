// simulate: predicts a schedule at any scale from a transformer's shape and the hardware.
//
//   ./zpp simulate --schedule zeropp --pp 8 --zero 8 --chunks 2 --microbatches 32 --unit-size 8
//       --hidden 4096 --layers 32 --seq 2048 --micro-batch 1 --tflops 150 --intra-gbps 300 --inter-gbps 25
//
// Cost model: a stage's forward is 2 * (12 h^2 L / pp) * b * s FLOPs at --tflops, backward twice
// that (Bi and W one forward each); activations crossing a stage boundary are b*s*h values and
// parameters are gathered over the zero group inside a node, in --bytes-per-value precision.
// Prints step time, bubble, bytes per rank per link class and peak memory per rank (model state
// 16 bytes per parameter / (pp*zero), stashed activations per the validator: 34*s*b*h bytes per
// layer kept, or the chunk input alone when recomputed; gathered chunks). --trace FILE writes the
// predicted Chrome trace.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>

#include "scheduler/generators.h"
#include "scheduler/simulator.h"
#include "scheduler/validator.h"

int main(int argc, char** argv) {
  std::map<std::string, std::string> f = {
      {"schedule", "zeropp"}, {"pp", "8"},         {"zero", "8"},         {"chunks", "2"},       {"microbatches", "32"},
      {"unit-size", "8"},     {"hidden", "4096"},  {"layers", "32"},      {"seq", "2048"},       {"micro-batch", "1"},
      {"tflops", "150"},      {"intra-gbps", "300"}, {"inter-gbps", "25"}, {"intra-alpha-us", "10"},
      {"inter-alpha-us", "20"}, {"bytes-per-value", "2"}, {"trace", ""}};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0 || !f.count(a.substr(2)) || i + 1 >= argc) {
      std::fprintf(stderr, "simulate: bad argument '%s'; flags:", a.c_str());
      for (const auto& kv : f) std::fprintf(stderr, " --%s", kv.first.c_str());
      std::fprintf(stderr, "\n");
      return 2;
    }
    f[a.substr(2)] = argv[++i];
  }
  // Every number must parse whole, be finite and be positive (bytes-per-value and the counts
  // too): a zero or negative would print inf or nan instead of a prediction.
  std::string bad;
  auto num = [&](const char* k) {
    char* end = nullptr;
    const double x = std::strtod(f[k].c_str(), &end);
    if (bad.empty() && (end == f[k].c_str() || *end != '\0' || !std::isfinite(x) || x <= 0 || x > 1e15)) {
      bad = std::string("--") + k + ": got '" + f[k] + "', expected a finite number > 0";
    }
    return x;
  };
  for (const char* k : {"pp", "zero", "chunks", "microbatches", "unit-size", "hidden", "layers", "seq", "micro-batch",
                        "tflops", "intra-gbps", "inter-gbps", "bytes-per-value"}) {
    num(k);
  }
  for (const char* k : {"intra-alpha-us", "inter-alpha-us"}) {
    const double x = std::strtod(f[k].c_str(), nullptr);
    if (bad.empty() && (!std::isfinite(x) || x < 0)) bad = std::string("--") + k + ": got '" + f[k] + "', expected >= 0";
  }
  for (const char* k : {"pp", "zero", "chunks", "microbatches", "unit-size"}) {
    const double x = std::strtod(f[k].c_str(), nullptr);
    if (bad.empty() && (x > 1e6 || x != std::floor(x))) {
      bad = std::string("--") + k + ": got '" + f[k] + "', expected a whole number in [1, 1000000]";
    }
  }
  if (!bad.empty()) {
    std::fprintf(stderr, "simulate: %s\n", bad.c_str());
    return 2;
  }
  const int pp = static_cast<int>(num("pp")), zero = static_cast<int>(num("zero")), v = static_cast<int>(num("chunks"));
  const int m = static_cast<int>(num("microbatches")), u = static_cast<int>(num("unit-size"));
  const double h = num("hidden"), layers = num("layers"), seq = num("seq"), b = num("micro-batch");
  const double bpv = num("bytes-per-value");
  try {
    using namespace zeropp::scheduler;
    Schedule s = Generate(f["schedule"], pp, v, m, f["schedule"] == "zeropp" ? u : 0);
    ValidationReport rep = Validate(s);
    if (!rep.ok) throw std::invalid_argument(rep.error);
    const double stage_params = 12 * h * h * layers / pp;
    const double fwd = 2 * stage_params * b * seq / (num("tflops") * 1e12);
    CostModel c;
    c.forward_s = fwd;
    c.backward_s = 2 * fwd;
    c.backward_input_s = fwd;
    c.backward_weight_s = fwd;
    c.activation_bytes = b * seq * h * bpv;
    c.stage_param_bytes = stage_params * bpv;
    c.zero = zero;
    c.intra = {num("intra-alpha-us") * 1e-6, num("intra-gbps") * 1e9};
    c.inter = {num("inter-alpha-us") * 1e-6, num("inter-gbps") * 1e9};
    c.blocking_p2p = TransfersBlock(f["schedule"]);
    SimResult r = Simulate(s, c);
    int act = 0, gathered = 0;
    for (const auto& rr : rep.ranks) {
      act = std::max(act, rr.peak_activations);
      gathered = std::max(gathered, rr.peak_gathered);
    }
    const bool recompute = !s.recompute.empty();
    const double layers_per_chunk = layers / (pp * v);
    const double act_bytes_each = recompute ? b * seq * h * bpv : 34 * seq * b * h * layers_per_chunk;
    const double state = 16 * stage_params / zero;
    const double peak = state + act * act_bytes_each + gathered * stage_params / v * bpv;
    std::printf("schedule %s: pp=%d zero=%d v=%d m=%d U=%d, %d GPUs; model %.1fB parameters\n", f["schedule"].c_str(), pp,
                zero, v, m, u, pp * zero, 12 * h * h * layers / 1e9);
    std::printf("step %.3f s, bubble %.3f, tokens/s %.0f\n", r.step_s, r.bubble, m * b * seq * zero / r.step_s);
    std::printf("per rank per step: intra-node all-gather %.2f GB, reduce-scatter %.2f GB; inter-node p2p %.2f GB\n",
                r.gather_bytes_per_rank / 1e9, r.reduce_bytes_per_rank / 1e9, r.p2p_bytes_per_rank / 1e9);
    std::printf("peak memory per rank %.1f GB: model state %.1f GB, %d stashed micro-batches x %.2f GB%s, %d gathered chunks\n",
                peak / 1e9, state / 1e9, act, act_bytes_each / 1e9, recompute ? " (recomputed: inputs only)" : "",
                gathered);
    if (!f["trace"].empty()) std::ofstream(f["trace"]) << r.ChromeTraceJson();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "simulate: %s\n", e.what());
    return 2;
  }
  return 0;
}
