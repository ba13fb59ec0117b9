// dist_program: a small multi-process program for launcher tests. Reads the torchrun
// environment, builds the process groups and checks collectives against formulas.
//   dist_program          one all-reduce and all-gather, prints "rank R ok sum=S"
//   dist_program --loop   writes $ZPP_PIDDIR/rank<R>.pid, then all-reduces forever
#include <ATen/TensorOperators.h>
#include <ATen/ops/full.h>
#include <ATen/ops/zeros.h>
#include <c10/util/Logging.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>

#include "zeropp/process_groups.h"

int main(int argc, char** argv) {
  c10::initLogging();  // as zeropp's programs do (cli::RunMain): LibTorch's level from TORCH_CPP_LOG_LEVEL
  bool loop = argc > 1 && std::strcmp(argv[1], "--loop") == 0;
  try {
    zeropp::DistEnv env = zeropp::DistEnv::FromEnvironment();
    zeropp::ParallelConfig cfg{1, env.world_size, 1, zeropp::DpMode::kDp};
    zeropp::ProcessGroupsOptions opts;
    opts.comm.timeout = std::chrono::milliseconds(20000);
    opts.rendezvous_timeout = std::chrono::milliseconds(20000);
    auto groups = zeropp::ProcessGroups::Create(env, cfg, opts);
    auto& world = groups->world();
    at::Tensor t = at::full({1000}, static_cast<float>(env.rank + 1));
    world.AllReduce(t)->Wait();
    const float expect = env.world_size * (env.world_size + 1) / 2.0f;
    if (t[999].item<float>() != expect) {
      std::cerr << "rank " << env.rank << ": all_reduce gave " << t[999].item<float>() << ", expected "
                << expect << "\n";
      return 1;
    }
    at::Tensor g = at::zeros({env.world_size});
    world.AllGather(g, at::full({1}, static_cast<float>(env.rank)))->Wait();
    for (int r = 0; r < env.world_size; ++r) {
      if (g[r].item<float>() != r) {
        std::cerr << "rank " << env.rank << ": all_gather slot " << r << " wrong\n";
        return 1;
      }
    }
    if (loop) {
      const char* dir = std::getenv("ZPP_PIDDIR");
      std::ofstream(std::string(dir ? dir : "/tmp") + "/rank" + std::to_string(env.rank) + ".pid")
          << getpid() << "\n";
      at::Tensor big = at::full({1 << 18}, 1.0f);
      while (true) world.AllReduce(big)->Wait();
    }
    std::cout << "rank " << env.rank << " ok sum=" << expect << std::endl;
    world.Barrier()->Wait();
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << std::endl;
    return 1;
  }
  return 0;
}
