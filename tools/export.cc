// export: one consolidated safetensors file from a zeropp checkpoint, with Hugging Face GPT-2's
// names (GPT-2's for the GPT, Llama's for the Llama; readable by Python's safetensors and by
// transformers' GPT2LMHeadModel / LlamaForCausalLM).
//
//   ./zpp export CKPT OUT.safetensors        (CKPT: a step directory or a save directory)
#include <cstdio>
#include <string>

#include "tools/hf_safetensors.h"
#include "zeropp/cli/cli_main.h"

namespace zeropp {
namespace {

int Main(int argc, char** argv) {
  if (argc != 3) throw std::invalid_argument("usage: export CKPT OUT.safetensors");
  const tools::ExportResult r = tools::ExportHf(argv[1], argv[2]);
  std::printf("EXPORT family=%s tensors=%d path=%s\n", tools::HfFamilyName(r.family), r.tensors, argv[2]);
  return 0;
}

}  // namespace
}  // namespace zeropp

int main(int argc, char** argv) { return zeropp::cli::RunMain(argc, argv, zeropp::Main); }
