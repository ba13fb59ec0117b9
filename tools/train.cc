// train: trains the GPT (or, with --model llama, the Llama) of models/ with zeropp's Trainer on the
// ranks the launcher started.
//
//   ./zpp run --nproc-per-node 4 -- bazel-bin/tools/train --steps 100 --width 128
//   ./zpp demo                   (the same with --demo: the main job's settings)
// Rank 0 prints one progress line per logged step and ends with
//   DONE steps=N first_loss=A last_loss=B tokens_per_s=C peak_rss_mb=D
#include <ATen/Parallel.h>
#include <ATen/ops/cross_entropy_loss.h>
#include <ATen/ops/full.h>
#include <ATen/ops/zeros.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <sched.h>

#include <algorithm>
#include <csignal>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#include "zeropp/cli/loopback_bound.h"
#include "zeropp/cli/matmul_bound.h"
#include "zeropp/cli/op_profile.h"
#include "zeropp/cli/proc_status.h"
#include "zeropp/host_allocator.h"
#include "models/byte_corpus.h"
#include "models/gpt.h"
#include "models/llama.h"
#include "zeropp/cli/cli_main.h"
#include "zeropp/cli/run_checks.h"
#include "absl/strings/str_cat.h"
#include "tools/hf_safetensors.h"
#include "tools/train_config.h"
#include "zeropp/checkpoint/checkpoint.h"
#include "zeropp/device.h"
#include "scheduler/runtime/executor.h"
#include "zeropp/zeropp.h"

namespace zeropp {
namespace {

using cli::PeakRssMb;
using cli::ProcStatus;

int OpenFds() {
  int n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec); !ec && it != std::filesystem::end(it);
       it.increment(ec)) {
    ++n;
  }
  return n;
}

std::string Bar(int64_t done, int64_t total, int width = 20) {
  int filled = static_cast<int>(width * done / std::max<int64_t>(1, total));
  return "[" + std::string(filled, '#') + std::string(width - filled, '.') + "]";
}

// The zero group's bytes this rank sends per step, from the schedule: every Gather action
// all-gathers its chunk's units and every ReduceGrad reduce-scatters their gradients (S (z-1)/z of
// each full buffer), plus the gradient norm's and the loss's all-reduces of one double. The
// closed forms (36 B h^2 / U per layer for ZeroPP) are this for uniform layers.
double PredictedZeroBytes(Trainer& trainer) {
  const int z = trainer.groups().zero().size();
  if (z == 1) return 0;
  const ParallelConfig& cfg = trainer.groups().config();
  const int me = cfg.CoordOf(trainer.groups().rank()).pp_index;
  const scheduler::Executor& ex = trainer.executor();
  const Engine& e = trainer.engine();
  auto chunk_bytes = [&](int chunk, bool grad) {
    double b = 0;
    for (int k = 0; k < e.num_units(); ++k) {
      const FlatParam* f = e.unit(k).flat();
      if (!f || ex.stage_of_unit(k) != chunk * cfg.pp + me || (grad && ex.ReducesAtStepEnd(k))) continue;
      b += grad ? f->padded_numel() * static_cast<double>(c10::elementSize(f->reduce_dtype())) : f->full_bytes();
    }
    return b;
  };
  // A Gather of a chunk still gathered (no Release since its last Gather) moves nothing.
  double total = 0;
  std::vector<bool> gathered(ex.schedule().v, false);
  for (const auto& a : ex.schedule().ranks[me]) {
    if (a.kind == scheduler::ActionKind::kGather && !gathered[a.chunk]) {
      total += chunk_bytes(a.chunk, false);
      gathered[a.chunk] = true;
    }
    if (a.kind == scheduler::ActionKind::kRelease) gathered[a.chunk] = false;
    if (a.kind == scheduler::ActionKind::kReduceGrad) total += chunk_bytes(a.chunk, true);
  }
  for (int k = 0; k < e.num_units(); ++k) {  // cross-stage tied: one reduction per step
    const FlatParam* f = e.unit(k).flat();
    if (f && e.owned(k) && ex.ReducesAtStepEnd(k)) {
      total += f->padded_numel() * static_cast<double>(c10::elementSize(f->reduce_dtype()));
    }
  }
  return total * (z - 1) / z + 2 * (2.0 * 8 * (z - 1) / z);
}

