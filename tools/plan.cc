// plan: which layout is fastest within memory, for a model, a global batch and a cluster. Every
// layout of every design is enumerated, those over the device memory dropped, the rest simulated
// (scheduler/planner) and ranked. Usage: kUsage below (printed by --help). Bad input: one line
// naming the flag, the value and what was expected; exit 2.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "scheduler/planner/hf_config.h"
#include "scheduler/planner/planner.h"
#include "scheduler/planner/train_flags.h"
#include "zeropp/cli/run_checks.h"

namespace {

constexpr const char* kUsage = R"(usage:
  ./zpp plan --model llama2-13b --seq 4096 --global-batch 512 --hardware a100-80gb-ib400 --gpus 64
      [--top 15] [--designs zero3,zeropp,pipe-fsdp,3d] [--no-offload] [--plot out.png] [--csv out.csv]
        every layout of every design within memory, ranked by predicted step time
  ./zpp plan --sweep --model llama2-7b --gpus 64 --seqs 2048,4096,8192 --inter-gbps 25,50,100,200,400
      [--plot region.png] [--csv sweep.csv]
        the best ZeroPP layout over the best 3D layout on a grid of sequence x link bandwidth
  ./zpp plan --predict LAYOUT [--trace T.json]
        one layout's PREDICT line (step, memory) and PREDICT_OPS lines (the compute charged per kind
        and pipeline rank, as train --profile-ops measures it); --trace writes the simulated step as
        Chrome trace JSON
  ./zpp estimate-memory LAYOUT
        the per-rank memory of one layout
LAYOUT: --design zero3|zeropp|pipe-fsdp|3d [--schedule gpipe|1f1b|interleaved|zb-h1|deepspeed|zeropp|zero3]
  --tp --pp --dp --zero --v --u --micro-batch [--prefetch N] [--recompute]
  [--max-deferred-w N: ZeroPP, zb-h1: at most N weight passes deferred at once per rank]
  pipelines: [--stage-layers 5,6,...,5: each chunk's layers when not split evenly]
  ZeRO designs: [--offload cpu|nvme] [--offload-params cpu|nvme] [--offload-activations cpu|nvme]
  [--reduce-fp32: gradients reduced in fp32, as FSDP's reduce_dtype=float32]
  3D: [--sp] [--zero1] [--dp-outer: rank order tp, pp, dp] [--grad-accumulation fused|autograd|fp32_add|sink:
  how W accumulates: Megatron's fused GEMM (default), autograd's add, an fp32 add, zeropp's engine]
Model: --model PRESET, or --model PATH (a Hugging Face config.json, or its directory: model_type
  llama, mistral, qwen2 or gpt2; the sequence is its max_position_embeddings unless --seq), or --hidden
  --layers --heads --vocab --seq [--kv-heads --ffn --swiglu --no-flash (a dense attention core that
  stashes its s^2 scores) --cpu-attention (PyTorch's CPU attention: priced as dense, as CPU
  descriptions are calibrated, stashing no s^2 tensor; the default on a CPU description) --flash-v1
  (FlashAttention 1's kernels) --dropout|--no-dropout (its masks stashed: gpt3 presets and configs
  with dropout have it, Llama presets and shapes given by number do not)]; flags after --model
  override the preset.
  --global-batch in sequences.
Cluster: --hardware NAME|FILE (scheduler/planner/hardware/NAME.json) --gpus N [--devices-per-node N];
  one run's inter-node link: --inter-gbps --inter-latency-us [--inter-wire-latency-us: wire-bound,
  tools/link_fit.py], with --inter-idle-gbps --inter-idle-latency-us (the same link measured idle,
  on a CPU box).
)";

using namespace zeropp::planner;

struct Flags {
  std::map<std::string, std::string> v;
  std::set<std::string> given;
  bool help = false;  // --help: print kUsage and the presets, nothing else
  bool Has(const std::string& k) const { return given.count(k) > 0; }
  const std::string& Str(const std::string& k) const { return v.at(k); }
  long Int(const std::string& k, long lo, long hi) const {
    const std::string& s = v.at(k);
    char* end = nullptr;
    const long x = std::strtol(s.c_str(), &end, 10);
    if (s.empty() || *end != '\0' || x < lo || x > hi) {
      throw std::invalid_argument(absl::StrCat("--", k, ": got '", s, "', expected a whole number in [", lo, ", ", hi, "]"));
    }
    return x;
  }
  std::vector<double> List(const std::string& k) const {
    std::vector<double> out;
    for (const auto& part : absl::StrSplit(v.at(k), ',')) {
      std::string p(part);
      char* end = nullptr;
      const double x = std::strtod(p.c_str(), &end);
      if (p.empty() || *end != '\0' || !std::isfinite(x) || x <= 0) {
        throw std::invalid_argument(absl::StrCat("--", k, ": got '", v.at(k), "', expected numbers > 0 separated by commas"));
      }
      out.push_back(x);
    }
    return out;
  }
};

const std::set<std::string> kBool = {"sweep",         "sp",         "zero1",    "dp-outer",        "recompute",
                                     "reduce-fp32",   "swiglu",     "predict",  "estimate-memory", "no-flash",
                                     "cpu-attention", "no-offload", "flash-v1", "dropout",         "no-dropout"};

Flags Parse(int argc, char** argv) {
  Flags f;
  f.v = {{"model", "llama2-7b"}, {"hidden", ""}, {"layers", ""}, {"heads", ""}, {"kv-heads", ""}, {"ffn", ""},
         {"vocab", ""}, {"seq", ""}, {"global-batch", "512"}, {"hardware", "a100-80gb-ib400"}, {"gpus", "64"},
         {"top", "15"}, {"designs", "zero3,zeropp,pipe-fsdp,3d"}, {"plot", ""}, {"csv", ""},
         {"seqs", "2048,4096,8192"}, {"inter-gbps", "25,50,100,200,400"}, {"inter-latency-us", ""},
         {"inter-idle-gbps", ""}, {"inter-idle-latency-us", ""}, {"inter-wire-latency-us", ""},
         {"design", "zeropp"}, {"schedule", ""}, {"devices-per-node", "0"}, {"offload", "none"}, {"tp", "1"},
         {"pp", "1"}, {"dp", "1"}, {"zero", "1"}, {"v", "1"}, {"u", "0"}, {"micro-batch", "1"}, {"trace", ""},
         {"prefetch", "1"}, {"offload-params", "none"}, {"offload-activations", "none"}, {"stage-layers", ""},
         {"grad-accumulation", "fused"}, {"max-deferred-w", ""}};
  for (const auto& b : kBool) f.v[b] = "0";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      f.help = true;
      return f;
    }
    const std::string k = a.rfind("--", 0) == 0 ? a.substr(2) : "";
    if (k.empty() || !f.v.count(k)) {
      std::vector<std::string> names;
      for (const auto& kv : f.v) names.push_back("--" + kv.first);
      throw std::invalid_argument(absl::StrCat("unknown argument '", a, "'; expected one of ", absl::StrJoin(names, " "),
                                               " (--help: usage)"));
    }
    f.given.insert(k);
    if (kBool.count(k)) {
      f.v[k] = "1";
      continue;
    }
    if (i + 1 >= argc) throw std::invalid_argument(absl::StrCat("--", k, ": missing its value"));
    f.v[k] = argv[++i];
  }
  return f;
}

