#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <thread>
#include <iostream>
#include "zeropp/gloo_backend.h"
int main() {
  std::string path = "/tmp/zpp_smoke_store"; std::remove(path.c_str());
  std::vector<std::thread> ts;
  for (int r = 0; r < 2; ++r) ts.emplace_back([&, r] {
    auto store = c10::make_intrusive<c10d::FileStore>(path, 2);
    auto pg = zeropp::MakeGlooBackend(store, r, 2, std::chrono::seconds(20));
    std::vector<at::Tensor> t{at::ones({4}) * (r + 1)};
    pg->allreduce(t)->wait();
    std::cout << "rank " << r << " " << t[0].sum().item<float>() << "\n";
  });
  for (auto& t : ts) t.join();
}
