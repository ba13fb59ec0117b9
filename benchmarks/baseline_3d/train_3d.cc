// train_3d: the 3D baseline's training job: the same GPT, data (models/byte_corpus.h), initial
// weights and flag names as tools/train (the subset a layout comparison needs; benchmarks do not
// use tools/), with tensor parallelism added: --tp T [--sp]. Ranks are laid out TP innermost
// (rank g is TP rank g % T of the group {g - g % T, ...}: inside a node), pipeline and data
// parallelism over the rest by zeropp's own schedule IR, executor and engine (ZeRO-1 across
// replicas with --dp-mode zero1). Ends with the train job's BENCH and DONE lines, plus the TP
// group's counted bytes per step. --profile-ops prints each rank's OPS line as tools/train
// does (zeropp/cli/op_profile.h), beside which `plan --predict --design 3d` prints its charge.
// --tp-wait-log PREFIX writes each rank's TP waits over the timed steps (after --bench-warmup N)
// to PREFIX.rank<N>, and its other groups' operations over those steps (its pipeline transfers, its
// data-parallel collectives) to PREFIX.rank<N>.ops, for tools/tp_wait_skew.py.
//   zpp run --nproc-per-node 4 -- train_3d --tp 2 --pp 2 --schedule 1f1b --width 256 ...
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/Parallel.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "benchmarks/baseline_3d/tp_llama.h"
#include "benchmarks/baseline_3d/tp_ops.h"
#include "benchmarks/baseline_3d/tp_stages.h"
#include "models/byte_corpus.h"
#include "models/llama.h"
#include "zeropp/backend_factory.h"
#include "zeropp/cli/cli_main.h"
#include "zeropp/cli/loopback_bound.h"
#include "zeropp/cli/op_profile.h"
#include "zeropp/cli/proc_status.h"
#include "zeropp/host_allocator.h"
#include "zeropp/zeropp.h"

namespace zeropp {
namespace {

using cli::PeakRssMb;

// The flags this job takes, with tools/train's names and defaults.
struct Config {
  std::string model = "gpt";  // gpt | llama (then kv_heads and ffn apply)
  int64_t kv_heads = 0, ffn = 0;
  models::GptConfig gpt;
  TrainerOptions trainer;
  int64_t steps = 100, micro_batch = 8, log_every = 1, bench_warmup = 0;
  uint64_t seed = 1234;
  std::string data_dir = "/usr/share/common-licenses";
  int threads = 1, tp = 1;
  bool sp = false;
  bool profile_ops = false;  // each rank's operator time by kind, over the steps after the first
  std::string tp_wait_log;    // each rank's TP waits over the timed steps, to PATH.rank<N>
};

// --tp-wait-log's files: `text` written whole to a temporary file and renamed into place.
void WriteLogFile(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) throw std::runtime_error("tp-wait-log: cannot write '" + tmp + "': " + std::strerror(errno));
  const bool written = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !written || std::rename(tmp.c_str(), path.c_str()) != 0) {
    throw std::runtime_error("tp-wait-log: cannot write '" + path + "': " + std::strerror(errno));
  }
}

// --tp-wait-log: one line per TP wait of the timed steps, "begin_ns end_ns cpu_begin_ns cpu_end_ns
// phase" (the process CPU clock at its ends; phase 0 for a forward's collective, 1 a backward's).
void WriteTpWaitLog(const std::string& path) {
  std::string lines;
  for (const auto& w : baseline3d::TakeTpWaitLog()) {
    absl::StrAppend(&lines, w.begin_ns, " ", w.end_ns, " ", w.cpu_begin_ns, " ", w.cpu_end_ns, " ",
                    static_cast<int>(w.phase), "\n");
  }
  WriteLogFile(path, lines);
}

