#include "tests/soak/producer.h"

#include <utility>

#include "absl/random/distributions.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace hourglass::soak {
namespace {

constexpr int kRole = 1;
// Shares of the batches: single messages, and bad batches (of 2 or more).
constexpr double kSingle = 0.7;
constexpr double kBad = 0.03;
constexpr int kMaxBatch = 20;
// Shares of the messages: given an absolute deliver_at rather than a delay;
// offered to the canceller.
constexpr double kAbsolute = 0.25;
constexpr double kCancel = 0.12;
constexpr size_t kMaxPayload = 256;

absl::Time FloorMillis(absl::Time t) {
  return absl::FromUnixMillis(absl::ToUnixMillis(t));
}

}  // namespace

Producer::Producer(Shared* shared, Canceller* canceller, int index)
    : shared_(shared),
      canceller_(canceller),
      index_(index),
      rng_(WorkerRng(shared->config.seed, kRole, index)) {}

void Producer::Start() {
  thread_ = std::thread([this] { Run(); });
}

void Producer::Join() { thread_.join(); }

void Producer::Run() {
  const absl::Duration gap = shared_->config.publish_gap;
  while (!shared_->stop_producing.HasBeenNotified()) {
    Publish(NextBatch());
    if (shared_->stop_producing.WaitForNotificationWithTimeout(
            gap * absl::Uniform(rng_, 0.0, 2.0))) {
      break;
    }
  }
}

Producer::Batch Producer::NextBatch() {
  Batch batch;
  const bool single = absl::Bernoulli(rng_, kSingle);
  const int size =
      single ? 1 : absl::Uniform(absl::IntervalClosed, rng_, 2, kMaxBatch);
  if (!single && absl::Bernoulli(rng_, kBad)) {
    batch.bad_index = absl::Uniform(rng_, 0, size);
  }
  const int64_t max_delay_ms =
      absl::ToInt64Milliseconds(shared_->config.max_delay);
  const absl::Time now = absl::Now();
  for (int i = 0; i < size; ++i) {
    client::Message& m = batch.messages.emplace_back();
    const std::string id = absl::StrCat("p", index_, "-", next_id_++);
    const size_t payload_size =
        absl::Uniform(absl::IntervalClosed, rng_, size_t{0}, kMaxPayload);
    m.topic = i == batch.bad_index ? "bad topic" : shared_->config.topic;
    m.id = id;
    m.payload = Ledger::Payload(id, payload_size);
    m.headers["soak-id"] = id;
    const absl::Duration delay = absl::Milliseconds(
        absl::Uniform(absl::IntervalClosed, rng_, int64_t{0}, max_delay_ms));
    // The broker adds a delay to its clock when it takes the call, later
    // than `now`, and truncates to milliseconds; an absolute time it keeps,
    // unless it is past.
    absl::Time earliest = FloorMillis(now + delay);
    if (absl::Bernoulli(rng_, kAbsolute)) {
      m.deliver_at = earliest;
    } else {
      m.delay = delay;
    }
    if (i != batch.bad_index) {
      batch.entries.push_back({id, payload_size, earliest});
    }
  }
  return batch;
}

void Producer::Publish(const Batch& batch) {
  Backoff backoff(&rng_);
  for (bool first = true;; first = false) {
    if (connection_ == nullptr) {
      connection_ = Connect(*shared_, shared_->stop_all, backoff);
      if (connection_ == nullptr) return;  // Stopped; nothing is in flight.
    }
    for (const Entry& e : batch.entries) {
      if (first) {
        shared_->ledger->NewMessage(e.id, e.payload_size, e.earliest,
                                    /*refusable=*/batch.bad_index >= 0);
      } else {
        shared_->ledger->PublishStarted(e.id);
      }
    }
    ++shared_->counters.publish_calls;
    if (first && batch.bad_index >= 0) ++shared_->counters.bad_batches;
    if (Settle(batch, connection_->publisher->PublishBatch(batch.messages))) {
      return;
    }
    if (!backoff.Wait(shared_->stop_all)) return;
  }
}

