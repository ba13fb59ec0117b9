// pipeline_bench: every schedule on the ranks the launcher started (pp = world size, zero = 1):
// tokens/s, mean step time over --steps steps with its standard deviation, measured bubble beside
// the formula, bytes per step, peak heap growth per rank, and the simulator's prediction. The
// simulator is calibrated once, on the first run (ZB-H1: forward, Bi, W and optimizer times from
// its traces) plus a measured point-to-point alpha/beta and copy rate, and then predicts the other
// layouts. Every schedule's trainer lives at once and their steps alternate, so the machine's drift
// over minutes falls on all alike. ZB-H1 vs 1F1B and split vs unsplit (ZB-H1, ZeroPP with two
// units and with one) are judged on the mean of the per-step differences against twice its standard
// error; the simulator's predicted gain is printed beside each. Writes each rank's trace and the
// simulator's trace to --out DIR (for ./zpp timeline). Run by benchmarks/pipeline.sh.
#include <ATen/ops/cross_entropy_loss.h>
#include <ATen/ops/full.h>
#include <ATen/ops/zeros.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "benchmarks/ping_pong.h"
#include "models/byte_corpus.h"
#include "models/gpt.h"
#include "scheduler/generators.h"
#include "scheduler/runtime/executor.h"
#include "zeropp/zeropp.h"
#include "scheduler/simulator.h"
#include "scheduler/validator.h"
#include "zeropp/cli/cli_main.h"
#include "zeropp/process_groups.h"

