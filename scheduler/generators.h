// generators.h: schedule generators, each a pure function of (pp, v, m, U, options).
//
//   GPipe        all forwards, then all backwards (v = 1)
//   OneFOneB     1F1B: pp-1-r warm-up forwards, then alternate, then cool down (v = 1)
//   Interleaved  Megatron's interleaved 1F1B over v chunks per rank (m % pp == 0)
//   ZeroPP       units of U micro-batches, each an interleaved GPipe with a 1F1B overlap on the
//                last chunk, weights gathered once per chunk change, W deferred (ZEROPP.md;
//                GenOptions::max_deferred_w caps how many at once)
//   DeepSpeed1F1B  DeepSpeed's pipeline engine (TrainSchedule): 1F1B in half-steps of alternating
//                parity, neighbouring stages pairing their blocking transfers (v = 1)
//   ZbH1         1F1B with the backward split into input (Bi) and weight (W) gradients, W
//                deferred into the cool-down bubbles (zero-bubble H1)
//   Zero3        the pp = 1 case: every scheduling unit is a chunk of the one rank; per
//                micro-batch, forwards then backwards with gathers prefetched `prefetch_depth`
//                units ahead, at most `max_live_units` gathered at once, releases after forward
//                (reshard_after_forward) and gradient reduction per micro-batch or once (no_sync)
//
// Baselines emit gathers by GatherPolicy: kResident (parameters gathered once per step, a plain
// pipeline with replicated stages) or kPerMicrobatch (ZeRO-3 inside a stage: every F and B
// gathers its chunk and releases it after). Invalid combinations throw std::invalid_argument
// naming every number.
#pragma once

#include "scheduler/schedule.h"

namespace zeropp {
namespace scheduler {

enum class GatherPolicy { kResident, kPerMicrobatch };

// Activation recomputation. kDefault: ZeroPP recomputes every chunk except chunk v-1 on the last
// rank (its forward and backward are adjacent); the other generators recompute nothing.
enum class RecomputePolicy { kDefault, kNone, kAllButLast, kAll };

struct GenOptions {
  GatherPolicy gather = GatherPolicy::kPerMicrobatch;
  // Move weight-gradient passes that split a run of transfers after it, so that each run can be
  // posted as one batch (deadlock-free under blocking p2p; see the validator's rendezvous mode).
  bool group_transfers = true;
  RecomputePolicy recompute = RecomputePolicy::kDefault;
  // ZeroPP and ZB-H1: at most this many weight-gradient passes deferred at once on a rank (-1: as
  // the design defers them). A deferred W keeps its chunk's weight-pass inputs and output
  // gradients alive; at long sequences they outweigh the rest of the activations, so a cap trades
  // some of the bubble W fills for memory (0: every W right after its Bi).
  int max_deferred_w = -1;
};

Schedule GPipe(int pp, int m, const GenOptions& o = {});
Schedule OneFOneB(int pp, int m, const GenOptions& o = {});
Schedule Interleaved(int pp, int v, int m, const GenOptions& o = {});
Schedule ZeroPP(int pp, int v, int m, int u, const GenOptions& o = {});
Schedule ZbH1(int pp, int m, const GenOptions& o = {});
Schedule DeepSpeed1F1B(int pp, int m, const GenOptions& o = {});
// Whether the engine a schedule name stands for blocks on every transfer (CostModel::blocking_p2p):
// DeepSpeed's pipeline engine does; Megatron and zeropp's executor do not.
inline bool TransfersBlock(const std::string& schedule) { return schedule == "deepspeed"; }
// What the ZeRO-3 schedule needs to know of the model and the engine options. Unit k is chunk k.
struct Zero3Plan {
  int units = 1;
  // needs[k]: the units owning tied tensors unit k uses (gathered with it; its backward writes
  // their gradients, so their reduction waits for the lowest-index user).
  std::vector<std::vector<int>> needs;
  int prefetch_depth = 1;
  int max_live_units = 0;  // 0 = no cap
  bool reshard_after_forward = true;
  bool no_sync = false;    // reduce once after the last micro-batch instead of after each
  // Every unit but the last keeps only its input and recomputes in backward (the last one's
  // backward follows its forward at once).
  bool recompute = false;
};
// Throws std::invalid_argument when max_live_units cannot hold a unit with its needs (or, without
// resharding after forward, every unit).
Schedule Zero3(int m, const Zero3Plan& plan, const GenOptions& o = {});

// The forward-only (evaluation) schedule of a training schedule: the same generator's actions
// with every backward, gradient transfer, reduction and optimizer step removed, and gathers no
// forward uses any more dropped. Activation transfers keep their order, so it validates like
// the original; in ZeroPP a unit still passes chunk by chunk with one gather per chunk change.
Schedule ForwardOnly(const Schedule& s);

// By name: gpipe, 1f1b, interleaved, zeropp, zb-h1, deepspeed, zero3 (one unit; see Zero3 for more).
Schedule Generate(const std::string& name, int pp, int v, int m, int u, const GenOptions& o = {});

}  // namespace scheduler
}  // namespace zeropp
