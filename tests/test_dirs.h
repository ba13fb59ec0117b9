// test_dirs.h: a named directory under the test's private temporary directory (TEST_TMPDIR under
// Bazel, /tmp otherwise), created if missing.
#pragma once

#include <sys/stat.h>

#include <cstdlib>
#include <string>

namespace zeropp {
namespace testing {

inline std::string TestDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string d = std::string(base ? base : "/tmp") + "/" + name;
  mkdir(d.c_str(), 0700);
  return d;
}

}  // namespace testing
}  // namespace zeropp
