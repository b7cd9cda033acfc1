#include "client/publisher.h"

#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "client/internal/channel_state.h"
#include "client/internal/convert.h"
#include "client/internal/publish_stream.h"
#include "grpcpp/alarm.h"

namespace hourglass::client {

using internal::ChannelAccess;
using internal::PublishStream;

namespace internal {

// What the Publisher and its operations share. Operations point to it; the
// Publisher's destructor waits until none is left.
struct PublisherState {
  PublisherState(std::shared_ptr<Channel> c, PublisherOptions o)
      : channel(std::move(c)),
        options(std::move(o)),
        timeout(options.timeout > absl::ZeroDuration()
                    ? options.timeout
                    : channel->options().call_timeout) {}

  // The stream to send on: the current one, or a new one if it broke. Drops
  // streams that broke earlier and have finished (never one inside its own
  // callbacks: a stream finishes after its last callback).
  std::shared_ptr<PublishStream> Stream();

  // An operation starts or ends.
  void Begin() {
    absl::MutexLock lock(&mu);
    ++in_flight;
  }
  void End() {
    absl::MutexLock lock(&mu);
    --in_flight;
  }

  // Constant after construction.
  const std::shared_ptr<Channel> channel;
  const PublisherOptions options;
  const absl::Duration timeout;

  absl::Mutex mu;
  int in_flight ABSL_GUARDED_BY(mu) = 0;
  std::shared_ptr<PublishStream> stream ABSL_GUARDED_BY(mu);
  // The endpoint `stream` goes to.
  const Endpoint* stream_endpoint ABSL_GUARDED_BY(mu) = nullptr;
  // A stream was made before: the next replaces it.
  bool replacing ABSL_GUARDED_BY(mu) = false;
  // Broken streams, kept until they have finished.
  std::vector<std::shared_ptr<PublishStream>> broken ABSL_GUARDED_BY(mu);
};

std::shared_ptr<PublishStream> PublisherState::Stream() {
  std::vector<std::shared_ptr<PublishStream>> finished;
  std::shared_ptr<PublishStream> current;
  {
    absl::MutexLock lock(&mu);
    const Endpoint* endpoint = &ChannelAccess::endpoint(*channel);
    // Broken, or to a node calls no longer go to (cluster mode).
    if (stream != nullptr &&
        (!stream->usable() || stream_endpoint != endpoint)) {
      broken.push_back(std::move(stream));
    }
    for (auto it = broken.begin(); it != broken.end();) {
      if ((*it)->finished()) {
        finished.push_back(std::move(*it));
        it = broken.erase(it);
      } else {
        ++it;
      }
    }
    if (stream == nullptr) {
      const Channel& c = *channel;
      // The first stream fails fast if the broker cannot be reached; one
      // that replaces a broken stream waits for the broker to come back
      // (the requests' deadlines bound the wait).
      const bool wait = replacing;
      replacing = true;
      stream_endpoint = endpoint;
      stream = std::make_shared<PublishStream>(
          *endpoint->broker, [&c, wait](grpc::ClientContext& context) {
            ChannelAccess::Prepare(c, context, absl::InfiniteFuture());
            context.set_wait_for_ready(wait && ChannelAccess::WaitForReady(c));
          });
    }
    current = stream;
  }
  return current;  // `finished` go here, outside mu.
}

}  // namespace internal

namespace {

using internal::PublisherState;

// Codes after which an operation may be tried again, when it is safe to.
bool Retryable(grpc::StatusCode code) {
  return code == grpc::StatusCode::UNAVAILABLE ||
         code == grpc::StatusCode::ABORTED;
}

// One publish or cancel with its retries, on gRPC's callback API. Made on
// the heap by the Publisher, it deletes itself once its callback returned.
// One step runs at a time: an attempt, its completion, a backoff alarm.
class Operation {
 public:
  virtual ~Operation() = default;

  void Begin() { Attempt(); }

 protected:
  // `retry_unavailable`: whether UNAVAILABLE (an unknown outcome) may be
  // tried again.
  Operation(PublisherState* state, bool retry_unavailable)
      : state_(state),
        deadline_(absl::Now() + state->timeout),
        retry_unavailable_(retry_unavailable),
        backoff_(state->options.retry.backoff) {
    state_->Begin();
  }

  // Makes the next attempt; it ends with Attempted.
  virtual void Attempt() = 0;

  // Prepares the context of an attempt: deadline, credentials, and, for a
  // retry, waiting for the broker to be reachable rather than failing at
  // once (the deadline bounds the wait).
  void Prepare(grpc::ClientContext& context) const {
    ChannelAccess::Prepare(*state_->channel, context, deadline_);
    context.set_wait_for_ready(attempts_ > 0 &&
                               ChannelAccess::WaitForReady(*state_->channel));
  }
  // Reports the outcome to the caller's callback.
  virtual void Report(absl::Status status) = 0;

