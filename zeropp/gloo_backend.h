// gloo_backend.h: constructs c10d's ProcessGroupGloo without exposing gloo headers.
//
// The torch wheel ships no gloo headers, so ProcessGroupGloo.hpp is included in exactly one
// translation unit (gloo_backend.cc) against opaque declarations in third_party/gloo_decls.
// Callers see only c10d::Backend.
//
//   auto backend = MakeGlooBackend(store, rank, world_size, std::chrono::seconds(60));
#pragma once

#include <chrono>

#include <c10/util/intrusive_ptr.h>

namespace c10d {
class Backend;
class Store;
}  // namespace c10d

namespace zeropp {

// Creates a Gloo backend over `store` with one transport device (the host's default interface,
// loopback when the hostname does not resolve) and one worker thread. Blocks until all `size`
// ranks have connected or `timeout` passes; throws c10::Error naming the rank on failure.
// Call on every rank of the group.
c10::intrusive_ptr<c10d::Backend> MakeGlooBackend(const c10::intrusive_ptr<c10d::Store>& store,
                                                  int rank, int size,
                                                  std::chrono::milliseconds timeout);

}  // namespace zeropp
