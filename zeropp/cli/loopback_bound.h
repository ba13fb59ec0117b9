// loopback_bound.h: the TCP loopback bandwidth of this machine, measured in-process (one stream,
// a sender and a receiver thread), as the hardware bound for collectives on one node.
#pragma once

#include <cstdint>

namespace zeropp {
namespace cli {

// Bytes per second moving `total_bytes` in `chunk_bytes` writes through a 127.0.0.1 socket.
double MeasureLoopbackBytesPerSec(int64_t total_bytes, int64_t chunk_bytes);

// Bytes transmitted so far on the loopback interface (all processes), from /proc/net/dev.
int64_t LoopbackTxBytes();

}  // namespace cli
}  // namespace zeropp
