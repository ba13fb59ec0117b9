// CUDA builds: ProcessGroupNCCL from the wheel's libtorch_cuda. Each rank uses the GPU of its
// LOCAL_RANK (set by the caller through c10::cuda before creating the backend).
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

#include "zeropp/backend_factory.h"

namespace zeropp {

bool HasNcclBackend() { return true; }

c10::intrusive_ptr<c10d::Backend> MakeNcclBackend(const c10::intrusive_ptr<c10d::Store>& store,
                                                  int rank, int size,
                                                  std::chrono::milliseconds timeout) {
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = timeout;
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, options);
}

}  // namespace zeropp
