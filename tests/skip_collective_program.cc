// skip_collective_program: every rank all-reduces twice; rank 1 then skips the third all-reduce
// and waits, so rank 0's third times out. Used by diagnose_test.sh.
#include <ATen/ops/full.h>
#include <unistd.h>

#include "zeropp/cli/cli_main.h"
#include "zeropp/process_groups.h"

namespace {

int Main(int, char**) {
  zeropp::DistEnv env = zeropp::DistEnv::FromEnvironment();
  zeropp::ProcessGroupsOptions opts;
  opts.comm.timeout = std::chrono::milliseconds(3000);
  auto groups = zeropp::ProcessGroups::Create(env, {1, env.world_size, 1, zeropp::DpMode::kDp}, opts);
  at::Tensor t = at::full({1000}, 1.0f);
  for (int i = 0; i < 3; ++i) {
    if (i == 2 && env.rank == 1) {
      sleep(60);  // skips the collective; stopped by the launcher once rank 0 fails
      return 0;
    }
    groups->world().AllReduce(t)->Wait();
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return zeropp::cli::RunMain(argc, argv, Main); }
