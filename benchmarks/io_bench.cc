// io_bench: sequential write then read throughput of the offload I/O engine (both backends) on an
// O_DIRECT file, 1 MiB blocks, queue depth 32. Prints "ZPP engine=... write_gbs=... read_gbs=...".
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <string>
#include <vector>

#include "offload/host_pool.h"
#include "offload/io_engine.h"
#include "offload/offload_file.h"

int main(int argc, char** argv) {
  using namespace zeropp::offload;
  if (argc < 2) {
    std::fprintf(stderr, "usage: io_bench DIR [BYTES]\n");
    return 2;
  }
  const std::string dir = argv[1];
  const int64_t total = argc > 2 ? std::atoll(argv[2]) : (int64_t{2} << 30);
  const int64_t chunk = 64 << 20;  // each request; the engine splits it into 1 MiB blocks
  try {
    for (auto backend : {IoOptions::Backend::kIoUring, IoOptions::Backend::kThreadPool}) {
      IoOptions o;
      o.backend = backend;
      o.queue_depth = 32;
      o.threads = 4;
      auto io = IoEngine::Create(o);
      OffloadFile f(dir, "io_bench.bin");
      f.Reserve(total);  // as fio lays its file out before writing
      HostPool pool(int64_t{4} * chunk);
      std::vector<HostBuffer> bufs;
      for (int i = 0; i < 2; ++i) {
        bufs.push_back(pool.Allocate(chunk));
        std::memset(bufs.back().data(), 0x5a, chunk);
      }
      auto run = [&](bool write) {
        auto t0 = std::chrono::steady_clock::now();
        std::vector<std::future<void>> pending;
        for (int64_t off = 0, i = 0; off < total; off += chunk, ++i) {
          void* b = bufs[i % 2].data();
          pending.push_back(write ? io->Write(f.fd(), b, chunk, off, f.path()) : io->Read(f.fd(), b, chunk, off, f.path()));
          if (pending.size() >= 2) {
            pending.front().get();
            pending.erase(pending.begin());
          }
        }
        for (auto& p : pending) p.get();
        return total / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 1e9;
      };
      const double w = run(true), r = run(false);
      std::printf("ZPP engine=%s direct=%d write_gbs=%.3f read_gbs=%.3f\n", io->name(), f.direct() ? 1 : 0, w, r);
      std::fflush(stdout);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "io_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
