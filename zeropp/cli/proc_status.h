// proc_status.h: this process's memory (from /proc/self/status) and CPU time, as the programs in
// tools/ and benchmarks/ report them.
#pragma once

#include <cstdint>

namespace zeropp {
namespace cli {

// A field of /proc/self/status ("VmHWM:", "VmRSS:" in kB, "Threads:"); 0 when absent.
double ProcStatus(const char* key);
// The peak resident set so far (VmHWM), in MiB.
inline double PeakRssMb() { return ProcStatus("VmHWM:") / 1024.0; }
// The CPU this process has used so far, every thread counted (the transport's too), in ns.
int64_t ProcessCpuNs();

}  // namespace cli
}  // namespace zeropp