// Where the table goes as CSV: --csv, else beside --plot's PNG (the plot is drawn from it), else "".
std::string CsvPath(const Flags& f) {
  if (!f.Str("csv").empty()) return f.Str("csv");
  return f.Str("plot").empty() ? "" : f.Str("plot") + ".csv";
}

// Refuses an output path whose directory is missing or not writable, or that is a directory, before
// any work is done (so a long plan or sweep does not end in an error with nothing written).
void CheckOutputPath(const Flags& f, const char* flag) {
  const std::string path = f.Str(flag);
  if (path.empty()) return;
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(path).has_parent_path() ? fs::path(path).parent_path() : fs::path(".");
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw std::invalid_argument(absl::StrCat("--", flag, ": got '", path, "', expected a file in an existing directory ('",
                                             dir.string(), "' is not one)"));
  }
  if (fs::is_directory(path, ec)) {
    throw std::invalid_argument(absl::StrCat("--", flag, ": got '", path, "', a directory; expected a file name"));
  }
  zeropp::cli::CheckWritable(absl::StrCat("--", flag), path);  // the directory (or the file) writable
}

// The command that trains the best ranked layout zeropp's engine runs (train_flags.h), and why the
// ones above it do not run there.
void PrintRun(const PlanRequest& q, const PlanResult& r) {
  std::string why;
  for (const Prediction& p : r.fitting) {
    std::string reason;
    const std::string flags = TrainFlags(q.model, p.layout, q.global_batch, q.hardware, &reason);
    if (flags.empty()) {
      if (why.empty()) why = absl::StrCat(p.layout.Name(), ": ", reason);
      continue;
    }
    if (&p != &r.fitting[0]) std::printf("not on zeropp's engine: %s\n", why.c_str());
    const int g = std::max(1, std::min(q.hardware.devices_per_node, q.devices)), nodes = q.devices / g;
    if (nodes <= 1) {
      std::printf("run %s: ./zpp train --nproc %d %s\n", p.layout.Name().c_str(), g, flags.c_str());
    } else if (nodes == 2 && q.hardware.shared_compute_units > 0) {
      // A CPU box described as two nodes: the two network namespaces its calibration measured.
      std::printf("run %s on this box's two network namespaces: tools/two_nodes.sh --nproc-per-node %d -- "
                  "bazel-bin/tools/train %s\n",
                  p.layout.Name().c_str(), g, flags.c_str());
    } else {
      std::printf("run %s on each of the %d nodes: ./zpp run --nproc-per-node %d --nnodes %d --node-rank <0..%d> "
                  "--master-addr <node 0> -- bazel-bin/tools/train %s\n",
                  p.layout.Name().c_str(), nodes, g, nodes, nodes - 1, flags.c_str());
    }
    return;
  }
  std::printf("no ranked layout runs on zeropp's engine (%s)\n", why.c_str());
}

