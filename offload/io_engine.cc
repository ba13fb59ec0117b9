#include "offload/io_engine.h"

#include <liburing.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

namespace zeropp {
namespace offload {
namespace {

std::string Describe(bool write, int64_t bytes, int64_t offset, const std::string& path, int err) {
  return std::string(write ? "write" : "read") + " of " + std::to_string(bytes) + " bytes at offset " +
         std::to_string(offset) + (write ? " to " : " from ") + path + " failed: " + std::strerror(err);
}

// One caller request, split into blocks.
struct Request {
  bool write = false;
  int fd = -1;
  char* buf = nullptr;
  int64_t bytes = 0, offset = 0;
  std::string path;
  std::promise<void> done;
  std::atomic<int64_t> outstanding{0};  // blocks not finished
  std::mutex mu;
  std::string error;

  void Fail(const std::string& e) {
    std::lock_guard<std::mutex> lock(mu);
    if (error.empty()) error = e;
  }
  void BlockDone() {
    if (outstanding.fetch_sub(1) == 1) {
      if (error.empty()) {
        done.set_value();
      } else {
        done.set_exception(std::make_exception_ptr(IoError(error)));
      }
    }
  }
};

// A request split into `block_bytes` blocks; a zero-byte request is complete at once.
std::shared_ptr<Request> MakeRequest(bool write, int fd, void* buf, int64_t bytes, int64_t offset,
                                     const std::string& path, int64_t block_bytes, std::future<void>* fut) {
  auto r = std::make_shared<Request>();
  r->write = write;
  r->fd = fd;
  r->buf = static_cast<char*>(buf);
  r->bytes = bytes;
  r->offset = offset;
  r->path = path;
  *fut = r->done.get_future();
  r->outstanding = (bytes + block_bytes - 1) / block_bytes;
  if (bytes == 0) r->done.set_value();
  return r;
}

class IoUringEngine : public IoEngine {
 public:
  explicit IoUringEngine(const IoOptions& o) : opt_(o) {
    int rc = io_uring_queue_init(static_cast<unsigned>(o.queue_depth), &ring_, 0);
    if (rc < 0) throw IoError(std::string("io_uring_queue_init: ") + std::strerror(-rc));
    thread_ = std::thread([this] { Loop(); });
  }
  ~IoUringEngine() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
    io_uring_queue_exit(&ring_);
  }
  const char* name() const override { return "io_uring"; }
  std::future<void> Write(int fd, const void* buf, int64_t bytes, int64_t offset, const std::string& path) override {
    return Submit(true, fd, const_cast<void*>(buf), bytes, offset, path);
  }
  std::future<void> Read(int fd, void* buf, int64_t bytes, int64_t offset, const std::string& path) override {
    return Submit(false, fd, buf, bytes, offset, path);
  }

 private:
  struct Block {
    std::shared_ptr<Request> req;
    int64_t pos, len;  // relative to the request
  };

  std::future<void> Submit(bool write, int fd, void* buf, int64_t bytes, int64_t offset, const std::string& path) {
    std::future<void> fut;
    auto r = MakeRequest(write, fd, buf, bytes, offset, path, opt_.block_bytes, &fut);
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (int64_t pos = 0; pos < bytes; pos += opt_.block_bytes) {
        queue_.push_back(Block{r, pos, std::min(opt_.block_bytes, bytes - pos)});
      }
    }
    cv_.notify_all();
    return fut;
  }

  void Prep(Block* b) {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    Request& r = *b->req;
    if (r.write) {
      io_uring_prep_write(sqe, r.fd, r.buf + b->pos, static_cast<unsigned>(b->len), r.offset + b->pos);
    } else {
      io_uring_prep_read(sqe, r.fd, r.buf + b->pos, static_cast<unsigned>(b->len), r.offset + b->pos);
    }
    io_uring_sqe_set_data(sqe, b);
  }

