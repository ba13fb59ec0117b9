// proc_status.h: this process's memory as the programs in tools/ and benchmarks/ report it, from
// /proc/self/status.
#pragma once

namespace zeropp {
namespace cli {

// A field of /proc/self/status ("VmHWM:", "VmRSS:" in kB, "Threads:"); 0 when absent.
double ProcStatus(const char* key);
// The peak resident set so far (VmHWM), in MiB.
inline double PeakRssMb() { return ProcStatus("VmHWM:") / 1024.0; }

}  // namespace cli
}  // namespace zeropp