ModelShape ModelFrom(const Flags& f) {
  const bool explicit_shape = f.Has("hidden") || f.Has("layers") || f.Has("heads");
  ModelShape m;
  if (explicit_shape && !f.Has("model")) {
    for (const char* k : {"hidden", "layers", "heads", "vocab", "seq"}) {
      if (!f.Has(k)) throw std::invalid_argument(absl::StrCat("--", k, ": missing; a model without --model needs --hidden --layers --heads --vocab --seq"));
    }
    m.name = "custom";
    m.tied_embedding = !f.Has("swiglu");
  } else if (IsHfConfigPath(f.Str("model"))) {
    m = ModelFromHfConfig(f.Str("model"), f.Has("seq") ? static_cast<int>(f.Int("seq", 1, 1 << 22)) : 0);
  } else {
    m = ModelPreset(f.Str("model"));
  }
  if (f.Has("hidden")) m.hidden = static_cast<int>(f.Int("hidden", 1, 1 << 20));
  if (f.Has("layers")) m.layers = static_cast<int>(f.Int("layers", 1, 100000));
  if (f.Has("heads")) m.heads = static_cast<int>(f.Int("heads", 1, 1 << 16));
  m.kv_heads = f.Has("kv-heads") ? static_cast<int>(f.Int("kv-heads", 1, 1 << 16)) : (explicit_shape && !f.Has("model") ? m.heads : m.kv_heads);
  if (f.Has("ffn")) m.ffn = static_cast<int>(f.Int("ffn", 1, 1 << 22));
  else if (m.ffn == 0) m.ffn = 4 * m.hidden;
  if (f.Has("vocab")) m.vocab = static_cast<int>(f.Int("vocab", 1, 1 << 24));
  if (f.Has("seq")) m.seq = static_cast<int>(f.Int("seq", 1, 1 << 22));
  if (f.Has("swiglu")) m.swiglu = true;
  if (f.Has("no-flash")) m.flash_attention = false;
  if (f.Has("cpu-attention")) m.flash_attention = false, m.keeps_scores = false;
  if (f.Has("dropout") && f.Has("no-dropout")) throw std::invalid_argument("--dropout and --no-dropout: give one");
  if (f.Has("dropout")) m.dropout = true;
  if (f.Has("no-dropout")) m.dropout = false;
  if (f.Has("flash-v1")) m.flash_v1 = true;
  const std::string bad = m.Validate();
  if (!bad.empty()) throw std::invalid_argument(bad);
  return m;
}

std::vector<Design> DesignsFrom(const std::string& s) {
  std::vector<Design> out;
  for (const auto& part : absl::StrSplit(s, ',')) {
    bool found = false;
    for (Design d : {Design::kZero3, Design::kZeroPP, Design::kPipeFsdp, Design::k3D}) {
      if (part == DesignName(d)) out.push_back(d), found = true;
    }
    if (!found) throw std::invalid_argument(absl::StrCat("--designs: got '", std::string(part), "', expected zero3, zeropp, pipe-fsdp or 3d"));
  }
  return out;
}

