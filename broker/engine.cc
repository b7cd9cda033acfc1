#include "broker/engine.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "storage/keys.h"
#include "storage/records.pb.h"

namespace hourglass::broker {
namespace {

using storage::DueKey;
using storage::Table;

// ids table value: the message's sequence and due time.
std::string IdValue(uint64_t sequence, int64_t deliver_at_ms) {
  std::string value;
  storage::AppendU64(value, sequence);
  storage::AppendU64(value, static_cast<uint64_t>(deliver_at_ms));
  return value;
}

std::optional<DueKey> DecodeIdValue(std::string_view value) {
  if (value.size() != 16) return std::nullopt;
  return DueKey{static_cast<int64_t>(storage::ReadU64(value.substr(8))),
                storage::ReadU64(value)};
}

// Ids the broker assigns: "hg-" and the sequence in 16 hex digits.
std::string AssignedId(uint64_t sequence) {
  return absl::StrFormat("hg-%016x", sequence);
}

std::string Quoted(std::string_view s) {
  return absl::StrCat("\"", std::string(s), "\"");
}

}  // namespace

absl::StatusOr<std::unique_ptr<Engine>> Engine::Open(
    storage::MessageStore* store, Clock* clock, Options options) {
  absl::StatusOr<std::optional<std::string>> last =
      store->LastKey(Table::kMessages);
  if (!last.ok()) return last.status();
  uint64_t next_sequence = 1;
  if (last->has_value()) {
    const std::optional<uint64_t> sequence = storage::DecodeMessageKey(**last);
    if (!sequence.has_value()) {
      return absl::DataLossError("messages table holds a malformed key");
    }
    next_sequence = *sequence + 1;
  }
  absl::StatusOr<std::optional<std::string>> reserved =
      store->Get(Table::kMeta, storage::kSequenceReservedKey);
  if (!reserved.ok()) return reserved.status();
  if (reserved->has_value()) {
    if ((*reserved)->size() != 8) {
      return absl::DataLossError("meta/sequence_reserved is not 8 bytes");
    }
    next_sequence = std::max(next_sequence, storage::ReadU64(**reserved));
  }

  std::map<std::string, std::set<std::string>> groups;
  const std::string prefix(storage::kGroupKeyPrefix);
  absl::Status scanned =
      store->Scan(Table::kMeta, prefix, storage::PrefixEnd(prefix),
                  [&](std::string_view key, std::string_view) {
                    if (auto names = storage::DecodeGroupKey(key)) {
                      groups[names->first].insert(names->second);
                    }
                    return true;
                  });
  if (!scanned.ok()) return scanned;

  std::unique_ptr<Engine> engine(
      new Engine(store, clock, options, next_sequence, std::move(groups)));
  if (absl::Status s = engine->scheduler_.Recover(); !s.ok()) return s;
  return engine;
}

Engine::Engine(storage::MessageStore* store, Clock* clock, Options options,
               uint64_t next_sequence,
               std::map<std::string, std::set<std::string>> groups)
    : store_(store),
      clock_(clock),
      options_(options),
      scheduler_(store, clock, options.scheduler),
      next_sequence_(next_sequence),
      reserved_until_(next_sequence),
      groups_(std::move(groups)),
      commits_(store) {}

Engine::~Engine() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (timer_.joinable()) timer_.join();
}

