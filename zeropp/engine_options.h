// engine_options.h: every knob of the ZeRO-3 engine, validated once as a pure function.
#pragma once

#include <string>
#include <vector>

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include "kernels/adamw.h"

namespace zeropp {

// How the Sequential's children are grouped into scheduling units (contiguous runs).
struct UnitPolicy {
  enum class Kind { kPerChild, kBySize, kExplicit };
  Kind kind = Kind::kPerChild;
  int64_t target_numel = 0;         // kBySize: close a unit once it holds >= this many parameters
  std::vector<int> starts;          // kExplicit: first child index of each unit, starts[0] == 0
};

// Where a kind of training state lives besides device memory. With device cpu, "device" and "cpu"
// are the same memory: kCpu then only moves the state into the host pool; on a GPU, kCpu keeps it
// in page-locked host memory (ZeRO-Offload: the fp32 master moves to the host with the moments,
// and AdamW runs on the CPU); kNvme moves it to files.
enum class OffloadTarget { kNone, kCpu, kNvme };
const char* Name(OffloadTarget t);  // none | cpu | nvme
// Throws std::invalid_argument naming `field`, the text and the choices.
OffloadTarget ParseOffloadTarget(const std::string& field, const std::string& text);

struct OffloadOptions {
  OffloadTarget optimizer = OffloadTarget::kNone;  // AdamW moments
  OffloadTarget params = OffloadTarget::kNone;     // fp32 master, compute shard and gradient shard
  // Saved inputs of recomputed units (needs recompute): written after the unit's forward, read back
  // (prefetched one unit ahead) before its backward.
  OffloadTarget activations = OffloadTarget::kNone;
  bool any() const {
    return optimizer != OffloadTarget::kNone || params != OffloadTarget::kNone || activations != OffloadTarget::kNone;
  }
  bool any_nvme() const {
    return optimizer == OffloadTarget::kNvme || params == OffloadTarget::kNvme || activations == OffloadTarget::kNvme;
  }
  std::string dir;                 // directory for nvme files (checked before training)
  int64_t host_budget_bytes = int64_t{8} << 30;  // host pool: staging buffers and the cpu tier
  int queue_depth = 32;            // I/O engine
};

struct EngineOptions {
  // Where shards, gathered buffers, gradients and (unless offloaded) the fp32 master and AdamW
  // moments live: cpu, or cuda:i (TrainerOptions::device resolves it from LOCAL_RANK).
  c10::Device device = c10::Device(c10::kCPU);
  UnitPolicy units;
  int prefetch_depth = 1;           // units gathered ahead of the one computing (0 = none)
  int max_live_units = 0;           // cap on unsharded units at once (0 = no cap)
  // Gradient reduce-scatters in flight at once, each holding its unit's unsharded gradient until
  // it lands; issuing one more waits for the oldest (0 = no cap).
  int max_pending_reductions = 2;
  // true: free a unit's gathered parameters after its forward and gather again for backward
  // (ZeRO-3). false: keep them from forward to backward (ZeRO-2-like): peak memory then holds every
  // unit unsharded (the whole model in compute dtype), one all-gather less per unit.
  bool reshard_after_forward = true;
  // Recompute each unit's forward in backward instead of keeping its activations.
  bool recompute = false;
  at::ScalarType param_dtype = at::kFloat;   // compute dtype of gathered parameters (fp32, bf16)
  at::ScalarType reduce_dtype = at::kFloat;  // dtype of gradient reduction and gradient shards
  // false (default): reduce-scatter after every micro-batch. true: accumulate unsharded
  // gradients over micro-batches and reduce once; costs one unsharded gradient buffer per unit
  // (the whole model in param dtype) for the duration of the step.
  bool no_sync = false;
  double max_grad_norm = 0.0;       // 0 = no clipping
  // Threads of the host AdamW and of the norm over host-resident gradients (offloaded optimizer or
  // parameters, or a CPU run): 0 = the rank's intra-op threads (at::get_num_threads()).
  int host_threads = 0;
  kernels::AdamWHyper adamw;        // lr, betas, eps, weight_decay (step is the engine's)
  OffloadOptions offload;
  // > 0: refuse, before training, a plan whose estimated peak memory exceeds this many bytes, and
  // check the engine's own accounting against it after every step.
  int64_t memory_budget_bytes = 0;

  // Empty when valid; otherwise every problem, naming the field and value.
  std::string Validate() const;
};

}  // namespace zeropp
