// ping_pong.h: ranks 0 and 1 of a communicator bounce one tensor `times` times, rank 0 sending
// first; the other ranks return at once. pipeline_bench times it (the pipeline link's latency and
// bandwidth), collectives_bench reads the CPU it takes (a message's transport cost).
#pragma once

#include "zeropp/communicator.h"

namespace zeropp {

inline void PingPong(Communicator& c, at::Tensor& buf, int times) {
  if (c.rank() > 1) return;
  const int peer = 1 - c.rank();
  for (int k = 0; k < times; ++k) {
    if (c.rank() == 0) {
      c.Send(buf, peer)->Wait();
      c.Recv(buf, peer)->Wait();
    } else {
      c.Recv(buf, peer)->Wait();
      c.Send(buf, peer)->Wait();
    }
  }
}

}  // namespace zeropp