int Main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  bool demo = false;
  std::vector<std::string> rest;
  for (const auto& a : args) {
    if (a == "--help" || a == "-h") {  // before any distributed set-up: runs without a launcher too
      std::printf("usage: ./zpp train [--nproc N] [--config FILE.json] [--SETTING VALUE ...]\n"
                  "  a JSON config holds the same settings by name; a later one wins; README, Training\n"
                  "settings:\n");
      for (const std::string& n : tools::TrainConfig::SettingNames()) std::printf("  %s\n", n.c_str());
      return 0;
    }
    if (a == "--demo") {
      demo = true;
    } else {
      rest.push_back(a);
    }
  }
  // The main job: ZeroPP, pp=2 stages x zero=2 (ZeRO-3 inside each stage) on 4 ranks, 2 chunks per
  // rank, 4 micro-batches per step in scheduling units of 2; held-out loss every 100 steps.
  if (demo) {
    rest.insert(rest.begin(), {"--steps", "300", "--log-every", "20", "--lr", "4e-3", "--pp", "2", "--schedule",
                               "zeropp", "--chunks", "2", "--microbatches", "4", "--unit-size", "2",
                               "--micro-batch", "4", "--eval-every", "100", "--eval-batches", "8", "--mfu"});
  }
  const double idle_rss_mb = ProcStatus("VmRSS:") / 1024.0;  // the process before any training state
  DistEnv env = DistEnv::FromEnvironment();
  tools::TrainConfig cfg = tools::TrainConfig::Parse(rest);
  cfg.Resolve(env.world_size);
  const bool lead = env.rank == 0;
  // Output paths are checked before training, on the rank that writes them.
  if (lead && !cfg.metrics.empty()) cli::CheckWritable("metrics", cfg.metrics);
  if (!cfg.trace.empty()) cli::CheckWritable("trace", cfg.trace + ".rank" + std::to_string(env.rank) + ".json");
  if (!cfg.trainer.engine.offload.dir.empty()) cli::CheckWritable("offload-dir", cfg.trainer.engine.offload.dir + "/x");
  if (lead && !cfg.save_dir.empty()) cli::CheckCreatableDir("save-dir", cfg.save_dir);
  cfg.CheckMemoryEstimate(env.local_world_size);
  at::set_num_threads(cfg.threads);
  if (cfg.trainer.engine.host_threads == 0 && cfg.trainer.device == "cuda") {
    // On a GPU the intra-op threads hardly matter, the host AdamW of an offloaded optimizer does:
    // by default it gets this process's cores over the node's ranks (DeepSpeed's CPU Adam takes
    // every OpenMP thread). A CPU run keeps --threads: its ranks share the cores with compute.
    cpu_set_t mask;
    const int cores = sched_getaffinity(0, sizeof(mask), &mask) == 0 ? CPU_COUNT(&mask) : 1;
    cfg.trainer.engine.host_threads = std::max(1, cores / std::max(1, env.local_world_size));
  }
  // Before the model exists, so that the tensor counters (HostBlockCacheStats) see all of it.
  if (cfg.trainer.tune_host_allocator) TuneHostAllocator();

  auto corpus = models::ByteCorpus::FromDirectory(cfg.data_dir);
  // With evaluation on, the last 5% of the stream is held out: training never sees it.
  models::ByteCorpus held_out(std::vector<uint8_t>{});
  if (cfg.eval_every > 0) std::tie(corpus, held_out) = corpus.SplitTail(0.05);
  torch::manual_seed(cfg.seed);
  auto model = cfg.model == "llama" ? models::MakeLlama(cfg.Llama()) : models::MakeGpt(cfg.gpt);
  if (!cfg.init_from.empty()) {
    const int n = tools::ImportHf(cfg.init_from, model);
    if (lead) std::printf("INIT from %s: %d tensors\n", cfg.init_from.c_str(), n);
  }
  // One runtime for every layout: pp = 1 runs the zero3 schedule, pp > 1 a pipeline schedule.
  // --trace draws each group's communication thread beside the actions (Trainer::TraceJson): its
  // OpLog must hold a whole step's operations, not the flight recorder's last 64.
  ProcessGroupsOptions groups_options;
  if (!cfg.trace.empty()) groups_options.comm.log_capacity = 1 << 14;
  auto trainer = Trainer::Create(model.ptr(), env, cfg.trainer, groups_options);
  ProcessGroups* groups = &trainer->groups();
  const int64_t dp_rank = trainer->dp_rank();
  const int64_t dp_size = trainer->dp_size();
  const int64_t microbatches = trainer->microbatches();
  const int64_t tokens_per_step = cfg.micro_batch * microbatches * dp_size * cfg.gpt.context;
  const TrainerOptions& to = trainer->options();
  // Resume: the step counter, learning rate, AdamW state and data position all follow the step.
  int64_t start = 0;
  if (!cfg.resume.empty()) {
    const std::string from = cfg.resume == "auto" ? cfg.save_dir : cfg.resume;
    if (cfg.resume != "auto" || !checkpoint::Resolve(from).empty()) {
      start = trainer->Load(from);
      if (lead) std::printf("RESUME step=%lld from %s\n", (long long)start, checkpoint::Resolve(from).c_str());
    } else if (lead) {
      std::printf("RESUME none: %s has no checkpoint yet, starting at step 0\n", from.c_str());
    }
  }
  if (lead) {
    std::printf("zeropp train: %s, %lld parameters, %s, schedule %s v=%d m=%lld U=%d, %lld tokens/step, corpus %s "
                "(%lld bytes)\n",
                cfg.ModelDescription().c_str(), (long long)cfg.NumParameters(), to.layout.ToString().c_str(),
                trainer->ScheduleName().c_str(), to.layout.pp > 1 ? to.pipeline.chunks : trainer->engine().num_units(),
                (long long)microbatches, to.pipeline.unit_size, (long long)tokens_per_step, cfg.data_dir.c_str(),
                (long long)corpus.size());
    if (to.layout.pp == 1) std::printf("%s", trainer->ScheduleText().c_str());
    if (to.engine.offload.optimizer != OffloadTarget::kNone || to.engine.offload.params != OffloadTarget::kNone) {
      std::printf("offload: host AdamW and norm on %d threads (--host-threads)\n",
                  to.engine.host_threads > 0 ? to.engine.host_threads : cfg.threads);
    }
    std::fflush(stdout);
  }
  // --mfu: every rank measures its matrix-multiply throughput at once (the machine as busy as in
  // training, on the training device and compute dtype); their sum is the bound MFU divides by.
  cli::MatmulBound bound;
  if (cfg.mfu) {
    const c10::Device dev = to.engine.device;
    const int64_t ffn = cfg.model == "llama" ? cfg.Llama().Ffn() : 4 * cfg.gpt.width;
    const auto shapes = cli::TransformerGemms(cfg.micro_batch * cfg.gpt.context, cfg.gpt.width, ffn, cfg.gpt.vocab);
    groups->world().Barrier()->Wait();
    const cli::MatmulBound mine = cli::MeasureMatmulBound(shapes, dev.is_cpu() ? 2048 : 8192, 5, dev,
                                                          to.engine.param_dtype);
    bound.square_gflops = SumOverRanks(groups->world(), mine.square_gflops);
    bound.model_gemm_gflops = SumOverRanks(groups->world(), mine.model_gemm_gflops);
    if (lead) {
      std::printf("MATMUL ranks=%d threads_per_rank=%d dtype=%s square_gflops=%.1f model_gemm_gflops=%.1f "
                  "(sums over ranks, measured at once)\n",
                  env.world_size, cfg.threads, c10::toString(to.engine.param_dtype), bound.square_gflops,
                  bound.model_gemm_gflops);
      std::fflush(stdout);
    }
  }
  // The tensor peak is training's: from here, after set-up (sharding freed the whole model).
  ResetHostTensorPeak();
  std::ofstream metrics;
  if (lead && !cfg.metrics.empty()) metrics.open(cfg.metrics);
  if (lead && !cfg.metrics.empty() && !metrics) throw std::invalid_argument("metrics: cannot write '" + cfg.metrics + "'");
  const int vocab = static_cast<int>(cfg.gpt.vocab);
  LossFn loss_fn = [vocab](const at::Tensor& out, const at::Tensor& target) {
    return at::cross_entropy_loss(out.reshape({-1, vocab}).to(at::kFloat), target.reshape({-1}));
  };
  double first_loss = 0, last_loss = 0;
  // Held-out loss: the same windows every time (step index -1 of the held-out stream).
  auto evaluate = [&](int64_t step) {
    const int64_t nb = cfg.eval_batches;
    std::vector<at::Tensor> xs(nb), ys(nb);
    for (int64_t m = 0; m < nb; ++m) {
      held_out.MicroBatch(0, m, dp_rank, dp_size, cfg.micro_batch, nb, cfg.gpt.context, cfg.seed, &xs[m], &ys[m]);
    }
    const double loss = trainer->Evaluate(xs, ys, loss_fn);
    if (lead) {
      std::printf("EVAL step=%lld loss=%.4f ppl=%.2f\n", (long long)step, loss, std::exp(loss));
      std::fflush(stdout);
    }
  };
  const OffloadOptions& off = to.engine.offload;
  const bool offloading = off.any();
  offload::SwapStats io_before = trainer->Memory().io;
  auto t0 = std::chrono::steady_clock::now();
  auto t_step = t0;
  // Benchmark window: the steps after --bench-warmup, timed between barriers.
  auto tb = t0;
  int64_t lo0 = 0, counted = 0, wait_us = 0;
  std::vector<double> bench_step_s;  // each timed step's wall time on this rank (the BENCH spread)
  scheduler::TimeShares shares;  // --profile
  cli::OpProfiler op_profiler;    // --profile-ops
  double profiled_s = 0;
  double bench_tps = 0;  // tokens/s over the timed window (--bench-warmup)
  // Fault injection for the restart test: ZEROPP_TEST_KILL="RANK:STEP" kills that rank (SIGKILL)
  // before that step, on the first start only.
  const char* kill_spec = std::getenv("ZEROPP_TEST_KILL");
  const char* restart = std::getenv("TORCHELASTIC_RESTART_COUNT");
  const bool first_start = restart == nullptr || std::string(restart) == "0";
  for (int64_t step = start; step < cfg.steps; ++step) {
    if (kill_spec && first_start && std::string(kill_spec) == absl::StrCat(env.rank, ":", step)) {
      std::raise(SIGKILL);
    }
    if (cfg.bench_warmup > 0 && step == cfg.bench_warmup) {
      groups->world().Barrier()->Wait();
      lo0 = cli::LoopbackTxBytes();
      tb = std::chrono::steady_clock::now();
    }
    std::vector<at::Tensor> xs(microbatches), ys(microbatches);
    for (int64_t m = 0; m < microbatches; ++m) {
      corpus.MicroBatch(step, m, dp_rank, dp_size, cfg.micro_batch, microbatches, cfg.gpt.context, cfg.seed, &xs[m],
                        &ys[m]);
    }
    // --profile-ops: every step after the first (which warms up), stopped after the last.
    if (cfg.profile_ops && step == start + 1) op_profiler.Start(to.engine.device.is_cuda());
    const auto step_t0 = std::chrono::steady_clock::now();
    const CommStats pp0 = groups->pp().Stats();
    StepResult r = trainer->Step(xs, ys, loss_fn);
    if (cfg.profile_ops && step > start && step + 1 == cfg.steps) {
      if (to.engine.device.is_cuda()) StreamEvent::RecordCurrent(to.engine.device).Synchronize();
      const cli::OpTotals ops = op_profiler.Stop();
      std::printf("%s\n", cli::FormatOpTotals(ops, env.rank, static_cast<int>(step - start)).c_str());
      // The names behind the kinds: which kernels (operators, on a CPU) the time went to.
      std::printf("%s\n", cli::FormatOpTop(ops, env.rank, static_cast<int>(step - start), /*top=*/30).c_str());
      std::fflush(stdout);
    }
    const double p2p_sent = groups->pp().Stats().Since(pp0).TotalSent();  // between pipeline stages
    if (cfg.profile && step > start) {  // the first step warms up
      shares.Add(trainer->LastStepShares());
      profiled_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - step_t0).count();
    }
    if (step == start) first_loss = r.loss;
    if (cfg.bench_warmup > 0 && step >= cfg.bench_warmup) {
      counted += r.zero_comm.TotalSent() + r.dp_comm.TotalSent();
      wait_us += r.gather_wait_us + r.reduce_wait_us;
      bench_step_s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - step_t0).count());
    }
    last_loss = r.loss;
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double tps = tokens_per_step * (step + 1 - start) / secs;
    if (lead && ((step + 1) % cfg.log_every == 0 || step == 0 || step + 1 == cfg.steps)) {
      MemoryStats mem = trainer->Memory();
      // host-tensors: the host tensor bytes this rank holds between steps (on a CPU device, its
      // model state and the step's batch; not the other pipeline stages' weights).
      std::printf("step %4lld/%lld %s loss %.4f  grad_norm %.3f  %.0f tok/s  rss %.0f MB  model-state %.1f MB/rank  sent %.2f MB/step  host-tensors %.1f MB\n",
                  (long long)(step + 1), (long long)cfg.steps, Bar(step + 1, cfg.steps).c_str(), r.loss, r.grad_norm,
                  tps, PeakRssMb(), mem.ModelStateBytes() / 1e6, (r.zero_comm.TotalSent() + r.dp_comm.TotalSent()) / 1e6,
                  HostBlockCacheStats().tensor_live_bytes / 1e6);
      if (offloading) {
        const double step_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_step).count();
        const double wait_s = (mem.io.wait_us - io_before.wait_us) / 1e6;
        std::printf("    step %.1f s: waiting on I/O %.1f s, computing and issuing %.1f s; its end (clipping, AdamW) "
                    "%.1f s, %.1f s of it waiting on I/O; read %.2f GB, wrote %.2f GB "
                    "(%.2f GB/s while waiting); %.1f MB of state on nvme, host pool %.0f MB\n",
                    step_s, wait_s, step_s - wait_s, r.finish_us / 1e6, r.finish_io_wait_us / 1e6,
                    (mem.io.bytes_read - io_before.bytes_read) / 1e9,
                    (mem.io.bytes_written - io_before.bytes_written) / 1e9,
                    wait_s > 0 ? (mem.io.bytes_read - io_before.bytes_read + mem.io.bytes_written - io_before.bytes_written) / 1e9 / step_s : 0.0,
                    mem.nvme_bytes / 1e6, mem.host_pool_bytes / 1e6);
        // Where the step's end went: what an offloaded optimizer's planner charge is checked against.
        std::printf("    its end: gradient pass and norm %.2f s, waiting for gradients to reach the host %.2f s, "
                    "AdamW %.2f s (%.0f Mparam/s over %lld parameters, waits for offloaded moments included), the rest "
                    "(copies back, write-backs) %.2f s\n",
                    r.finish_norm_us / 1e6, r.finish_grad_wait_us / 1e6, r.finish_adamw_us / 1e6,
                    r.finish_adamw_us > 0 ? r.updated_params / (r.finish_adamw_us / 1e6) / 1e6 : 0.0,
                    (long long)r.updated_params,
                    (r.finish_us - r.finish_norm_us - r.finish_grad_wait_us - r.finish_adamw_us) / 1e6);
      }
      std::fflush(stdout);
    }
    io_before = trainer->Memory().io;
    t_step = std::chrono::steady_clock::now();
    if (cfg.eval_every > 0 && ((step + 1) % cfg.eval_every == 0 || step + 1 == cfg.steps)) evaluate(step + 1);
    if (cfg.save_every > 0 && ((step + 1) % cfg.save_every == 0 || step + 1 == cfg.steps)) {
      if (cfg.async_save) {
        const double ms = trainer->SaveAsync(cfg.save_dir, cfg.keep);
        if (lead) std::printf("SAVE step=%lld async stall_ms=%.1f\n", (long long)(step + 1), ms);
      } else {
        const auto s0 = std::chrono::steady_clock::now();
        const std::string saved = trainer->Save(cfg.save_dir, cfg.keep);
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s0).count();
        if (lead) std::printf("SAVE step=%lld path=%s stall_ms=%.0f\n", (long long)(step + 1), saved.c_str(), ms);
      }
    }
    if (metrics.is_open()) {
      metrics << "{\"step\":" << r.step << ",\"loss\":" << r.loss << ",\"grad_norm\":" << r.grad_norm
              << ",\"tokens_per_s\":" << tps << ",\"bytes_sent\":" << (r.zero_comm.TotalSent() + r.dp_comm.TotalSent())
              << ",\"p2p_bytes_sent\":" << p2p_sent << ",\"all_gathers\":" << r.gathers << ",\"reduce_scatters\":" << r.reduce_scatters
              << ",\"rss_mb\":" << ProcStatus("VmRSS:") / 1024.0 << ",\"fds\":" << OpenFds()
              << ",\"threads\":" << ProcStatus("Threads:") << "}\n";
      metrics.flush();
    }
  }
  const std::string last_save = trainer->WaitForSave();
  if (lead && !last_save.empty()) std::printf("SAVE committed %s\n", last_save.c_str());
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!cfg.trace.empty()) {
    std::ofstream(cfg.trace + ".rank" + std::to_string(env.rank) + ".json") << trainer->TraceJson();
  }
  if (cfg.bench_warmup > 0 && cfg.steps > cfg.bench_warmup) {
    groups->world().Barrier()->Wait();
    const double bsecs = std::chrono::duration<double>(std::chrono::steady_clock::now() - tb).count();
    const int64_t lo1 = cli::LoopbackTxBytes();
    const int64_t timed = cfg.steps - cfg.bench_warmup;
    // Exposed communication: the time the training thread waited on gathers and reductions, as a
    // share of the step (mean over ranks).
    const double exposed = SumOverRanks(groups->world(), static_cast<double>(wait_us) / 1e6 / bsecs) / env.world_size;
    const double tps = tokens_per_step * timed / bsecs;
    bench_tps = tps;
    const double net_rss = MaxOverRanks(groups->world(), PeakRssMb() - idle_rss_mb);
    const double peak_tensor = MaxOverRanks(groups->world(), HostBlockCacheStats().tensor_peak_bytes / 1e6);
    double step_mean = 0, step_sd = 0;  // rank 0's timed steps: mean and sample standard deviation
    for (double x : bench_step_s) step_mean += x / bench_step_s.size();
    for (double x : bench_step_s) step_sd += (x - step_mean) * (x - step_mean) / std::max<size_t>(1, bench_step_s.size() - 1);
    step_sd = std::sqrt(step_sd);
    if (lead) {
      std::printf("BENCH framework=zeropp ranks=%d tokens_per_s=%.1f wire_bytes_per_rank_step=%.0f "
                  "counted_bytes_per_rank_step=%.0f exposed_comm_share=%.3f model_flops_per_token=%.0f "
                  "model_gflops=%.2f peak_rss_net_mb=%.0f peak_tensor_mb=%.1f predicted_zero_bytes_per_rank_step=%.0f "
                  "step_s_mean=%.4f step_s_sd=%.4f steps_timed=%zu\n",
                  env.world_size, tps, static_cast<double>(lo1 - lo0) / timed / env.world_size,
                  static_cast<double>(counted) / timed, exposed, cfg.ModelFlopsPerToken(),
                  tps * cfg.ModelFlopsPerToken() / 1e9, net_rss, peak_tensor, PredictedZeroBytes(*trainer), step_mean, step_sd,
                  bench_step_s.size());
    }
  }
  if (cfg.profile && shares.steps > 0) {
    // Every rank reports its own: stages and ranks differ. Idle: the step's wall time not in any
    // traced action (the step's setup, the loss's reduction, waiting at its start and end).
    const double t = profiled_s;
    auto pct = [&](double x) { return 100.0 * x / t; };
    std::printf("PROFILE rank=%d steps=%d step_s=%.4f forward=%.1f%% backward=%.1f%% backward_input=%.1f%% "
                "backward_weight=%.1f%% recompute=%.1f%% optimizer=%.1f%% wait_gather=%.1f%% wait_transfer=%.1f%% "
                "comm_calls=%.1f%% idle=%.1f%%\n",
                env.rank, shares.steps, t / shares.steps, pct(shares.forward), pct(shares.backward),
                pct(shares.backward_input), pct(shares.backward_weight), pct(shares.recompute), pct(shares.optimizer),
                pct(shares.wait_gather), pct(shares.wait_transfer), pct(shares.comm_calls),
                pct(std::max(0.0, t - shares.Accounted())));
    std::fflush(stdout);
  }
  const double run_tps = tokens_per_step * (cfg.steps - start) / secs;  // DONE's tokens/s
  if (cfg.mfu && lead) {
    // Over the timed window when there is one, else over the whole run (as DONE's tokens/s).
    const double tps = bench_tps > 0 ? bench_tps : run_tps;
    const double fpt = cfg.ModelFlopsPerToken();
    std::printf("MFU model_flops_per_token=%.0f tokens_per_s=%.1f model_gflops=%.2f matmul_gflops=%.1f mfu=%.4f "
                "mfu_model_gemm=%.4f\n",
                fpt, tps, tps * fpt / 1e9, bound.square_gflops, cli::Mfu(tps, fpt, bound.square_gflops * 1e9),
                cli::Mfu(tps, fpt, bound.model_gemm_gflops * 1e9));
    std::fflush(stdout);
  }
  const double peak_rss_mb = MaxOverRanks(groups->world(), PeakRssMb());
  // On a GPU: the caching allocator's peak (the most over ranks), after the RSS figure.
  const double peak_device_mb =
      MaxOverRanks(groups->world(), trainer->Memory().device.peak_allocated_bytes / 1048576.0);
  if (lead) {
    std::printf("DONE steps=%lld first_loss=%.4f last_loss=%.4f tokens_per_s=%.0f peak_rss_mb=%.0f%s\n",
                (long long)cfg.steps, first_loss, last_loss, run_tps,
                peak_rss_mb,
                to.device == "cpu" ? "" : absl::StrCat(" peak_device_mb=", static_cast<int64_t>(peak_device_mb + 0.5)).c_str());
    std::fflush(stdout);
  }
  groups->world().Barrier()->Wait();
  groups->Shutdown();
  return 0;
}

}  // namespace
}  // namespace zeropp

int main(int argc, char** argv) { return zeropp::cli::RunMain(argc, argv, zeropp::Main); }
