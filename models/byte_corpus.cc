#include "models/byte_corpus.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include <ATen/ops/empty.h>

namespace zeropp {
namespace models {
namespace {

uint64_t Mix(uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

ByteCorpus ByteCorpus::FromDirectory(const std::string& dir, int64_t min_bytes) {
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string path = dir + "/" + e->d_name;
      struct stat st;
      if (stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) names.push_back(path);
    }
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  std::vector<uint8_t> bytes;
  for (const auto& n : names) {
    std::ifstream in(n, std::ios::binary);
    bytes.insert(bytes.end(), std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  if (static_cast<int64_t>(bytes.size()) < min_bytes) {
    throw std::runtime_error("data.dir: '" + dir + "' holds " + std::to_string(bytes.size()) +
                             " bytes of text, expected at least " + std::to_string(min_bytes));
  }
  return ByteCorpus(std::move(bytes));
}

std::pair<ByteCorpus, ByteCorpus> ByteCorpus::SplitTail(double fraction) const {
  const auto cut = static_cast<size_t>(static_cast<double>(bytes_.size()) * (1.0 - fraction));
  return {ByteCorpus(std::vector<uint8_t>(bytes_.begin(), bytes_.begin() + static_cast<std::ptrdiff_t>(cut))),
          ByteCorpus(std::vector<uint8_t>(bytes_.begin() + static_cast<std::ptrdiff_t>(cut), bytes_.end()))};
}

void ByteCorpus::MicroBatch(int64_t step, int64_t micro, int64_t dp_rank, int64_t dp_size,
                            int64_t micro_batch, int64_t num_micro, int64_t context, uint64_t seed,
                            at::Tensor* inputs, at::Tensor* targets) const {
  if (size() < context + 2) {
    throw std::runtime_error("corpus of " + std::to_string(size()) + " bytes is shorter than context+2");
  }
  const int64_t global_batch = micro_batch * dp_size * num_micro;
  *inputs = at::empty({micro_batch, context}, at::TensorOptions().dtype(at::kLong));
  *targets = at::empty({micro_batch, context}, at::TensorOptions().dtype(at::kLong));
  int64_t* in = inputs->data_ptr<int64_t>();
  int64_t* tg = targets->data_ptr<int64_t>();
  for (int64_t i = 0; i < micro_batch; ++i) {
    const int64_t j = (micro * dp_size + dp_rank) * micro_batch + i;
    const uint64_t g = static_cast<uint64_t>(step * global_batch + j);
    const int64_t start = static_cast<int64_t>(Mix(seed ^ Mix(g)) % static_cast<uint64_t>(size() - context - 1));
    for (int64_t t = 0; t < context; ++t) {
      in[i * context + t] = bytes_[start + t];
      tg[i * context + t] = bytes_[start + t + 1];
    }
  }
}

}  // namespace models
}  // namespace zeropp
