#include "broker/work_queue.h"

#include <pthread.h>

#include <utility>

namespace hourglass::broker {

WorkQueue::WorkQueue(std::string name)
    : thread_([this, name = std::move(name)] {
        pthread_setname_np(pthread_self(), name.c_str());
        Run();
      }) {}

WorkQueue::~WorkQueue() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void WorkQueue::Post(Work work) {
  absl::MutexLock lock(&mu_);
  queue_.push_back(std::move(work));
}

void WorkQueue::Run() {
  while (true) {
    Work work;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](WorkQueue* q) ABSL_EXCLUSIVE_LOCKS_REQUIRED(q->mu_) {
            return q->stopping_ || !q->queue_.empty();
          },
          this));
      if (queue_.empty()) return;  // Stopping, and everything ran.
      work = std::move(queue_.front());
      queue_.pop_front();
    }
    std::move(work)();
  }
}

}  // namespace hourglass::broker
