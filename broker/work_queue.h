#ifndef HOURGLASS_BROKER_WORK_QUEUE_H_
#define HOURGLASS_BROKER_WORK_QUEUE_H_

#include <deque>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"

namespace hourglass::broker {

// Runs posted work in order on one thread of its own. The Engine answers
// admin queries and runs admin tasks on such queues, so that the gRPC
// threads that ask never wait on the store.
//
// Thread-safe: Post may be called from any thread, also from posted work.
class WorkQueue {
 public:
  using Work = absl::AnyInvocable<void() &&>;

  // `name` names the thread (at most 15 characters).
  explicit WorkQueue(std::string name);
  // Runs what is queued, then stops the thread.
  ~WorkQueue();

  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  void Post(Work work);

 private:
  void Run();

  absl::Mutex mu_;
  std::deque<Work> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace hourglass::broker

#endif  // HOURGLASS_BROKER_WORK_QUEUE_H_
