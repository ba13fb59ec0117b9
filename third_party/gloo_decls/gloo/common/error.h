// Opaque declarations of the gloo types that c10d/ProcessGroupGloo.hpp names (torch 2.11).
// The PyPI wheel ships no gloo headers. ProcessGroupGloo refers to gloo types only through
// shared_ptr/unique_ptr, so its size and layout do not depend on gloo definitions; zeropp needs
// only its constructor and Options::create_default, both compiled inside libtorch_cpu.
// Debian libgloo-dev (2022 snapshot) is deliberately NOT used: it is a different gloo from the
// one built into libtorch_cpu. Include only from zeropp/gloo_backend.cc.
#pragma once
namespace gloo {
class Exception;
}  // namespace gloo