PlanRequest RequestFrom(const Flags& f) {
  PlanRequest q;
  q.model = ModelFrom(f);
  q.hardware = LoadHardware(f.Str("hardware"));
  // A CPU box runs PyTorch's CPU attention whatever kernel the model has elsewhere: priced as its
  // description was calibrated (dense) and keeping no s^2 tensor, unless --no-flash asks for a dense
  // core that does.
  if (q.hardware.shared_compute_units > 0 && !f.Has("no-flash")) {
    q.model.flash_attention = false, q.model.keeps_scores = false, q.model.flash_v1 = false;
  }
  // Overrides for one run (--predict, validation on a differently wired box): the node size and
  // the inter-node bandwidth per node.
  if (f.Has("devices-per-node")) q.hardware.devices_per_node = static_cast<int>(f.Int("devices-per-node", 1, 4096));
  if (f.Has("inter-gbps") && !f.Has("sweep")) q.hardware.inter.bytes_per_s = f.List("inter-gbps").front() * 1e9;
  if (f.Has("inter-latency-us")) q.hardware.inter.latency_s = f.List("inter-latency-us").front() * 1e-6;
  // A link given here is alpha-beta unless its wire latency is given too (LinkSpec::wire_latency_s).
  if (f.Has("inter-gbps") || f.Has("inter-latency-us")) q.hardware.inter.wire_latency_s = -1;
  if (f.Has("inter-wire-latency-us")) {
    const double wire = f.List("inter-wire-latency-us").front() * 1e-6;
    if (!(wire >= 0 && wire <= q.hardware.inter.latency_s)) {
      throw std::invalid_argument(absl::StrFormat("--inter-wire-latency-us: got %g, expected a number from 0 to the "
                                                  "link's latency (%g us)",
                                                  wire * 1e6, q.hardware.inter.latency_s * 1e6));
    }
    q.hardware.inter.wire_latency_s = wire;
  }
  // The same link measured idle (CPU boxes, Hardware::inter_idle): a link given here replaces the
  // description's, whose idle twin no longer applies unless given too.
  if (f.Has("inter-gbps") || f.Has("inter-latency-us")) q.hardware.inter_idle = {};
  if (f.Has("inter-idle-gbps") != f.Has("inter-idle-latency-us")) {
    throw std::invalid_argument("--inter-idle-gbps and --inter-idle-latency-us: got one, expected both or neither");
  }
  if (f.Has("inter-idle-gbps")) {
    q.hardware.inter_idle = {f.List("inter-idle-gbps").front() * 1e9, f.List("inter-idle-latency-us").front() * 1e-6,
                             q.hardware.inter.efficiency};
  }
  // Below 1 is refused by CheckRequest, with the same message for 0 and negative counts.
  q.devices = static_cast<int>(f.Int("gpus", -(1 << 20), 1 << 20));
  q.global_batch = static_cast<int>(f.Int("global-batch", 1, 1 << 24));
  q.designs = DesignsFrom(f.Str("designs"));
  q.offload = !f.Has("no-offload");
  const std::string bad = CheckRequest(q);
  if (!bad.empty()) throw std::invalid_argument(bad);
  return q;
}

void PrintPrediction(int rank, const Prediction& p) {
  const MemoryBreakdown& m = p.memory;
  // What an offloaded layout keeps off the device, per device: what host memory and disks must hold.
  std::string off;
  if (m.host > 0) off += absl::StrFormat(" host %.1f GB", m.host / 1e9);
  if (m.nvme > 0) off += absl::StrFormat(" nvme %.1f GB", m.nvme / 1e9);
  std::printf("%4d  %-44s %8.3f %10.0f %6.1f%%  %6.1f = %5.1f %5.1f %5.1f %5.1f  %s%s\n", rank, p.layout.Name().c_str(),
              p.step_s, p.tokens_per_s, 100 * p.mfu, m.Total() / 1e9, m.ModelState() / 1e9, m.unsharded / 1e9,
              m.activations / 1e9, (m.working + m.reserved) / 1e9, p.Dominant().c_str(),
              off.empty() ? "" : absl::StrCat(";", off, " off the device").c_str());
}

std::string Why(const Prediction& p) {
  const double s = p.step_s;
  return absl::StrCat(p.layout.Name(), ": step ", absl::StrFormat("%.3f", s), " s = compute ",
                      absl::StrFormat("%.0f%%", 100 * (p.compute_s - p.tp_comm_s) / s), " + TP comm ",
                      absl::StrFormat("%.0f%%", 100 * p.tp_comm_s / s), " + idle ",
                      absl::StrFormat("%.0f%%", 100 * p.idle_s / s), " + cross-replica reduction ",
                      absl::StrFormat("%.0f%%", 100 * p.dp_reduce_s / s), " + optimizer ",
                      absl::StrFormat("%.0f%%", 100 * p.optimizer_s / s), "; dominated by ", p.Dominant());
}

