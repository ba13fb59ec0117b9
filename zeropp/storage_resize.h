// storage_resize.h: free and re-allocate a tensor's storage in place, keeping every view valid.
//
// ZeRO-3's unsharded parameter buffer is released by resizing its storage to 0 bytes and
// re-allocated to full size before the next all-gather writes into it. Module parameters and the
// tensors autograd saved are views of that one storage, so they see the new bytes without being
// re-bound (the same mechanism FSDP uses). Reading a view while the storage is empty is a bug the
// shard state machine prevents.
#pragma once

#include <cstddef>

#include <ATen/core/Tensor.h>

namespace zeropp {

// Resizes the storage behind `t` to `bytes`: CPU always, CUDA in --config=cuda builds; throws
// std::invalid_argument naming the device otherwise. Not thread-safe with concurrent readers of `t`.
void ResizeStorageBytes(const at::Tensor& t, size_t bytes);

// Bytes currently allocated for the storage behind `t`.
size_t StorageBytes(const at::Tensor& t);

}  // namespace zeropp
