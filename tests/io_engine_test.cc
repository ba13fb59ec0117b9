// The offload I/O engine (io_uring and the thread-pool fallback) and its files: round trips of
// odd block counts with concurrent requests, a full filesystem failing with the file and offset
// named and nothing left behind, an unwritable directory refused up front, and the host pool's
// budget.
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "offload/host_pool.h"
#include "offload/io_engine.h"
#include "offload/offload_file.h"
#include "tests/test_dirs.h"

namespace zeropp {
namespace offload {
namespace {

using zeropp::testing::TestDir;

// A small tmpfs (root only); returns false when this machine refuses the mount.
bool MountTmpfs(const std::string& dir, const char* opts, unsigned long flags = 0) {
  return mount("tmpfs", dir.c_str(), "tmpfs", flags, opts) == 0;
}

class IoEngineTest : public ::testing::TestWithParam<IoOptions::Backend> {};

TEST_P(IoEngineTest, RoundTripOddBlocksConcurrently) {
  IoOptions o;
  o.backend = GetParam();
  o.block_bytes = 1 << 20;
  o.queue_depth = 8;
  auto io = IoEngine::Create(o);
  std::printf("engine %s (%s)\n", io->name(), io->reason().c_str());
  OffloadFile f(TestDir("rt"), "state.bin");
  std::printf("O_DIRECT: %s\n", f.direct() ? "yes" : "refused by the filesystem, buffered");
  struct stat st;
  EXPECT_NE(stat(f.path().c_str(), &st), 0) << "the offload file keeps a name while open; a SIGKILL would leave it";
  HostPool pool(64 << 20);
  const int64_t big = (5 << 20) + 3 * kIoAlignment;  // 6 blocks, the last partial
  HostBuffer out = pool.Allocate(big), in = pool.Allocate(big);
  std::mt19937 rng(3);
  for (int64_t i = 0; i < big; ++i) static_cast<uint8_t*>(out.data())[i] = static_cast<uint8_t>(rng());
  // One large write plus three concurrent 1 MiB writes behind it.
  std::vector<HostBuffer> small;
  std::vector<std::future<void>> writes;
  writes.push_back(io->Write(f.fd(), out.data(), big, 2 * kIoAlignment, f.path()));
  for (int k = 0; k < 3; ++k) {
    small.push_back(pool.Allocate(1 << 20));
    std::memset(small.back().data(), 'a' + k, 1 << 20);
    writes.push_back(io->Write(f.fd(), small.back().data(), 1 << 20, (16 << 20) + k * (1 << 20), f.path()));
  }
  for (auto& w : writes) w.get();
  io->Read(f.fd(), in.data(), big, 2 * kIoAlignment, f.path()).get();
  EXPECT_EQ(std::memcmp(in.data(), out.data(), big), 0);
  HostBuffer check = pool.Allocate(1 << 20);
  for (int k = 0; k < 3; ++k) {
    io->Read(f.fd(), check.data(), 1 << 20, (16 << 20) + k * (1 << 20), f.path()).get();
    EXPECT_EQ(static_cast<char*>(check.data())[12345], 'a' + k);
  }
}

TEST_P(IoEngineTest, FullFilesystemNamesFileAndOffsetAndLeavesNothing) {
  const std::string dir = TestDir(std::string("full_") + (GetParam() == IoOptions::Backend::kIoUring ? "uring" : "pool"));
  if (!MountTmpfs(dir, "size=1m")) GTEST_SKIP() << "cannot mount a small tmpfs here (needs root): " << std::strerror(errno);
  IoOptions o;
  o.backend = GetParam();
  o.block_bytes = 256 << 10;
  auto io = IoEngine::Create(o);
  std::string path;
  {
    OffloadFile f(dir, "optimizer.bin");
    path = f.path();
    HostPool pool(8 << 20);
    HostBuffer b = pool.Allocate(4 << 20);
    std::memset(b.data(), 7, 4 << 20);
    try {
      io->Write(f.fd(), b.data(), 4 << 20, 0, f.path()).get();
      ADD_FAILURE() << "4 MiB fit into a 1 MiB filesystem";
    } catch (const IoError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("write of"), std::string::npos) << m;
      EXPECT_NE(m.find(path), std::string::npos) << m;
      EXPECT_NE(m.find("at offset"), std::string::npos) << m;
      EXPECT_NE(m.find("No space left on device"), std::string::npos) << m;
    }
  }
  struct stat st;
  EXPECT_NE(stat(path.c_str(), &st), 0) << path << " survived its OffloadFile";
  // Reserving more than the device holds fails up front, naming file and size.
  try {
    OffloadFile f(dir, "big.bin");
    f.Reserve(8 << 20);
    ADD_FAILURE() << "reserved 8 MiB on a 1 MiB filesystem";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot reserve 8388608 bytes for offload file " + dir + "/big.bin: No space left on device"),
              std::string::npos)
        << e.what();
  }
  umount(dir.c_str());
}

INSTANTIATE_TEST_SUITE_P(Backends, IoEngineTest,
                         ::testing::Values(IoOptions::Backend::kIoUring, IoOptions::Backend::kThreadPool),
                         [](const auto& info) {
                           return std::string(info.param == IoOptions::Backend::kIoUring ? "io_uring" : "threads");
                         });

TEST(OffloadFileTest, UnwritableOrMissingDirectoryIsRefusedUpFront) {
  try {
    OffloadFile::CheckDirectory("/nonexistent/zeropp");
    ADD_FAILURE() << "missing directory accepted";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("offload dir '/nonexistent/zeropp': No such file or directory"),
              std::string::npos)
        << e.what();
  }
  const std::string dir = TestDir("ro");
  if (!MountTmpfs(dir, "size=1m", MS_RDONLY)) GTEST_SKIP() << "cannot mount a read-only tmpfs here (needs root)";
  try {
    OffloadFile f(dir, "x.bin");
    ADD_FAILURE() << "read-only directory accepted";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("is not writable: Read-only file system"), std::string::npos) << e.what();
  }
  umount(dir.c_str());
}

TEST(HostPoolTest, ReusesAndEnforcesTheBudget) {
  HostPool pool(3 << 20);
  void* first;
  {
    HostBuffer a = pool.Allocate(1 << 20);
    first = a.data();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % 4096, 0u);
    EXPECT_EQ(pool.in_use(), 1 << 20);
  }
  HostBuffer b = pool.Allocate(1 << 20);
  EXPECT_EQ(b.data(), first);  // reused
  HostBuffer c = pool.Allocate(2 << 20);
  try {
    pool.Allocate(4096);
    ADD_FAILURE() << "budget exceeded silently";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("request of 4096 bytes with 3145728 in use exceeds the budget of 3145728"),
              std::string::npos)
        << e.what();
  }
}

TEST(IoEngineOptionsTest, BadOptionsAreRefused) {
  IoOptions o;
  o.block_bytes = 1000;
  EXPECT_THROW(IoEngine::Create(o), std::invalid_argument);
}

}  // namespace
}  // namespace offload
}  // namespace zeropp