int RunPlan(const Flags& f) {
  PlanRequest q = RequestFrom(f);
  const int top = static_cast<int>(f.Int("top", 1, 100000));
  PlanResult r = Plan(q);
  std::printf("plan: %s (%.2fB parameters, seq %d) on %d x %s, global batch %d sequences (%.2fM tokens)\n",
              q.model.name.c_str(), q.model.Parameters() / 1e9, q.model.seq, q.devices, q.hardware.name.c_str(),
              q.global_batch, q.global_batch * static_cast<double>(q.model.seq) / 1e6);
  std::printf("layouts: %d considered, %d over %.0f GB, %zu fit\n", r.considered, r.over_memory,
              q.hardware.memory_bytes / 1e9, r.fitting.size());
  if (r.considered == 0) {
    std::fprintf(stderr,
                 "plan: --global-batch: got %d, but no layout of %s splits it over %d devices (each needs a whole "
                 "number of micro-batches per data-parallel and ZeRO rank, a pipeline at least pp of them); try a "
                 "multiple of %d\n",
                 q.global_batch, f.Str("designs").c_str(), q.devices, q.devices);
    return 3;
  }
  if (r.fitting.empty()) {
    std::fprintf(stderr,
                 "plan: no layout fits %s on %d x %s: the smallest needs %.1f GB per device (%s), the device has "
                 "%.1f GB\n",
                 q.model.name.c_str(), q.devices, q.hardware.name.c_str(), r.smallest_memory / 1e9,
                 r.smallest_layout.c_str(), q.hardware.memory_bytes / 1e9);
    return 3;
  }
  std::printf("rank  %-44s %8s %10s %7s  %6s   %5s %5s %5s %5s  %s\n", "layout", "step_s", "tokens/s", "MFU", "mem_GB",
              "state", "unsh", "act", "other", "dominant cost");
  for (int i = 0; i < static_cast<int>(r.fitting.size()) && i < top; ++i) PrintPrediction(i + 1, r.fitting[i]);
  std::printf("\nbest of each design:\n");
  for (Design d : q.designs) {
    const Prediction* p = BestOf(r, d);
    if (p == nullptr) {
      std::printf("  %-9s none fits\n", DesignName(d));
      continue;
    }
    std::printf("  %-9s %s\n", DesignName(d), Why(*p).c_str());
  }
  std::printf("\nwinner: %s\n", Why(r.fitting[0]).c_str());
  const Prediction* zpp = BestOf(r, Design::kZeroPP);
  const Prediction* d3 = BestOf(r, Design::k3D);
  if (zpp && d3) {
    const Layout& l = zpp->layout;
    std::printf("best ZeroPP / best 3D tokens/s: %.3f (ZeroPP's 2*s*U*b/(9*h) = %.2f; > 1 is the paper's condition)\n",
                zpp->tokens_per_s / d3->tokens_per_s, 2.0 * q.model.seq * l.u * l.micro_batch / (9.0 * q.model.hidden));
  }
  PrintRun(q, r);
  const std::string csv = CsvPath(f);
  if (!csv.empty()) {
    std::ofstream out(csv);
    if (!out) throw std::invalid_argument("--csv: cannot write '" + csv + "'");
    out << "rank,layout,design,step_s,tokens_per_s,mfu,mem_gb,compute_s,tp_comm_s,idle_s,dp_reduce_s,optimizer_s\n";
    for (size_t i = 0; i < r.fitting.size(); ++i) {
      const Prediction& p = r.fitting[i];
      out << i + 1 << "," << p.layout.Name() << "," << DesignName(p.layout.design) << "," << p.step_s << ","
          << p.tokens_per_s << "," << p.mfu << "," << p.memory.Total() / 1e9 << "," << p.compute_s << ","
          << p.tp_comm_s << "," << p.idle_s << "," << p.dp_reduce_s << "," << p.optimizer_s << "\n";
    }
    std::printf("csv: %s\n", csv.c_str());
  }
  return 0;
}

