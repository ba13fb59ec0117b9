// backend_factory.h: the c10d backend for a device kind.
//
// "gloo" -> ProcessGroupGloo (host tensors; GPU tensors are staged by the Communicator); "nccl" ->
// ProcessGroupNCCL (only in builds made with --config=cuda; other builds refuse with a message
// saying how to get one). Anything else is refused with the list of supported backends.
#pragma once

#include <chrono>
#include <string>

#include <c10/util/intrusive_ptr.h>

namespace c10d {
class Backend;
class Store;
}  // namespace c10d

namespace zeropp {

// Blocks until every rank of the group joined or `timeout` passed. Call on every group rank.
c10::intrusive_ptr<c10d::Backend> MakeBackend(const std::string& backend,
                                              const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                              int size, std::chrono::milliseconds timeout);

// True when this binary was built with the NCCL backend.
bool HasNcclBackend();

// Defined in nccl_backend.cc (CUDA builds) or nccl_backend_absent.cc (CPU builds).
c10::intrusive_ptr<c10d::Backend> MakeNcclBackend(const c10::intrusive_ptr<c10d::Store>& store,
                                                  int rank, int size,
                                                  std::chrono::milliseconds timeout);

}  // namespace zeropp
