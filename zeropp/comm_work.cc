#include "zeropp/comm_work.h"

#include "absl/strings/str_cat.h"

namespace zeropp {

void CommWork::Wait() {
  if (waiter_) {
    auto waiter = std::move(waiter_);
    waiter_ = nullptr;
    try {
      waiter();
      MarkDone();
    } catch (...) {
      MarkFailed(std::current_exception());
    }
  }
  std::unique_lock<std::mutex> lock(mu_);
  auto grace = timeout_ + std::chrono::milliseconds(5000);
  if (!cv_.wait_for(lock, grace, [&] { return done_; })) {
    throw CommError(absl::StrCat(describe_, " did not complete within ", grace.count(),
                                 " ms (timeout ", timeout_.count(), " ms plus grace)"));
  }
  if (error_) std::rethrow_exception(error_);
  if (!done_event_.null()) {
    done_event_.Block();
    done_event_ = StreamEvent();
  }
  held_.clear();
}

bool CommWork::IsCompleted() {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

void CommWork::MarkDone() {
  std::lock_guard<std::mutex> lock(mu_);
  done_ = true;
  cv_.notify_all();
}

void CommWork::MarkFailed(std::exception_ptr error) {
  std::lock_guard<std::mutex> lock(mu_);
  error_ = error;
  done_ = true;
  cv_.notify_all();
}

}  // namespace zeropp
