#include "zeropp/host_allocator.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace zeropp {

HostAllocatorSettings TuneHostAllocator() {
  static const HostAllocatorSettings settings = [] {
    HostAllocatorSettings s;
#if defined(__GLIBC__)
    s.mmap_threshold = int64_t{32} << 20;
    s.trim_threshold = int64_t{1} << 30;
    s.applied = mallopt(M_MMAP_THRESHOLD, static_cast<int>(s.mmap_threshold)) == 1 &&
                mallopt(M_TRIM_THRESHOLD, static_cast<int>(s.trim_threshold)) == 1;
#endif
    return s;
  }();
  return settings;
}

}  // namespace zeropp
