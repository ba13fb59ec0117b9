// byte_corpus.h: a byte-level token stream from real text every Debian machine has (the licence
// texts in /usr/share/common-licenses, from base-files), with deterministic batching sharded
// across data-parallel ranks.
//
// Sample j of step s (global index g = s * global_batch + j) is the window of context+1 bytes
// starting at an offset drawn from a 64-bit hash of (seed, g). A data-parallel rank d of D with
// micro-batch b and M micro-batches takes samples j = (m * D + d) * b ... + b - 1 for micro-batch
// m, so the union over ranks is the same global batch for any D (parity tests rely on this).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

namespace zeropp {
namespace models {

class ByteCorpus {
 public:
  // Reads every regular file in `dir` (sorted by name) into one stream. Throws
  // std::runtime_error naming the directory when it holds fewer than `min_bytes` bytes.
  static ByteCorpus FromDirectory(const std::string& dir, int64_t min_bytes = 4096);
  explicit ByteCorpus(std::vector<uint8_t> bytes) : bytes_(std::move(bytes)) {}

  // inputs [b, context] and targets [b, context] (the next bytes), int64.
  void MicroBatch(int64_t step, int64_t micro, int64_t dp_rank, int64_t dp_size, int64_t micro_batch,
                  int64_t num_micro, int64_t context, uint64_t seed, at::Tensor* inputs,
                  at::Tensor* targets) const;
  int64_t size() const { return static_cast<int64_t>(bytes_.size()); }
  // The first (1 - fraction) of the stream and the held-out rest, e.g. for evaluation.
  std::pair<ByteCorpus, ByteCorpus> SplitTail(double fraction) const;

 private:
  std::vector<uint8_t> bytes_;
};

}  // namespace models
}  // namespace zeropp
