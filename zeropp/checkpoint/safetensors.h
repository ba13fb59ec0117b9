// safetensors.h: the safetensors file format (8-byte little-endian header length, a UTF-8 JSON
// header, then the data buffer), written and read with every check the reference reader makes.
//
//   WriteSafetensors(path, {{"w", tensor}}, {{"format", "pt"}});   // fsynced before it returns
//   SafetensorsFile f = ReadSafetensorsHeader(path);                // throws naming path + problem
//   f.ReadElements(f.Find("w"), 0, n, dst);                          // pread of a flat range
//
// Checks on read: header length within kMaxHeaderBytes and the file, valid JSON object, known
// dtype, shape of non-negative ints, data_offsets contiguous from 0 in file order, each tensor's
// byte length = numel * element size, no bytes after the last tensor, no duplicate names.
// Loading never executes code: the header is data parsed by nlohmann::json.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

namespace zeropp {
namespace checkpoint {

constexpr int64_t kMaxHeaderBytes = 100000000;

struct SafetensorsEntry {
  std::string name;
  std::string dtype;            // "F32", "BF16", "I64", ...
  std::vector<int64_t> shape;
  int64_t begin = 0, end = 0;   // byte offsets relative to the data buffer, end exclusive
  int64_t numel() const;
};

struct SafetensorsFile {
  std::string path;
  std::vector<SafetensorsEntry> tensors;
  std::map<std::string, std::string> metadata;  // "__metadata__"
  int64_t data_start = 0;                        // 8 + header length
  // Index of `name` in tensors, or -1.
  int Find(const std::string& name) const;
  // Reads elements [first, first + count) of tensor i (flattened, C order) into dst, which holds
  // count elements of the tensor's dtype. Throws std::runtime_error naming the file on I/O errors.
  void ReadElements(int i, int64_t first, int64_t count, void* dst) const;
};

// Element size of a safetensors dtype name (0 when unknown) and the name of an ATen dtype.
int ElementSize(const std::string& dtype);
std::string DtypeName(at::ScalarType t);

// Writes the tensors (contiguous CPU tensors, in this order) and metadata, fsyncs the file.
// Returns the bytes written; with `xxh64`, also the file's XXH64 (seed 0), computed from the bytes
// as they are written (no second pass). Throws std::runtime_error naming the path (a full disk).
int64_t WriteSafetensors(const std::string& path, const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                         const std::map<std::string, std::string>& metadata, uint64_t* xxh64 = nullptr);

// Parses and checks the header. Throws std::runtime_error "<path>: <problem>".
SafetensorsFile ReadSafetensorsHeader(const std::string& path);

}  // namespace checkpoint
}  // namespace zeropp
