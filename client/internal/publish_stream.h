#ifndef HOURGLASS_CLIENT_INTERNAL_PUBLISH_STREAM_H_
#define HOURGLASS_CLIENT_INTERNAL_PUBLISH_STREAM_H_

#include <deque>
#include <functional>
#include <memory>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/alarm.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/client_callback.h"
#include "hourglass/v1/broker.grpc.pb.h"

namespace hourglass::client::internal {

// One Broker.PublishStream call on gRPC's callback API: requests are written
// one at a time in the order they are sent, and each answer (answers come in
// that order, one or more to a response) goes to the oldest request still
// waiting for one. Once the stream ends, every request in flight or sent
// later fails with the stream's status.
//
// A request whose answer is not back by its deadline cancels the stream:
// every request waiting then fails with DEADLINE_EXCEEDED (answers come in
// order, so the rest would wait behind it).
//
// Thread-safe. Send, CloseWrites and Cancel may come from any thread, gRPC's
// too; callbacks run on gRPC's threads, or inline in Send when the stream
// has already ended (or is closing). Destroy it from any thread but inside its
// own callbacks; the destructor waits for the call to end (finished() says
// whether that is immediate).
class PublishStream final
    : public grpc::ClientBidiReactor<hourglass::v1::PublishRequest,
                                     hourglass::v1::PublishStreamResponse> {
 public:
  // The outcome of one request: `answer` (its own code and message: a
  // refused request does not end the stream), or null with the stream's
  // failure in `status`.
  using AnswerCallback = absl::AnyInvocable<void(
      const grpc::Status& status, hourglass::v1::PublishAnswer* answer)>;

  // Starts the call on `stub`; `prepare` gives its context what every call
  // needs (credentials; a deadline, if the whole stream has one).
  PublishStream(hourglass::v1::Broker::Stub& stub,
                const std::function<void(grpc::ClientContext&)>& prepare);
  // Cancels the call if it is still running and waits until it has ended.
  ~PublishStream() override;

  PublishStream(const PublishStream&) = delete;
  PublishStream& operator=(const PublishStream&) = delete;

  // Writes `request` after those sent before it; `done` runs once with its
  // answer, by `deadline` (InfiniteFuture: none). REQUIRES: `request` stays
  // valid and unchanged until `done` runs.
  void Send(const hourglass::v1::PublishRequest* request, absl::Time deadline,
            AnswerCallback done);

  // Ends the client's side once every request sent is written; the broker
  // then ends the stream once it has answered them all.
  void CloseWrites();
  // Cancels the call: requests waiting fail with CANCELLED.
  void Cancel() { context_.TryCancel(); }

  // Whether Send still writes requests: false once the stream ended or is
  // ending, or after CloseWrites.
  bool usable();
  // Whether the call has ended and its last callback (the watchdog's too)
  // has run: the destructor will not wait.
  bool finished();
  // Waits until the call has ended, at most until `deadline`; its status,
  // or nullopt if the deadline passed first.
  std::optional<grpc::Status> WaitDone(absl::Time deadline);

 private:
  struct Pending {
    const hourglass::v1::PublishRequest* request;
    absl::Time deadline;
    AnswerCallback done;
  };
  // The watchdog: an alarm at the deadline of the oldest request waiting.
  // A new alarm each time (one is never set again, nor destroyed, inside
  // its own callback); those whose callback has run are dropped at the next
  // arming.
  struct Watchdog {
    grpc::Alarm alarm;
    bool ran = false;
  };
  // What to start once mu_ is released (Start* may run reactions inline).
  struct Start {
    enum class Kind { kNone, kWrite, kWritesDone } kind = Kind::kNone;
    const hourglass::v1::PublishRequest* request = nullptr;
    // More requests wait: gRPC may coalesce them into one network write.
    bool buffer_hint = false;
  };

  void OnWriteDone(bool ok) override;
  void OnWritesDoneDone(bool ok) override;
  void OnReadDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

  // Claims the writer for the next request, or for ending the client's
  // side.
  Start ClaimLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DoStart(Start start);
  // A Start* call claimed by ClaimLocked has returned; releases the hold
  // once the reads ended and no Start* can follow.
  void Started();
  // Arms the watchdog for the oldest request waiting, if it has a deadline
  // and the watchdog is idle; what to arm once mu_ is released.
  std::optional<absl::Time> ArmLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Arm(absl::Time at);
  // What requests get once the stream has ended (status_ is set): never OK.
  grpc::Status FailureLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnWatchdog(Watchdog* watchdog, bool fired);

  grpc::ClientContext context_;
  // Touched by the read chain only (StartRead and the OnReadDone it causes).
  hourglass::v1::PublishStreamResponse response_;

  absl::Mutex mu_;
  std::deque<Pending> unwritten_ ABSL_GUARDED_BY(mu_);
  // Written or being written, awaiting their answers, in order.
  std::deque<Pending> answering_ ABSL_GUARDED_BY(mu_);
  // The request being written (the front of answering_'s tail) or the
  // client's end being sent.
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool writes_done_ ABSL_GUARDED_BY(mu_) = false;
  bool reads_ended_ ABSL_GUARDED_BY(mu_) = false;
  // Start* calls claimed and not yet returned; the hold that keeps OnDone
  // away stays until the reads ended and this is 0.
  int starting_ ABSL_GUARDED_BY(mu_) = 0;
  bool hold_released_ ABSL_GUARDED_BY(mu_) = false;
  // The watchdog cancelled the stream.
  bool deadline_passed_ ABSL_GUARDED_BY(mu_) = false;
  // A broker that answers more than it was asked: the stream is cancelled.
  bool too_many_answers_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<std::unique_ptr<Watchdog>> watchdogs_ ABSL_GUARDED_BY(mu_);
  bool watchdog_armed_ ABSL_GUARDED_BY(mu_) = false;
  // Arm calls between ArmLocked and the alarm's Set.
  int arming_ ABSL_GUARDED_BY(mu_) = 0;
  // The destructor runs: no more watchdogs.
  bool destroying_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<grpc::Status> status_ ABSL_GUARDED_BY(mu_);
  // OnDone has run its callbacks: nothing of gRPC's uses the object now.
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace hourglass::client::internal

#endif  // HOURGLASS_CLIENT_INTERNAL_PUBLISH_STREAM_H_
