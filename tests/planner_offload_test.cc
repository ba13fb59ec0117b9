// planner_offload_test: offload in the planner against values computed by hand on small cases:
// the optimizer state, the parameters (ZeRO-Infinity) and the recomputed units' saved inputs off
// the device, their transfers and step, and plan trying offload only where nothing else fits (and
// a cap on deferred weight passes before it).
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "scheduler/planner/memory_model.h"
#include "scheduler/planner/planner.h"
#include "scheduler/planner/predictor.h"
#include "scheduler/simulator.h"
#include "tests/planner_layouts.h"

namespace zeropp {
namespace planner {
namespace {

using namespace fixtures;  // Small, Toy, SmallRequest, Tp2, Zero3Over4

// Optimizer offload (ZeRO designs): master and moments leave the device for host memory (cpu) or
// NVMe files, and the step's tail is the slowest of three pipelined streams, by hand from the
// description's host numbers: gradients down and shards up in the compute dtype (bf16 here, each
// direction on its own copy engine), the CPU AdamW over the node's shards (its traffic plus the
// copies' through host memory), and the NVMe stream.
TEST(Planner, OffloadMovesTheOptimizerStateAndItsStep) {
  const Hardware h = Toy();  // host 50 GB/s per node (4 devices offloading), PCIe 20 GB/s, NVMe 5 GB/s, bf16
  const ModelShape m = Small();
  Layout l = Zero3Over4();
  const MemoryBreakdown none = PredictMemory(m, l, h, 32);
  const double shard = m.Parameters() / 4;
  EXPECT_DOUBLE_EQ(none.optimizer, 12 * shard);
  l.offload = Offload::kCpu;
  EXPECT_EQ(l.Name(), "zero3_z4_b1_offcpu");
  const MemoryBreakdown cpu = PredictMemory(m, l, h, 32);
  EXPECT_DOUBLE_EQ(cpu.optimizer, 0);
  EXPECT_DOUBLE_EQ(cpu.host, 12 * shard);
  EXPECT_DOUBLE_EQ(none.Total() - cpu.Total(), 12 * shard);
  const double update = shard * 4 * (30 + 2 * 2) / 50e9;  // the node's 4 shards, AdamW's 30 B + 2 x 2 B copied
  ASSERT_GT(update, shard * 2 / 20e9);                     // the CPU, not PCIe, sets the pace here
  EXPECT_DOUBLE_EQ(Predict(m, l, h, 32).optimizer_s, update);
  // NVMe takes the moments; the fp32 master stays in host memory, as the engine keeps it.
  l.offload = Offload::kNvme;
  const MemoryBreakdown nvme = PredictMemory(m, l, h, 32);
  EXPECT_DOUBLE_EQ(nvme.optimizer, 0);
  EXPECT_DOUBLE_EQ(nvme.host, 4 * shard);
  EXPECT_DOUBLE_EQ(nvme.nvme, 8 * shard);
  EXPECT_DOUBLE_EQ(Predict(m, l, h, 32).optimizer_s, std::max(update, 2 * shard * 8 / 5e9));
  // A measured AdamW rate takes the memory bound's place, slow or fast: the node's 4 shards at that
  // rate, slowed by the copies' 2 x 2 B through host memory beside AdamW's own 30 B a parameter.
  l.offload = Offload::kCpu;
  Hardware measured = h;
  for (double rate : {1e6, 1e12}) {
    measured.host_adamw_params_per_s = rate;
    const double cpu = shard * 4 / rate * (30.0 + 2 * 2) / 30;
    EXPECT_DOUBLE_EQ(Predict(m, l, measured, 32).optimizer_s, std::max(cpu, shard * 2 / 20e9)) << rate;
  }
  EXPECT_GT(update, shard * 4 / 1e12 * 34 / 30);  // the fast rate is faster than the memory bound
  // A slow link sets the pace instead: one direction's bytes, the other running beside it.
  Hardware narrow = h;
  narrow.pcie_bytes_per_s = 1e6;
  EXPECT_DOUBLE_EQ(Predict(m, l, narrow, 32).optimizer_s, shard * 2 / 1e6);
  // On a CPU box host memory is the device's: offloading to it frees nothing there.
  Hardware box = h;
  box.shared_compute_units = 2;
  l.offload = Offload::kCpu;
  EXPECT_DOUBLE_EQ(PredictMemory(m, l, box, 32).optimizer, 12 * shard);
  // The 3D baseline keeps its state on the device.
  Layout d;
  d.design = Design::k3D;
  d.pp = 2, d.dp = 2, d.offload = Offload::kCpu;
  EXPECT_NE(d.Check(m, 4, 4, 32).find("offload is zeropp's"), std::string::npos);
}
// Offloaded parameters (ZeRO-Infinity): the compute shard, the gradient shard and the master go to
// the tier with the moments; the device keeps only what a step gathers, plus the staged shard and
// the reduced gradient shard of its largest unit (a layer here). Every gather stages its shard over
// PCIe (and from NVMe), every reduction sends its gradient shard back (and, on NVMe, reads it back
// to accumulate); the optimizer step then moves nothing over PCIe.
TEST(Planner, OffloadedParametersLeaveTheDeviceAndAreStagedPerGather) {
  const Hardware h = Toy();  // bf16, PCIe 20 GB/s, NVMe 5 GB/s, host 50 GB/s per node
  const ModelShape m = Small();
  Layout l = Zero3Over4();
  const MemoryBreakdown none = PredictMemory(m, l, h, 32);
  const double shard = m.Parameters() / 4;
  l.params_offload = Offload::kCpu;
  EXPECT_NE(l.Check(m, 4, 4, 32).find("optimizer state offloaded too"), std::string::npos);
  l.offload = Offload::kCpu;
  EXPECT_EQ(l.Name(), "zero3_z4_b1_offcpu_poffcpu");
  const MemoryBreakdown cpu = PredictMemory(m, l, h, 32);
  EXPECT_DOUBLE_EQ(cpu.ModelState(), 0);
  EXPECT_DOUBLE_EQ(cpu.host, (2 + 2 + 4 + 8) * shard);
  EXPECT_DOUBLE_EQ(cpu.AllModelState(), none.ModelState());
  ASSERT_GT(m.LayerParameters(), m.EmbeddingParameters());
  EXPECT_DOUBLE_EQ(cpu.working - none.working, 2 * 2 * m.LayerParameters() / 4);
  // Nothing crosses PCIe at the step; the clipping norm reads the node's 4 gradient shards (2 B a
  // parameter) in host memory before the update starts.
  const double norm = shard * 4 * 2 / 50e9;
  EXPECT_DOUBLE_EQ(Predict(m, l, h, 32).optimizer_s, norm + shard * 30 * 4 / 50e9);
  Hardware measured = h;
  measured.host_adamw_params_per_s = 1e9;
  EXPECT_DOUBLE_EQ(Predict(m, l, measured, 32).optimizer_s, norm + shard * 4 / 1e9);
  scheduler::CostModel c = BuildCostModel(m, l, h, 4);
  EXPECT_DOUBLE_EQ(c.gather_staging_s_per_byte, 1 / 20e9);
  EXPECT_DOUBLE_EQ(c.reduce_staging_s_per_byte, 1 / 20e9);
  EXPECT_DOUBLE_EQ(c.reduce_accumulate_s_per_byte, 0);
  // With a sharding group the staging rides the comm stream before its collective; on one GPU
  // (zero = 1) the executor's copies block its training thread: they run between the computations.
  EXPECT_FALSE(c.staging_blocks);
  Layout one = l;
  one.zero = 1;
  EXPECT_TRUE(BuildCostModel(m, one, h, 1).staging_blocks);
  l.offload = l.params_offload = Offload::kNvme;
  const MemoryBreakdown nvme = PredictMemory(m, l, h, 32);
  EXPECT_DOUBLE_EQ(nvme.ModelState() + nvme.host, 0);
  EXPECT_DOUBLE_EQ(nvme.nvme, 16 * shard);
  // NVMe per parameter at the step: moments read and written (16 B), master read and written (8),
  // the gradient shard read twice (4) and the compute shard written (2).
  EXPECT_DOUBLE_EQ(Predict(m, l, h, 32).optimizer_s, std::max(shard * 30 * 4 / 50e9, shard * 30 / 5e9));
  c = BuildCostModel(m, l, h, 4);
  EXPECT_DOUBLE_EQ(c.gather_staging_s_per_byte, 1 / 20e9 + 1 / 5e9);
  EXPECT_DOUBLE_EQ(c.reduce_staging_s_per_byte, 1 / 20e9 + 1 / 5e9);
  EXPECT_DOUBLE_EQ(c.reduce_accumulate_s_per_byte, 1 / 5e9);
  // Staging only adds time: the same layout with its parameters resident is faster.
  Layout resident = l;
  resident.params_offload = Offload::kNone;
  EXPECT_GT(Predict(m, l, h, 32).step_s - Predict(m, l, h, 32).optimizer_s,
            Predict(m, resident, h, 32).step_s - Predict(m, resident, h, 32).optimizer_s);
  // On a CPU box host memory is the device's: the cpu tier moves nothing and costs nothing; NVMe
  // takes the state out and costs its reads and writes.
  Hardware box = h;
  box.shared_compute_units = 2;
  l.offload = l.params_offload = Offload::kCpu;
  EXPECT_DOUBLE_EQ(PredictMemory(m, l, box, 32).ModelState(), none.ModelState());
  EXPECT_DOUBLE_EQ(BuildCostModel(m, l, box, 4).gather_staging_s_per_byte, 0);
  l.offload = l.params_offload = Offload::kNvme;
  EXPECT_DOUBLE_EQ(PredictMemory(m, l, box, 32).ModelState(), 0);
  EXPECT_DOUBLE_EQ(BuildCostModel(m, l, box, 4).gather_staging_s_per_byte, 1 / 5e9);
  // The 3D baseline keeps its parameters on the device.
  Layout d;
  d.design = Design::k3D;
  d.pp = 2, d.dp = 2, d.offload = d.params_offload = Offload::kCpu;
  EXPECT_NE(d.Check(m, 4, 4, 32).find("offload is zeropp's"), std::string::npos);
}
// plan tries offload only where nothing else fits: a device too small for the state on it, and
// host memory too small for the state in it, leave NVMe.
TEST(Planner, OffloadIsTriedOnlyWhereNothingElseFits) {
  PlanRequest q = SmallRequest(4);
  q.designs = {Design::kZero3, Design::kZeroPP, Design::kPipeFsdp};
  for (const Prediction& p : Plan(q).fitting) EXPECT_EQ(p.layout.offload, Offload::kNone) << p.layout.Name();
  // Device memory one byte short of the smallest layout that keeps its state (every variant of
  // every layout is considered when nothing fits).
  q.offload = false;
  q.hardware.memory_bytes = 1;
  q.hardware.memory_bytes = Plan(q).smallest_memory - 1;
  EXPECT_TRUE(Plan(q).fitting.empty());
  const double shard = q.model.Parameters() / 4;
  q.offload = true;
  const PlanResult r = Plan(q);
  ASSERT_FALSE(r.fitting.empty());
  for (const Prediction& p : r.fitting) EXPECT_EQ(p.layout.offload, Offload::kCpu) << p.layout.Name();
  // 4 devices per node, 11 * shard each: too little for the optimizer state (12), enough for the
  // master alone (4: NVMe takes the moments), too little for offloaded parameters (16): those go to
  // NVMe too where a layout needs them off the device.
  q.hardware.host_capacity_bytes = 4 * 11 * shard;
  const PlanResult n = Plan(q);
  ASSERT_FALSE(n.fitting.empty());
  bool kept_params = false;
  for (const Prediction& p : n.fitting) {
    EXPECT_EQ(p.layout.offload, Offload::kNvme) << p.layout.Name();
    EXPECT_NE(p.layout.params_offload, Offload::kCpu) << p.layout.Name();
    kept_params = kept_params || p.layout.params_offload == Offload::kNone;
  }
  EXPECT_TRUE(kept_params);
  // A device one byte short of the lightest way any of them keeps its parameters (optimizer on
  // NVMe, recomputing): only layouts offloading their parameters fit, to NVMe (host memory cannot
  // take them).
  double lightest = 1e300;
  for (const Prediction& p : n.fitting) {
    if (p.layout.params_offload != Offload::kNone) continue;
    Layout kept = p.layout;
    kept.recompute = true;
    lightest = std::min(lightest, PredictMemory(q.model, kept, q.hardware, q.global_batch).Total());
  }
  q.hardware.memory_bytes = lightest - 1;
  const PlanResult pr = Plan(q);
  ASSERT_FALSE(pr.fitting.empty());
  bool params = false;
  for (const Prediction& p : pr.fitting) {
    const Layout& f = p.layout;
    EXPECT_TRUE(f.params_offload == Offload::kNvme || f.activations_offload == Offload::kNvme) << f.Name();
    params = params || f.params_offload == Offload::kNvme;
  }
  EXPECT_TRUE(params);  // the pipelines fit only by offloading their parameters
}
// ZeroPP's deferred weight passes are capped only where its own schedule does not fit, and before
// recomputing or offloading: a device one byte short of a layout's own deferral gets that layout
// back with fewer W's deferred at once, recomputing nothing and keeping its state.
TEST(Planner, DeferralIsCappedOnlyWhereTheScheduleDoesNotFit) {
  PlanRequest q = SmallRequest(4);
  q.designs = {Design::kZeroPP};
  const PlanResult ample = Plan(q);
  ASSERT_FALSE(ample.fitting.empty());
  const Layout* most = nullptr;  // the layout a cap saves most on
  double saved = 0;
  for (const Prediction& p : ample.fitting) {
    EXPECT_EQ(p.layout.max_deferred_w, -1) << p.layout.Name();
    Layout none = p.layout;
    none.max_deferred_w = 0;
    const double d = PredictMemory(q.model, p.layout, q.hardware, q.global_batch).Total() -
                     PredictMemory(q.model, none, q.hardware, q.global_batch).Total();
    EXPECT_GE(d, 0) << p.layout.Name();
    if (!p.layout.recompute && d > saved) saved = d, most = &p.layout;
  }
  ASSERT_NE(most, nullptr);
  const double own = PredictMemory(q.model, *most, q.hardware, q.global_batch).Total();
  q.hardware.memory_bytes = own - 1;
  bool found = false;
  for (const Prediction& p : Plan(q).fitting) {
    Layout uncapped = p.layout;
    uncapped.max_deferred_w = -1;
    if (uncapped.Name() != most->Name()) continue;
    found = true;
    EXPECT_GE(p.layout.max_deferred_w, 0);
    EXPECT_FALSE(p.layout.recompute);
    EXPECT_EQ(p.layout.offload, Offload::kNone);
    EXPECT_LE(PredictMemory(q.model, p.layout, q.hardware, q.global_batch).Total(), q.hardware.memory_bytes);
  }
  EXPECT_TRUE(found) << most->Name() << " capped should fit in " << own - 1 << " bytes";
}

// One device too small for a model whose parameters it would have to hold: plan offloads them too
// (ZeRO-Infinity on one rank, whose every use stages a whole unit from the tier), and that rank,
// alone on its node, has the node's whole host memory.
TEST(Planner, OneDeviceOffloadsItsParametersWhereNothingElseFits) {
  PlanRequest q = SmallRequest(1);
  q.designs = {Design::kZero3};
  Layout kept;
  kept.design = Design::kZero3;
  kept.schedule = "zero3";
  kept.recompute = true;
  kept.offload = kept.activations_offload = Offload::kNvme;
  q.hardware.memory_bytes = PredictMemory(q.model, kept, q.hardware, q.global_batch).Total() - 1;
  PlanResult r = Plan(q);
  ASSERT_FALSE(r.fitting.empty());
  for (const Prediction& p : r.fitting) {
    EXPECT_EQ(p.layout.zero, 1) << p.layout.Name();
    EXPECT_NE(p.layout.params_offload, Offload::kNone) << p.layout.Name();
  }
  // Host memory exactly what the first fitting layout, its parameters in host memory, keeps there:
  // a quarter of it per device on a node of 4 would refuse it, the one rank gets all of it.
  Layout cpu = r.fitting.front().layout;
  ASSERT_EQ(cpu.params_offload, Offload::kCpu) << cpu.Name();
  ASSERT_EQ(q.hardware.devices_per_node, 4);
  q.hardware.host_capacity_bytes = PredictMemory(q.model, cpu, q.hardware, q.global_batch).host;
  r = Plan(q);
  ASSERT_FALSE(r.fitting.empty());
  EXPECT_EQ(r.fitting.front().layout.Name(), cpu.Name());
  // One byte less: host memory cannot take that layout's parameters; NVMe does.
  q.hardware.host_capacity_bytes -= 1;
  r = Plan(q);
  bool found = false;
  for (const Prediction& p : r.fitting) {
    EXPECT_LE(p.memory.host, q.hardware.host_capacity_bytes) << p.layout.Name();
    if (p.layout.micro_batch != cpu.micro_batch) continue;
    found = true;
    EXPECT_EQ(p.layout.params_offload, Offload::kNvme) << p.layout.Name();
  }
  EXPECT_TRUE(found);
}
// Offloaded activations (ZeRO-3 recomputing): the recomputed units' saved inputs, one per layer
// unit here (the head's unit, last, keeps its own), leave the device for the tier; each costs a
// synchronous copy over PCIe after its forward and another before its backward.
TEST(Planner, OffloadedActivationsLeaveTheDeviceAndCostTwoCopiesPerUnit) {
  const Hardware h = Toy();  // bf16, PCIe 20 GB/s
  const ModelShape m = Small();
  Layout l = Zero3Over4();
  l.offload = Offload::kCpu;
  l.activations_offload = Offload::kCpu;
  EXPECT_NE(l.Check(m, 4, 4, 32).find("needs ZeRO-3"), std::string::npos);  // not recomputing
  l.recompute = true;
  EXPECT_EQ(l.Name(), "zero3_z4_b1_rc_offcpu_aoffcpu");
  Layout kept = l;
  kept.activations_offload = Offload::kNone;
  const double input = 32.0 * 64 * 2;  // tokens x hidden x 2 bytes
  const MemoryBreakdown a = PredictMemory(m, l, h, 32), k = PredictMemory(m, kept, h, 32);
  EXPECT_GT(k.activations, 0);  // some of the 4 inputs at the device's peak moment
  EXPECT_DOUBLE_EQ(a.activations, 0);
  EXPECT_LT(a.Total(), k.Total());
  EXPECT_DOUBLE_EQ(a.host - k.host, 4 * input);  // all 4 on the host at the end of a forward
  l.activations_offload = Offload::kNvme;
  EXPECT_DOUBLE_EQ(PredictMemory(m, l, h, 32).nvme, 4 * input);
  // 8 micro-batches (32 sequences over 4 ranks), 4 layer units, a copy each way.
  EXPECT_NEAR(Predict(m, l, h, 32).compute_s - Predict(m, kept, h, 32).compute_s, 8 * 4 * 2 * input / 20e9, 1e-12);
  // Pipelines run the executor's per-chunk policy: the engine refuses per-unit activation offload.
  Layout p;
  p.design = Design::kZeroPP;
  p.schedule = "zeropp";
  p.pp = 2, p.zero = 2, p.u = 2, p.recompute = true, p.offload = p.activations_offload = Offload::kCpu;
  EXPECT_NE(p.Check(m, 4, 4, 32).find("needs ZeRO-3"), std::string::npos);
}

}  // namespace
}  // namespace planner
}  // namespace zeropp
