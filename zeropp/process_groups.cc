#include "zeropp/process_groups.h"

#include <future>
#include <memory>
#include <stdexcept>
#include <thread>

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "zeropp/backend_factory.h"

namespace zeropp {

std::unique_ptr<ProcessGroups> ProcessGroups::Create(const DistEnv& env, const ParallelConfig& config,
                                                     const ProcessGroupsOptions& given) {
  config.ValidateOrThrow(env.world_size);
  ProcessGroupsOptions options = given;
  if (env.rendezvous_timeout_s > 0) options.rendezvous_timeout = std::chrono::seconds(env.rendezvous_timeout_s);
  c10d::TCPStoreOptions opts;
  opts.port = static_cast<uint16_t>(env.master_port);
  opts.isServer = env.rank == 0;
  opts.numWorkers = env.world_size;
  opts.waitWorkers = false;
  opts.timeout = options.rendezvous_timeout;
  c10::intrusive_ptr<c10d::Store> store;
  try {
    // LibTorch's connect retries can outlast opts.timeout by tens of seconds; the documented
    // timeout is kept by waiting for the connection on a helper thread, abandoned on expiry (the
    // caller ends the process).
    auto done = std::make_shared<std::promise<c10::intrusive_ptr<c10d::Store>>>();
    auto future = done->get_future();
    std::thread([done, addr = env.master_addr, opts] {
      try {
        done->set_value(c10::make_intrusive<c10d::TCPStore>(addr, opts));
      } catch (...) {
        done->set_exception(std::current_exception());
      }
    }).detach();
    if (future.wait_for(options.rendezvous_timeout + std::chrono::seconds(1)) != std::future_status::ready) {
      throw std::runtime_error(absl::StrCat("no answer from ", env.master_addr, ":", env.master_port));
    }
    store = future.get();
  } catch (const std::exception& e) {
    std::string first_line = e.what();
    first_line = first_line.substr(0, first_line.find('\n'));
    throw std::runtime_error(absl::StrCat(
        "[rank ", env.rank, "] rendezvous at MASTER_ADDR=", env.master_addr,
        " MASTER_PORT=", env.master_port, " failed: ",
        env.rank == 0 ? "rank 0 could not listen (is the port in use?): "
                      : absl::StrCat("could not reach rank 0's store within ",
                                     options.rendezvous_timeout.count() / 1000.0, " s: "),
        first_line));
  }
  // Every rank announces itself; a missing rank is named instead of hanging in a backend.
  store->set(absl::StrCat("zpp/joined/", env.rank), std::vector<uint8_t>{'1'});
  std::vector<std::string> keys;
  for (int r = 0; r < env.world_size; ++r) keys.push_back(absl::StrCat("zpp/joined/", r));
  auto deadline = std::chrono::steady_clock::now() + options.rendezvous_timeout;
  while (!store->check(keys)) {
    if (std::chrono::steady_clock::now() > deadline) {
      std::vector<int> missing;
      for (int r = 0; r < env.world_size; ++r) {
        if (!store->check({keys[r]})) missing.push_back(r);
      }
      throw std::runtime_error(absl::StrCat("[rank ", env.rank, "] rendezvous timed out after ",
                                            options.rendezvous_timeout.count(),
                                            " ms; ranks that never arrived: ",
                                            absl::StrJoin(missing, ",")));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return CreateWithStore(store, env.rank, env.world_size, config, options);
}

std::unique_ptr<ProcessGroups> ProcessGroups::CreateWithStore(c10::intrusive_ptr<c10d::Store> store,
                                                              int rank, int world_size,
                                                              const ParallelConfig& config,
                                                              const ProcessGroupsOptions& options) {
  config.ValidateOrThrow(world_size);
  std::unique_ptr<ProcessGroups> g(new ProcessGroups());
  g->store_ = std::move(store);
  g->config_ = config;
  g->rank_ = rank;
  std::vector<int> all(world_size);
  for (int r = 0; r < world_size; ++r) all[r] = r;
  MeshCoord c = config.CoordOf(rank);
  g->world_ = g->MakeGroup("world", all, options);
  g->zero_ = g->MakeGroup(absl::StrCat("zero.dp", c.dp_index, ".pp", c.pp_index),
                          config.ZeroGroupRanks(rank), options);
  // Pipeline transfers are matched by tag (the executor posts receives ahead, out of send order);
  // NCCL matches send/recv by order only, so the pp group stays on Gloo, host-staged on a GPU.
  ProcessGroupsOptions pp_options = options;
  pp_options.backend = "gloo";
  g->pp_ = g->MakeGroup(absl::StrCat("pp.dp", c.dp_index, ".z", c.zero_index), config.PpGroupRanks(rank),
                        pp_options);
  g->dp_ = g->MakeGroup(absl::StrCat("dp.pp", c.pp_index, ".z", c.zero_index), config.DpGroupRanks(rank),
                        options);
  return g;
}

std::unique_ptr<Communicator> ProcessGroups::MakeGroup(const std::string& name,
                                                       const std::vector<int>& ranks,
                                                       const ProcessGroupsOptions& options) {
  int group_rank = static_cast<int>(std::find(ranks.begin(), ranks.end(), rank_) - ranks.begin());
  auto backend_store = c10::make_intrusive<c10d::PrefixStore>(absl::StrCat("zpp/", name, "/pg"), store_);
  auto comm_store = c10::make_intrusive<c10d::PrefixStore>(absl::StrCat("zpp/", name, "/comm"), store_);
  auto backend = MakeBackend(options.backend, backend_store, group_rank,
                             static_cast<int>(ranks.size()), options.comm.timeout);
  return std::make_unique<Communicator>(name, rank_, ranks, comm_store, backend, options.comm);
}

void ProcessGroups::Shutdown() {
  for (auto* c : {world_.get(), zero_.get(), pp_.get(), dp_.get()}) {
    if (c != nullptr) c->ShutdownBackend();
  }
}

ProcessGroups::~ProcessGroups() = default;

}  // namespace zeropp