void Engine::Publish(std::vector<NewMessage> messages, PublishCallback done) {
  using IdKey = std::pair<std::string, std::string>;
  const size_t n = messages.size();
  std::vector<PublishReceipt> receipts(n);

  // Claim each producer id, so that two publishes of one id never both
  // store it. The first occurrence in the batch is the one that counts.
  std::map<IdKey, size_t> first;
  // For each message with a producer id, the index of its id's first
  // occurrence; n for messages whose id the engine assigns.
  std::vector<size_t> first_of(n, n);
  for (size_t i = 0; i < n; ++i) {
    if (!messages[i].id.empty()) {
      first_of[i] = first.emplace(IdKey(messages[i].topic, messages[i].id), i)
                        .first->second;
    }
  }
  std::optional<absl::Status> busy;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [key, index] : first) {
      if (publishing_ids_.contains(key)) {
        busy = absl::AbortedError(absl::StrCat(
            "message ", index, ": a publish of id ", Quoted(key.second),
            " in topic ", Quoted(key.first), " is still in progress; retry"));
        break;
      }
    }
    if (!busy) {
      for (const auto& [key, index] : first) publishing_ids_.insert(key);
    }
  }
  if (busy) {
    std::move(done)(*std::move(busy));  // Outside mu_: `done` may call in.
    return;
  }
  auto release = [this, claimed = first]() {
    absl::MutexLock lock(&mu_);
    for (const auto& [key, index] : claimed) publishing_ids_.erase(key);
  };

  // An id stored earlier is a duplicate: its first receipt comes back.
  std::vector<bool> stored_before(n, false);
  for (const auto& [key, index] : first) {
    absl::StatusOr<std::optional<std::string>> value =
        store_->Get(Table::kIds, storage::IdKey(key.first, key.second));
    if (!value.ok()) {
      release();
      std::move(done)(value.status());
      return;
    }
    if (!value->has_value()) continue;
    const std::optional<DueKey> due = DecodeIdValue(**value);
    if (!due.has_value()) {
      release();
      std::move(done)(absl::DataLossError(
          absl::StrCat("ids entry of ", Quoted(key.second), " in topic ",
                       Quoted(key.first), " is malformed")));
      return;
    }
    receipts[index] = {key.second, absl::FromUnixMillis(due->deliver_at_ms),
                       true};
    stored_before[index] = true;
  }

  size_t new_messages = 0;
  for (size_t i = 0; i < n; ++i) {
    if ((first_of[i] == n || first_of[i] == i) && !stored_before[i]) {
      ++new_messages;
    }
  }
  uint64_t first_sequence = 0;
  if (new_messages > 0) {
    absl::StatusOr<uint64_t> taken = TakeSequences(new_messages);
    if (!taken.ok()) {
      release();
      std::move(done)(taken.status());
      return;
    }
    first_sequence = *taken;
  }

  // Nothing of this publish comes due before its floor, and the persisted
  // cursor stays at or below it until the write ends (scheduler.h).
  const int64_t floor = scheduler_.HoldCursor();
  storage::WriteBatch batch;
  std::vector<ScheduledEntry> keys;
  for (size_t i = 0; i < n; ++i) {
    NewMessage& m = messages[i];
    if ((first_of[i] != n && first_of[i] != i) || stored_before[i]) continue;
    const uint64_t sequence = first_sequence++;
    const int64_t due_ms = std::max(absl::ToUnixMillis(m.deliver_at), floor);
    if (m.id.empty()) m.id = AssignedId(sequence);
    storage::MessageRecord record;
    record.set_topic(m.topic);
    record.set_id(m.id);
    record.set_payload(std::move(m.payload));
    for (auto& [k, v] : m.headers) (*record.mutable_headers())[k] = v;
    record.set_deliver_at_ms(due_ms);
    record.set_published_at_ms(absl::ToUnixMillis(clock_->Now()));
    const DueKey key{due_ms, sequence};
    batch.Put(Table::kMessages, storage::MessageKey(sequence),
              record.SerializeAsString());
    batch.Put(Table::kIds, storage::IdKey(m.topic, m.id),
              IdValue(sequence, due_ms));
    batch.Put(Table::kSchedule, storage::ScheduleKey(key), m.topic);
    receipts[i] = {m.id, absl::FromUnixMillis(due_ms), false};
    keys.push_back({key, m.topic});
  }
  // Later occurrences of an id in this batch repeat the first's receipt.
  for (size_t i = 0; i < n; ++i) {
    const size_t f = first_of[i];
    if (f != n && f != i) {
      receipts[i] = {receipts[f].id, receipts[f].deliver_at, true};
    }
  }

  if (keys.empty()) {
    scheduler_.ReleaseCursor(floor);
    release();
    std::move(done)(std::move(receipts));
    return;
  }
  for (const ScheduledEntry& entry : keys) scheduler_.BeginPublish(entry.key);
  commits_.Submit(std::move(batch),
                  [this, floor, keys = std::move(keys),
                   receipts = std::move(receipts), release = std::move(release),
                   done = std::move(done)](absl::Status status) mutable {
                    for (const ScheduledEntry& entry : keys) {
                      if (status.ok()) {
                        scheduler_.PublishDurable(entry.key, entry.topic);
                      } else {
                        scheduler_.PublishFailed(entry.key);
                      }
                    }
                    // After the keys are in the wheel or known failed, so
                    // the cursor never passes them.
                    scheduler_.ReleaseCursor(floor);
                    release();
                    if (!status.ok()) {
                      std::move(done)(std::move(status));
                      return;
                    }
                    Wake();
                    std::move(done)(std::move(receipts));
                  });
}