  // An attempt ended with `status`: done, or tried again after a backoff
  // if the policy and the deadline allow. `context` is the call's (its
  // trailers may name the primary), `primary` the primary a PublishStream
  // answer named, if any.
  void Attempted(const grpc::Status& status,
                 const grpc::ClientContext* context = nullptr,
                 const std::string& primary = "") {
    // Cluster mode: a node that is not the primary refused the call before
    // doing anything, and said where the primary is: repeat it there at
    // once. A node that did not answer: ask the others where the primary
    // is, and repeat there if repeating is safe.
    if (status.error_code() == grpc::StatusCode::UNAVAILABLE &&
        redirects_ < internal::kMaxRedirects &&
        ((context != nullptr &&
          ChannelAccess::FollowRedirect(*state_->channel, *context, status)) ||
         ChannelAccess::FollowPrimary(*state_->channel, primary) ||
         (retry_unavailable_ &&
          ChannelAccess::Rediscover(*state_->channel,
                                    internal::kRediscoverTimeout)))) {
      ++redirects_;
      Attempt();
      return;
    }
    ++attempts_;
    const bool may_retry = Retryable(status.error_code()) &&
                           (status.error_code() == grpc::StatusCode::ABORTED ||
                            retry_unavailable_) &&
                           attempts_ < state_->options.retry.max_attempts;
    if (may_retry) {
      const absl::Time at = absl::Now() + backoff_.Next();
      if (at < deadline_) {
        // A new alarm each time: one is never set again while its callback
        // may still be returning.
        alarms_.push_back(std::make_unique<grpc::Alarm>());
        alarms_.back()->Set(absl::ToChronoTime(at),
                            [this](bool) { Attempt(); });
        return;
      }
    }
    Finish(ChannelAccess::ToStatus(*state_->channel, status, state_->timeout));
  }

  // Reports `status` and deletes the operation.
  void Finish(absl::Status status) {
    Report(std::move(status));
    PublisherState* state = state_;
    delete this;
    state->End();
  }

  PublisherState* const state_;
  const absl::Time deadline_;

 private:
  const bool retry_unavailable_;
  int attempts_ = 0;
  int redirects_ = 0;
  Backoff backoff_;
  std::vector<std::unique_ptr<grpc::Alarm>> alarms_;
};

// Whether every message of `request` has an id: then a retry after an
// unknown outcome stores nothing twice.
bool AllHaveIds(const hourglass::v1::PublishRequest& request) {
  for (const hourglass::v1::Message& m : request.messages()) {
    if (m.id().empty()) return false;
  }
  return true;
}

// A batch (or one message) over a Publish call or the stream.
class PublishOperation final : public Operation {
 public:
  PublishOperation(PublisherState* state, hourglass::v1::PublishRequest request,
                   bool on_stream, Publisher::BatchCallback done)
      : Operation(state, AllHaveIds(request)),
        request_(std::move(request)),
        on_stream_(on_stream),
        done_(std::move(done)) {}

 private:
  void Attempt() override {
    if (on_stream_) {
      state_->Stream()->Send(
          &request_, deadline_,
          [this](const grpc::Status& status,
                 hourglass::v1::PublishAnswer* answer) {
            if (answer == nullptr) {
              Attempted(status);
              return;
            }
            if (answer->code() != 0) {
              Attempted(
                  grpc::Status(static_cast<grpc::StatusCode>(answer->code()),
                               answer->message()),
                  nullptr, answer->primary());
              return;
            }
            Succeeded(answer->receipts());
          });
      return;
    }
    response_.Clear();
    context_ = std::make_unique<grpc::ClientContext>();
    Prepare(*context_);
    ChannelAccess::broker(*state_->channel)
        .async()
        ->Publish(context_.get(), &request_, &response_,
                  [this](grpc::Status status) {
                    if (status.ok()) {
                      Succeeded(response_.receipts());
                    } else {
                      Attempted(status, context_.get());
                    }
                  });
  }

  void Succeeded(
      const google::protobuf::RepeatedPtrField<hourglass::v1::Receipt>&
          receipts) {
    if (receipts.size() != request_.messages_size()) {
      Finish(absl::InternalError(absl::StrCat(
          "the broker answered ", receipts.size(), " receipts to a publish of ",
          request_.messages_size(), " messages")));
      return;
    }
    receipts_.reserve(static_cast<size_t>(receipts.size()));
    for (const hourglass::v1::Receipt& r : receipts) {
      receipts_.push_back(internal::FromProto(r));
    }
    Finish(absl::OkStatus());
  }

  void Report(absl::Status status) override {
    if (status.ok()) {
      done_(std::move(receipts_));
    } else {
      done_(std::move(status));
    }
  }

