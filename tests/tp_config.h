// tp_config.h: the tiny GPT the 3D baseline's parity tests slice (vocabulary, heads and context
// divide by tp = 2).
#pragma once

#include "models/gpt.h"

namespace zeropp {
namespace testing {

inline models::GptConfig TpTestConfig() {
  models::GptConfig c;
  c.vocab = 32;
  c.context = 8;
  c.width = 16;
  c.depth = 2;
  c.heads = 2;
  return c;
}

}  // namespace testing
}  // namespace zeropp