absl::StatusOr<uint64_t> Engine::TakeSequences(uint64_t count) {
  constexpr uint64_t kBlock = 1'000'000;
  absl::MutexLock lock(&sequence_mu_);
  if (next_sequence_ + count > reserved_until_) {
    // Rare (once per block): the caller waits for one small write.
    const uint64_t until = next_sequence_ + count + kBlock;
    std::string value;
    storage::AppendU64(value, until);
    storage::WriteBatch batch;
    batch.Put(Table::kMeta, std::string(storage::kSequenceReservedKey), value);
    if (absl::Status s = commits_.Commit(std::move(batch)); !s.ok()) return s;
    reserved_until_ = until;
  }
  const uint64_t first = next_sequence_;
  next_sequence_ += count;
  return first;
}

void Engine::Cancel(std::string topic, std::string id, CancelCallback done) {
  absl::StatusOr<std::optional<std::string>> value =
      store_->Get(Table::kIds, storage::IdKey(topic, id));
  if (!value.ok()) {
    std::move(done)(value.status());
    return;
  }
  const std::optional<DueKey> key =
      value->has_value() ? DecodeIdValue(**value) : std::nullopt;
  const absl::Status not_found = absl::NotFoundError(
      absl::StrCat("no scheduled message with id ", Quoted(id), " in topic ",
                   Quoted(topic), " (unknown, already due, or cancelled)"));
  if (!key.has_value()) {
    std::move(done)(not_found);
    return;
  }
  switch (scheduler_.BeginCancel(*key)) {
    case Scheduler::CancelStart::kAccepted:
      break;
    case Scheduler::CancelStart::kAlreadyDue:
      std::move(done)(not_found);
      return;
    case Scheduler::CancelStart::kInProgress:
      std::move(done)(absl::AbortedError(
          absl::StrCat("a publish or cancel of id ", Quoted(id), " in topic ",
                       Quoted(topic), " is in progress; retry")));
      return;
  }
  // The scheduler cannot tell a message not yet loaded from one dispatched
  // before a restart (the loader has not reached it again); the schedule
  // key can: dispatch deletes it.
  absl::StatusOr<std::optional<std::string>> scheduled =
      store_->Get(Table::kSchedule, storage::ScheduleKey(*key));
  if (!scheduled.ok() || !scheduled->has_value()) {
    scheduler_.EndCancel(*key, topic, /*deleted=*/true);
    std::move(done)(scheduled.ok() ? not_found : scheduled.status());
    return;
  }
  storage::WriteBatch batch;
  batch.Delete(Table::kMessages, storage::MessageKey(key->sequence));
  batch.Delete(Table::kIds, storage::IdKey(topic, id));
  batch.Delete(Table::kSchedule, storage::ScheduleKey(*key));
  commits_.Submit(std::move(batch),
                  [this, key = *key, topic = std::move(topic),
                   done = std::move(done)](absl::Status status) mutable {
                    scheduler_.EndCancel(key, topic, status.ok());
                    std::move(done)(std::move(status));
                  });
}

