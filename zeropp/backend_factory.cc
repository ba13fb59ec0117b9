#include "zeropp/backend_factory.h"

#include <stdexcept>

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include "zeropp/gloo_backend.h"

namespace zeropp {

c10::intrusive_ptr<c10d::Backend> MakeBackend(const std::string& device,
                                              const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                              int size, std::chrono::milliseconds timeout) {
  if (device == "cpu") return MakeGlooBackend(store, rank, size, timeout);
  if (device == "cuda") return MakeNcclBackend(store, rank, size, timeout);
  throw std::invalid_argument("device: got '" + device + "', expected one of: cpu, cuda");
}

}  // namespace zeropp