// PREFIX.rank<N>.ops beside it: one line per operation of this rank's pipeline, ZeRO and data groups
// after `from_ns` (the timed steps' start), "group kind bytes peer start_ns end_ns", on the steady
// clock of the waits at the OpLog's microseconds. A collective's span is its run on the group's
// communication thread; a send's or receive's runs from its issue to the return of its Wait (the
// transfer happens somewhere inside; tools/tp_wait_skew.py narrows it with the peer's side), and its
// peer is the peer's process rank (the groups' ranks are TP indices `tp_index` of `tp`-rank blocks);
// a collective's peer is -1. The OpLog keeps its last `capacity` operations: a log that may have lost
// a timed one is refused.
void WriteOpsLog(const std::string& path, ProcessGroups& groups, int64_t from_ns, size_t capacity, int tp,
                 int tp_index) {
  std::string lines;
  for (Communicator* c : {&groups.pp(), &groups.zero(), &groups.dp()}) {
    if (c->size() < 2) continue;
    const std::vector<OpRecord> ops = c->RecentOps();
    if (ops.size() >= capacity && ops.front().start_us * 1000 >= from_ns) {
      throw std::runtime_error(absl::StrCat("tp-wait-log: group ", c->name(), " ran more than ", capacity,
                                            " operations over the timed steps, expected at most that many "
                                            "(its log would miss the first ones): time fewer steps"));
    }
    for (const OpRecord& r : ops) {
      if (r.state != OpState::kDone || r.start_us * 1000 < from_ns) continue;
      const bool p2p = r.kind == OpKind::kSend || r.kind == OpKind::kRecv;
      const int peer = p2p ? c->global_ranks()[r.peer] * tp + tp_index : -1;
      absl::StrAppend(&lines, c->name(), " ", OpKindName(r.kind), " ", r.bytes, " ", peer, " ", r.start_us * 1000,
                      " ", r.end_us * 1000, "\n");
    }
  }
  WriteLogFile(path, lines);
}

Config Parse(int argc, char** argv) {
  Config c;
  c.trainer.engine.adamw.lr = 3e-3f;
  c.trainer.engine.adamw.weight_decay = 0.01f;
  c.trainer.engine.max_grad_norm = 1.0;
  auto integer = [](const std::string& name, const std::string& v) {
    int64_t x;
    if (!absl::SimpleAtoi(v, &x) || x < 0) throw std::invalid_argument(name + ": got '" + v + "', expected an integer >= 0");
    return x;
  };
  std::map<std::string, std::function<void(const std::string&)>> table = {
      {"width", [&](const std::string& v) { c.gpt.width = integer("width", v); }},
      {"depth", [&](const std::string& v) { c.gpt.depth = integer("depth", v); }},
      {"heads", [&](const std::string& v) { c.gpt.heads = integer("heads", v); }},
      {"context", [&](const std::string& v) { c.gpt.context = integer("context", v); }},
      {"vocab", [&](const std::string& v) { c.gpt.vocab = integer("vocab", v); }},
      {"steps", [&](const std::string& v) { c.steps = integer("steps", v); }},
      {"micro-batch", [&](const std::string& v) { c.micro_batch = integer("micro-batch", v); }},
      {"microbatches", [&](const std::string& v) { c.trainer.microbatches = static_cast<int>(integer("microbatches", v)); }},
      {"log-every", [&](const std::string& v) { c.log_every = std::max<int64_t>(1, integer("log-every", v)); }},
      {"bench-warmup", [&](const std::string& v) { c.bench_warmup = integer("bench-warmup", v); }},
      {"seed", [&](const std::string& v) { c.seed = static_cast<uint64_t>(integer("seed", v)); }},
      {"threads", [&](const std::string& v) { c.threads = static_cast<int>(integer("threads", v)); }},
      {"data-dir", [&](const std::string& v) { c.data_dir = v; }},
      {"tp-wait-log", [&](const std::string& v) { c.tp_wait_log = v; }},
      {"lr", [&](const std::string& v) {
         double x;
         if (!absl::SimpleAtod(v, &x) || !(x >= 0 && x <= 10)) throw std::invalid_argument("lr: got '" + v + "', expected a number in [0, 10]");
         c.trainer.engine.adamw.lr = static_cast<float>(x);
       }},
      {"pp", [&](const std::string& v) { c.trainer.layout.pp = static_cast<int>(integer("pp", v)); }},
      {"dp", [&](const std::string& v) { c.trainer.layout.dp = static_cast<int>(integer("dp", v)); }},
      {"dp-mode", [&](const std::string& v) { c.trainer.layout.dp_mode = ParseDpMode(v); }},
      {"schedule", [&](const std::string& v) { c.trainer.pipeline.schedule = ParsePipelineSchedule("schedule", v); }},
      {"chunks", [&](const std::string& v) { c.trainer.pipeline.chunks = static_cast<int>(integer("chunks", v)); }},
      {"tp", [&](const std::string& v) { c.tp = static_cast<int>(integer("tp", v)); }},
      {"model", [&](const std::string& v) {
         if (v != "gpt" && v != "llama") throw std::invalid_argument("model: got '" + v + "', expected gpt or llama");
         c.model = v;
       }},
      {"kv-heads", [&](const std::string& v) { c.kv_heads = integer("kv-heads", v); }},
      {"ffn", [&](const std::string& v) { c.ffn = integer("ffn", v); }},
  };
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--sp") {
      c.sp = true;
      continue;
    }
    if (a == "--profile-ops") {  // as tools/train: bare, or followed by true|false
      c.profile_ops = true;
      if (i + 1 < argc && (std::string(argv[i + 1]) == "true" || std::string(argv[i + 1]) == "false")) {
        c.profile_ops = std::string(argv[++i]) == "true";
      }
      continue;
    }
    auto it = a.rfind("--", 0) == 0 ? table.find(a.substr(2)) : table.end();
    if (it == table.end()) {
      std::string names;
      for (const auto& kv : table) names += (names.empty() ? "" : ", ") + kv.first;
      throw std::invalid_argument("unknown setting '" + a + "'; expected one of: " + names + ", sp, profile-ops");
    }
    if (i + 1 >= argc) throw std::invalid_argument(a + ": missing value");
    it->second(argv[++i]);
  }
  if (c.tp < 1) throw std::invalid_argument("tp: got " + std::to_string(c.tp) + ", expected an integer >= 1");
  if (!c.tp_wait_log.empty() && (c.bench_warmup == 0 || c.bench_warmup >= c.steps)) {
    throw std::invalid_argument("tp-wait-log: got --bench-warmup " + std::to_string(c.bench_warmup) + " with --steps " +
                                std::to_string(c.steps) + ", expected 0 < bench-warmup < steps (it logs the timed steps)");
  }
  if (c.sp && c.model == "llama") throw std::invalid_argument("sp: the Llama's tensor-parallel form has no sequence parallelism");
  c.trainer.layout.zero = 1;  // no ZeRO-3 inside the baseline: TP is its intra-node parallelism
  return c;
}

