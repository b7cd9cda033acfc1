#include "client/consumer.h"

#include <deque>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "client/internal/channel_state.h"
#include "client/internal/convert.h"
#include "client/internal/subscribe_stream.h"
#include "grpcpp/alarm.h"

namespace hourglass::client {
namespace internal {

// A Consumer's insides. The streams' callbacks point to it; the Consumer's
// destructor waits until no stream or alarm can call it.
struct ConsumerState {
  ConsumerState(std::shared_ptr<Channel> c, ConsumerOptions o,
                Consumer::Handler h)
      : channel(std::move(c)),
        options(std::move(o)),
        handler(std::move(h)),
        backoff(options.backoff) {}

  // Opens stream number `generation` (1 for the first); its callbacks call
  // Subscribed, Received and Ended.
  void Open(uint64_t generation);
  void Subscribed(bool ok);
  void Received(absl::Span<hourglass::v1::Delivery* const> deliveries,
                absl::Time received_at);
  // The stream of `generation` ended with `status`; a cluster node that
  // refused it may have named the topic's primary (`redirect`), where the
  // subscription goes from now on.
  void Ended(uint64_t generation, const grpc::Status& status,
             const internal::Redirect& redirect);
  // Subscribes again, from a backoff alarm.
  void Reconnect(bool fired);

  // Destroys the streams that ended and the alarms that ran, here: never
  // inside their own callbacks.
  void Collect();

  absl::Status ToStatus(const grpc::Status& status) const {
    return ChannelAccess::ToStatus(*channel, status,
                                   channel->options().call_timeout);
  }

  // Constant after construction.
  Consumer* owner = nullptr;
  const std::shared_ptr<Channel> channel;
  const ConsumerOptions options;
  // Run by one stream's read chain at a time.
  Consumer::Handler handler;