absl::StatusOr<absl::Time> Engine::Tick() {
  const absl::Time now = clock_->Now();
  bool more_to_load = false;
  if (now + options_.scheduler.horizon >=
      absl::FromUnixMillis(scheduler_.LoadedUntil())) {
    absl::StatusOr<bool> more = scheduler_.Load();
    if (!more.ok()) return more.status();
    more_to_load = *more;
  }
  const std::vector<ScheduledEntry> due = scheduler_.Poll();
  if (!due.empty()) {
    if (absl::Status s = Dispatch(due); !s.ok()) return s;
  }
  return more_to_load ? now : scheduler_.NextWake();
}

// Moves `due` (in due order) from scheduled to ready in every group of its
// topic, or in the topic's waiting area (group "") if it has none, in
// batches. Each batch also persists the loader cursor: the safe cursor, but
// never past the first entry of a batch not yet written. If a batch fails,
// it and the ones after it go back to the scheduler to come due again; the
// batches already written stay dispatched.
absl::Status Engine::Dispatch(const std::vector<ScheduledEntry>& due) {
  std::string zero_attempts;
  storage::AppendU32(zero_attempts, 0);
  for (size_t start = 0; start < due.size(); start += options_.dispatch_batch) {
    const size_t end = std::min(due.size(), start + options_.dispatch_batch);
    storage::WriteBatch batch;
    {
      absl::MutexLock lock(&mu_);
      for (size_t i = start; i < end; ++i) {
        const ScheduledEntry& entry = due[i];
        auto groups = groups_.find(entry.topic);
        if (groups == groups_.end() || groups->second.empty()) {
          batch.Put(Table::kReady,
                    storage::ReadyKey(entry.topic, "", entry.key),
                    zero_attempts);
        } else {
          for (const std::string& group : groups->second) {
            batch.Put(Table::kReady,
                      storage::ReadyKey(entry.topic, group, entry.key),
                      zero_attempts);
          }
        }
        batch.Delete(Table::kSchedule, storage::ScheduleKey(entry.key));
      }
    }
    DueKey cursor = scheduler_.SafeCursor();
    if (end < due.size()) cursor = std::min(cursor, due[end].key);
    PutLoaderCursor(batch, cursor);
    if (absl::Status s = commits_.Commit(std::move(batch)); !s.ok()) {
      scheduler_.PutBack(
          std::vector<ScheduledEntry>(due.begin() + start, due.end()));
      if (options_.on_dispatched && start > 0) {
        options_.on_dispatched(
            std::vector<ScheduledEntry>(due.begin(), due.begin() + start));
      }
      return s;
    }
  }
  if (options_.on_dispatched) options_.on_dispatched(due);
  return absl::OkStatus();
}

absl::Status Engine::RegisterGroup(std::string_view topic,
                                   std::string_view group) {
  const std::string t(topic), g(group);
  {
    absl::MutexLock lock(&mu_);
    auto it = groups_.find(t);
    if (it != groups_.end() && it->second.contains(g)) return absl::OkStatus();
  }
  storage::GroupRecord record;
  record.set_created_at_ms(absl::ToUnixMillis(clock_->Now()));
  storage::WriteBatch batch;
  batch.Put(Table::kMeta, storage::GroupKey(t, g), record.SerializeAsString());
  if (absl::Status s = commits_.Commit(std::move(batch)); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  groups_[t].insert(g);
  return absl::OkStatus();
}

void Engine::Start() {
  timer_ = std::thread([this] { RunTimer(); });
}

void Engine::Wake() {
  absl::MutexLock lock(&mu_);
  wake_ = true;
}

void Engine::RunTimer() {
  while (true) {
    const absl::StatusOr<absl::Time> next = Tick();
    // After a failed step (store error), retry shortly rather than spin.
    const absl::Time wake_at =
        next.ok() ? *next : clock_->Now() + absl::Milliseconds(100);
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(
                             +[](Engine* e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(
                                  e->mu_) { return e->wake_ || e->stopping_; },
                             this),
                         wake_at - clock_->Now());
    if (stopping_) return;
    wake_ = false;
  }
}

}  // namespace hourglass::broker
