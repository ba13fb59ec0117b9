// cli_main.h: the one way zeropp's rank programs end on an error: a single line
// "error: [rank R] <message>" on stderr and exit code 1 (never an uncaught exception).
//
//   int main(int argc, char** argv) { return zeropp::tools::RunMain(argc, argv, zeropp::Main); }
#pragma once

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

namespace zeropp {
namespace tools {

inline int RunMain(int argc, char** argv, int (*body)(int, char**)) {
  try {
    return body(argc, argv);
  } catch (const std::exception& e) {
    std::string msg = e.what();
    if (msg.rfind("[rank", 0) != 0) {
      const char* rank = std::getenv("RANK");
      msg = std::string("[rank ") + (rank ? rank : "?") + "] " + msg;
    }
    std::fprintf(stderr, "error: %s\n", msg.c_str());
    return 1;
  }
}

}  // namespace tools
}  // namespace zeropp