  absl::Mutex mu;
  // The stream open now; null while reconnecting, or once ended.
  std::shared_ptr<SubscribeStream> stream ABSL_GUARDED_BY(mu);
  uint64_t generation ABSL_GUARDED_BY(mu) = 0;
  // The last stream ended UNAVAILABLE: the next looks for the primary.
  bool ended_unavailable ABSL_GUARDED_BY(mu) = false;
  // The newest stream whose end was reported.
  uint64_t ended_generation ABSL_GUARDED_BY(mu) = 0;
  std::vector<std::shared_ptr<SubscribeStream>> ended_streams
      ABSL_GUARDED_BY(mu);
  // The first stream's answer: subscribed, or its status.
  std::optional<bool> first_subscribed ABSL_GUARDED_BY(mu);
  std::deque<Delivery> queue ABSL_GUARDED_BY(mu);
  // Returned by Receive and not yet acked or nacked.
  absl::flat_hash_set<std::string> unacked ABSL_GUARDED_BY(mu);
  std::optional<absl::Status> ended ABSL_GUARDED_BY(mu);
  // Close or Cancel was called: no reconnecting.
  bool closing ABSL_GUARDED_BY(mu) = false;
  bool cancelled ABSL_GUARDED_BY(mu) = false;
  bool interrupted ABSL_GUARDED_BY(mu) = false;
  uint64_t reconnects ABSL_GUARDED_BY(mu) = 0;
  Backoff backoff ABSL_GUARDED_BY(mu);
  // Backoff alarms: a new one for each wait, kept until its callback ran.
  struct Wait {
    grpc::Alarm alarm;
    bool ran = false;
  };
  std::deque<std::unique_ptr<Wait>> waits ABSL_GUARDED_BY(mu);
};

namespace {

// Ends after which subscribing again may work.
bool Reconnectable(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::CANCELLED:
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
    case grpc::StatusCode::ABORTED:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::INTERNAL:
    case grpc::StatusCode::UNKNOWN:
      return true;
    default:
      return false;
  }
}

}  // namespace

void ConsumerState::Open(uint64_t number) {
  hourglass::v1::Open open;
  open.set_topic(options.topic);
  open.set_group(options.group);
  open.set_max_in_flight(options.max_in_flight);
  if (options.ack_timeout > absl::ZeroDuration()) {
    *open.mutable_ack_timeout() = ToProto(options.ack_timeout);
  }
  SubscribeStream::Callbacks callbacks;
  callbacks.on_subscribed = [this](bool ok) { Subscribed(ok); };
  callbacks.on_deliveries =
      [this](absl::Span<hourglass::v1::Delivery* const> deliveries,
             absl::Time received_at,
             uint64_t /*response*/) { Received(deliveries, received_at); };
  callbacks.on_done = [this, number](const grpc::Status& status,
                                     const internal::Redirect& redirect) {
    Ended(number, status, redirect);
  };
  // Stored before it starts, so that a handler acking the first
  // deliveries finds it (Consumer::Ack).
  std::shared_ptr<SubscribeStream> created = SubscribeStream::Create(
      options.rpc == ConsumerOptions::Rpc::kSubscribeBatches
          ? SubscribeStream::Rpc::kSubscribeBatches
          : SubscribeStream::Rpc::kSubscribe,
      std::move(callbacks),
      options.max_in_flight > 0 ? options.max_in_flight : 100);
  {
    absl::MutexLock lock(&mu);
    stream = created;
  }
  const Channel& c = *channel;
  // Outside mu: the stream may call back before Begin returns.
  created->Begin(ChannelAccess::broker(c, options.topic),
                 [&c, number](grpc::ClientContext& context) {
                   ChannelAccess::Prepare(c, context, absl::InfiniteFuture());
                   // The first subscription fails fast if the broker cannot
                   // be reached; a reconnection waits until it can.
                   context.set_wait_for_ready(
                       number > 1 && ChannelAccess::WaitForReady(c));
                 },
                 open);
}

void ConsumerState::Subscribed(bool ok) {
  absl::MutexLock lock(&mu);
  if (!first_subscribed.has_value()) first_subscribed = ok;
  if (ok) backoff.Reset();
}

void ConsumerState::Received(
    absl::Span<hourglass::v1::Delivery* const> deliveries,
    absl::Time received_at) {
  std::vector<Delivery> taken;
  taken.reserve(deliveries.size());
  for (hourglass::v1::Delivery* d : deliveries) {
    taken.push_back(FromProto(std::move(*d)));
    taken.back().received_at = received_at;
  }
  if (handler != nullptr) {
    handler(*owner, std::move(taken));
    return;
  }
  absl::MutexLock lock(&mu);
  for (Delivery& d : taken) queue.push_back(std::move(d));
}

void ConsumerState::Ended(uint64_t number, const grpc::Status& status,
                          const internal::Redirect& redirect) {
  std::optional<absl::Time> wait_until;
  Wait* wait = nullptr;
  // Cluster mode: the node is not the primary of the topic's shard, and
  // said which node is.
  const bool redirected =
      status.error_code() == grpc::StatusCode::UNAVAILABLE &&
      ChannelAccess::Follow(*channel, redirect, options.topic);
  {
    absl::MutexLock lock(&mu);
    ended_generation = number;
    if (stream != nullptr && generation == number) {
      ended_streams.push_back(std::move(stream));
    }
    // Its deliveries are back in the group: acks for them are void.
    unacked.clear();
    if (!first_subscribed.value_or(false)) {
      // The first stream was refused; Subscribe reports it.
      first_subscribed = false;
      ended = ToStatus(status);
      return;
    }
    if (closing) {
      if (cancelled && !ended.has_value()) ended = ToStatus(status);
      return;
    }
    if (options.reconnect && Reconnectable(status.error_code())) {
      ended_unavailable =
          status.error_code() == grpc::StatusCode::UNAVAILABLE && !redirected;
      wait_until = absl::Now() + backoff.Next();
      waits.push_back(std::make_unique<Wait>());
      wait = waits.back().get();
    } else {
      ended = ToStatus(status);
    }
  }
  if (wait != nullptr) {
    wait->alarm.Set(absl::ToChronoTime(*wait_until), [this, wait](bool fired) {
      Reconnect(fired);
      absl::MutexLock lock(&mu);
      wait->ran = true;
    });
  }
}

void ConsumerState::Reconnect(bool fired) {
  uint64_t number;
  bool rediscover;
  {
    absl::MutexLock lock(&mu);
    if (!fired || closing) return;
    ++reconnects;
    number = ++generation;
    rediscover = std::exchange(ended_unavailable, false);
  }
  // Cluster mode: the node may have died or stopped being the primary;
  // its peers say which node is.
  if (rediscover) {
    ChannelAccess::Rediscover(*channel, internal::kRediscoverTimeout,
                              options.topic);
  }
  Open(number);
}

void ConsumerState::Collect() {
  std::vector<std::shared_ptr<SubscribeStream>> streams;
  std::vector<std::unique_ptr<Wait>> ran;
  {
    absl::MutexLock lock(&mu);
    for (auto it = ended_streams.begin(); it != ended_streams.end();) {
      if ((*it)->finished()) {
        streams.push_back(std::move(*it));
        it = ended_streams.erase(it);
      } else {
        ++it;
      }
    }
    while (!waits.empty() && waits.front()->ran) {
      ran.push_back(std::move(waits.front()));
      waits.pop_front();
    }
  }
  // Destroyed here, outside mu.
}

}  // namespace internal

