#include "broker/background_write.h"

#include <pthread.h>

#include <utility>

namespace hourglass::broker {

BackgroundWrite::BackgroundWrite(storage::CommitQueue* commits,
                                 std::string name)
    : commits_(commits),
      thread_([this, name = std::move(name)] { Run(name); }) {}

BackgroundWrite::~BackgroundWrite() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void BackgroundWrite::Start(storage::WriteBatch batch) {
  busy_ = true;
  absl::MutexLock lock(&mu_);
  batch_ = std::move(batch);
  status_.reset();
}

absl::Status BackgroundWrite::Finish(storage::WriteBatch* failed) {
  busy_ = false;
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](std::optional<absl::Status>* s) { return s->has_value(); },
      &status_));
  if (!status_->ok()) *failed = *std::move(batch_);
  batch_.reset();  // Freed by the thread already unless the write failed.
  return *std::move(status_);
}

void BackgroundWrite::Run(const std::string& name) {
  pthread_setname_np(pthread_self(), name.c_str());
  // A batch to write: one is set and its status is not.
  auto pending = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return batch_.has_value() && !status_.has_value();
  };
  auto work = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopping_ || pending();
  };
  mu_.Lock();
  while (true) {
    mu_.Await(absl::Condition(&work));
    if (!pending()) break;  // Stopping, with nothing left to write.
    // The owner leaves the batch alone until its status is set.
    const storage::WriteBatch& batch = *batch_;
    mu_.Unlock();
    absl::Status status = commits_->WriteDirect(batch);
    mu_.Lock();
    // A written batch is freed here rather than by the owner, whose thread
    // (the dispatcher's step) is the busier one; a failed one is kept for
    // the owner's retry.
    if (status.ok()) batch_.reset();
    status_ = std::move(status);
  }
  mu_.Unlock();
}

}  // namespace hourglass::broker
