// run_checks.h: checks a rank program makes before it trains, so that bad input fails at once
// with one line instead of after the work is done.
//
//   CheckWritable("metrics", "/tmp/m.jsonl");   // throws std::invalid_argument naming the field
#pragma once

#include <cstdint>
#include <string>

namespace zeropp {
namespace cli {

// `path` can be written by this process: an existing file opened for appending, else its
// directory exists and is writable. Writes nothing. Throws std::invalid_argument naming `field`.
void CheckWritable(const std::string& field, const std::string& path);

// `dir` exists and is writable, or can be created: its nearest existing ancestor is a writable
// directory. Creates nothing. Throws std::invalid_argument naming `field`.
void CheckCreatableDir(const std::string& field, const std::string& dir);

// MemAvailable from /proc/meminfo in bytes (0 when unknown).
int64_t AvailableMemoryBytes();

}  // namespace cli
}  // namespace zeropp
