#include "zeropp/cli/run_checks.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include "absl/strings/str_cat.h"

namespace zeropp {
namespace cli {

void CheckWritable(const std::string& field, const std::string& path) {
  if (access(path.c_str(), F_OK) == 0) {
    if (access(path.c_str(), W_OK) != 0) {
      throw std::invalid_argument(absl::StrCat(field, ": cannot write '", path, "': ", std::strerror(errno)));
    }
    return;
  }
  const auto slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  if (access(dir.c_str(), W_OK) != 0) {
    throw std::invalid_argument(absl::StrCat(field, ": cannot write '", path, "': directory '", dir, "': ",
                                             std::strerror(errno)));
  }
}

void CheckCreatableDir(const std::string& field, const std::string& dir) {
  std::string d = dir.empty() ? "." : dir;
  while (access(d.c_str(), F_OK) != 0) {
    const auto slash = d.find_last_of('/');
    d = slash == std::string::npos ? "." : (slash == 0 ? "/" : d.substr(0, slash));
  }
  if (access(d.c_str(), W_OK | X_OK) != 0) {
    throw std::invalid_argument(absl::StrCat(field, ": cannot create or write '", dir, "': '", d, "': ",
                                             std::strerror(errno)));
  }
}

int64_t AvailableMemoryBytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kb = 0;
  std::string unit;
  while (in >> key >> kb >> unit) {
    if (key == "MemAvailable:") return kb * 1024;
  }
  return 0;
}

}  // namespace cli
}  // namespace zeropp
