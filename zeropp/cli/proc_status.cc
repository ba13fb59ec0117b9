#include "zeropp/cli/proc_status.h"

#include <time.h>

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

int64_t ProcessCpuNs() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec;
}

}  // namespace cli
}  // namespace zeropp
