#include "zeropp/storage_resize.h"

#include <stdexcept>

#include <ATen/native/Resize.h>

namespace zeropp {

void ResizeStorageBytes(const at::Tensor& t, size_t bytes) {
  if (!t.device().is_cpu()) {
    throw std::invalid_argument("ResizeStorageBytes: device " + t.device().str() +
                                " is not supported yet (expected cpu)");
  }
  at::native::resize_bytes_cpu(t.storage().unsafeGetStorageImpl(), bytes);
}

size_t StorageBytes(const at::Tensor& t) { return t.storage().nbytes(); }

}  // namespace zeropp