int RunSweep(const Flags& f) {
  PlanRequest base = RequestFrom(f);
  const std::vector<double> seqs = f.List("seqs"), gbps = f.List("inter-gbps");
  const std::string csv = CsvPath(f);
  std::ofstream out;
  if (!csv.empty()) {
    out.open(csv);
    if (!out) throw std::invalid_argument("--csv: cannot write '" + csv + "'");
    out << "model,hidden,seq,inter_gbps,micro_batch,zeropp_layout,zeropp_u,zeropp_tokens_per_s,d3_layout,"
           "d3_tokens_per_s,ratio,condition\n";
  }
  std::printf("sweep: %s on %d x %s (inter-node bandwidth per node varied), global batch %d\n",
              base.model.name.c_str(), base.devices, base.hardware.name.c_str(), base.global_batch);
  std::printf("%6s %8s  %-40s %10s  %-40s %10s %7s %9s\n", "seq", "IB_GB/s", "best ZeroPP", "tok/s", "best 3D", "tok/s",
              "ratio", "2sUb/9h");
  for (double s : seqs) {
    for (double g : gbps) {
      PlanRequest q = base;
      q.model.seq = static_cast<int>(s);
      // Same tokens per step at every sequence length.
      q.global_batch = std::max(1, static_cast<int>(base.global_batch * static_cast<double>(base.model.seq) / s));
      q.hardware.inter.bytes_per_s = g * 1e9;
      q.designs = {Design::kZeroPP, Design::k3D};
      PlanResult r = Plan(q);
      const Prediction* z = BestOf(r, Design::kZeroPP);
      const Prediction* d = BestOf(r, Design::k3D);
      const double ratio = z && d ? z->tokens_per_s / d->tokens_per_s : 0;
      const double cond = z ? 2.0 * s * z->layout.u * z->layout.micro_batch / (9.0 * q.model.hidden) : 0;
      std::printf("%6.0f %8.0f  %-40s %10.0f  %-40s %10.0f %7.3f %9.2f\n", s, g, z ? z->layout.Name().c_str() : "none",
                  z ? z->tokens_per_s : 0, d ? d->layout.Name().c_str() : "none", d ? d->tokens_per_s : 0, ratio, cond);
      if (out.is_open()) {
        out << q.model.name << "," << q.model.hidden << "," << s << "," << g << "," << (z ? z->layout.micro_batch : 0)
            << "," << (z ? z->layout.Name() : "") << "," << (z ? z->layout.u : 0) << "," << (z ? z->tokens_per_s : 0)
            << "," << (d ? d->layout.Name() : "") << "," << (d ? d->tokens_per_s : 0) << "," << ratio << "," << cond
            << "\n";
      }
    }
  }
  if (!csv.empty()) std::printf("csv: %s\n", csv.c_str());
  return 0;
}

Layout LayoutFrom(const Flags& f, const PlanRequest& q) {
  Layout l;
  const std::string d = f.Str("design");
  l.design = d == "zero3" ? Design::kZero3 : d == "zeropp" ? Design::kZeroPP : d == "pipe-fsdp" ? Design::kPipeFsdp
             : d == "3d" ? Design::k3D : throw std::invalid_argument("--design: got '" + d + "', expected zero3, zeropp, pipe-fsdp or 3d");
  l.tp = static_cast<int>(f.Int("tp", 1, 1 << 16));
  l.pp = static_cast<int>(f.Int("pp", 1, 1 << 16));
  l.dp = static_cast<int>(f.Int("dp", 1, 1 << 20));
  l.zero = static_cast<int>(f.Int("zero", 1, 1 << 20));
  l.v = static_cast<int>(f.Int("v", 1, 64));
  l.u = static_cast<int>(f.Int("u", 0, 1 << 20));
  l.micro_batch = static_cast<int>(f.Int("micro-batch", 1, 1 << 20));
  l.prefetch = static_cast<int>(f.Int("prefetch", 0, 64));
  l.sequence_parallel = f.Has("sp");
  l.zero1 = f.Has("zero1");
  l.dp_outer = f.Has("dp-outer");
  l.recompute = f.Has("recompute");
  if (f.Has("max-deferred-w")) l.max_deferred_w = static_cast<int>(f.Int("max-deferred-w", 0, 1 << 20));
  l.reduce_fp32 = f.Has("reduce-fp32");
  if (!ParseGradAccumulation(f.Str("grad-accumulation"), &l.grad_accumulation)) {
    throw std::invalid_argument("--grad-accumulation: got '" + f.Str("grad-accumulation") +
                                "', expected fused, autograd, fp32_add or sink");
  }
  if (f.Has("stage-layers")) {  // whole numbers >= 0; Layout::Check says whether they fit the model
    for (const auto& part : absl::StrSplit(f.Str("stage-layers"), ',')) {
      const std::string p(part);
      char* end = nullptr;
      const long n = std::strtol(p.c_str(), &end, 10);
      if (p.empty() || *end != '\0' || n < 0 || n > 100000) {
        throw std::invalid_argument("--stage-layers: got '" + f.Str("stage-layers") +
                                    "', expected whole numbers >= 0 separated by commas, one per pipeline chunk");
      }
      l.stage_layers.push_back(static_cast<int>(n));
    }
  }
  auto tier = [&](const std::string& flag) {
    const std::string t = f.Str(flag);
    return t == "cpu" ? Offload::kCpu : t == "nvme" ? Offload::kNvme : t == "none" ? Offload::kNone
           : throw std::invalid_argument("--" + flag + ": got '" + t + "', expected none, cpu or nvme");
  };
  l.params_offload = tier("offload-params");
  l.activations_offload = tier("offload-activations");
  // Offloaded parameters take the optimizer with them: --offload defaults to their tier.
  l.offload = f.Has("offload") || l.params_offload == Offload::kNone ? tier("offload") : l.params_offload;
  l.schedule = f.Has("schedule") ? f.Str("schedule") : (l.design == Design::kZeroPP ? "zeropp" : l.design == Design::kZero3 ? "zero3" : "1f1b");
  const char* own = l.design == Design::kZeroPP ? "zeropp" : l.design == Design::kZero3 ? "zero3" : nullptr;
  if (own && l.schedule != own) {
    throw std::invalid_argument(absl::StrCat("--schedule: got '", l.schedule, "', but --design ", f.Str("design"),
                                             " runs only its own schedule (", own, ")"));
  }
  PartitionAsExecuted(q.model, &l);  // without --stage-layers: as the executor would split the layers
  const std::string why = l.Check(q.model, q.devices, q.hardware.devices_per_node, q.global_batch);
  if (!why.empty()) throw std::invalid_argument("layout " + l.Name() + ": " + why);
  return l;
}