bool Producer::Settle(
    const Batch& batch,
    const absl::StatusOr<std::vector<client::Receipt>>& receipts) {
  Ledger& ledger = *shared_->ledger;
  const bool bad = batch.bad_index >= 0;
  const absl::Status& status = receipts.status();
  switch (status.code()) {
    case absl::StatusCode::kOk:
      Succeeded(batch, *receipts);
      return true;
    case absl::StatusCode::kInvalidArgument:
      for (const Entry& e : batch.entries) ledger.PublishRefused(e.id);
      if (!bad) {
        ledger.AddViolation(
            absl::StrCat("a valid batch (", batch.entries.front().id,
                         " ...) was refused: ", status.message()));
      } else if (!absl::StartsWith(
                     status.message(),
                     absl::StrCat("message ", batch.bad_index, ": "))) {
        ledger.AddViolation(absl::StrCat(
            "the refusal of a batch whose message ", batch.bad_index,
            " is bad names another: ", status.message()));
      }
      return true;
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kAborted:
      // Nothing stored; the broker asks for a retry.
      for (const Entry& e : batch.entries) ledger.PublishRefused(e.id);
      ++shared_->counters.publish_retry_later;
      return bad;
    default:
      break;
  }
  if (!OutcomeUnknown(status.code()) ||
      status.code() == absl::StatusCode::kInternal ||
      status.code() == absl::StatusCode::kUnknown) {
    ReportUnexpected(*shared_, "Publish", status);
  }
  for (const Entry& e : batch.entries) ledger.PublishUnknown(e.id);
  ++shared_->counters.publish_unknown;
  // The broker may have gone away: reconnect before the next attempt.
  connection_.reset();
  // A bad batch cannot have been stored: no need to learn its outcome.
  return bad;
}

void Producer::Succeeded(const Batch& batch,
                         const std::vector<client::Receipt>& receipts) {
  Ledger& ledger = *shared_->ledger;
  if (batch.bad_index >= 0) {
    ledger.AddViolation(absl::StrCat("a batch with a bad message (",
                                     batch.entries.front().id,
                                     " ...) was accepted"));
  }
  if (receipts.size() != batch.messages.size()) {
    ledger.AddViolation(absl::StrCat(
        "publish of ", batch.messages.size(), " messages (",
        batch.entries.front().id, " ...) got ", receipts.size(), " receipts"));
    for (const Entry& e : batch.entries) ledger.PublishUnknown(e.id);
    return;
  }
  size_t entry = 0;
  for (size_t i = 0; i < receipts.size(); ++i) {
    if (static_cast<int>(i) == batch.bad_index) continue;
    const Entry& e = batch.entries[entry++];
    ledger.PublishSucceeded(e.id, receipts[i]);
    OfferCancels(e.id, receipts[i].deliver_at);
  }
}

void Producer::OfferCancels(const std::string& id, absl::Time deliver_at) {
  if (!absl::Bernoulli(rng_, kCancel)) return;
  const absl::Time now = absl::Now();
  absl::Time at;
  const double kind = absl::Uniform(rng_, 0.0, 1.0);
  if (kind < 0.6 && deliver_at > now) {
    // Well before it is due: must succeed.
    at = now + (deliver_at - now) * absl::Uniform(rng_, 0.0, 1.0);
  } else if (kind < 0.9) {
    // Within a few milliseconds of its due time: either may win.
    at = deliver_at + absl::Milliseconds(absl::Uniform(rng_, -5, 5));
  } else {
    // Just after: NOT_FOUND unless the broker is late.
    at = deliver_at + absl::Milliseconds(absl::Uniform(rng_, 5, 50));
  }
  canceller_->Offer(id, at);
}

}  // namespace hourglass::soak
