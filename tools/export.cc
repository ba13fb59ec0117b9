// export: one consolidated safetensors file from a zeropp checkpoint, with Hugging Face GPT-2's
// names (readable by Python's safetensors and transformers' GPT2LMHeadModel).
//
//   ./zpp export CKPT OUT.safetensors        (CKPT: a step directory or a save directory)
#include <cstdio>
#include <string>

#include "tools/gpt2_safetensors.h"
#include "zeropp/cli/cli_main.h"

namespace zeropp {
namespace {

int Main(int argc, char** argv) {
  if (argc != 3) throw std::invalid_argument("usage: export CKPT OUT.safetensors");
  const int n = tools::ExportGpt2(argv[1], argv[2]);
  std::printf("EXPORT tensors=%d path=%s\n", n, argv[2]);
  return 0;
}

}  // namespace
}  // namespace zeropp

int main(int argc, char** argv) { return zeropp::cli::RunMain(argc, argv, zeropp::Main); }
