#include "zeropp/backend_factory.h"

#include <stdexcept>

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include "zeropp/gloo_backend.h"

namespace zeropp {

c10::intrusive_ptr<c10d::Backend> MakeBackend(const std::string& backend,
                                              const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                              int size, std::chrono::milliseconds timeout) {
  if (backend == "gloo") return MakeGlooBackend(store, rank, size, timeout);
  if (backend == "nccl") return MakeNcclBackend(store, rank, size, timeout);
  throw std::invalid_argument("[rank " + std::to_string(rank) + "] backend: got '" + backend +
                              "', expected one of: gloo, nccl");
}

}  // namespace zeropp
