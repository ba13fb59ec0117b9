// io_engine.h: asynchronous reads and writes of aligned host buffers to files, for offload.
//
// Two engines behind one interface, chosen at start-up and reported by name():
//   io_uring  (liburing): one I/O thread owns a ring of `queue_depth` entries and keeps it full
//             with `block_bytes` requests; short transfers are resubmitted for their remainder.
//   threads   (Boost.Asio thread pool of `threads` workers): pread/pwrite per block.
// kAuto takes io_uring and falls back to the thread pool only when the kernel refuses a ring, and
// says so in reason(). Requests complete through std::future; a failed request's future throws
// IoError naming the operation, the file, the offset and the system's reason (ENOSPC, EIO,
// EACCES, short transfers that cannot finish).
// Buffers, offsets and sizes must be multiples of kIoAlignment for O_DIRECT files. Buffers must stay
// alive until the future is ready. Thread-safe: submit from any thread.
#pragma once

#include <cstdint>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>

namespace zeropp {
namespace offload {

constexpr int64_t kIoAlignment = 4096;

class IoError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct IoOptions {
  enum class Backend { kAuto, kIoUring, kThreadPool };
  Backend backend = Backend::kAuto;
  int queue_depth = 32;
  int64_t block_bytes = 1 << 20;
  int threads = 2;  // thread-pool backend
};

class IoEngine {
 public:
  virtual ~IoEngine() = default;
  // Throws std::invalid_argument for bad options, IoError when a forced backend is unavailable.
  static std::unique_ptr<IoEngine> Create(const IoOptions& options);

  // Non-blocking. `path` only names the file in errors.
  virtual std::future<void> Write(int fd, const void* buf, int64_t bytes, int64_t offset, const std::string& path) = 0;
  virtual std::future<void> Read(int fd, void* buf, int64_t bytes, int64_t offset, const std::string& path) = 0;
  virtual const char* name() const = 0;
  const std::string& reason() const { return reason_; }

 protected:
  std::string reason_;
};

}  // namespace offload
}  // namespace zeropp
