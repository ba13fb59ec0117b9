// The simulator against the pipeline formulas: with uniform costs and free communication the
// bubble is exactly (p-1)/m for GPipe and 1F1B, (p-1)/(v*m) for interleaved 1F1B and about
// (p-1)/(3m) for ZB-H1; stashed activations peak at m for GPipe and at most p for 1F1B; ZeroPP's
// all-gather bytes fall as 1/U.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "scheduler/generators.h"
#include "scheduler/simulator.h"
#include "scheduler/trace.h"
#include "scheduler/validator.h"

namespace zeropp {
namespace scheduler {
namespace {

CostModel Uniform() {
  CostModel c;
  c.forward_s = 1;
  c.backward_s = 2;
  c.backward_input_s = 1;
  c.backward_weight_s = 1;
  return c;
}

// One rank's stage in two chunks of 2 MB sharded over 2 ranks (a gather moves 1 MB): F 1 s and
// B 2 s (Bi 1 s, W 1 s) per chunk.
CostModel TwoShardedChunks() {
  CostModel c;
  c.forward_s = 2, c.backward_s = 4, c.backward_input_s = 2, c.backward_weight_s = 2;
  c.zero = 2;
  c.stage_param_bytes = 4e6;
  return c;
}

TEST(SimulatorTest, BubbleFormulas) {
  for (int p : {2, 4, 8}) {
    for (int m : {p, 2 * p, 4 * p}) {
      const double gp = Simulate(GPipe(p, m), Uniform()).bubble;
      const double f1 = Simulate(OneFOneB(p, m), Uniform()).bubble;
      EXPECT_NEAR(gp, double(p - 1) / m, 1e-12) << "gpipe p " << p << " m " << m;
      EXPECT_NEAR(f1, double(p - 1) / m, 1e-12) << "1f1b p " << p << " m " << m;
      for (int v : {2, 3, 4}) {
        const double il = Simulate(Interleaved(p, v, m), Uniform()).bubble;
        EXPECT_NEAR(il, double(p - 1) / (v * m), 1e-12) << "interleaved p " << p << " v " << v << " m " << m;
      }
      const double zb = Simulate(ZbH1(p, m), Uniform()).bubble;
      const double zb_formula = double(p - 1) / (3 * m);
      std::printf("p=%d m=%d: 1f1b %.4f, zb-h1 %.4f (formula (p-1)/(3m) = %.4f)\n", p, m, f1, zb, zb_formula);
      EXPECT_NEAR(zb, zb_formula, 1e-12) << "zb-h1 p " << p << " m " << m;
      EXPECT_LT(zb, f1 / 2);
    }
  }
}

TEST(SimulatorTest, FirstStageWholeBackwardMovesWorkIntoBi) {
  // The executor's first stage runs B+W inside Bi: the same work per rank, later W's empty.
  for (int p : {2, 4}) {
    const Schedule zb = ZbH1(p, 2 * p);
    CostModel whole = Uniform();
    whole.first_stage_whole_backward = true;
    const SimResult a = Simulate(zb, Uniform()), b = Simulate(zb, whole);
    for (int r = 0; r < p; ++r) EXPECT_DOUBLE_EQ(a.busy_s[r], b.busy_s[r]) << "p " << p << " rank " << r;
    double w0 = 0, bi0 = 0;
    for (const auto& e : b.events) {
      if (e.rank != 0) continue;
      if (e.name[0] == 'W') w0 += e.end_s - e.start_s;
      if (e.name.rfind("Bi", 0) == 0) bi0 += e.end_s - e.start_s;
    }
    EXPECT_EQ(w0, 0.0) << "p " << p;
    EXPECT_DOUBLE_EQ(bi0, 2.0 * 2 * p) << "p " << p;  // 2p micro-batches, B = 2 each
    EXPECT_GE(b.step_s, a.step_s) << "p " << p;
  }
}

TEST(SimulatorTest, RecomputedChunksPayTheirForwardAgainInB) {
  // Uniform costs F=1, B=2: each rank computes m*(F+B) = 3m, plus m*F = 4m when recomputing.
  for (int p : {2, 4}) {
    const int m = 2 * p;
    GenOptions all;
    all.recompute = RecomputePolicy::kAll;
    const SimResult plain = Simulate(OneFOneB(p, m), Uniform());
    const SimResult again = Simulate(OneFOneB(p, m, all), Uniform());
    for (int r = 0; r < p; ++r) {
      EXPECT_DOUBLE_EQ(plain.busy_s[r], 3.0 * m) << "p " << p << " rank " << r;
      EXPECT_DOUBLE_EQ(again.busy_s[r], 4.0 * m) << "p " << p << " rank " << r;
    }
    int r_events = 0;
    for (const auto& e : again.events) r_events += e.name[0] == 'R' && e.name[1] != 'A' && e.name[1] != 'G' && e.name[1] != 'S';
    EXPECT_EQ(r_events, p * m) << "one recompute per backward";
  }
}

TEST(SimulatorTest, StashedActivations) {
  for (int p : {2, 4, 8}) {
    for (int m : {1, 3, 16}) {
      ValidationReport g = Validate(GPipe(p, m)), f = Validate(OneFOneB(p, m));
      ASSERT_TRUE(g.ok && f.ok);
      for (int r = 0; r < p; ++r) {
        EXPECT_EQ(g.ranks[r].peak_activations, m);
        EXPECT_LE(f.ranks[r].peak_activations, p);
        EXPECT_EQ(f.ranks[r].peak_activations, std::min(m, p - r));
      }
    }
  }
}

TEST(SimulatorTest, ZeroPPGatherBytesFallWithUnitSize) {
  CostModel c = Uniform();
  c.stage_param_bytes = 1e9;
  c.zero = 8;
  c.intra.bytes_per_s = 1e11;
  double previous = 1e300;
  for (int u : {4, 8, 16, 32}) {
    SimResult r = Simulate(ZeroPP(4, 2, 32, u), c);
    // (2v-1) + (units-1)(2v-2) chunk gathers of stage_param_bytes/v * (zero-1)/zero each.
    const int units = 32 / u;
    const double expect = (3 + (units - 1) * 2) * (1e9 / 2) * 7.0 / 8.0;
    EXPECT_NEAR(r.gather_bytes_per_rank, expect, 1.0) << "u " << u;
    EXPECT_LT(r.gather_bytes_per_rank, previous);
    previous = r.gather_bytes_per_rank;
  }
}

// Processor sharing, by hand: GPipe over 2 ranks, 2 micro-batches, F=1, B=2, free links, both
// ranks on one core. F0 on rank 0 runs alone [0,1]; then rank 0's F1 and rank 1's F0 share the
// core, each at half speed [1,3]; rank 1's F1 alone [3,4] and its first B alone [4,6]; then the two
// ranks' B's share it [6,10]; rank 0's last B alone [10,12]. The core never idles: the step is the
// 12 s of work, against 9 s with a core each.
TEST(SimulatorTest, RanksComputingAtOnceShareTheCores) {
  const Schedule s = GPipe(2, 2);
  CostModel c = Uniform();
  EXPECT_DOUBLE_EQ(Simulate(s, c).step_s, 9);
  c.shared_cores = 2;  // as many cores as ranks: nothing changes
  EXPECT_DOUBLE_EQ(Simulate(s, c).step_s, 9);
  c.shared_cores = 1;
  const SimResult r = Simulate(s, c);
  EXPECT_DOUBLE_EQ(r.step_s, 12);
  EXPECT_DOUBLE_EQ(r.busy_s[0], 1 + 2 + 4 + 2);  // wall time of its computations
  EXPECT_DOUBLE_EQ(r.busy_s[1], 2 + 1 + 2 + 4);
  // Slower while oversubscribed: the shared stretches (2 + 4 s of wall time) take 1.5 times longer.
  c.shared_slowdown = 1.5;
  EXPECT_DOUBLE_EQ(Simulate(s, c).step_s, 12 + 0.5 * (2 + 4));
}

// A blocking collective inside a computation takes no core: with ZeRO-3's 4 ranks on 2 cores
// (half a core each), a 1 s forward of which 0.4 s is waiting takes 0.6 * 2 + 0.4 = 1.6 s.
TEST(SimulatorTest, BlockingWaitsInsideComputationsTakeNoCore) {
  Zero3Plan z;
  z.units = 1;
  const Schedule s = Zero3(1, z);
  CostModel c = Uniform();
  c.backward_s = 0, c.backward_input_s = 0, c.backward_weight_s = 0;
  c.shared_cores = 2;
  c.ranks_per_simulated_rank = 4;
  EXPECT_DOUBLE_EQ(Simulate(s, c).step_s, 2);
  c.forward_wait_s = 0.4;
  const SimResult r = Simulate(s, c);
  EXPECT_DOUBLE_EQ(r.step_s, 1.6);
  int forwards = 0;  // one trace event for the whole forward
  for (const auto& e : r.events) {
    if (e.cat != "compute" || e.name[0] != 'F') continue;
    ++forwards;
    EXPECT_DOUBLE_EQ(e.end_s - e.start_s, 1.6);
  }
  EXPECT_EQ(forwards, 1);
}

// waits_hold_cores, by hand: GPipe over 2 ranks on 1 core, 2 micro-batches, F = 1 s of which
// 0.5 s waits in a blocking collective, the last stage's F 1 s of compute more, B = 2 s. Rank 0's
// F0 [0, 1]; rank 0's F1 and rank 1's F0 share the core until rank 0's compute ends at 2 (rank 1
// has 1 s left). Then rank 0 waits [2, 2.5]: taking no core, rank 1 finishes at 3; holding it,
// rank 1 runs at half speed until 2.5 and finishes at 3.25. After that one rank computes at a
// time until both B's share the core: 13.5 s against 13.75 s.
TEST(SimulatorTest, WaitsThatHoldTheirCoresSlowTheOthers) {
  const Schedule s = GPipe(2, 2);
  CostModel c = Uniform();
  c.forward_wait_s = 0.5;
  c.virtual_stage_extra = {{}, {1.0, 0, 0, 0, 0}};
  c.shared_cores = 1;
  EXPECT_DOUBLE_EQ(Simulate(s, c).step_s, 13.5);
  c.waits_hold_cores = true;
  EXPECT_DOUBLE_EQ(Simulate(s, c).step_s, 13.75);
}

// A rank waiting on a gather it needs at once holds its core where waits do, by hand: rank 0 waits
// 1 s for its gather, then computes a 2 s forward; rank 1 computes a 2 s forward from the start;
// one core. Taking no core while it waits, rank 0 lets rank 1 run alone [0, 1]; then they share
// [1, 3] and rank 0 finishes alone at 4. Holding it, rank 1 runs at half speed from the start,
// finishes at 4, and rank 0 at 4.5. CostModel::gather_wait_core_share: holding a part of it.
TEST(SimulatorTest, GatherWaitsHoldTheirCoresWhereWaitsDo) {
  const Schedule s = Schedule::Parse(
      "schedule t pp=2 v=1 m=1 u=0\n"
      "rank 0: G0 F0.0 X0 OPT\n"
      "rank 1: F0.0 OPT\n");
  CostModel c;
  c.forward_s = 2, c.backward_s = 0, c.backward_input_s = 0, c.backward_weight_s = 0;
  c.zero = 2;
  c.stage_param_bytes = 2;
  c.intra = {1.0, 1e300};  // the gather is its latency alone
  c.shared_cores = 1;
  EXPECT_DOUBLE_EQ(Simulate(s, c).step_s, 4);
  c.waits_hold_cores = true;
  const SimResult r = Simulate(s, c);
  EXPECT_DOUBLE_EQ(r.step_s, 4.5);
  EXPECT_DOUBLE_EQ(r.busy_s[1], 4);
  // Half of rank 0 holds the core while it waits: 1.5 ranks on it, so rank 1 does 2/3 s of work
  // by 1; then both share it and rank 1's 4/3 s left take 8/3 s (done at 11/3), while rank 0 does
  // 4/3 s of its 2 s and finishes the rest alone at 13/3.
  c.gather_wait_core_share = 0.5;
  const SimResult half = Simulate(s, c);
  EXPECT_NEAR(half.step_s, 13.0 / 3, 1e-12);
  EXPECT_NEAR(half.busy_s[1], 11.0 / 3, 1e-12);
}

// A gather whose chunk the very next computation needs is waited on at once: it runs on the
// blocking link when one is set; a gather with a computation between it and its use (prefetched)
// keeps the unloaded link. By hand, one rank, zero 2, two chunks of 2 MB (1 MB moved each).
TEST(SimulatorTest, GathersWaitedOnAtOnceUseTheBlockingLink) {
  const Schedule at_once = Schedule::Parse(
      "schedule t pp=1 v=2 m=1 u=0\n"
      "rank 0: G0 F0.0 X0 G1 F1.0 B1.0 X1 G0 B0.0 X0 OPT\n");
  const Schedule prefetched = Schedule::Parse(
      "schedule t pp=1 v=2 m=1 u=0\n"
      "rank 0: G0 G1 F0.0 F1.0 B1.0 X1 B0.0 X0 OPT\n");
  CostModel c = TwoShardedChunks();
  c.intra = {0.1, 1e6};           // 1 MB: 1.1 s
  c.intra_blocking = {0.5, 2.5e5};  // 1 MB: 4.5 s
  // Chunk compute 1 s forward, 2 s backward. At once: G0 F G1 F B G0 B, each gather exposed.
  EXPECT_DOUBLE_EQ(Simulate(at_once, c).step_s, 3 * 1.1 + 2 * 1 + 2 * 2);
  EXPECT_DOUBLE_EQ(Simulate(at_once, c).blocking_gather_s, 3 * 1.1);  // waited on at once, whichever link
  c.has_intra_blocking = true;
  EXPECT_DOUBLE_EQ(Simulate(at_once, c).step_s, 3 * 4.5 + 2 * 1 + 2 * 2);
  EXPECT_DOUBLE_EQ(Simulate(at_once, c).blocking_gather_s, 3 * 4.5);
  // Prefetched: G0 is still waited on at once (F0.0 is next: blocking, ready at 4.5 s); G1, issued
  // behind it with F0.0 between it and its use, takes the unloaded link (ready at 5.6 s), so F1.0
  // starts at 5.6 s and the backwards follow.
  EXPECT_DOUBLE_EQ(Simulate(prefetched, c).step_s, 4.5 + 1.1 + 1 + 2 * 2);
  EXPECT_DOUBLE_EQ(Simulate(prefetched, c).blocking_gather_s, 4.5);
}

// CostModel::intra_idle: on a shared box the comm stream's collectives progress at the loaded
// link's rate while more ranks compute than there are cores and at the idle link's otherwise. By
// hand: one simulated rank standing for 4 ranks on 2 cores (compute at half speed while it
// computes), TwoShardedChunks: a gather 4 s loaded, 1 s idle.
TEST(SimulatorTest, CollectivesRunAtTheRateOfTheBoxsLoad) {
  const Schedule s = Schedule::Parse(
      "schedule t pp=1 v=2 m=1 u=0\n"
      "rank 0: G0 G1 F0.0 F1.0 B1.0 B0.0 OPT\n");
  CostModel c = TwoShardedChunks();
  c.intra = {0, 2.5e5};
  c.shared_cores = 2;
  c.ranks_per_simulated_rank = 4;
  // Loaded throughout (no idle link): G0 lands at 4, G1 at 8; F0.0 4-6, F1.0 8-10, B 10-14-18.
  EXPECT_DOUBLE_EQ(Simulate(s, c).step_s, 18);
  c.intra_idle = {0, 1e6};
  c.has_intra_idle = true;
  // G0 runs on an idle box (F0.0 waits for it): lands at 1. F0.0 computes 1-3 (half speed) while
  // G1 does half its work at the loaded rate; then F1.0 waits, the box is idle, and the other half
  // takes 0.5 s: G1 lands at 3.5. F1.0 3.5-5.5, B1.0 5.5-9.5, B0.0 9.5-13.5.
  SimResult r = Simulate(s, c);
  EXPECT_DOUBLE_EQ(r.step_s, 13.5);
  int gathers = 0;
  for (const SimEvent& e : r.events) {
    if (e.cat != "comm") continue;
    ++gathers;
    EXPECT_DOUBLE_EQ(e.start_s, e.name == "G0" ? 0 : 1);
    EXPECT_DOUBLE_EQ(e.end_s, e.name == "G0" ? 1 : 3.5);
  }
  EXPECT_EQ(gathers, 2);
  // A rank waiting on a gather it needs at once holds its cores where waits do: G0 runs loaded
  // (lands at 4), F0.0 4-6 with G1 half done, then G1 (prefetched: F0.0 stood between) finishes
  // idle at 6.5; F1.0 6.5-8.5, B1.0 8.5-12.5, B0.0 12.5-16.5.
  c.waits_hold_cores = true;
  EXPECT_DOUBLE_EQ(Simulate(s, c).step_s, 16.5);
  // With a compute unit per rank nothing is shared: the loaded link throughout, as without one.
  c.shared_cores = 0;
  c.waits_hold_cores = false;
  EXPECT_DOUBLE_EQ(Simulate(s, c).step_s, 4 + 4 + 1 + 2 + 2);
}

// A chunk of several scheduling units is gathered and reduced by one collective per unit: each
// pays the link's latency, the bytes are paid once. pp=1 v=1 zero=2, 2 MB of parameters (1 MB
// moved), link 0.1 s + 1 MB/s: one collective 1.1 s, three 1.3 s. F 1 s, B 2 s.
TEST(SimulatorTest, EachUnitOfAChunkIsItsOwnCollective) {
  const Schedule s = Schedule::Parse(
      "schedule t pp=1 v=1 m=1 u=0\n"
      "rank 0: G0 F0.0 B0.0 X0 RS0 OPT\n");
  CostModel c;
  c.forward_s = 1, c.backward_s = 2, c.backward_input_s = 1, c.backward_weight_s = 1;
  c.zero = 2;
  c.stage_param_bytes = 2e6;
  c.intra = {0.1, 1e6};
  EXPECT_DOUBLE_EQ(Simulate(s, c).step_s, 1.1 + 1 + 2 + 1.1);
  c.chunk_collectives = {3};
  EXPECT_DOUBLE_EQ(Simulate(s, c).step_s, 1.3 + 1 + 2 + 1.3);
  // A wire-bound link (Link::wire_alpha_s): each collective max(0.1, 0.05 + its 1/3 s of bytes),
  // then with the latency over the bytes' time, the latency alone.
  c.intra.wire_alpha_s = 0.05;
  EXPECT_DOUBLE_EQ(Simulate(s, c).step_s, 3 * (0.05 + 1.0 / 3) * 2 + 1 + 2);
  c.intra.alpha_s = 0.5;
  EXPECT_DOUBLE_EQ(Simulate(s, c).step_s, 1.5 + 1 + 2 + 1.5);
  c.chunk_collectives = {1};
  EXPECT_DOUBLE_EQ(Simulate(s, c).step_s, 1.05 + 1 + 2 + 1.05);
}

// CostModel::overlap_slowdown: computation runs 1.25x as long while the comm stream runs a
// collective beside it, and only then. TwoShardedChunks, link 0.1 s + 1 MB/s (a gather or a
// reduction 1.1 s). Without it: G0 0-1.1, G1 1.1-2.2; F0.0 1.1-2.1, F1.0 2.2-3.2, B1.0 3.2-5.2,
// B0.0 5.2-7.2 with RS1 5.2-6.3 beside it, RS0 7.2-8.3. With it, by hand: G0 overlaps nothing
// (F0.0 waits for it). F0.0 does 1.1 / 1.25 = 0.88 s of work while G1 runs, the last 0.12 s alone:
// done at 2.32. F1.0 2.32-3.32, B1.0 3.32-5.32 (nothing in flight). B0.0 does 0.88 s during RS1
// (5.32-6.42), 1.12 s after: done at 7.54; RS0 7.54-8.64, which nothing overlaps.
TEST(SimulatorTest, CollectivesSlowTheComputationTheyOverlap) {
  const Schedule s = Schedule::Parse(
      "schedule t pp=1 v=2 m=1 u=0\n"
      "rank 0: G0 G1 F0.0 F1.0 B1.0 RS1 B0.0 RS0 OPT\n");
  CostModel c = TwoShardedChunks();
  c.intra = {0.1, 1e6};
  EXPECT_NEAR(Simulate(s, c).step_s, 8.3, 1e-9);
  c.overlap_slowdown = 0.25;
  const SimResult r = Simulate(s, c);
  EXPECT_NEAR(r.step_s, 8.64, 1e-9);
  int seen = 0;
  for (const SimEvent& e : r.events) {
    const bool f = e.name == "F0.0", b = e.name == "B0.0", rs = e.name == "RS0";
    if (f || b) {
      EXPECT_NEAR(e.end_s, f ? 2.32 : 7.54, 1e-9) << e.name;
    }
    if (rs) {
      EXPECT_NEAR(e.start_s, 7.54, 1e-9);
    }
    seen += f + b + rs;
  }
  EXPECT_EQ(seen, 3);
  EXPECT_NEAR(r.busy_s[0], 6 + 2 * 0.22, 1e-9);  // 6 s of work; each overlap of 1.1 s did 0.88 s of it
  // A gather waited on at once overlaps no computation: the at-once program pays nothing.
  const Schedule at_once = Schedule::Parse(
      "schedule t pp=1 v=2 m=1 u=0\n"
      "rank 0: G0 F0.0 G1 F1.0 B1.0 G0 B0.0 OPT\n");
  EXPECT_NEAR(Simulate(at_once, c).step_s, 3 * 1.1 + 2 * 1 + 2 * 2, 1e-9);
  // An offloaded shard's staging (0.5 s of PCIe/NVMe before each gather's 1.1 s collective) takes no
  // SMs: G1 stages 1.6-2.1 and gathers 2.1-3.2, so F0.0 (from 1.6, when G0 lands) does 0.5 s alone
  // and its last 0.5 s at 1/1.25 the speed: done at 2.725.
  c.gather_staging_s_per_byte = 0.5 / 1e6;  // a rank's shard: 2 MB / 2
  seen = 0;
  for (const SimEvent& e : Simulate(s, c).events) {
    if (e.name != "F0.0") continue;
    EXPECT_NEAR(e.end_s, 2.725, 1e-9);
    ++seen;
  }
  EXPECT_EQ(seen, 1);
}

// The executor's work per reduction (reduce_handling_s_per_byte) lands on the compute stream after
// the backward, once per RS in the program: 3 reductions of a 2 MB chunk at 0.1 us a byte add
// 3 x 0.2 s; with zero = 1 the RS itself moves nothing. A reduction every micro-batch (as ZeRO-3's)
// against one a step (as a pipeline's): the cost follows the program's reductions.
TEST(SimulatorTest, ReductionHandlingFollowsTheProgramsReductions) {
  const Schedule per_mb = Schedule::Parse(
      "schedule t pp=1 v=1 m=3 u=0\n"
      "rank 0: F0.0 B0.0 RS0 F0.1 B0.1 RS0 F0.2 B0.2 RS0 OPT\n");
  const Schedule per_step = Schedule::Parse(
      "schedule t pp=1 v=1 m=3 u=0\n"
      "rank 0: F0.0 B0.0 F0.1 B0.1 F0.2 B0.2 RS0 OPT\n");
  CostModel c = Uniform();
  c.stage_param_bytes = 2e6;
  EXPECT_DOUBLE_EQ(Simulate(per_mb, c).step_s, 9);
  c.reduce_handling_s_per_byte = 1e-7;
  const SimResult r = Simulate(per_mb, c);
  EXPECT_DOUBLE_EQ(r.step_s, 9 + 3 * 0.2);
  EXPECT_DOUBLE_EQ(r.busy_s[0], 9 + 3 * 0.2);
  EXPECT_DOUBLE_EQ(Simulate(per_step, c).step_s, 9 + 0.2);
  // Per chunk: its own bytes (chunk_param_bytes), scaled like the rank's compute.
  c.chunk_param_bytes = {5e6};
  c.rank_compute_scale = {2};
  EXPECT_DOUBLE_EQ(Simulate(per_step, c).step_s, 2 * 9 + 2 * 0.5);
}

// A transfer moves once both sides are there. GPipe(2, 2) with F 1 s, B 2 s and a link of 0.5 s
// per message: rank 1 posts F0.0's receive at 0, before rank 0 sends (at 1), so it arrives at 1.5
// as with an eager send; it posts F0.1's at 2.5, after F0.0, though rank 0 sent at 2, so the send
// starts when that notice reaches rank 0 (3.0) and arrives at 3.5, where an eager send arrived at
// 2.5. Rank 1 then computes F0.1 3.5-4.5 and its backwards 4.5-8.5, whose gradients (receives
// posted with the forwards) arrive at 7.0 and 9.0: rank 0's backwards run 7-11.
TEST(SimulatorTest, TransfersStartWhenBothSidesArePosted) {
  CostModel c = Uniform();
  c.activation_bytes = 1;
  c.inter.alpha_s = 0.5;
  const SimResult r = Simulate(GPipe(2, 2), c);
  EXPECT_DOUBLE_EQ(r.step_s, 11);
  int checked = 0;
  for (const TraceEvent& e : r.events) {
    if (e.name == "SA0.0>1") {
      EXPECT_DOUBLE_EQ(e.end_s, 1.5);
      ++checked;
    } else if (e.name == "SA0.1>1") {
      EXPECT_DOUBLE_EQ(e.start_s, 2);
      EXPECT_DOUBLE_EQ(e.end_s, 3.5);
      ++checked;
    } else if (e.name == "F0.1" && e.rank == 1) {
      EXPECT_DOUBLE_EQ(e.start_s, 3.5);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 3);
}

// CostModel::blocking_p2p on DeepSpeed's schedule, F 1 s and B 2 s. pp=2, m=4 by hand: stage 0
// runs F0 [0,1], F1 [1,2], waits in SA0.1 until stage 1 (B0 [2,4]) posts RA0.1 at 4, then B0
// [4,6], F2 [6,7], B1 [7,9], F3 [9,10], B2 [10,12], and B3 [13,15] once stage 1's B3 [11,13]
// sends its gradient: 15 s. With free transfers the engine's pairing of neighbours costs no bubble
// of its own: neighbouring stages settle out of phase, one's forward beside the other's backward,
// and a deep pipeline takes 1F1B's (m + pp - 1)(F + B). What blocking costs is the transfers'
// time, which no computation then hides.
TEST(SimulatorTest, BlockingTransfersOfDeepSpeedsSchedule) {
  CostModel c = Uniform();
  c.blocking_p2p = true;
  EXPECT_DOUBLE_EQ(Simulate(DeepSpeed1F1B(2, 4), c).step_s, 15);
  const int pp = 8, m = 64;
  EXPECT_DOUBLE_EQ(Simulate(DeepSpeed1F1B(pp, m), c).step_s, (m + pp - 1) * 3.0);
  EXPECT_DOUBLE_EQ(Simulate(OneFOneB(pp, m), Uniform()).step_s, (m + pp - 1) * 3.0);
  CostModel slow = Uniform();
  slow.activation_bytes = 1;
  slow.inter.bytes_per_s = 10;  // 0.1 s a transfer
  const double free_running = Simulate(DeepSpeed1F1B(pp, m), slow).step_s;
  slow.blocking_p2p = true;
  const double blocking = Simulate(DeepSpeed1F1B(pp, m), slow).step_s;
  std::printf("pp=%d m=%d, transfers of 0.1 s: deepspeed %.2f s asynchronous, %.2f s blocking\n", pp, m,
              free_running, blocking);
  EXPECT_GT(blocking, free_running + 0.1 * m);  // at least one exposed transfer per micro-batch
}

// CostModel::compute_cv, comm_cv: each duration drawn around its mean (lognormal, mean 1), the mean
// step over the runs. A chain of actions keeps its mean (the mean of a sum); where the compute stream
// waits for the comm stream and the comm stream for compute, the step holds E[max] of the two, here
// against its integral, E[max(X, Y)] = integral over t > 0 of 1 - P(X <= t) P(Y <= t).
TEST(SimulatorTest, VaryingDurationsCostTheMeanOfTheirMaximum) {
  CostModel c = TwoShardedChunks();  // chunks: F 1 s; a gather moves 1 MB
  c.intra = {0.0, 1e6};              // 1 s
  c.compute_cv = 0.3, c.comm_cv = 0.5;
  c.variability_samples = 20000;
  const Schedule chain = Schedule::Parse("schedule t pp=1 v=2 m=1 u=0\nrank 0: G0 F0.0 G1 F1.0\n");
  // G0, then F0.0 beside G1, then F1.0 once both are done.
  const Schedule joined = Schedule::Parse("schedule t pp=1 v=2 m=1 u=0\nrank 0: G0 G1 F0.0 F1.0\n");
  CostModel fixed = c;
  fixed.compute_cv = fixed.comm_cv = 0;
  EXPECT_DOUBLE_EQ(Simulate(chain, fixed).step_s, 4.0);
  EXPECT_DOUBLE_EQ(Simulate(joined, fixed).step_s, 3.0);
  EXPECT_NEAR(Simulate(chain, c).step_s, 4.0, 0.02);  // Monte Carlo error ~0.005
  auto lognormal_cdf = [](double t, double cv) {
    const double s2 = std::log1p(cv * cv);
    return 0.5 * std::erfc(-(std::log(t) + s2 / 2) / std::sqrt(2 * s2));
  };
  double e_max = 0;
  for (double t = 0.0005; t < 30; t += 0.001) e_max += (1 - lognormal_cdf(t, 0.3) * lognormal_cdf(t, 0.5)) * 0.001;
  EXPECT_GT(e_max, 1.15);  // well over max(1, 1): the effect is not Monte Carlo noise
  EXPECT_NEAR(Simulate(joined, c).step_s, 1.0 + e_max + 1.0, 0.02);
  EXPECT_DOUBLE_EQ(Simulate(joined, c).step_s, Simulate(joined, c).step_s);  // fixed seeds
}

TEST(SimulatorTest, ChromeTraceHasOneTrackPerRank) {
  SimResult r = Simulate(OneFOneB(2, 2), Uniform());
  std::string json = r.ChromeTraceJson();
  EXPECT_NE(json.find("\"traceEvents\""), std::string::npos);
  EXPECT_NE(json.find("\"tid\":1"), std::string::npos);
  EXPECT_NE(json.find("\"name\":\"F0.1\""), std::string::npos);
}

}  // namespace
// --profile's accounting: each traced kind lands in its own share; waits split off their actions.
TEST(TimeSharesTest, EachKindLandsInItsShare) {
  std::vector<TraceEvent> ev = {{0, "G0", "comm", 0.0, 0.1},           {0, "wait-gather F0.0", "comm", 0.1, 0.3},
                                {0, "F0.0", "compute", 0.3, 1.3},      {0, "RA0.1", "p2p", 1.3, 1.5},
                                {0, "wait-recv Bi0.0", "p2p", 1.5, 1.6}, {0, "R0.0", "compute", 1.6, 2.1},
                                {0, "Bi0.0", "compute", 2.1, 3.1},     {0, "W0.0", "compute", 3.1, 3.6},
                                {0, "B1.0", "compute", 3.6, 4.6},      {0, "RS0", "comm", 4.6, 4.7},
                                {0, "SA0.0", "p2p", 4.7, 4.75},        {0, "OPT", "compute", 4.75, 5.0}};
  TimeShares t;
  t.Add(ev);
  t.Add(ev);
  EXPECT_EQ(t.steps, 2);
  EXPECT_NEAR(t.forward, 2.0, 1e-9);
  EXPECT_NEAR(t.recompute, 1.0, 1e-9);
  EXPECT_NEAR(t.backward_input, 2.0, 1e-9);
  EXPECT_NEAR(t.backward_weight, 1.0, 1e-9);
  EXPECT_NEAR(t.backward, 2.0, 1e-9);
  EXPECT_NEAR(t.optimizer, 0.5, 1e-9);
  EXPECT_NEAR(t.wait_gather, 0.4, 1e-9);
  EXPECT_NEAR(t.wait_transfer, 0.6, 1e-9);  // RA and wait-recv
  EXPECT_NEAR(t.comm_calls, 0.5, 1e-9);     // G, RS, SA
  EXPECT_NEAR(t.Accounted(), 10.0, 1e-9);
  // The communication thread's operations (Trainer::TraceJson) are drawn on their own track and are
  // not the rank's time.
  std::vector<TraceEvent> with_comm = ev;
  with_comm.push_back({0, "all_gather zero #3 1024B", "comm", 0.0, 2.0, /*comm_stream=*/true});
  TimeShares u;
  u.Add(with_comm);
  EXPECT_NEAR(u.Accounted(), 5.0, 1e-9);
  const std::string json = ChromeTraceJson(with_comm);
  EXPECT_NE(json.find("\"name\":\"all_gather zero #3 1024B\",\"cat\":\"comm\",\"ph\":\"X\",\"pid\":0,\"tid\":1000,"),
            std::string::npos);
  EXPECT_NE(json.find("\"name\":\"F0.0\",\"cat\":\"compute\",\"ph\":\"X\",\"pid\":0,\"tid\":0,"), std::string::npos);
}

}  // namespace scheduler
}  // namespace zeropp
