// train_flags.h: the `tools/train` flags that run a planned layout on zeropp's engine, so that
// what `./zpp plan` ranks can be launched as printed.
//   std::string why;
//   std::string flags = TrainFlags(model, layout, global_batch, hw, &why);  // "" + why: not ours
// zeropp's engine runs ZeRO-3 (and hybrid sharding), ZeroPP, FSDP inside a pipeline and pipelines
// without tensor parallelism, on its GPT (GeLU MLP of 4h, tied embedding) or Llama (SwiGLU,
// untied) models; tensor parallelism and DeepSpeed's schedule are the baselines' (Megatron-LM,
// DeepSpeed), and a model train cannot build is said so.
#pragma once

#include <string>

#include "scheduler/planner/hardware.h"
#include "scheduler/planner/layout.h"
#include "scheduler/planner/model_shape.h"

namespace zeropp {
namespace planner {

std::string TrainFlags(const ModelShape& m, const Layout& l, int global_batch, const Hardware& hw, std::string* why);

}  // namespace planner
}  // namespace zeropp