  const hourglass::v1::PublishRequest request_;
  const bool on_stream_;
  Publisher::BatchCallback done_;
  // The attempt's, on Publish calls.
  std::unique_ptr<grpc::ClientContext> context_;
  hourglass::v1::PublishResponse response_;
  std::vector<Receipt> receipts_;
};

class CancelOperation final : public Operation {
 public:
  CancelOperation(PublisherState* state, hourglass::v1::CancelRequest request,
                  absl::AnyInvocable<void(absl::Status)> done)
      : Operation(state, /*retry_unavailable=*/false),
        request_(std::move(request)),
        done_(std::move(done)) {}

 private:
  void Attempt() override {
    context_ = std::make_unique<grpc::ClientContext>();
    Prepare(*context_);
    ChannelAccess::broker(*state_->channel)
        .async()
        ->Cancel(context_.get(), &request_, &response_,
                 [this](grpc::Status status) {
                   if (status.ok()) {
                     Finish(absl::OkStatus());
                   } else {
                     Attempted(status, context_.get());
                   }
                 });
  }

  void Report(absl::Status status) override { done_(std::move(status)); }

  const hourglass::v1::CancelRequest request_;
  absl::AnyInvocable<void(absl::Status)> done_;
  std::unique_ptr<grpc::ClientContext> context_;
  hourglass::v1::CancelResponse response_;
};

}  // namespace

Publisher::Publisher(std::shared_ptr<Channel> channel, PublisherOptions options)
    : state_(std::make_unique<internal::PublisherState>(std::move(channel),
                                                        std::move(options))) {}

Publisher::~Publisher() {
  std::shared_ptr<PublishStream> stream;
  std::vector<std::shared_ptr<PublishStream>> broken;
  {
    absl::MutexLock lock(&state_->mu);
    auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_->mu) {
      return state_->in_flight == 0;
    };
    state_->mu.Await(absl::Condition(&idle));
    stream = std::move(state_->stream);
    broken = std::move(state_->broken);
  }
  if (stream != nullptr) {
    // Every request is answered: the broker ends the stream at once.
    stream->CloseWrites();
    stream->WaitDone(absl::Now() + state_->timeout);
  }
  // The streams' destructors cancel what still runs and wait for its end.
}

void Publisher::PublishBatchAsync(std::vector<Message> messages,
                                  BatchCallback done) {
  hourglass::v1::PublishRequest request;
  if (absl::Status s = internal::ToRequest(std::move(messages), request);
      !s.ok()) {
    done(std::move(s));
    return;
  }
  (new PublishOperation(
       state_.get(), std::move(request),
       state_->options.batch_rpc == PublisherOptions::BatchRpc::kPublishStream,
       std::move(done)))
      ->Begin();
}

void Publisher::PublishAsync(Message message, ReceiptCallback done) {
  std::vector<Message> one;
  one.push_back(std::move(message));
  hourglass::v1::PublishRequest request;
  if (absl::Status s = internal::ToRequest(std::move(one), request); !s.ok()) {
    done(std::move(s));
    return;
  }
  (new PublishOperation(
       state_.get(), std::move(request), /*on_stream=*/true,
       [done = std::move(done)](
           absl::StatusOr<std::vector<Receipt>> receipts) mutable {
         if (!receipts.ok()) {
           done(receipts.status());
         } else {
           done(std::move(receipts->front()));
         }
       }))
      ->Begin();
}

absl::StatusOr<std::vector<Receipt>> Publisher::PublishBatch(
    std::vector<Message> messages) {
  absl::StatusOr<std::vector<Receipt>> result;
  absl::Notification done;
  PublishBatchAsync(std::move(messages),
                    [&](absl::StatusOr<std::vector<Receipt>> receipts) {
                      result = std::move(receipts);
                      done.Notify();
                    });
  done.WaitForNotification();
  return result;
}

absl::StatusOr<Receipt> Publisher::Publish(Message message) {
  absl::StatusOr<Receipt> result;
  absl::Notification done;
  PublishAsync(std::move(message), [&](absl::StatusOr<Receipt> receipt) {
    result = std::move(receipt);
    done.Notify();
  });
  done.WaitForNotification();
  return result;
}

absl::Status Publisher::Cancel(absl::string_view topic, absl::string_view id) {
  hourglass::v1::CancelRequest request;
  request.set_topic(std::string(topic));
  request.set_id(std::string(id));
  absl::Status result;
  absl::Notification done;
  (new CancelOperation(state_.get(), std::move(request),
                       [&](absl::Status status) {
                         result = std::move(status);
                         done.Notify();
                       }))
      ->Begin();
  done.WaitForNotification();
  return result;
}

}  // namespace hourglass::client
