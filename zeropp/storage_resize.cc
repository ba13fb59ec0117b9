#include "zeropp/storage_resize.h"

#include <stdexcept>

#include <ATen/native/Resize.h>
#ifdef ZEROPP_CUDA
#include <ATen/native/cuda/Resize.h>
#endif

namespace zeropp {

void ResizeStorageBytes(const at::Tensor& t, size_t bytes) {
#ifdef ZEROPP_CUDA
  if (t.device().is_cuda()) {
    at::native::resize_bytes_cuda(t.storage().unsafeGetStorageImpl(), bytes);
    return;
  }
#endif
  if (!t.device().is_cpu()) {
    throw std::invalid_argument("ResizeStorageBytes: device " + t.device().str() +
                                " is not supported (expected cpu, or cuda in --config=cuda builds)");
  }
  at::native::resize_bytes_cpu(t.storage().unsafeGetStorageImpl(), bytes);
}

size_t StorageBytes(const at::Tensor& t) { return t.storage().nbytes(); }

}  // namespace zeropp
