// process_groups.h: the rendezvous and the four communicators of one rank.
//
// ProcessGroups::Create joins the TCPStore named by the torchrun environment (rank 0 hosts it) and
// builds, for the mesh of ParallelConfig, the communicators this rank belongs to: world, zero
// (ZeRO-3 shard group, intra-node), pp (pipeline stages) and dp (replicas). Each group has its
// own store prefix, so groups never see each other's keys. The pp group is always Gloo: its
// transfers are matched by tag, which NCCL's send/recv do not support (GPU tensors are staged).
//
// Call Create on every rank with the same ParallelConfig. Blocking; bounded by
// options.rendezvous_timeout, after which the error names the ranks that did not arrive.
//
//   auto groups = ProcessGroups::Create(DistEnv::FromEnvironment(), cfg, {});
//   groups->zero().AllGather(full, shard)->Wait();
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <c10/util/intrusive_ptr.h>

#include "zeropp/communicator.h"
#include "zeropp/dist_env.h"
#include "zeropp/parallel_config.h"

namespace c10d {
class Store;
}  // namespace c10d

namespace zeropp {

struct ProcessGroupsOptions {
  std::string backend = "gloo";  // gloo | nccl (NCCL: tensors on the thread's current GPU)
  CommOptions comm;
  std::chrono::milliseconds rendezvous_timeout{60000};
};

class ProcessGroups {
 public:
  // Rendezvous through a TCPStore at env.master_addr:master_port. Throws std::runtime_error naming
  // the address when rank 0 cannot listen (port in use) or a rank cannot connect in time.
  static std::unique_ptr<ProcessGroups> Create(const DistEnv& env, const ParallelConfig& config,
                                               const ProcessGroupsOptions& options);
  // Over any store shared by all ranks (tests use a FileStore).
  static std::unique_ptr<ProcessGroups> CreateWithStore(c10::intrusive_ptr<c10d::Store> store, int rank,
                                                        int world_size, const ParallelConfig& config,
                                                        const ProcessGroupsOptions& options);

  Communicator& world() { return *world_; }
  Communicator& zero() { return *zero_; }
  Communicator& pp() { return *pp_; }
  Communicator& dp() { return *dp_; }
  const ParallelConfig& config() const { return config_; }
  int rank() const { return rank_; }
  const c10::intrusive_ptr<c10d::Store>& store() const { return store_; }

  // The orderly end of a finished run, every rank past a last barrier: NCCL backends flush and
  // free their communicators now rather than being aborted by their destructors during exit (on a
  // lent H100 that abort once logged an asynchronous "unhandled system error" with a stack trace
  // after a finished run's DONE line). Not for a failed run: there the destructors abort, which
  // cannot wait on a missing peer.
  void Shutdown();
  ~ProcessGroups();

 private:
  ProcessGroups() = default;
  std::unique_ptr<Communicator> MakeGroup(const std::string& name, const std::vector<int>& ranks,
                                          const ProcessGroupsOptions& options);

  c10::intrusive_ptr<c10d::Store> store_;
  ParallelConfig config_;
  int rank_ = 0;
  std::unique_ptr<Communicator> world_, zero_, pp_, dp_;
};

}  // namespace zeropp
