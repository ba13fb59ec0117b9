// host_allocator.h: how a training process allocates host memory.
//
// By default glibc returns freed memory above 128 KiB to the kernel (mmap per allocation, trimming
// the heap top), so every micro-batch's activations and gradients page-fault afresh. Training
// allocates the same sizes step after step; keeping freed memory for reuse (as PyTorch's caching
// allocators do on the GPU) removes those faults. Measured on this project's split-backward bench
// (1 thread, GPT width 256): Bi + W went from 1.23x to 1.06x autograd's whole backward, because W
// keeps the output gradients alive and B then faults on fresh pages for every new buffer.
//
// Kept on glibc's heap, though, large buffers fragment it: a freed unit-sized buffer (a gathered
// unit, its unsharded gradient) is split by the small allocations that follow, and the next one of
// that size extends the heap. On the 4-rank ZeRO-3 layout of zeropp-vs-3d a rank's anonymous RSS
// grew by 79-106 MB (7 runs) for 39 MB of live training heap. So CPU tensors of at least large_block_bytes and
// under glibc's mmap threshold come from a cache of page-aligned mmapped blocks reused at their
// page-rounded size or up to twice it (best fit): no heap fragmentation, no repeated page faults.
// Before it maps a new block, the cache unmaps kept blocks (largest first) until blocks in use and
// kept come to at most the most ever in use plus an eighth (at least 4 MiB): kept at their exact
// size only, blocks of sizes that training no longer asks for held 10 MB more on the 3D rows of
// zeropp-vs-3d (peak RSS net of idle, tp2 x dp2: 80 MB exact-size, 79 best fit, 69 trimmed; ZeRO-3
// z4: 72, 65, 64). So a rank's RSS follows its peak tensor bytes, which the planner predicts.
//
// The blocks start at 64 KiB (page rounding wastes at most 1/16 there). From 1 MiB, tensors of
// 64 KiB-1 MiB (at width 256 a micro-batch's activations, a layer's gathered weights) stayed on the
// heap, whose free space (mallinfo2 at the end of a run) was 25-46 MB per rank on zeropp-vs-3d's
// zero3_z4 and zeropp_pp2_z2_u4; from 64 KiB it was 2 MB, and those runs' peak RSS net of the idle
// process fell from 79 to 72 MB and from 120 to 99 MB, at 3198 and 6601 tokens/s (3048, 6513).
#pragma once

#include <cstdint>

namespace zeropp {

struct HostAllocatorSettings {
  int64_t mmap_threshold = 0;  // allocations at least this large are mmapped (glibc's max: 32 MiB)
  int64_t trim_threshold = 0;  // free memory kept at the heap top before it is given back
  // CPU tensors in [large_block_bytes, mmap_threshold) come from the block cache; freed blocks are
  // kept for reuse up to cache_cap_bytes in all (above it a freed block is unmapped), and trimmed
  // to the peak in use (above).
  int64_t large_block_bytes = 0;
  int64_t cache_cap_bytes = 0;
  bool applied = false;  // false where the C library is not glibc
};

// Sets the mmap threshold to 32 MiB and the trim threshold to 1 GiB, and installs the block cache
// as the CPU allocator (blocks from 64 KiB, 512 MiB of freed blocks kept), once per process (later
// calls return the same settings). Thread-safe.
HostAllocatorSettings TuneHostAllocator();

struct BlockCacheStats {
  int64_t hits = 0, misses = 0;  // allocations served from the cache, and freshly mapped
  int64_t cached_bytes = 0;      // freed blocks kept for reuse
  int64_t live_bytes = 0;        // blocks in use (the bytes asked for, page-rounded)
  int64_t blocks_peak_bytes = 0;  // the most mapped bytes of blocks in use at once
  // Every CPU tensor and raw CPU allocation (blocks and the replaced allocator's, the latter by
  // malloc_usable_size): live now and the most live at once since the last ResetHostTensorPeak.
  // The host's counterpart of the CUDA caching allocator's allocated and peak allocated bytes:
  // what training holds, without what the allocators keep freed (RSS includes that).
  int64_t tensor_live_bytes = 0, tensor_peak_bytes = 0;
};
BlockCacheStats HostBlockCacheStats();
// Starts a new peak at the bytes live now.
void ResetHostTensorPeak();

}  // namespace zeropp