namespace zeropp {
namespace {

using Clock = std::chrono::steady_clock;


// One-way time of a message of `bytes` between pp ranks 0 and 1 (ping-pong / 2).
double OneWaySeconds(Communicator& pp, int64_t bytes, int iters) {
  at::Tensor buf = at::zeros({std::max<int64_t>(1, bytes / 4)});
  if (pp.rank() > 1) return 0;
  auto t0 = Clock::now();
  PingPong(pp, buf, iters);
  return std::chrono::duration<double>(Clock::now() - t0).count() / iters / 2;
}

int Main(int argc, char** argv) {
  std::string out = "/tmp/zpp-pipeline";
  int steps = 20;
  double matmul_gflops = 0;  // one thread's fp32 matmul throughput (matmul_bench), for MFU
  for (int i = 1; i + 1 < argc; ++i) {
    if (!std::strcmp(argv[i], "--out")) out = argv[i + 1];
    if (!std::strcmp(argv[i], "--steps")) steps = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--matmul-gflops")) matmul_gflops = std::atof(argv[i + 1]);
  }
  at::set_num_threads(1);
  DistEnv env = DistEnv::FromEnvironment();
  const int pp = env.world_size;
  ParallelConfig cfg{pp, 1, 1, DpMode::kDp};
  auto groups = ProcessGroups::Create(env, cfg, {});
  const bool lead = env.rank == 0;
  models::GptConfig g;
  g.vocab = 256;
  g.context = 64;
  g.width = 256;
  g.depth = 8;
  g.heads = 8;
  const int64_t b = 4, m = 8;
  auto corpus = models::ByteCorpus::FromDirectory("/usr/share/common-licenses");
  // Link calibration for the simulator.
  const int64_t act_bytes = b * g.context * g.width * 4;
  const int64_t big = 16 << 20;
  const double t_small = OneWaySeconds(groups->pp(), 4, 50), t_big = OneWaySeconds(groups->pp(), big, 10);
  scheduler::CostModel cost;
  cost.inter.alpha_s = MaxOverRanks(groups->world(), t_small);
  const double t_big_all = MaxOverRanks(groups->world(), t_big);
  cost.inter.bytes_per_s = big / std::max(1e-9, t_big_all - cost.inter.alpha_s);
  cost.activation_bytes = static_cast<double>(act_bytes);
  {
    // Local copy rate: a gather writes the whole chunk into its unsharded buffer.
    at::Tensor src = at::ones({big / 4}), dst = at::empty({big / 4});
    dst.copy_(src);
    const auto c0 = Clock::now();
    for (int i = 0; i < 10; ++i) dst.copy_(src);
    const double t_copy = std::chrono::duration<double>(Clock::now() - c0).count() / 10;
    cost.copy_bytes_per_s = big / std::max(1e-9, MaxOverRanks(groups->world(), t_copy));
  }
  if (lead) {
    std::printf("# pipeline bench: %s, pp=%d, micro-batch %lld x %lld tokens, m=%lld; p2p alpha %.0f us, beta %.2f GB/s, copy %.2f GB/s\n",
                g.ToString().c_str(), pp, (long long)b, (long long)g.context, (long long)m, cost.inter.alpha_s * 1e6,
                cost.inter.bytes_per_s / 1e9, cost.copy_bytes_per_s / 1e9);
    std::printf("# %-18s %9s %9s %7s %8s %8s %8s %9s %9s %10s %9s %8s %8s %6s\n", "schedule", "tok/s", "step_s", "sd_s",
                "bubble", "formula", "sim_bub", "sim_step", "step/sim", "MB/step", "act_peak", "work_s", "heap_MB", "mfu");
    std::printf("# MFU: model FLOP/s (6 x matmul parameters + 12 x depth x width x context per token) over %.1f GFLOP/s "
                "x %d cores used\n", matmul_gflops, std::min<int>(pp, std::thread::hardware_concurrency()));
  }
  struct Run {
    std::string name;
    int v, u;
    double formula;
    bool split = true;  // false: Bi does the whole backward, W nothing (the ablation)
  };
  const double p1 = pp - 1;
  // The first run is the simulator's calibration (F, Bi, W, optimizer and per-rank scale, from its
  // traces); every other layout is predicted from it, not from its own times.
  std::vector<Run> runs = {{"zb-h1", 1, 0, p1 / (3 * m)},      {"gpipe", 1, 0, p1 / m},
                           {"1f1b", 1, 0, p1 / m},             {"interleaved", 2, 0, p1 / (2 * m)},
                           {"zeropp", 2, static_cast<int>(m / 2), -1}, {"zeropp", 2, static_cast<int>(m), -1},
                           {"zb-h1", 1, 0, p1 / (3 * m), false},    {"zeropp", 2, static_cast<int>(m / 2), -1, false},
                           {"zeropp", 2, static_cast<int>(m), -1, false}};
  LossFn loss_fn = [](const at::Tensor& o, const at::Tensor& t) {
    return at::cross_entropy_loss(o.reshape({-1, o.size(-1)}), t.reshape({-1}));
  };
  // More ranks than cores: the neighbour fills idle time, so bubbles and step ratios mean less.
  const bool oversubscribed = env.local_world_size > static_cast<int>(std::thread::hardware_concurrency());
  const std::string prefix = "pp" + std::to_string(pp) + (oversubscribed ? "_oversubscribed_" : "_");
  struct Stats {
    double mean = 0, sd = 0, lo = 0, hi = 0;
  };
  auto stats = [](const std::vector<double>& v) {
    Stats r;
    for (double x : v) r.mean += x / v.size();
    for (double x : v) r.sd += (x - r.mean) * (x - r.mean) / std::max<size_t>(1, v.size() - 1);
    r.sd = std::sqrt(r.sd);
    r.lo = *std::min_element(v.begin(), v.end());
    r.hi = *std::max_element(v.begin(), v.end());
    return r;
  };
  std::map<std::string, Stats> measured;
  std::map<std::string, double> predicted;  // the simulator's step time per schedule (rank 0)
  std::map<std::string, std::vector<double>> per_step;  // by tag: each measured step's time
  scheduler::CostModel calibrated = cost;
  bool have_calibration = false;
  double step_overhead = 0;
  // Every schedule's trainer is built first and the steps are interleaved (one step of each in
  // turn), so that the machine's drift over minutes affects every schedule alike.
  struct Live {
    Run run;
    torch::nn::Sequential model;
    std::unique_ptr<Trainer> trainer;
    double stage_param_bytes = 0;
    bool whole_first = false;
    std::vector<double> step_times;  // per measured step, the slowest rank's wall time
    double bytes = 0, f_sum = 0, b_sum = 0, bi_sum = 0, w_sum = 0, busy = 0, opt = 0, trace_sum = 0;
    int f_n = 0, b_n = 0, bi_n = 0, w_n = 0;
  };
  std::vector<Live> lives;
  for (const Run& run : runs) {
    Live l;
    l.run = run;
    torch::manual_seed(1);
    l.model = models::MakeGpt(g);
    TrainerOptions to;
    to.layout = groups->config();
    to.pipeline.schedule = ParsePipelineSchedule("schedule", run.name);
    to.pipeline.chunks = run.v;
    to.microbatches = static_cast<int>(m);
    to.pipeline.unit_size = run.u;
    to.pipeline.split_backward = run.split;
    to.pipeline.measure_heap = true;
    to.engine.adamw.lr = 1e-3f;
    l.trainer = std::make_unique<Trainer>(l.model.ptr(), *groups, to);
    scheduler::Executor& ex = l.trainer->executor();
    double my_param_bytes = 0;  // this rank's parameters, all chunks, in compute dtype
    int first_stage_units = 0;
    for (int k = 0; k < l.trainer->engine().num_units(); ++k) {
      const auto* f = l.trainer->engine().unit(k).flat();
      if (f && ex.stage_of_unit(k) % pp == env.rank) my_param_bytes += static_cast<double>(f->padded_numel()) * 4;
      first_stage_units += ex.stage_of_unit(k) == 0 ? 1 : 0;
    }
    l.stage_param_bytes = SumOverRanks(groups->world(), my_param_bytes) / pp;
    l.whole_first = run.split && first_stage_units < 2;
    lives.push_back(std::move(l));
  }
  for (int s = 0; s <= steps; ++s) {
    std::vector<at::Tensor> xs(m), ys(m);
    for (int64_t i = 0; i < m; ++i) corpus.MicroBatch(s, i, 0, 1, b, m, g.context, 7, &xs[i], &ys[i]);
    for (Live& l : lives) {
      scheduler::Executor& ex = l.trainer->executor();
      groups->world().Barrier()->Wait();
      auto t0 = Clock::now();
      const CommStats pp0 = groups->pp().Stats();
      StepResult r = l.trainer->Step(xs, ys, loss_fn);
      const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
      if (s == 0) continue;  // warm-up
      l.step_times.push_back(MaxOverRanks(groups->world(), secs));
      l.bytes += (r.zero_comm.TotalSent() + r.dp_comm.TotalSent() + groups->pp().Stats().Since(pp0).TotalSent()) / steps;
      l.trace_sum += ex.trace().empty() ? 0 : ex.trace().back().end_s;
      for (const auto& e : ex.trace()) {
        const double d = e.end_s - e.start_s;
        size_t letters = 0;  // an action prints as its kind's letters, then chunk.mb (schedule.h)
        while (letters < e.name.size() && std::isalpha(static_cast<unsigned char>(e.name[letters]))) ++letters;
        const std::string kind = e.name.substr(0, letters);
        const bool first_stage = env.rank == 0 && std::atoi(e.name.c_str() + letters) == 0;
        if (e.name == "OPT") l.opt += d;
        if (kind == "F" || kind == "R" || kind == "B" || kind == "Bi" || kind == "W") l.busy += d;
        if (kind == "F" || kind == "R") l.f_sum += d, ++l.f_n;
        if (kind == "B" || (kind == "Bi" && first_stage && l.whole_first)) l.b_sum += d, ++l.b_n;
        if (kind == "Bi" && !(first_stage && l.whole_first)) l.bi_sum += d, ++l.bi_n;
        if (kind == "W" && !(first_stage && l.whole_first)) l.w_sum += d, ++l.w_n;
      }
    }
  }
  for (Live& l : lives) {
    const Run& run = l.run;
    scheduler::Executor& ex = l.trainer->executor();
    const double stage_param_bytes = l.stage_param_bytes;
    const bool whole_first = l.whole_first;
    const std::vector<double>& step_times = l.step_times;
    const double bytes = l.bytes, f_sum = l.f_sum, b_sum = l.b_sum, bi_sum = l.bi_sum, w_sum = l.w_sum;
    const double busy = l.busy, opt = l.opt, trace_sum = l.trace_sum;
    const int f_n = l.f_n, b_n = l.b_n, bi_n = l.bi_n, w_n = l.w_n;
    auto mean = [&](double sum, int n) {
      const double all = SumOverRanks(groups->world(), n);
      return all > 0 ? SumOverRanks(groups->world(), sum) / all : 0.0;
    };
    const double f_mean = mean(f_sum, f_n), b_mean = mean(b_sum, b_n);
    const double bi_mean = mean(bi_sum, bi_n), w_mean = mean(w_sum, w_n);
    const double busy_all = SumOverRanks(groups->world(), busy) / steps;
    std::vector<double> scales = GatherScalar(groups->world(), busy / steps);
    const double mean_busy = busy_all / pp;
    for (double& x : scales) x = mean_busy > 0 ? x / mean_busy : 1.0;
    const double heap_peak = MaxOverRanks(groups->world(), static_cast<double>(ex.split_stats().heap_peak_growth));
    const double opt_mean = SumOverRanks(groups->world(), opt / steps) / pp;
    const double trace_step = MaxOverRanks(groups->world(), trace_sum / steps);
    std::string tag = run.name + (run.u ? "-u" + std::to_string(run.u) : "") + (run.split ? "" : "-nosplit");
    std::ofstream(out + "/" + tag + ".rank" + std::to_string(env.rank) + ".json")
        << scheduler::ChromeTraceJson(ex.trace());
    const Stats st = stats(step_times);
    measured[tag] = st;
    per_step[tag] = step_times;
    if (!have_calibration) {  // the calibration run: per-stage costs of a v = 1 schedule
      calibrated.forward_s = f_mean * run.v;
      calibrated.backward_input_s = (bi_mean > 0 ? bi_mean : b_mean / 2) * run.v;
      calibrated.backward_weight_s = (bi_mean > 0 ? w_mean : b_mean / 2) * run.v;
      calibrated.backward_s = b_mean > 0 ? b_mean * run.v : calibrated.backward_input_s + calibrated.backward_weight_s;
      calibrated.rank_compute_scale = scales;
      calibrated.optimizer_s = opt_mean;
      // What a step costs outside the executor's actions (the loss's reduction, the step's setup):
      // the calibration run's mean wall step minus its mean traced step, added to every prediction.
      step_overhead = std::max(0.0, st.mean - trace_step);
      have_calibration = true;
    }
    if (lead) {
      scheduler::CostModel c = calibrated;
      c.first_stage_whole_backward = whole_first;
      c.stage_param_bytes = stage_param_bytes;
      if (!run.split) {  // Bi is the whole backward, W empty
        c.backward_input_s = c.backward_s;
        c.backward_weight_s = 0;
      }
      const scheduler::Schedule& sch = ex.schedule();
      scheduler::SimResult sim = scheduler::Simulate(sch, c);
      std::ofstream(out + "/" + tag + ".sim.json") << sim.ChromeTraceJson();
      sim.step_s += step_overhead;
      predicted[tag] = sim.step_s;
      scheduler::ValidationReport rep = scheduler::Validate(sch);
      int act_peak = 0;
      for (const auto& rr : rep.ranks) act_peak = std::max(act_peak, rr.peak_activations);
      // Bubble over the pipelined part (the optimizer tail excluded), as the formulas count it.
      const double measured_bubble = (pp * (trace_step - opt_mean) - busy_all) / busy_all;
      double formula = run.formula;
      if (formula < 0) {
        scheduler::CostModel uni;
        formula = scheduler::Simulate(sch, uni).bubble;  // ZeroPP: uniform-cost bubble of its schedule
      }
      const double tokens = static_cast<double>(b * m * g.context);
      const double flops_per_token = g.TrainingFlopsPerToken();
      const double cores = std::min<int>(pp, std::thread::hardware_concurrency());
      const double mfu = matmul_gflops > 0 ? tokens / st.mean * flops_per_token / 1e9 / (cores * matmul_gflops) : 0;
      std::printf("  %-18s %9.0f %9.3f %7.3f %8.3f %8.3f %8.3f %9.3f %9.3f %10.2f %9d %8.3f %8.1f %6.3f\n", tag.c_str(),
                  tokens / st.mean, st.mean, st.sd, measured_bubble, formula, sim.bubble, sim.step_s, st.mean / sim.step_s,
                  bytes / 1e6, act_peak, busy_all / pp, heap_peak / 1e6, mfu);
      if (&l == &lives.front()) {
        std::printf("  (calibration run: the simulator's costs come from its traces, plus %.1f ms per step outside the "
                    "executor; the other rows are predictions)\n", step_overhead * 1e3);
      } else {
        std::printf("RESULT pipeline %s%s_step_s=%.4f s reference=%.4f ratio=%.3f target=1.15 %s\n", prefix.c_str(),
                    tag.c_str(), st.mean, sim.step_s, st.mean / sim.step_s,
                    std::abs(st.mean / sim.step_s - 1) <= 0.15 ? "MET" : "MISSED");
      }
      std::fflush(stdout);
    }
  }
  // The decoupled W's effect and the zero-bubble schedule's: mean step times over `steps` steps
  // each. The schedules' steps alternate (step s of every schedule runs back to back on the same
  // data), so the comparison is paired: the gain is the mean of the per-step differences, and it is
  // MET only when it exceeds twice its standard error (the spread of that mean from run to run).
  // The unpaired standard error is printed beside it; drift that moves both schedules of a pair
  // alike inflates that one and cancels in the paired one.
  const std::string uh = "zeropp-u" + std::to_string(m / 2), um = "zeropp-u" + std::to_string(m);
  for (const auto& [a, ref] : std::vector<std::pair<std::string, std::string>>{{"zb-h1", "1f1b"},
                                                                               {uh, uh + "-nosplit"},
                                                                               {um, um + "-nosplit"},
                                                                               {"zb-h1", "zb-h1-nosplit"}}) {
    if (!lead || !measured.count(a) || !measured.count(ref)) continue;
    const Stats x = measured[a], y = measured[ref];
    std::printf("# %s: mean %.4f s sd %.4f (min %.4f max %.4f); %s: mean %.4f s sd %.4f (min %.4f max %.4f); %d steps each\n",
                a.c_str(), x.mean, x.sd, x.lo, x.hi, ref.c_str(), y.mean, y.sd, y.lo, y.hi, steps);
    std::vector<double> diff;
    for (size_t i = 0; i < per_step[a].size() && i < per_step[ref].size(); ++i) diff.push_back(per_step[ref][i] - per_step[a][i]);
    const Stats d = stats(diff);
    const double se = d.sd / std::sqrt(static_cast<double>(diff.size()));
    const double se_unpaired = std::sqrt((x.sd * x.sd + y.sd * y.sd) / steps);
    std::printf("# gain %.4f s per step (paired differences: sd %.4f, standard error %.4f, %.1f standard errors; "
                "unpaired standard error %.4f)\n", d.mean, d.sd, se, se > 0 ? d.mean / se : 0.0, se_unpaired);
    // The simulator's view beside it (calibrated on the first run, not on these), for reading only.
    const double predicted_gain = predicted.count(a) && predicted.count(ref) && predicted[ref] > 0
                                      ? (predicted[ref] - predicted[a]) / predicted[ref] : 0.0;
    std::printf("# measured gain %.1f%%; the simulator predicted %.1f%% (%.4f s vs %.4f s)\n", 100 * d.mean / y.mean,
                100 * predicted_gain, predicted[a], predicted[ref]);
    std::printf("RESULT pipeline %s%s_vs_%s_step_s=%.4f s reference=%.4f ratio=%.3f target=1.00 %s\n", prefix.c_str(),
                a.c_str(), ref.c_str(), x.mean, y.mean, x.mean / y.mean, d.mean > 2 * se ? "MET" : "MISSED");
  }
  groups->world().Barrier()->Wait();
  return 0;
}

}  // namespace
}  // namespace zeropp

int main(int argc, char** argv) { return zeropp::cli::RunMain(argc, argv, zeropp::Main); }