  void Loop() {
    int inflight = 0;
    while (true) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        if (inflight == 0) cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (stop_ && queue_.empty() && inflight == 0) return;
        while (inflight < opt_.queue_depth && !queue_.empty()) {
          Prep(new Block(std::move(queue_.front())));
          queue_.pop_front();
          ++inflight;
        }
      }
      io_uring_submit(&ring_);
      io_uring_cqe* cqe = nullptr;
      if (io_uring_wait_cqe(&ring_, &cqe) < 0) continue;
      do {
        Block* b = static_cast<Block*>(io_uring_cqe_get_data(cqe));
        const int res = cqe->res;
        io_uring_cqe_seen(&ring_, cqe);
        --inflight;
        Request& r = *b->req;
        if (res < 0) {
          r.Fail(Describe(r.write, b->len, r.offset + b->pos, r.path, -res));
          r.BlockDone();
          delete b;
        } else if (res == 0 && b->len > 0) {
          r.Fail(Describe(r.write, b->len, r.offset + b->pos, r.path, r.write ? ENOSPC : EIO) +
                 " (no progress: " + (r.write ? "device full" : "end of file") + ")");
          r.BlockDone();
          delete b;
        } else if (res < b->len) {
          b->pos += res;  // short transfer: resubmit the remainder
          b->len -= res;
          std::lock_guard<std::mutex> lock(mu_);
          queue_.push_front(std::move(*b));
          delete b;
        } else {
          r.BlockDone();
          delete b;
        }
      } while (io_uring_peek_cqe(&ring_, &cqe) == 0);
    }
  }

  IoOptions opt_;
  io_uring ring_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Block> queue_;
  bool stop_ = false;
  std::thread thread_;  // owns the ring: submits and reaps
};

class ThreadPoolEngine : public IoEngine {
 public:
  explicit ThreadPoolEngine(const IoOptions& o) : opt_(o), pool_(static_cast<size_t>(o.threads)) {}
  ~ThreadPoolEngine() override { pool_.join(); }
  const char* name() const override { return "threads"; }
  std::future<void> Write(int fd, const void* buf, int64_t bytes, int64_t offset, const std::string& path) override {
    return Submit(true, fd, const_cast<void*>(buf), bytes, offset, path);
  }
  std::future<void> Read(int fd, void* buf, int64_t bytes, int64_t offset, const std::string& path) override {
    return Submit(false, fd, buf, bytes, offset, path);
  }

 private:
  std::future<void> Submit(bool write, int fd, void* buf, int64_t bytes, int64_t offset, const std::string& path) {
    std::future<void> fut;
    auto r = MakeRequest(write, fd, buf, bytes, offset, path, opt_.block_bytes, &fut);
    const int64_t blocks = r->outstanding;
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t pos = b * opt_.block_bytes, len = std::min(opt_.block_bytes, bytes - pos);
      boost::asio::post(pool_, [r, pos, len] {
        int64_t off = pos;
        while (off < pos + len) {
          ssize_t n = r->write ? pwrite(r->fd, r->buf + off, pos + len - off, r->offset + off)
                               : pread(r->fd, r->buf + off, pos + len - off, r->offset + off);
          if (n < 0 && errno == EINTR) continue;
          if (n <= 0) {
            int err = n < 0 ? errno : (r->write ? ENOSPC : EIO);
            r->Fail(Describe(r->write, pos + len - off, r->offset + off, r->path, err));
            break;
          }
          off += n;
        }
        r->BlockDone();
      });
    }
    return fut;
  }

  IoOptions opt_;
  boost::asio::thread_pool pool_;  // I/O workers, one blocking pread/pwrite each
};

}  // namespace

std::unique_ptr<IoEngine> IoEngine::Create(const IoOptions& o) {
  if (o.queue_depth < 1 || o.block_bytes < kIoAlignment || o.block_bytes % kIoAlignment != 0 || o.threads < 1) {
    throw std::invalid_argument("IoOptions: queue_depth(" + std::to_string(o.queue_depth) + ") must be >= 1, block_bytes(" +
                                std::to_string(o.block_bytes) + ") a multiple of " + std::to_string(kIoAlignment) +
                                ", threads(" + std::to_string(o.threads) + ") >= 1");
  }
  if (o.backend == IoOptions::Backend::kThreadPool) {
    auto e = std::make_unique<ThreadPoolEngine>(o);
    e->reason_ = "thread pool requested";
    return e;
  }
  try {
    auto e = std::make_unique<IoUringEngine>(o);
    e->reason_ = "io_uring available";
    return e;
  } catch (const IoError& err) {
    if (o.backend == IoOptions::Backend::kIoUring) throw;
    auto e = std::make_unique<ThreadPoolEngine>(o);
    e->reason_ = std::string("io_uring refused (") + err.what() + "); using the thread pool";
    return e;
  }
}

}  // namespace offload
}  // namespace zeropp
