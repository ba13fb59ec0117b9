// thread_ranks.h: run N ranks as N threads over a temporary FileStore (the fast test tier).
//
//   RunRanks(4, [](int rank, const c10::intrusive_ptr<c10d::Store>& store) { ... });
// Every exception thrown by a rank is reported as a test failure naming the rank.
#pragma once

#include <atomic>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <ATen/TensorOperators.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include "zeropp/communicator.h"
#include "zeropp/gloo_backend.h"

namespace zeropp {
namespace testing {

inline std::string TempStorePath() {
  const char* dir = std::getenv("TEST_TMPDIR");
  std::string tmpl = std::string(dir ? dir : "/tmp") + "/zpp_store_XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  int fd = mkstemp(buf.data());
  if (fd >= 0) close(fd);
  std::string path(buf.data());
  std::remove(path.c_str());
  return path;
}

template <typename Fn>
void RunRanks(int n, Fn fn) {
  const std::string path = TempStorePath();
  std::mutex mu;
  std::vector<std::string> errors;
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        c10::intrusive_ptr<c10d::Store> store = c10::make_intrusive<c10d::FileStore>(path, n);
        fn(r, store);
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(mu);
        errors.push_back("rank " + std::to_string(r) + ": " + e.what());
      }
    });
  }
  for (auto& t : threads) t.join();
  std::remove(path.c_str());
  for (const auto& e : errors) ADD_FAILURE() << e;
}

// A communicator spanning all `n` ranks of the store, on Gloo.
inline std::unique_ptr<Communicator> MakeComm(const std::string& name, int rank, int n,
                                              const c10::intrusive_ptr<c10d::Store>& store,
                                              CommOptions options = {}) {
  auto pg_store = c10::make_intrusive<c10d::PrefixStore>(name + "/pg", store);
  auto comm_store = c10::make_intrusive<c10d::PrefixStore>(name + "/comm", store);
  std::vector<int> ranks(n);
  for (int i = 0; i < n; ++i) ranks[i] = i;
  auto backend = MakeGlooBackend(pg_store, rank, n, std::chrono::milliseconds(30000));
  return std::make_unique<Communicator>(name, rank, ranks, comm_store, backend, options);
}

}  // namespace testing
}  // namespace zeropp