int Main(int argc, char** argv) {
  Config cfg = Parse(argc, argv);
  const int tp = cfg.tp;
  const bool sp = cfg.sp;
  const double idle_rss_mb = PeakRssMb();
  DistEnv env = DistEnv::FromEnvironment();
  if (env.world_size % tp != 0) {
    throw std::invalid_argument(absl::StrCat("tp(", tp, ") does not divide world_size(", env.world_size, ")"));
  }
  const int inner_world = env.world_size / tp, t = env.rank % tp, inner = env.rank / tp;
  {
    const std::string err = cfg.trainer.Resolve(inner_world);
    if (!err.empty()) throw std::invalid_argument(err);
  }
  at::set_num_threads(cfg.threads);
  // As tools/train: before the model exists, so that the tensor counters see all of it.
  if (cfg.trainer.tune_host_allocator) TuneHostAllocator();
  const bool lead = env.rank == 0;
  auto corpus = models::ByteCorpus::FromDirectory(cfg.data_dir);
  torch::manual_seed(cfg.seed);
  // The same model and initial weights as tools/train with the same flags.
  models::LlamaConfig llama;
  llama.vocab = cfg.gpt.vocab;
  llama.context = cfg.gpt.context;
  llama.width = cfg.gpt.width;
  llama.depth = cfg.gpt.depth;
  llama.heads = cfg.gpt.heads;
  llama.kv_heads = cfg.kv_heads;
  llama.ffn = cfg.ffn;
  const bool is_llama = cfg.model == "llama";
  torch::nn::Sequential reference = is_llama ? models::MakeLlama(llama) : models::MakeGpt(cfg.gpt);
  const double flops_per_token = is_llama ? llama.TrainingFlopsPerToken() : cfg.gpt.TrainingFlopsPerToken();

  // One rendezvous for all ranks; then TP index t's pp x dp groups and this rank's TP group.
  auto all = ProcessGroups::Create(env, {1, env.world_size, 1, DpMode::kDp}, {});
  auto mine = c10::make_intrusive<c10d::PrefixStore>(absl::StrCat("3d/tp_index", t), all->store());
  TrainerOptions to = cfg.trainer;
  // --tp-wait-log also writes the other groups' operations over the timed steps (WriteOpsLog): their
  // OpLogs must hold those steps' operations, not the flight recorder's last 64.
  ProcessGroupsOptions groups_options;
  if (!cfg.tp_wait_log.empty()) groups_options.comm.log_capacity = 1 << 16;
  auto groups = ProcessGroups::CreateWithStore(mine, inner, inner_world, to.layout, groups_options);
  std::vector<int> pair;
  for (int j = 0; j < tp; ++j) pair.push_back(inner * tp + j);
  const std::string name = absl::StrCat("tp", inner);
  Communicator tpc(name, env.rank, pair, c10::make_intrusive<c10d::PrefixStore>("3d/" + name + "/comm", all->store()),
                   MakeBackend("gloo", c10::make_intrusive<c10d::PrefixStore>("3d/" + name + "/pg", all->store()), t,
                               tp, std::chrono::milliseconds(60000)),
                   {});
  torch::nn::Sequential model = is_llama ? baseline3d::MakeTpLlamaSequential(reference, llama, tpc)
                                         : baseline3d::MakeTpSequential(reference, cfg.gpt, tpc, sp, nullptr);
  // This rank's slices are copies: the whole model they were cut from is not kept for the run
  // (on zeropp-vs-3d's model, 13 MB of fp32 weights beside 13 MB of model state).
  reference = nullptr;
  Trainer trainer(model.ptr(), std::move(groups), to);
  trainer.SetModelParallel(&tpc, baseline3d::IsReplicated, sp);
  const int64_t m = trainer.microbatches();
  const int64_t tokens_per_step = cfg.micro_batch * m * trainer.dp_size() * cfg.gpt.context;
  if (lead) {
    std::printf("3d train: %s width %lld depth %lld heads %lld context %lld, tp=%d%s x %s, schedule %s m=%lld, "
                "%lld tokens/step\n",
                is_llama ? "llama" : "GPT", (long long)cfg.gpt.width, (long long)cfg.gpt.depth, (long long)cfg.gpt.heads, (long long)cfg.gpt.context,
                tp, sp ? " (sequence parallel)" : "", trainer.options().layout.ToString().c_str(),
                trainer.ScheduleName().c_str(), (long long)m, (long long)tokens_per_step);
    std::fflush(stdout);
  }
  auto loss_fn = [&](const at::Tensor& out, const at::Tensor& target) {
    return baseline3d::TpLoss(out, target, cfg.gpt.vocab, tpc, sp);
  };
  double first = 0, last = 0;
  int64_t lo0 = 0, wait_us = 0, counted = 0, tp_counted = 0;
  double tp_wait_s = 0;
  cli::OpProfiler op_profiler;  // --profile-ops
  ResetHostTensorPeak();  // training's peak, after set-up
  auto t0 = std::chrono::steady_clock::now(), tb = t0;
  int64_t timed_from_ns = 0;  // the timed steps' start on the steady clock (--tp-wait-log's ops)
  for (int64_t step = 0; step < cfg.steps; ++step) {
    if (cfg.bench_warmup > 0 && step == cfg.bench_warmup) {
      all->world().Barrier()->Wait();
      lo0 = cli::LoopbackTxBytes();
      tb = std::chrono::steady_clock::now();
      timed_from_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(tb.time_since_epoch()).count();
      if (!cfg.tp_wait_log.empty()) baseline3d::SetTpWaitLogging(true);
    }
    std::vector<at::Tensor> xs(m), ys(m);
    for (int64_t k = 0; k < m; ++k) {
      corpus.MicroBatch(step, k, trainer.dp_rank(), trainer.dp_size(), cfg.micro_batch, m, cfg.gpt.context, cfg.seed,
                        &xs[k], &ys[k]);
    }
    const CommStats tp0 = tpc.Stats(), pp0 = trainer.groups().pp().Stats();
    const double tp_wait0 = baseline3d::TpWaitSeconds();
    if (cfg.profile_ops && step == 1) op_profiler.Start(/*cuda=*/false);  // the first step warms up
    StepResult r = trainer.Step(xs, ys, loss_fn);
    if (cfg.profile_ops && step >= 1 && step + 1 == cfg.steps) {
      std::printf("%s\n", cli::FormatOpTotals(op_profiler.Stop(), env.rank, static_cast<int>(step)).c_str());
      std::fflush(stdout);
    }
    if (cfg.bench_warmup > 0 && step >= cfg.bench_warmup) {
      tp_counted += tpc.Stats().Since(tp0).TotalSent();
      tp_wait_s += baseline3d::TpWaitSeconds() - tp_wait0;
      counted += r.zero_comm.TotalSent() + r.dp_comm.TotalSent() + trainer.groups().pp().Stats().Since(pp0).TotalSent();
      wait_us += r.gather_wait_us + r.reduce_wait_us;
    }
    if (step == 0) first = r.loss;
    last = r.loss;
    if (lead && ((step + 1) % cfg.log_every == 0 || step == 0 || step + 1 == cfg.steps)) {
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      // model-state and host-tensors as tools/train prints them: the engine's accounting of this
      // rank's TP slice and the host tensor bytes it holds between steps (tests/planner_memory_test).
      std::printf("step %4lld/%lld loss %.4f  grad_norm %.3f  %.0f tok/s  model-state %.1f MB/rank  "
                  "host-tensors %.1f MB\n",
                  (long long)(step + 1), (long long)cfg.steps, r.loss, r.grad_norm, tokens_per_step * (step + 1) / secs,
                  trainer.Memory().ModelStateBytes() / 1e6, HostBlockCacheStats().tensor_live_bytes / 1e6);
      std::fflush(stdout);
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (cfg.bench_warmup > 0 && cfg.steps > cfg.bench_warmup) {
    all->world().Barrier()->Wait();
    const double bsecs = std::chrono::duration<double>(std::chrono::steady_clock::now() - tb).count();
    const int64_t timed = cfg.steps - cfg.bench_warmup;
    const double tps = tokens_per_step * timed / bsecs;
    const double exposed = SumOverRanks(all->world(), wait_us / 1e6 / bsecs) / env.world_size;
    const double tp_wait = SumOverRanks(all->world(), tp_wait_s / timed) / env.world_size;
    const double net_rss = MaxOverRanks(all->world(), PeakRssMb() - idle_rss_mb);
    const double peak_tensor = MaxOverRanks(all->world(), HostBlockCacheStats().tensor_peak_bytes / 1e6);
    // Rank 0's own counters (as tools/train reports them): the first pipeline stage's.
    const double tp_bytes = static_cast<double>(tp_counted) / timed;
    const double other = static_cast<double>(counted) / timed;
    if (lead) {
      std::printf("BENCH framework=3d ranks=%d tokens_per_s=%.1f wire_bytes_per_rank_step=%.0f "
                  "counted_bytes_per_rank_step=%.0f tp_bytes_per_rank_step=%.0f tp_wait_s_per_step=%.4f exposed_comm_share=%.3f "
                  "model_flops_per_token=%.0f model_gflops=%.2f peak_rss_net_mb=%.0f peak_tensor_mb=%.1f\n",
                  env.world_size, tps, static_cast<double>(cli::LoopbackTxBytes() - lo0) / timed / env.world_size,
                  other + tp_bytes, tp_bytes, tp_wait, exposed, flops_per_token, tps * flops_per_token / 1e9,
                  net_rss, peak_tensor);
    }
  }
  if (!cfg.tp_wait_log.empty()) {
    const std::string path = cfg.tp_wait_log + ".rank" + std::to_string(env.rank);
    WriteTpWaitLog(path);
    WriteOpsLog(path + ".ops", trainer.groups(), timed_from_ns, groups_options.comm.log_capacity, tp, t);
  }
  const double peak = MaxOverRanks(all->world(), PeakRssMb());
  if (lead) {
    std::printf("DONE steps=%lld first_loss=%.4f last_loss=%.4f tokens_per_s=%.0f peak_rss_mb=%.0f\n",
                (long long)cfg.steps, first, last, tokens_per_step * cfg.steps / secs, peak);
    std::fflush(stdout);
  }
  all->world().Barrier()->Wait();
  return 0;
}

}  // namespace
}  // namespace zeropp

int main(int argc, char** argv) { return zeropp::cli::RunMain(argc, argv, zeropp::Main); }