using internal::ConsumerState;

Consumer::Consumer(std::unique_ptr<ConsumerState> state)
    : state_(std::move(state)) {
  state_->owner = this;
}

absl::StatusOr<std::unique_ptr<Consumer>> Consumer::Subscribe(
    std::shared_ptr<Channel> channel, ConsumerOptions options,
    Handler handler) {
  // Cluster mode: a node that is not the primary of the topic's shard
  // refuses with UNAVAILABLE, naming the primary; subscribe there (or, if
  // it named none, ask the nodes where the primary is).
  // Each attempt gets the one handler.
  auto shared = std::make_shared<Handler>(std::move(handler));
  for (int attempt = 1;; ++attempt) {
    Handler forward;
    if (*shared != nullptr) {
      forward = [shared](Consumer& consumer, std::vector<Delivery> batch) {
        (*shared)(consumer, std::move(batch));
      };
    }
    const internal::Endpoint* before =
        &internal::ChannelAccess::endpoint(*channel, options.topic);
    absl::StatusOr<std::unique_ptr<Consumer>> consumer =
        SubscribeOnce(channel, options, std::move(forward));
    if (consumer.ok() || attempt >= internal::kMaxRedirects ||
        consumer.status().code() != absl::StatusCode::kUnavailable) {
      return consumer;
    }
    // The refusal named the primary, and calls go there now (Ended); or
    // the nodes are asked where it is.
    const bool redirected =
        &internal::ChannelAccess::endpoint(*channel, options.topic) != before;
    if (!redirected &&
        !internal::ChannelAccess::Rediscover(
            *channel, internal::kRediscoverTimeout, options.topic)) {
      return consumer;
    }
  }
}

absl::StatusOr<std::unique_ptr<Consumer>> Consumer::SubscribeOnce(
    std::shared_ptr<Channel> channel, ConsumerOptions options,
    Handler handler) {
  const absl::Duration timeout = channel->options().call_timeout;
  std::unique_ptr<Consumer> consumer(
      new Consumer(std::make_unique<ConsumerState>(
          std::move(channel), std::move(options), std::move(handler))));
  ConsumerState& s = *consumer->state_;
  {
    absl::MutexLock lock(&s.mu);
    s.generation = 1;
  }
  s.Open(1);
  absl::Status refused;
  {
    absl::MutexLock lock(&s.mu);
    auto answered = [&s]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
      return s.first_subscribed.has_value();
    };
    if (!s.mu.AwaitWithTimeout(absl::Condition(&answered), timeout)) {
      refused =
          s.ToStatus(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, ""));
    } else if (*s.first_subscribed) {
      return consumer;
    } else {
      // Refused: the stream's end says why (it is on its way if the
      // answer came without it).
      auto ended = [&s]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
        return s.ended.has_value();
      };
      s.mu.Await(absl::Condition(&ended));
      refused = *s.ended;
    }
  }
  consumer->Cancel();
  return refused;
}

Consumer::~Consumer() {
  Close(absl::Now() + state_->channel->options().call_timeout).IgnoreError();
}

std::vector<Delivery> Consumer::Receive(size_t max, absl::Time deadline) {
  std::vector<Delivery> taken;
  {
    ConsumerState& s = *state_;
    absl::MutexLock lock(&s.mu);
    auto ready = [&s]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
      return !s.queue.empty() || s.ended.has_value() || s.interrupted;
    };
    s.mu.AwaitWithDeadline(absl::Condition(&ready), deadline);
    if (s.interrupted) return taken;
    while (!s.queue.empty() && taken.size() < max) {
      s.unacked.insert(s.queue.front().id);
      taken.push_back(std::move(s.queue.front()));
      s.queue.pop_front();
    }
  }
  state_->Collect();
  return taken;
}

absl::Status Consumer::Ack(const std::string& id) {
  return Ack(absl::MakeConstSpan(&id, 1));
}

