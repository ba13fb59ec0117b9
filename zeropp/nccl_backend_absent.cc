// CPU-only builds: the NCCL backend is refused, never silently replaced.
#include <stdexcept>

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include "zeropp/backend_factory.h"

namespace zeropp {

bool HasNcclBackend() { return false; }

c10::intrusive_ptr<c10d::Backend> MakeNcclBackend(const c10::intrusive_ptr<c10d::Store>&, int rank,
                                                  int, std::chrono::milliseconds) {
  throw std::invalid_argument("[rank " + std::to_string(rank) +
                              "] backend 'nccl' needs a CUDA build, but this binary was built "
                              "without CUDA; rebuild with bazel --config=cuda");
}

}  // namespace zeropp
