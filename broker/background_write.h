#ifndef HOURGLASS_BROKER_BACKGROUND_WRITE_H_
#define HOURGLASS_BROKER_BACKGROUND_WRITE_H_

#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "storage/commit_queue.h"
#include "storage/message_store.h"

namespace hourglass::broker {

// Writes one batch at a time with CommitQueue::WriteDirect on a thread of
// its own, so that its owner can go on meanwhile and collect the result
// later. The dispatcher writes a step's acks with it while it reads and
// writes the step's deliveries (dispatcher.h).
//
// Start and Finish are for one thread at a time (the owner's); the writing
// happens on the object's thread.
class BackgroundWrite {
 public:
  // `name` names the thread (at most 15 characters).
  // REQUIRES: `commits` outlives the object.
  BackgroundWrite(storage::CommitQueue* commits, std::string name);
  // Finishes the write in progress, if any, and stops the thread.
  ~BackgroundWrite();

  BackgroundWrite(const BackgroundWrite&) = delete;
  BackgroundWrite& operator=(const BackgroundWrite&) = delete;

  // Starts writing `batch`, which must need no sync (WriteDirect refuses
  // one that does). REQUIRES: no write in progress (Finish returned since
  // the last Start).
  void Start(storage::WriteBatch batch);

  // Whether a write was started and not finished.
  bool busy() const { return busy_; }

  // Waits for the write in progress and returns its status. If it failed,
  // `*failed` receives the batch, unchanged, for a retry; otherwise `*failed`
  // is left alone. REQUIRES: busy().
  absl::Status Finish(storage::WriteBatch* failed);

 private:
  void Run(const std::string& name);

  storage::CommitQueue* const commits_;  // Constant after construction.
  bool busy_ = false;                    // The owner's.

  absl::Mutex mu_;
  std::optional<storage::WriteBatch> batch_ ABSL_GUARDED_BY(mu_);
  std::optional<absl::Status> status_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;

  std::thread thread_;
};

}  // namespace hourglass::broker

#endif  // HOURGLASS_BROKER_BACKGROUND_WRITE_H_