absl::Status Consumer::Ack(absl::Span<const std::string> ids) {
  std::shared_ptr<internal::SubscribeStream> stream;
  {
    ConsumerState& s = *state_;
    absl::MutexLock lock(&s.mu);
    for (const std::string& id : ids) s.unacked.erase(id);
    if (s.ended.has_value()) {
      return s.ended->ok()
                 ? absl::FailedPreconditionError("the consumer is closed")
                 : *s.ended;
    }
    stream = s.stream;
  }
  const bool queued = stream != nullptr && stream->Ack(ids) != 0;
  state_->Collect();
  if (!queued) {
    return absl::UnavailableError(
        "no stream is open (it ended; the deliveries will come again)");
  }
  return absl::OkStatus();
}

absl::Status Consumer::Nack(const std::string& id, absl::Duration delay) {
  std::shared_ptr<internal::SubscribeStream> stream;
  {
    ConsumerState& s = *state_;
    absl::MutexLock lock(&s.mu);
    s.unacked.erase(id);
    if (s.ended.has_value()) {
      return s.ended->ok()
                 ? absl::FailedPreconditionError("the consumer is closed")
                 : *s.ended;
    }
    stream = s.stream;
  }
  const bool queued = stream != nullptr && stream->Nack(id, delay) != 0;
  state_->Collect();
  if (!queued) {
    return absl::UnavailableError(
        "no stream is open (it ended; the delivery will come again)");
  }
  return absl::OkStatus();
}

bool Consumer::AwaitAcked(absl::Time deadline) {
  ConsumerState& s = *state_;
  absl::MutexLock lock(&s.mu);
  auto settled = [&s]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
    return s.unacked.empty() || s.ended.has_value() || s.interrupted;
  };
  s.mu.AwaitWithDeadline(absl::Condition(&settled), deadline);
  return s.unacked.empty();
}

void Consumer::Interrupt() {
  absl::MutexLock lock(&state_->mu);
  state_->interrupted = true;
}

void Consumer::Cancel() {
  std::shared_ptr<internal::SubscribeStream> stream;
  {
    absl::MutexLock lock(&state_->mu);
    state_->closing = true;
    state_->cancelled = true;
    stream = state_->stream;
    if (stream == nullptr && !state_->ended.has_value()) {
      state_->ended = absl::CancelledError("the consumer was cancelled");
    }
  }
  if (stream != nullptr) stream->Cancel();
}

absl::Status Consumer::Close(absl::Time deadline) {
  ConsumerState& s = *state_;
  std::shared_ptr<internal::SubscribeStream> stream;
  std::vector<grpc::Alarm*> waits;
  {
    absl::MutexLock lock(&s.mu);
    s.closing = true;
    stream = s.stream;
    for (auto& w : s.waits) {
      if (!w->ran) waits.push_back(&w->alarm);
    }
  }
  // Outside mu: a cancelled alarm may run its callback at once.
  for (grpc::Alarm* alarm : waits) alarm->Cancel();
  std::optional<absl::Status> result;
  if (stream != nullptr) {
    stream->CloseWrites();
    std::optional<grpc::Status> status = stream->WaitDone(deadline);
    if (!status.has_value()) {
      stream->Cancel();
      stream->WaitDone(absl::InfiniteFuture());
      result = absl::CancelledError(
          "the broker did not end the stream in time; it was cancelled");
    } else {
      result = s.ToStatus(*status);
    }
  }
  std::vector<std::shared_ptr<internal::SubscribeStream>> streams;
  {
    absl::MutexLock lock(&s.mu);
    auto quiet = [&s]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
      for (const auto& w : s.waits) {
        if (!w->ran) return false;
      }
      return true;
    };
    s.mu.Await(absl::Condition(&quiet));
    // A stream that ended earlier decides; else this one's end.
    if (!s.ended.has_value()) s.ended = result.value_or(absl::OkStatus());
    if (s.stream != nullptr) streams.push_back(std::move(s.stream));
    for (auto& e : s.ended_streams) streams.push_back(std::move(e));
    s.ended_streams.clear();
    result = *s.ended;
  }
  // The streams' destructors wait for their ends; the alarms all ran.
  streams.clear();
  state_->Collect();
  return *result;
}

std::optional<absl::Status> Consumer::ended(absl::Time deadline) {
  ConsumerState& s = *state_;
  absl::MutexLock lock(&s.mu);
  auto done = [&s]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
    return s.ended.has_value();
  };
  s.mu.AwaitWithDeadline(absl::Condition(&done), deadline);
  return s.ended;
}

uint64_t Consumer::reconnects() const {
  absl::MutexLock lock(&state_->mu);
  return state_->reconnects;
}

}  // namespace hourglass::client
