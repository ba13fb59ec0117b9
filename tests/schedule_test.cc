// Schedule IR, generators and validator: every generated schedule is well-formed and deadlock
// free over a grid of shapes; invalid shapes are refused; ZeroPP matches its worked example and
// its gather-count formula; text round-trips.
#include <gtest/gtest.h>

#include <algorithm>

#include "scheduler/generators.h"
#include "scheduler/validator.h"

namespace zeropp {
namespace scheduler {
namespace {

std::string Compact(const Schedule& s, int r, bool with_p2p = false) {
  std::string out;
  for (const auto& a : s.ranks[r]) {
    bool p2p = a.kind == ActionKind::kSendAct || a.kind == ActionKind::kRecvAct || a.kind == ActionKind::kSendGrad ||
               a.kind == ActionKind::kRecvGrad;
    if (p2p && !with_p2p) continue;
    if (!out.empty()) out += " ";
    out += a.ToString();
  }
  return out;
}

TEST(ScheduleTest, TextRoundTrip) {
  Schedule s = ZeroPP(2, 2, 4, 2);
  EXPECT_EQ(Schedule::Parse(s.ToString()), s);
  // ZeroPP recomputes every chunk except the last chunk of the last rank; baselines none.
  EXPECT_EQ(s.recompute, (std::vector<std::vector<bool>>{{true, true}, {true, false}}));
  EXPECT_TRUE(OneFOneB(2, 4).recompute.empty());
  GenOptions all;
  all.recompute = RecomputePolicy::kAll;
  EXPECT_EQ(OneFOneB(2, 4, all).recompute, (std::vector<std::vector<bool>>{{true}, {true}}));
  Schedule t = Interleaved(4, 3, 8);
  EXPECT_EQ(Schedule::Parse(t.ToString()), t);
  EXPECT_THROW(Action::Parse("Q1.2"), std::invalid_argument);
  EXPECT_THROW(Action::Parse("Fx.2"), std::invalid_argument);
}

TEST(ScheduleTest, ZeroPPWorkedExample) {
  // ZEROPP.md: pp=2, v=2, m=4, U=2 (sends/receives omitted).
  Schedule s = ZeroPP(2, 2, 4, 2);
  EXPECT_EQ(Compact(s, 0),
            "G0 F0.0 F0.1 X0 G1 F1.0 F1.1 Bi1.0 W1.0 Bi1.1 W1.1 RS1 X1 G0 Bi0.0 W0.0 Bi0.1 W0.1 RS0 "
            "F0.2 F0.3 X0 G1 F1.2 F1.3 Bi1.2 W1.2 Bi1.3 W1.3 RS1 X1 G0 Bi0.2 W0.2 Bi0.3 W0.3 RS0 X0 OPT");
  EXPECT_EQ(Compact(s, 1),
            "G0 F0.0 F0.1 X0 G1 F1.0 Bi1.0 F1.1 Bi1.1 X1 G0 Bi0.0 W0.0 Bi0.1 W0.1 RS0 W1.1 W1.0 RS1 "
            "F0.2 F0.3 X0 G1 F1.2 Bi1.2 F1.3 Bi1.3 X1 G0 Bi0.2 W0.2 Bi0.3 W0.3 RS0 W1.3 W1.2 RS1 X0 OPT");
  ValidationReport rep = Validate(s);
  EXPECT_TRUE(rep.ok) << rep.error;
}

// The forward-only schedule validates and keeps exactly the forwards, in order, with no
// backward, gradient transfer, reduction or optimizer action.
void CheckForwardOnly(const Schedule& s) {
  const Schedule f = ForwardOnly(s);
  ASSERT_EQ(Schedule::Parse(f.ToString()), f) << f.ToString();
  ValidationReport rep = Validate(f, P2PMode::kEager);
  ASSERT_TRUE(rep.ok) << rep.error << "\n" << f.ToString();
  for (size_t r = 0; r < s.ranks.size(); ++r) {
    std::vector<std::string> fwd_s, fwd_f;
    for (const Action& a : s.ranks[r]) {
      if (a.kind == ActionKind::kForward) fwd_s.push_back(a.ToString());
    }
    for (const Action& a : f.ranks[r]) {
      if (a.kind == ActionKind::kForward) fwd_f.push_back(a.ToString());
      const bool allowed = a.kind == ActionKind::kForward || a.kind == ActionKind::kGather ||
                           a.kind == ActionKind::kRelease || a.kind == ActionKind::kSendAct ||
                           a.kind == ActionKind::kRecvAct;
      ASSERT_TRUE(allowed) << a.ToString() << " in " << f.ToString();
    }
    ASSERT_EQ(fwd_f, fwd_s) << "rank " << r;
  }
}

// DeepSpeed's TrainSchedule at pp=2, m=2, worked by hand from its step rule (6 steps; stage 0
// runs forwards at even steps, stage 1 at odd ones): an activation leaves at the sender's next
// (backward) step, a gradient at the sender's next (forward) step.
TEST(ScheduleTest, DeepSpeedWorkedExample) {
  const Schedule s = DeepSpeed1F1B(2, 2);
  auto program = [&](int r) {
    std::string out;
    for (const Action& a : s.ranks[r]) {
      if (a.IsCompute() || a.peer >= 0) out += (out.empty() ? "" : " ") + a.ToString();
    }
    return out;
  };
  EXPECT_EQ(program(0), "F0.0 SA0.0>1 F0.1 SA0.1>1 RG0.0<1 B0.0 RG0.1<1 B0.1");
  EXPECT_EQ(program(1), "RA0.0<0 F0.0 B0.0 RA0.1<0 SG0.0>0 F0.1 B0.1 SG0.1>0");
  EXPECT_EQ(s.name, "deepspeed");
  EXPECT_THROW(Generate("deepspeed", 2, 2, 4, 0), std::invalid_argument);  // v must be 1
}

TEST(ScheduleTest, EveryGeneratorValidatesOverTheGrid) {
  int checked = 0;
  for (int pp = 1; pp <= 8; ++pp) {
    for (int m = 1; m <= 16; ++m) {
      for (const char* name : {"gpipe", "1f1b", "zb-h1", "deepspeed"}) {
        Schedule s = Generate(name, pp, 1, m, 0);
        for (P2PMode mode : {P2PMode::kEager, P2PMode::kRendezvous}) {
          ValidationReport rep = Validate(s, mode);
          ASSERT_TRUE(rep.ok) << rep.error << "\n" << s.ToString();
        }
        CheckForwardOnly(s);
        ++checked;
      }
      for (int v = 1; v <= 4; ++v) {
        if (m % pp == 0) {
          Schedule s = Interleaved(pp, v, m);
          ValidationReport rep = Validate(s, P2PMode::kEager);
          ASSERT_TRUE(rep.ok) << rep.error << "\n" << s.ToString();
          CheckForwardOnly(s);
          ++checked;
        }
        for (int u = pp; u <= m; ++u) {
          if (m % u != 0 && m % u < pp) continue;  // invalid: a short last unit
          Schedule s = ZeroPP(pp, v, m, u);
          ValidationReport rep = Validate(s, P2PMode::kEager);
          ASSERT_TRUE(rep.ok) << rep.error << "\n" << s.ToString();
          CheckForwardOnly(s);
          // Evaluation passes each unit chunk by chunk: one gather per chunk change.
          const int units = (m + u - 1) / u;
          const Schedule f = ForwardOnly(s);
          for (size_t r = 0; r < f.ranks.size(); ++r) {
            int gathers = 0;
            for (const Action& a : f.ranks[r]) gathers += a.kind == ActionKind::kGather;
            ASSERT_EQ(gathers, v == 1 ? 1 : units * v) << f.ToString();
          }
          ++checked;
        }
      }
    }
    Schedule z = Zero3(4, Zero3Plan{});
    EXPECT_TRUE(Validate(z).ok);
  }
  std::printf("validated %d generated schedules\n", checked);
  EXPECT_GT(checked, 1000);
}

TEST(ScheduleTest, ValidatorCatchesBrokenSchedules) {
  Schedule s = OneFOneB(2, 2);
  Schedule missing_recv = s;
  auto& r1 = missing_recv.ranks[1];
  r1.erase(std::find_if(r1.begin(), r1.end(), [](const Action& a) { return a.kind == ActionKind::kRecvAct; }));
  ValidationReport rep = Validate(missing_recv);
  EXPECT_FALSE(rep.ok);
  EXPECT_NE(rep.error.find("input activation not available"), std::string::npos) << rep.error;

  Schedule no_gather = s;
  auto& r0 = no_gather.ranks[0];
  r0.erase(std::find_if(r0.begin(), r0.end(), [](const Action& a) { return a.kind == ActionKind::kGather; }));
  rep = Validate(no_gather);
  EXPECT_FALSE(rep.ok);
  EXPECT_NE(rep.error.find("chunk not gathered"), std::string::npos) << rep.error;

  // Both ranks receive before they send: a deadlock, named per rank.
  Schedule dead;
  dead.name = "dead";
  dead.pp = 2;
  dead.ranks = {{Action{ActionKind::kRecvGrad, 0, 0, 1}, Action{ActionKind::kSendAct, 0, 0, 1}},
                {Action{ActionKind::kRecvAct, 0, 0, 0}, Action{ActionKind::kSendGrad, 0, 0, 0}}};
  rep = Validate(dead);
  EXPECT_FALSE(rep.ok);
  EXPECT_NE(rep.error.find("deadlock: rank 0 at #0 RG0.0<1; rank 1 at #0 RA0.0<0"), std::string::npos) << rep.error;

  // Rendezvous: a send whose receiver first waits for something this rank sends later.
  Schedule cross;
  cross.name = "cross";
  cross.pp = 2;
  cross.ranks = {{Action{ActionKind::kSendAct, 0, 0, 1}, Action{ActionKind::kGather, 0}, Action{ActionKind::kRelease, 0},
                  Action{ActionKind::kSendAct, 0, 1, 1}},
                 {Action{ActionKind::kRecvAct, 0, 1, 0}, Action{ActionKind::kGather, 0}, Action{ActionKind::kRelease, 0},
                  Action{ActionKind::kRecvAct, 0, 0, 0}}};
  rep = Validate(cross, P2PMode::kRendezvous);
  EXPECT_FALSE(rep.ok);
  EXPECT_NE(rep.error.find("deadlock: rank 0 at #0 SA0.0>1; rank 1 at #0 RA0.1<0"), std::string::npos) << rep.error;
  EXPECT_FALSE(Validate(cross, P2PMode::kEager).error.find("deadlock") != std::string::npos);

  // Grouping transfers keeps ZB-H1 valid under both semantics.
  GenOptions ungrouped;
  ungrouped.group_transfers = false;
  EXPECT_TRUE(Validate(ZbH1(2, 3, ungrouped), P2PMode::kEager).ok);
  EXPECT_TRUE(Validate(ZbH1(2, 3), P2PMode::kRendezvous).ok);
}

TEST(ScheduleTest, InvalidShapesAreRefusedWithTheirNumbers) {
  auto msg = [](auto fn) {
    try {
      fn();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(msg([] { Interleaved(4, 2, 6); }), "interleaved: m(6) must be a multiple of pp(4)");
  EXPECT_EQ(msg([] { ZeroPP(4, 2, 6, 4); }),
            "zeropp: unit 1 has 2 micro-batches (m(6) split by U(4)) but every unit needs at least pp(4)");
  EXPECT_EQ(msg([] { ZeroPP(4, 2, 8, 2); }),
            "zeropp: unit 0 has 2 micro-batches (m(8) split by U(2)) but every unit needs at least pp(4)");
  EXPECT_EQ(msg([] { Generate("gpipe", 2, 2, 4, 0); }), "gpipe: v(2) must be 1 (use interleaved or zeropp)");
  EXPECT_EQ(msg([] { Generate("zero3", 2, 1, 4, 0); }), "zero3: pp(2) and v(1) must be 1");
  EXPECT_EQ(msg([] { Generate("dualpipe", 2, 1, 4, 0); }),
            "schedule: got 'dualpipe', expected one of: gpipe, 1f1b, interleaved, zeropp, zb-h1, deepspeed, zero3");
  EXPECT_EQ(msg([] { OneFOneB(0, 4); }), "1f1b: pp(0) must be >= 1");
  GenOptions cap;
  cap.max_deferred_w = -2;
  EXPECT_EQ(msg([&] { ZeroPP(2, 1, 4, 2, cap); }),
            "zeropp: max_deferred_w(-2) must be >= 0, or -1 for the design's deferral");
  EXPECT_EQ(msg([&] { ZbH1(2, 4, cap); }), "zb-h1: max_deferred_w(-2) must be >= 0, or -1 for the design's deferral");
}

// The most weight passes a rank has pending when a Bi runs (its deferred W's), over every rank.
int MostDeferred(const Schedule& s) {
  int most = 0;
  for (const auto& actions : s.ranks) {
    int pending = 0;
    for (const Action& a : actions) {
      if (a.kind == ActionKind::kBackwardInput) most = std::max(most, pending++);
      if (a.kind == ActionKind::kBackwardWeight) --pending;
    }
  }
  return most;
}

// GenOptions::max_deferred_w: ZeroPP and ZB-H1 defer at most the cap, still validate, run the
// same actions, and with a cap at or above their own deferral are the schedule they were.
// Their own: ZeroPP's rank r defers the steady pairs k <= 2r (ZEROPP.md), ZB-H1's the first r.
TEST(ScheduleTest, DeferralCapBoundsPendingWeightPasses) {
  auto sorted = [](const Schedule& s, int r) {
    std::vector<std::string> out;
    for (const Action& a : s.ranks[r]) out.push_back(a.ToString());
    std::sort(out.begin(), out.end());
    return out;
  };
  int checked = 0;
  for (int pp = 2; pp <= 6; ++pp) {
    for (int m = pp; m <= 12; ++m) {
      std::vector<Schedule> own = {ZbH1(pp, m)};
      for (int v : {1, 2}) {
        for (int u = pp; u <= m; ++u) {
          if (m % u == 0 || m % u >= pp) own.push_back(ZeroPP(pp, v, m, u));
        }
      }
      for (const Schedule& base : own) {
        const int natural = MostDeferred(base);
        ASSERT_LE(natural, base.name == "zb-h1" ? pp - 1 : 2 * pp - 1) << base.ToString();
        for (int cap = 0; cap <= natural + 1; ++cap) {
          GenOptions o;
          o.max_deferred_w = cap;
          const Schedule s = base.name == "zb-h1" ? ZbH1(pp, m, o) : ZeroPP(pp, base.v, m, base.u, o);
          ASSERT_TRUE(Validate(s, P2PMode::kEager).ok) << s.ToString();
          EXPECT_EQ(MostDeferred(s), std::min(cap, natural)) << s.ToString();
          for (int r = 0; r < pp; ++r) ASSERT_EQ(sorted(s, r), sorted(base, r)) << "rank " << r;
          if (cap >= natural) {
            EXPECT_EQ(s.ToString(), base.ToString());
          }
          ++checked;
        }
      }
    }
  }
  std::printf("checked %d capped schedules\n", checked);
  EXPECT_GT(checked, 500);
}

TEST(ScheduleTest, ZeroPPGathersOncePerChunkChange) {
  for (int pp : {1, 2, 4}) {
    for (int v : {1, 2, 3}) {
      const int m = 8;
      for (int u = std::max(pp, 1); u <= m; ++u) {
        if (m % u != 0 && m % u < pp) continue;
        Schedule s = ZeroPP(pp, v, m, u);
        ValidationReport rep = Validate(s);
        ASSERT_TRUE(rep.ok) << rep.error;
        const int units = (m + u - 1) / u;
        // First unit: v forward gathers + (v-1) backward; later units reuse chunk 0 from the
        // previous backward: (v-1) + (v-1). v = 1 never changes chunk: one gather per step.
        const int expect = v == 1 ? 1 : (2 * v - 1) + (units - 1) * (2 * v - 2);
        for (int r = 0; r < pp; ++r) {
          EXPECT_EQ(rep.ranks[r].gathers, expect) << "pp " << pp << " v " << v << " u " << u << " rank " << r;
          EXPECT_LE(rep.ranks[r].peak_gathered, 1);
          EXPECT_EQ(rep.ranks[r].reduce_grads, units * v);
        }
      }
    }
  }
  // Against the per-micro-batch baseline: 2 gathers per micro-batch per chunk.
  ValidationReport base = Validate(OneFOneB(4, 8));
  EXPECT_EQ(base.ranks[0].gathers, 2 * 8);
}

}  // namespace
}  // namespace scheduler
}  // namespace zeropp
