// comm_work.h: the handle of one asynchronous communication operation.
//
// Every Communicator operation returns a CommWork at once; Wait() blocks the calling thread until
// the operation completed on this rank (its output tensor is then valid and its input may be
// reused). The tensors stay referenced by the operation until it completes, so callers may drop
// their own references early. A failed or timed-out operation rethrows a CommError from Wait().
#pragma once

#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "zeropp/device.h"

namespace zeropp {

// A communication failure: timeout (naming the operation, its sequence number and the ranks that
// never arrived), a peer that died, or invalid arguments detected on this rank.
class CommError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class CommWork {
 public:
  // `describe` names the operation in errors ("group 'zero' all_gather #5").
  CommWork(uint64_t seq, std::string describe, std::chrono::milliseconds timeout)
      : seq_(seq), describe_(std::move(describe)), timeout_(timeout) {}

  // Blocks until done. Throws CommError if the operation failed, or if it has not finished within
  // its timeout plus a grace period (the worker reports the precise cause first when it can).
  // On a device, "done" means issued and ordered: the caller's current stream is made to wait on
  // the operation's completion event (no host synchronisation), after which the tensors the
  // operation held are released (their memory is reused only after the waiting stream's work).
  void Wait();
  // Non-blocking.
  bool IsCompleted();
  uint64_t seq() const { return seq_; }

  // Called once by the thread that ran the operation.
  void MarkDone();
  void MarkFailed(std::exception_ptr error);
  // For operations that are completed by waiting on something else (point-to-point): Wait()
  // runs `waiter` on the caller's thread exactly once.
  void SetWaiter(std::function<void()> waiter) { waiter_ = std::move(waiter); }
  // Device operations: the event the consumer's stream waits on, and the tensors kept alive until
  // then (set by the thread that ran the operation, before MarkDone).
  void SetDone(StreamEvent done, std::vector<at::Tensor> held) {
    done_event_ = std::move(done);
    held_ = std::move(held);
  }

 private:
  uint64_t seq_;
  std::string describe_;
  std::chrono::milliseconds timeout_;
  std::function<void()> waiter_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::exception_ptr error_;
  StreamEvent done_event_;
  std::vector<at::Tensor> held_;
};

}  // namespace zeropp
