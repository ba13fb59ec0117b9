// gloo_backend.h: constructs c10d's ProcessGroupGloo without exposing gloo headers.
//
// The torch wheel ships no gloo headers, so ProcessGroupGloo.hpp is included in exactly one
// translation unit (gloo_backend.cc) against opaque declarations in third_party/gloo_decls.
// Callers see only c10d::Backend.
//
//   auto backend = MakeGlooBackend(store, rank, world_size, std::chrono::seconds(60));
#pragma once

#include <chrono>
#include <string>

#include <c10/util/intrusive_ptr.h>

namespace c10d {
class Backend;
class Store;
}  // namespace c10d

namespace zeropp {

// Creates a Gloo backend over `store` with one transport device and one worker thread. The device
// binds the interface named by GLOO_SOCKET_IFNAME (as PyTorch users set it; a bad name is refused
// with std::invalid_argument naming it), else the local address that routes to MASTER_ADDR (so a
// remote master never gets loopback), else the host name's address. Blocks until all `size`
// ranks have connected or `timeout` passes; throws c10::Error naming the rank on failure.
// Call on every rank of the group.
// The local address (numeric) the kernel would use to reach `host` (a name or an address; a UDP
// connect, nothing is sent); "" when `host` does not resolve or no route exists.
std::string LocalAddressTowards(const std::string& host);

c10::intrusive_ptr<c10d::Backend> MakeGlooBackend(const c10::intrusive_ptr<c10d::Store>& store,
                                                  int rank, int size,
                                                  std::chrono::milliseconds timeout);

}  // namespace zeropp
