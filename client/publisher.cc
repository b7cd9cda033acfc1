#include "client/publisher.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "client/internal/channel_state.h"
#include "client/internal/convert.h"
#include "client/internal/publish_stream.h"
#include "cluster/shard_hash.h"
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

  // The stream to send on to `endpoint`: its current one, or a new one if
  // it broke. Drops streams that broke earlier and have finished (never one
  // inside its own callbacks: a stream finishes after its last callback).
  std::shared_ptr<PublishStream> Stream(const Endpoint& endpoint);

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
  // A stream to each node publishes went to (cluster mode: the primaries
  // of the topics' shards; otherwise the one broker).
  std::map<const Endpoint*, std::shared_ptr<PublishStream>> streams
      ABSL_GUARDED_BY(mu);
  // The endpoints a stream was made to before: the next replaces it.
  std::set<const Endpoint*> opened ABSL_GUARDED_BY(mu);
  // Broken streams, kept until they have finished.
  std::vector<std::shared_ptr<PublishStream>> broken ABSL_GUARDED_BY(mu);
};

std::shared_ptr<PublishStream> PublisherState::Stream(
    const Endpoint& endpoint) {
  std::vector<std::shared_ptr<PublishStream>> finished;
  std::shared_ptr<PublishStream> current;
  {
    absl::MutexLock lock(&mu);
    std::shared_ptr<PublishStream>& stream = streams[&endpoint];
    if (stream != nullptr && !stream->usable()) {
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
      const bool wait = !opened.insert(&endpoint).second;
      stream = std::make_shared<PublishStream>(
          *endpoint.broker, [&c, wait](grpc::ClientContext& context) {
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
  // `topic`: what the operation is about, which says where it goes in
  // cluster mode (the primary of its shard). `retry_unavailable`: whether
  // UNAVAILABLE (an unknown outcome) may be tried again.
  Operation(PublisherState* state, std::string topic, bool retry_unavailable)
      : state_(state),
        topic_(std::move(topic)),
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
  // Cluster mode: a node refused the operation with FAILED_PRECONDITION and
  // said how many shards the cluster has. Whether the operation handed its
  // work on (and deleted itself) rather than fail.
  virtual bool HandOver() { return false; }

  // An attempt ended with `status`: done, or tried again after a backoff
  // if the policy and the deadline allow. `redirect` is what the node said
  // of where to go: the call's trailers, or a PublishStream answer's.
  void Attempted(const grpc::Status& status,
                 const internal::Redirect& redirect = {}) {
    // Cluster mode: a node that is not the primary refused the call before
    // doing anything, and said where the primary is: repeat it there at
    // once. A node that did not answer: ask the others where the primary
    // is, and repeat there if repeating is safe.
    const bool followed =
        ChannelAccess::Follow(*state_->channel, redirect, topic_);
    if (status.error_code() == grpc::StatusCode::UNAVAILABLE &&
        redirects_ < internal::kMaxRedirects &&
        (followed || (retry_unavailable_ &&
                      ChannelAccess::Rediscover(*state_->channel,
                                                internal::kRediscoverTimeout,
                                                topic_)))) {
      ++redirects_;
      Attempt();
      return;
    }
    if (status.error_code() == grpc::StatusCode::FAILED_PRECONDITION &&
        redirect.shard_count > 1 && HandOver()) {
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
    Forget();
  }
  // Deletes the operation, reporting nothing.
  void Forget() {
    PublisherState* state = state_;
    delete this;
    state->End();
  }

  PublisherState* const state_;
  const std::string topic_;
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

// Starts publishing `request`: as one operation, or, in cluster mode when
// its messages fall in several shards, as one per shard (PublishSplit).
void StartPublish(PublisherState* state, hourglass::v1::PublishRequest request,
                  bool on_stream, Publisher::BatchCallback done);

// The topic a publish goes by: its first message's (a request's messages
// are in one shard); none for an empty one.
std::string TopicOf(const hourglass::v1::PublishRequest& request) {
  return request.messages().empty() ? std::string()
                                    : request.messages(0).topic();
}

// A batch (or one message) over a Publish call or the stream.
class PublishOperation final : public Operation {
 public:
  PublishOperation(PublisherState* state, hourglass::v1::PublishRequest request,
                   bool on_stream, Publisher::BatchCallback done)
      : Operation(state, TopicOf(request), AllHaveIds(request)),
        request_(std::move(request)),
        on_stream_(on_stream),
        done_(std::move(done)) {}

 private:
  void Attempt() override {
    if (on_stream_) {
      state_
          ->Stream(ChannelAccess::endpoint(*state_->channel, topic_))
          ->Send(&request_, deadline_,
                 [this](const grpc::Status& status,
                        hourglass::v1::PublishAnswer* answer) {
                   if (answer == nullptr) {
                     Attempted(status);
                     return;
                   }
                   if (answer->code() != 0) {
                     Attempted(grpc::Status(static_cast<grpc::StatusCode>(
                                                answer->code()),
                                            answer->message()),
                               {answer->primary(),
                                static_cast<int>(answer->shard_count())});
                     return;
                   }
                   Succeeded(answer->receipts());
                 });
      return;
    }
    response_.Clear();
    context_ = std::make_unique<grpc::ClientContext>();
    Prepare(*context_);
    ChannelAccess::broker(*state_->channel, topic_)
        .async()
        ->Publish(context_.get(), &request_, &response_,
                  [this](grpc::Status status) {
                    if (status.ok()) {
                      Succeeded(response_.receipts());
                    } else {
                      Attempted(status, internal::RedirectOf(*context_, status));
                    }
                  });
  }

  // The batch spans shards (the node said how many there are): publish it
  // split by shard instead. Not if this client finds it in one shard (it
  // would be refused again): the refusal is the answer then.
  bool HandOver() override {
    const int shard_count = ChannelAccess::ShardCount(*state_->channel);
    std::set<int> shards;
    for (const hourglass::v1::Message& m : request_.messages()) {
      shards.insert(cluster::ShardOf(m.topic(), std::max(shard_count, 1)));
    }
    if (shards.size() < 2) return false;
    StartPublish(state_, std::move(request_), on_stream_, std::move(done_));
    Forget();
    return true;
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

  hourglass::v1::PublishRequest request_;
  const bool on_stream_;
  Publisher::BatchCallback done_;
  // The attempt's, on Publish calls.
  std::unique_ptr<grpc::ClientContext> context_;
  hourglass::v1::PublishResponse response_;
  std::vector<Receipt> receipts_;
};

// "0, 4, 5", or "0, 4, 5, ... (12 in all)" for many.
std::string DescribeIndices(const std::vector<int>& indices) {
  constexpr size_t kShown = 8;
  std::string text = absl::StrJoin(
      indices.begin(), indices.begin() + std::min(indices.size(), kShown),
      ", ");
  if (indices.size() > kShown) {
    absl::StrAppend(&text, ", ... (", indices.size(), " in all)");
  }
  return text;
}

// `message`, a part's error, with a leading "message K: " (the part's K-th
// message) numbered as in the whole batch, whose `indices` the part holds.
std::string NumberedInBatch(absl::string_view message,
                            const std::vector<int>& indices) {
  absl::string_view rest = message;
  size_t k = 0;
  if (absl::ConsumePrefix(&rest, "message ")) {
    const size_t colon = rest.find(": ");
    if (colon != absl::string_view::npos &&
        absl::SimpleAtoi(rest.substr(0, colon), &k) && k < indices.size()) {
      return absl::StrCat("message ", indices[k], rest.substr(colon));
    }
  }
  return std::string(message);
}

// "message 3" or "messages 0, 4, 5".
std::string Messages(const std::vector<int>& indices) {
  return absl::StrCat(indices.size() == 1 ? "message " : "messages ",
                      DescribeIndices(indices));
}

// A batch published as one request per shard: gathers the parts' receipts
// in the batch's order, or says which parts failed and which were stored.
// Thread-safe: the parts end on gRPC's threads.
class PublishSplit {
 public:
  // `parts`: the messages' indices in the batch, by shard.
  static void Start(PublisherState* state,
                    hourglass::v1::PublishRequest request, bool on_stream,
                    std::map<int, std::vector<int>> parts,
                    Publisher::BatchCallback done) {
    auto split = std::shared_ptr<PublishSplit>(new PublishSplit(
        static_cast<size_t>(request.messages_size()), parts, std::move(done)));
    for (auto& [shard, indices] : parts) {
      hourglass::v1::PublishRequest part;
      for (int i : indices) {
        *part.add_messages() = std::move(*request.mutable_messages(i));
      }
      (new PublishOperation(
           state, std::move(part), on_stream,
           [split, shard = shard](
               absl::StatusOr<std::vector<Receipt>> receipts) mutable {
             split->Ended(shard, std::move(receipts));
           }))
          ->Begin();
    }
  }

 private:
  PublishSplit(size_t messages, const std::map<int, std::vector<int>>& parts,
               Publisher::BatchCallback done)
      : parts_(parts),
        left_(parts.size()),
        receipts_(messages),
        done_(std::move(done)) {}

  void Ended(int shard, absl::StatusOr<std::vector<Receipt>> receipts) {
    absl::StatusOr<std::vector<Receipt>> result;
    {
      absl::MutexLock lock(&mu_);
      const std::vector<int>& indices = parts_.at(shard);
      if (receipts.ok()) {
        for (size_t k = 0; k < indices.size(); ++k) {
          receipts_[static_cast<size_t>(indices[k])] = std::move((*receipts)[k]);
        }
      } else {
        failed_[shard] = receipts.status();
      }
      if (--left_ > 0) return;
      if (failed_.empty()) {
        result = std::move(receipts_);
      } else {
        result = Failure();
      }
    }
    // The last part's: no other part calls done_.
    done_(std::move(result));
  }

  // The first failed part's code, naming every failed part and what was
  // stored.
  absl::Status Failure() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<std::string> failures;
    std::vector<int> stored;
    std::vector<int> shards;
    for (const auto& [shard, indices] : parts_) {
      shards.push_back(shard);
      auto failed = failed_.find(shard);
      if (failed == failed_.end()) {
        stored.insert(stored.end(), indices.begin(), indices.end());
        continue;
      }
      failures.push_back(absl::StrCat(
          "shard ", shard, " (", Messages(indices), ") failed: ",
          NumberedInBatch(failed->second.message(), indices)));
    }
    std::sort(stored.begin(), stored.end());
    return absl::Status(
        failed_.begin()->second.code(),
        absl::StrCat(absl::StrJoin(failures, "; "), "; the batch spans shards ",
                     absl::StrJoin(shards, ", "),
                     " and is all-or-nothing within each shard only: ",
                     stored.empty() ? "none of its messages"
                                    : Messages(stored),
                     stored.size() == 1 ? " was" : " were", " stored"));
  }

  // Constant after construction.
  const std::map<int, std::vector<int>> parts_;

  absl::Mutex mu_;
  size_t left_ ABSL_GUARDED_BY(mu_);
  std::vector<Receipt> receipts_ ABSL_GUARDED_BY(mu_);
  std::map<int, absl::Status> failed_ ABSL_GUARDED_BY(mu_);
  Publisher::BatchCallback done_;
};

void StartPublish(PublisherState* state, hourglass::v1::PublishRequest request,
                  bool on_stream, Publisher::BatchCallback done) {
  const int shard_count = ChannelAccess::ShardCount(*state->channel);
  if (shard_count > 1) {
    std::map<int, std::vector<int>> parts;
    for (int i = 0; i < request.messages_size(); ++i) {
      parts[cluster::ShardOf(request.messages(i).topic(), shard_count)]
          .push_back(i);
    }
    if (parts.size() > 1) {
      PublishSplit::Start(state, std::move(request), on_stream,
                          std::move(parts), std::move(done));
      return;
    }
  }
  (new PublishOperation(state, std::move(request), on_stream, std::move(done)))
      ->Begin();
}

class CancelOperation final : public Operation {
 public:
  CancelOperation(PublisherState* state, hourglass::v1::CancelRequest request,
                  absl::AnyInvocable<void(absl::Status)> done)
      : Operation(state, request.topic(), /*retry_unavailable=*/false),
        request_(std::move(request)),
        done_(std::move(done)) {}

 private:
  void Attempt() override {
    context_ = std::make_unique<grpc::ClientContext>();
    Prepare(*context_);
    ChannelAccess::broker(*state_->channel, topic_)
        .async()
        ->Cancel(context_.get(), &request_, &response_,
                 [this](grpc::Status status) {
                   if (status.ok()) {
                     Finish(absl::OkStatus());
                   } else {
                     Attempted(status, internal::RedirectOf(*context_, status));
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
  std::map<const internal::Endpoint*, std::shared_ptr<PublishStream>> streams;
  std::vector<std::shared_ptr<PublishStream>> broken;
  {
    absl::MutexLock lock(&state_->mu);
    auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_->mu) {
      return state_->in_flight == 0;
    };
    state_->mu.Await(absl::Condition(&idle));
    streams = std::move(state_->streams);
    broken = std::move(state_->broken);
  }
  // Every request is answered: the brokers end the streams at once.
  for (auto& [endpoint, stream] : streams) stream->CloseWrites();
  const absl::Time deadline = absl::Now() + state_->timeout;
  for (auto& [endpoint, stream] : streams) stream->WaitDone(deadline);
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
  StartPublish(
      state_.get(), std::move(request),
      state_->options.batch_rpc == PublisherOptions::BatchRpc::kPublishStream,
      std::move(done));
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