// One layout's prediction as one machine-readable line (the local validation reads it).
int RunPredict(const Flags& f) {
  const PlanRequest q = RequestFrom(f);
  const Layout l = LayoutFrom(f, q);
  const std::string trace = f.v.at("trace");
  zeropp::scheduler::SimResult sim;
  const Prediction p = Predict(q.model, l, q.hardware, q.global_batch, trace.empty() ? nullptr : &sim);
  if (!trace.empty()) {  // written whole or not at all: a temporary file renamed into place
    const std::string tmp = trace + ".tmp";
    bool written;
    {
      std::ofstream out(tmp);
      out << sim.ChromeTraceJson();
      written = static_cast<bool>(out.flush());
    }
    if (!written || std::rename(tmp.c_str(), trace.c_str()) != 0) {
      std::remove(tmp.c_str());
      throw std::invalid_argument("--trace: cannot write '" + trace + "'");
    }
  }
  std::printf("PREDICT layout=%s step_s=%.6f tokens_per_s=%.1f mfu=%.4f mem_mb=%.2f model_state_mb=%.2f "
              "model_state_rank0_mb=%.2f unsharded_mb=%.2f activations_mb=%.2f working_mb=%.2f reserved_mb=%.2f host_mb=%.2f "
              "nvme_mb=%.2f compute_s=%.6f idle_s=%.6f tp_collectives_s=%.6f blocking_gather_s=%.6f gather_B=%.0f "
              "reduce_B=%.0f p2p_B=%.0f\n",
              l.Name().c_str(), p.step_s, p.tokens_per_s, p.mfu, p.memory.Total() / 1e6, p.memory.ModelState() / 1e6,
              p.rank0_model_state / 1e6, p.memory.unsharded / 1e6, p.memory.activations / 1e6, p.memory.working / 1e6, p.memory.reserved / 1e6,
              p.memory.host / 1e6, p.memory.nvme / 1e6, p.compute_s, p.idle_s, p.tp_collectives_s, p.blocking_gather_s,
              p.gather_bytes, p.reduce_bytes, p.p2p_bytes);
  // The same kinds `train --profile-ops` measures (its OPS line), per pipeline rank.
  const std::vector<OpTimes> ops = PredictOpTimes(q.model, l, q.hardware, q.global_batch);
  for (size_t r = 0; r < ops.size(); ++r) {
    const OpTimes& o = ops[r];
    std::printf("PREDICT_OPS rank=%zu matmul_s=%.6f attention_s=%.6f elementwise_s=%.6f optimizer_s=%.6f "
                "matmul_gflop=%.3f matmul_tflops=%.3f elementwise_gvalues=%.4f copy_s=%.6f\n",
                r, o.matmul_s, o.attention_s, o.elementwise_s, o.optimizer_s, o.matmul_flops / 1e9,
                o.matmul_s > 0 ? o.matmul_flops / o.matmul_s / 1e12 : 0.0, o.elementwise_values / 1e9, o.copy_s);
  }
  return 0;
}

