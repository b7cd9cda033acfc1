#include "broker/publisher.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "broker/lifecycle_reads.h"
#include "storage/keys.h"
#include "storage/records.pb.h"

namespace hourglass::broker {
namespace {

using storage::DueKey;

}  // namespace

std::string Quoted(std::string_view s) {
  return absl::StrCat("\"", std::string(s), "\"");
}

Publisher::Publisher(storage::MessageStore* store,
                     storage::CommitQueue* commits, Scheduler* scheduler,
                     Clock* clock, Activity* activity, uint64_t next_sequence,
                     absl::AnyInvocable<void()> on_durable)
    : store_(store),
      commits_(commits),
      scheduler_(scheduler),
      clock_(clock),
      activity_(activity),
      on_durable_(std::move(on_durable)),
      next_sequence_(next_sequence),
      reserved_until_(next_sequence) {}

absl::StatusOr<PreparedPublish> Publisher::Prepare(
    std::vector<NewMessage> messages) {
  using IdKey = std::pair<std::string, std::string>;
  const size_t n = messages.size();
  PreparedPublish prepared;
  prepared.receipts.resize(n);

  // Claim each producer id, so that two publishes of one id never both
  // store it. The first occurrence in the batch is the one that counts.
  std::map<IdKey, size_t> first;
  // For each message with a producer id, the index of its id's first
  // occurrence; n for messages whose id the broker assigns.
  std::vector<size_t> first_of(n, n);
  for (size_t i = 0; i < n; ++i) {
    if (!messages[i].id.empty()) {
      first_of[i] = first.emplace(IdKey(messages[i].topic, messages[i].id), i)
                        .first->second;
    }
  }
  {
    absl::MutexLock lock(&ids_mu_);
    for (const auto& [key, index] : first) {
      if (publishing_ids_.contains(key)) {
        return absl::AbortedError(absl::StrCat(
            "message ", index, ": a publish of id ", Quoted(key.second),
            " in topic ", Quoted(key.first), " is still in progress; retry"));
      }
    }
    for (const auto& [key, index] : first) {
      publishing_ids_.insert(key);
      prepared.claimed_ids.push_back(key);
    }
  }

  // An id stored earlier is a duplicate: its first receipt comes back.
  std::vector<bool> stored_before(n, false);
  for (const auto& [key, index] : first) {
    absl::StatusOr<std::optional<DueKey>> due =
        lifecycle::FindId(*store_, key.first, key.second);
    if (!due.ok()) {
      Release(prepared);
      return due.status();
    }
    if (!due->has_value()) continue;
    prepared.receipts[index] = {
        key.second, absl::FromUnixMillis((*due)->deliver_at_ms), true};
    stored_before[index] = true;
  }

  size_t new_messages = 0;
  for (size_t i = 0; i < n; ++i) {
    if ((first_of[i] == n || first_of[i] == i) && !stored_before[i]) {
      ++new_messages;
    }
  }
  uint64_t sequence = 0;
  if (new_messages > 0) {
    absl::StatusOr<uint64_t> taken = TakeSequences(new_messages);
    if (!taken.ok()) {
      Release(prepared);
      return taken.status();
    }
    sequence = *taken;
    // Nothing of this publish comes due before its floor, and the persisted
    // cursor stays at or below it until Finish (scheduler.h).
    prepared.floor = scheduler_->HoldCursor();
  }

  const int64_t published_at_ms = absl::ToUnixMillis(clock_->Now());
  prepared.changes.Reserve(4 * new_messages);
  for (size_t i = 0; i < n; ++i) {
    NewMessage& m = messages[i];
    if ((first_of[i] != n && first_of[i] != i) || stored_before[i]) continue;
    const uint64_t seq = sequence++;
    const int64_t due_ms =
        std::max(absl::ToUnixMillis(m.deliver_at), prepared.floor.floor());
    if (m.id.empty()) m.id = storage::AssignedId(seq);
    storage::MessageRecord record;
    record.set_topic(m.topic);
    record.set_id(m.id);
    record.set_payload(std::move(m.payload));
    for (auto& [k, v] : m.headers) (*record.mutable_headers())[k] = v;
    record.set_deliver_at_ms(due_ms);
    record.set_published_at_ms(published_at_ms);
    record.set_dead_letter_attempts(m.dead_letter_attempts);
    record.set_dead_letter_group(m.dead_letter_group);
    if (m.expire_at != absl::InfiniteFuture()) {
      record.set_expire_at_ms(absl::ToUnixMillis(m.expire_at));
      record.set_dead_letter_on_expire(m.dead_letter_on_expire);
    }
    const DueKey key{due_ms, seq};
    lifecycle::Publish(prepared.changes, record, key);
    prepared.receipts[i] = {m.id, absl::FromUnixMillis(due_ms), false};
    prepared.keys.push_back({key, m.topic});
  }
  // Later occurrences of an id in this batch repeat the first's receipt.
  for (size_t i = 0; i < n; ++i) {
    const size_t f = first_of[i];
    if (f != n && f != i) {
      prepared.receipts[i] = {prepared.receipts[f].id,
                              prepared.receipts[f].deliver_at, true};
    }
  }
  prepared.pending.reserve(prepared.keys.size());
  for (const ScheduledEntry& entry : prepared.keys) {
    prepared.pending.push_back(scheduler_->BeginPublish(entry.key));
  }
  return prepared;
}

absl::StatusOr<std::vector<PublishReceipt>> Publisher::Finish(
    PreparedPublish prepared, absl::Status status) {
  bool in_wheel = false;
  for (size_t i = 0; i < prepared.pending.size(); ++i) {
    Scheduler::PendingPublish& publish = prepared.pending[i];
    if (status.ok()) {
      in_wheel = std::move(publish).Durable(prepared.keys[i].topic) || in_wheel;
    } else {
      std::move(publish).Failed();
    }
  }
  // After the keys are in the wheel or known failed, so the cursor never
  // passes them.
  Release(prepared);
  if (!status.ok()) return status;
  if (!prepared.keys.empty()) {
    std::map<std::string_view, uint64_t> per_topic;
    for (const ScheduledEntry& entry : prepared.keys) ++per_topic[entry.topic];
    for (const auto& [topic, n] : per_topic) activity_->Published(topic, n);
  }
  // Only the wheel's new entries can be due before the timer's next wake-up.
  if (in_wheel) on_durable_();
  return std::move(prepared.receipts);
}

void Publisher::Release(PreparedPublish& prepared) {
  std::move(prepared.floor).Release();
  absl::MutexLock lock(&ids_mu_);
  for (const auto& key : prepared.claimed_ids) publishing_ids_.erase(key);
}

void Publisher::Publish(std::vector<NewMessage> messages, Callback done) {
  absl::StatusOr<PreparedPublish> prepared = Prepare(std::move(messages));
  if (!prepared.ok()) {
    std::move(done)(prepared.status());
    return;
  }
  if (prepared->receipts.empty()) {
    std::move(done)(Finish(*std::move(prepared), absl::OkStatus()));
    return;
  }
  // With duplicates only the batch is empty, and still goes through the
  // queue: answered once what was read of them is durable (as
  // CommitQueue::SubmitBarrier).
  storage::WriteBatch batch = prepared->changes.Take();
  commits_->Submit(std::move(batch),
                   [this, prepared = *std::move(prepared),
                    done = std::move(done)](absl::Status status) mutable {
                     std::move(done)(Finish(std::move(prepared), status));
                   });
}

namespace {
constexpr uint64_t kSequenceBlock = 1'000'000;
}  // namespace

absl::Status Publisher::ReserveFirstBlock() {
  absl::MutexLock lock(&sequence_mu_);
  return ReserveLocked(next_sequence_ + kSequenceBlock);
}

absl::Status Publisher::ReserveLocked(uint64_t until) {
  // A reservation written ahead lands first: the persisted value never goes
  // back.
  sequence_mu_.Await(absl::Condition(
      +[](bool* reserving) { return !*reserving; }, &reserving_));
  if (until <= reserved_until_) return absl::OkStatus();
  Changes changes;
  lifecycle::ReserveSequences(changes, until);
  if (absl::Status s = commits_->Commit(changes.Take()); !s.ok()) return s;
  reserved_until_ = until;
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> Publisher::TakeSequences(uint64_t count) {
  absl::MutexLock lock(&sequence_mu_);
  if (next_sequence_ + count > reserved_until_) {
    // Rare: the block ran out before the next one's reservation landed (or
    // a publish takes more than half a block). Wait for one small write.
    if (absl::Status s = ReserveLocked(next_sequence_ + count + kSequenceBlock);
        !s.ok()) {
      return s;
    }
  }
  const uint64_t first = next_sequence_;
  next_sequence_ += count;
  if (!reserving_ && reserved_until_ - next_sequence_ < kSequenceBlock / 2) {
    // The next block, ahead of need and without waiting.
    reserving_ = true;
    const uint64_t until = reserved_until_ + kSequenceBlock;
    Changes changes;
    lifecycle::ReserveSequences(changes, until);
    commits_->Submit(changes.Take(), [this, until](absl::Status status) {
      absl::MutexLock lock(&sequence_mu_);
      reserving_ = false;
      if (status.ok()) reserved_until_ = std::max(reserved_until_, until);
    });
  }
  return first;
}

}  // namespace hourglass::broker
