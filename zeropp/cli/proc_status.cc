#include "zeropp/cli/proc_status.h"

#include <cstring>
#include <fstream>
#include <string>

namespace zeropp {
namespace cli {

double ProcStatus(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) return std::stod(line.substr(std::strlen(key)));
  }
  return 0;
}

}  // namespace cli
}  // namespace zeropp
