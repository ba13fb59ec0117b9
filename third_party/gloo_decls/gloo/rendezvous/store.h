// Opaque declarations of the gloo types that c10d/ProcessGroupGloo.hpp names (torch 2.11).
// The PyPI wheel ships no gloo headers. ProcessGroupGloo refers to gloo types only through
// shared_ptr/unique_ptr, so its size and layout do not depend on gloo definitions; zeropp needs
// only its constructor and Options::create_default, both compiled inside libtorch_cpu.
// Debian libgloo-dev (2022 snapshot) is deliberately NOT used: it is a different gloo from the
// one built into libtorch_cpu. Include only from zeropp/gloo_backend.cc.
// The abstract base is spelled out because ProcessGroupGloo::GlooStore derives from it; zeropp
// never instantiates GlooStore, so no vtable or inline body from here reaches the binary.
#pragma once
#include <chrono>
#include <string>
#include <vector>
namespace gloo {
namespace rendezvous {
class Store {
 public:
  virtual ~Store() = default;
  virtual void set(const std::string& key, const std::vector<char>& data) = 0;
  virtual std::vector<char> get(const std::string& key) = 0;
  virtual void wait(const std::vector<std::string>& keys) = 0;
  virtual void wait(const std::vector<std::string>& keys,
                    const std::chrono::milliseconds& timeout) = 0;
};
}  // namespace rendezvous
}  // namespace gloo