int RunEstimateMemory(const Flags& f) {
  const PlanRequest q = RequestFrom(f);
  const Layout l = LayoutFrom(f, q);
  zeropp::scheduler::ValidationReport rep;
  const std::vector<MemoryBreakdown> ranks = PredictMemoryPerRank(q.model, l, q.hardware, q.global_batch, &rep);
  MemoryBreakdown m;
  for (const MemoryBreakdown& b : ranks) m = b.Total() > m.Total() ? b : m;
  std::printf("estimate-memory: %s, %s on %d x %s, global batch %d\n", l.Name().c_str(), q.model.name.c_str(),
              q.devices, q.hardware.name.c_str(), q.global_batch);
  std::printf("per rank: %s\n", m.ToString().c_str());
  // Each pipeline rank, with the schedule's peaks that set its memory.
  for (size_t r = 0; r < ranks.size(); ++r) {
    const zeropp::scheduler::RankReport& x = rep.ranks[r];
    std::printf("  pipeline rank %zu: %s; peaks: %d stashed forwards (%d kept whole), %d gathered chunks, %d "
                "pending W\n",
                r, ranks[r].ToString().c_str(), x.peak_activations, x.peak_kept_activations, x.peak_gathered,
                x.peak_pending_w);
  }
  const double host = q.hardware.host_capacity_bytes / q.hardware.devices_per_node;
  const bool host_ok = host <= 0 || m.host <= host;
  std::printf("%s: %.1f of %.1f GB\n", m.Total() <= q.hardware.memory_bytes && host_ok ? "fits" : "DOES NOT FIT",
              m.Total() / 1e9, q.hardware.memory_bytes / 1e9);
  if (m.host > 0 && host > 0) {
    std::printf("host memory: %.1f of %.1f GB per device (%s)\n", m.host / 1e9, host / 1e9, host_ok ? "fits" : "over");
  }
  if (m.nvme > 0) std::printf("nvme: %.1f GB per device\n", m.nvme / 1e9);
  return m.Total() <= q.hardware.memory_bytes && host_ok ? 0 : 3;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Flags f = Parse(argc, argv);
    if (f.help) {
      const std::vector<std::string> hardware = ShippedHardwareNames();
      std::printf("%smodel presets: %s\n", kUsage, absl::StrJoin(ModelPresetNames(), " ").c_str());
      if (!hardware.empty()) std::printf("hardware: %s\n", absl::StrJoin(hardware, " ").c_str());
      return 0;
    }
    if (!f.v.at("trace").empty() && !f.Has("predict")) {
      throw std::invalid_argument("--trace: got '" + f.v.at("trace") + "' without --predict (it traces one layout's step)");
    }
    if (!f.Has("predict") && !f.Has("estimate-memory")) {
      // These describe one layout; plan and --sweep enumerate every layout, so they would be ignored.
      for (const char* k : {"design", "schedule", "tp", "pp", "dp", "zero", "v", "u", "micro-batch", "prefetch", "sp",
                            "zero1", "dp-outer", "recompute", "reduce-fp32", "offload", "offload-params",
                            "offload-activations", "stage-layers", "grad-accumulation", "max-deferred-w"}) {
        if (f.Has(k)) {
          throw std::invalid_argument(absl::StrCat("--", k, ": sets one layout, for --predict or --estimate-memory; "
                                                   "plan enumerates every layout (--designs picks designs)"));
        }
      }
    }
    CheckOutputPath(f, "plot");
    CheckOutputPath(f, "csv");
    int rc;
    if (f.Has("predict")) {
      rc = RunPredict(f);
    } else if (f.Has("estimate-memory")) {
      rc = RunEstimateMemory(f);
    } else if (f.Has("sweep")) {
      rc = RunSweep(f);
    } else {
      rc = RunPlan(f);
    }
    if (rc == 0 && !f.Str("plot").empty()) {
      const std::string csv = CsvPath(f);
      const std::string cmd = absl::StrCat("python3 tools/plan_plot.py ", f.Has("sweep") ? "sweep " : "rank ", csv, " ",
                                           f.Str("plot"));
      if (std::system(cmd.c_str()) != 0) throw std::runtime_error("--plot: '" + cmd + "' failed");
      std::printf("plot: %s\n", f.Str("plot").c_str());
    }
    return rc;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "plan: %s\n", e.what());
    return 2;
  }
}
