#include "broker/delivery_step.h"

#include <algorithm>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "broker/lifecycle_reads.h"

namespace hourglass::broker {
namespace {

using storage::DueKey;

// A timer set `delay` from now fires at the first whole millisecond at or
// after now + delay, so it never fires before the full delay has passed.
int64_t CeilMillis(absl::Time t) {
  return absl::ToInt64Milliseconds(
      absl::Ceil(t - absl::UnixEpoch(), absl::Milliseconds(1)));
}

// DeliveryBytes of the delivery `record` makes.
size_t RecordBytes(const storage::MessageRecord& record) {
  size_t bytes =
      record.id().size() + record.topic().size() + record.payload().size();
  for (const auto& [key, value] : record.headers()) {
    bytes += key.size() + value.size();
  }
  return bytes;
}

// Whether the message is past its deadline at `now_ms`: no delivery from
// then on. Records without a deadline hold 0.
bool PastDeadline(const storage::MessageRecord& record, int64_t now_ms) {
  return record.expire_at_ms() > 0 && now_ms >= record.expire_at_ms();
}

// The letter `group` of `topic` publishes to `<topic>.dlq` for `record`
// after `attempts` deliveries, due now. Takes the record's payload.
NewMessage Letter(const std::string& topic, const std::string& group,
                  storage::MessageRecord& record, uint32_t attempts,
                  int64_t now_ms) {
  NewMessage letter;
  letter.topic = absl::StrCat(topic, ".dlq");
  letter.id = record.id();
  letter.payload = std::move(*record.mutable_payload());
  letter.headers.insert(record.headers().begin(), record.headers().end());
  letter.deliver_at = absl::FromUnixMillis(now_ms);
  letter.dead_letter_attempts = record.dead_letter_attempts() + attempts;
  letter.dead_letter_group = group;
  return letter;
}

}  // namespace

size_t DeliveryBytes(const Delivery& delivery) {
  size_t bytes =
      delivery.id.size() + delivery.topic.size() + delivery.payload.size();
  for (const auto& [key, value] : delivery.headers) {
    bytes += key.size() + value.size();
  }
  return bytes;
}

// A delivery being made in this step.
struct DeliveryStep::Assignment {
  GroupState* group;
  uint64_t sequence;
  uint64_t token;
  ConsumerId consumer;
  absl::Duration ack_timeout;
  std::optional<ReadyItem> from_window;  // Else it was redeliverable.
  uint32_t previous_attempt;
  uint32_t attempt;
  // Read by BuildBatch, on the step's arena; null if the message is gone.
  storage::MessageRecord* record = nullptr;
  // BuildBatch left it out: the stream's outbox had no room for its bytes
  // (DispatcherOptions::max_unsent_bytes). The step puts it back.
  bool deferred = false;
  // The stream it goes to, once written: an index into the step's sends.
  std::optional<size_t> send_to;
  // BuildBatch found the message past its deadline: no delivery. The
  // entry, taken out of the group's in_flight, leaves the group (Commit)
  // or goes back there (UndoDelivery).
  std::optional<InFlight> expired;
};

struct DeliveryStep::Work {
  // A step reads up to DispatcherOptions::step_limit records of a few
  // hundred bytes.
  static google::protobuf::ArenaOptions ArenaOptions() {
    google::protobuf::ArenaOptions options;
    options.start_block_size = 4096;
    options.max_block_size = 256 << 10;
    return options;
  }

  struct DeadLetter {
    GroupState* group;
    InFlight entry;
    bool delete_message = false;
    // Past its deadline as well: it expires rather than dead-letters.
    bool expired = false;
    std::optional<PreparedPublish> prepared;
  };

  // Holds the step's message records (Assignment::record): parsed into a
  // few large blocks rather than an allocation per string, freed at once.
  google::protobuf::Arena arena{ArenaOptions()};
  // Room left in the outbox of each stream given deliveries, in bytes, as
  // the step began (max_unsent_bytes minus its unsent bytes).
  absl::flat_hash_map<ConsumerId, size_t> outbox_room;
  // Acks and nacks taken, in arrival order; once BuildAckBatch ran, only
  // the nacks, and the acks are in `acked`.
  std::vector<Finished> finished;
  size_t finished_taken = 0;  // How many acks updated `finishing`.
  std::vector<Finished> acked;
  std::vector<Assignment> deliveries;
  std::vector<DeadLetter> dead_letters;
  // The letters of deliveries that expired with dead_letter_on_expire.
  std::vector<PreparedPublish> expiry_letters;
  // (topic, id) of the messages lettered to `<topic>.dlq` in this step:
  // several groups may dead-letter or expire one message in one step; the
  // first letter publishes it and the others, duplicates, publish nothing
  // (a second Prepare of the id would be refused as still in progress, and
  // so would every retry of the step).
  std::set<std::pair<std::string, std::string>> lettered;

  bool empty() const {
    return finished.empty() && acked.empty() && deliveries.empty() &&
           dead_letters.empty();
  }
};

DeliveryStep::DeliveryStep(DeliveryState* state, storage::MessageStore* store,
                           storage::CommitQueue* commits, Publisher* publisher,
                           Activity* activity)
    : state_(state),
      store_(store),
      commits_(commits),
      publisher_(publisher),
      activity_(activity),
      ack_writer_(std::make_unique<BackgroundWrite>(commits, "hg-ack-writer")) {
}

DeliveryStep::~DeliveryStep() = default;

absl::StatusOr<bool> DeliveryStep::Run(bool deliver) {
  Clock& clock = *state_->clock();
  const int64_t now_ms = absl::ToUnixMillis(clock.Now());
  const absl::Time now = absl::FromUnixMillis(now_ms);
  state_->ExpireTimers(now_ms);
  state_->ReportStuckConsumers(now);
  for (auto& [sink, status] : state_->RemoveStalledConsumers(now)) {
    sink->Abort(std::move(status));
  }
  Work work;
  absl::Status taken = TakeFinished(work);
  if (taken.ok() && deliver) taken = TakeDeliveries(work);
  if (!taken.ok()) {
    Undo(work);
    return taken;
  }
  if (work.empty() && unwritten_acks_.empty()) return false;

  // The acks (with any a failed step left) are written on their own thread
  // while this one reads and writes the rest: they delete what consumers
  // are done with and touch no key the rest does. No fsync for either:
  // deliveries, acks, nacks and dead letters that a power cut loses are
  // redelivered (at least once); the client waits on none.
  storage::WriteBatch acks = std::exchange(unwritten_acks_, {});
  {
    Changes ack_changes;
    BuildAckBatch(work, ack_changes);
    acks.Append(ack_changes.Take());
  }
  if (!acks.empty()) {
    acks.set_needs_sync(false);
    ack_writer_->Start(std::move(acks));
  }
  Changes changes;
  absl::Status status = BuildBatch(now_ms, work, changes);
  changes.set_needs_sync(false);
  // Written on this thread, beside the commit queue: the step waits for it
  // anyway, and every write it builds on (publishes, moves to ready,
  // registrations, earlier steps) has completed.
  if (status.ok() && !changes.empty()) {
    status = commits_->WriteDirect(changes.Take());
  }
  for (Work::DeadLetter& dead : work.dead_letters) {
    if (!dead.prepared.has_value()) continue;
    absl::StatusOr<std::vector<PublishReceipt>> finished =
        publisher_->Finish(*std::move(dead.prepared), status);
    dead.prepared.reset();
    (void)finished;  // Same status as the step's.
  }
  for (PreparedPublish& letter : std::exchange(work.expiry_letters, {})) {
    (void)publisher_->Finish(std::move(letter), status);  // Same status.
  }
  if (!status.ok()) {
    Undo(work);
    (void)FinishAckWrite();  // Kept for the next step if it failed too.
    return status;
  }
  Commit(work);

  // Which deliveries go to which stream, in order.
  std::vector<std::pair<std::shared_ptr<Consumer>, std::vector<Delivery>>>
      sends;
  absl::flat_hash_map<ConsumerId, size_t> slot;
  for (Assignment& a : work.deliveries) {
    if (a.record == nullptr || a.deferred) continue;
    ConsumerState* consumer = state_->FindConsumer(a.consumer);
    if (consumer == nullptr) continue;
    auto entry = a.group->in_flight.find(a.sequence);
    if (entry == a.group->in_flight.end() || entry->second.token != a.token) {
      continue;  // Handed back meanwhile.
    }
    auto [s, inserted] = slot.try_emplace(a.consumer, sends.size());
    if (inserted) sends.push_back({consumer->sink, {}});
    a.send_to = s->second;
    // Into the stream's outbox until it reports the write.
    if (consumer->unsent++ == 0) state_->UpdateStallDeadline(*consumer, now);
    consumer->unsent_bytes += RecordBytes(*a.record);
  }
  for (Assignment& a : work.deliveries) {
    if (!a.send_to.has_value()) continue;
    storage::MessageRecord& r = *a.record;
    Delivery delivery;
    // Commit copied the id; the record is needed no more but for its times.
    delivery.id = std::move(*r.mutable_id());
    delivery.topic = std::move(*r.mutable_topic());
    delivery.payload = std::move(*r.mutable_payload());
    delivery.headers.insert(r.headers().begin(), r.headers().end());
    delivery.deliver_at = absl::FromUnixMillis(r.deliver_at_ms());
    delivery.published_at = absl::FromUnixMillis(r.published_at_ms());
    delivery.attempt = r.dead_letter_attempts() + a.attempt;
    sends[*a.send_to].second.push_back(std::move(delivery));
  }
  RecordActivity(work, now);
  // Stats count a delivery in flight before its consumer can see it.
  state_->PublishCounts();
  for (auto& [consumer, deliveries] : sends) {
    consumer->Send(std::move(deliveries));
  }
  // The acks' vector, emptied, takes the next step's acks: in a burst
  // each step would otherwise grow a new one from nothing.
  if (state_->finished().empty()) {
    work.acked.clear();
    state_->finished() = std::move(work.acked);
  }
  if (absl::Status acked = FinishAckWrite(); !acked.ok()) return acked;
  return true;
}

absl::Status DeliveryStep::TakeFinished(Work& work) {
  work.finished = std::exchange(state_->finished(), {});
  // In arrival order: an ack decides against the acks taken before it, so
  // of two groups acking one message the later one deletes it.
  for (Finished& f : work.finished) {
    if (f.kind != Finished::Kind::kAck) continue;
    auto it = f.group->finishing.find(f.entry.key.sequence);
    if (--it->second == 0) f.group->finishing.erase(it);
    ++work.finished_taken;
    absl::StatusOr<bool> held = state_->HeldElsewhere(*f.group, f.entry.key);
    if (!held.ok()) return held.status();
    f.delete_message = !*held;
  }
  return absl::OkStatus();
}

absl::Status DeliveryStep::TakeDeliveries(Work& work) {
  const DispatcherOptions& options = state_->options();
  // Groups with consumers share the step: each gets an equal part, and the
  // first served changes from step to step, so that no group's backlog
  // holds back another's deliveries.
  std::vector<GroupState*> active;
  for (auto& [topic, groups] : state_->topics()) {
    for (auto& [name, group] : groups) {
      if (!group->consumers.empty()) active.push_back(group.get());
    }
  }
  if (active.empty()) return absl::OkStatus();
  const size_t share = std::max<size_t>(64, options.step_limit / active.size());
  const size_t first = next_group_++ % active.size();
  // Deliveries given each stream in this step: with what it has not yet
  // written, at most its credit.
  absl::flat_hash_map<const ConsumerState*, size_t> given;
  auto has_room = [&](const ConsumerState& c) {
    return c.owned.size() < c.max_in_flight &&
           c.unsent + given[&c] < c.max_in_flight &&
           c.unsent_bytes < options.max_unsent_bytes;
  };
  for (size_t k = 0; k < active.size(); ++k) {
    GroupState& group = *active[(first + k) % active.size()];
    const size_t limit =
        std::min(options.step_limit, work.deliveries.size() + share);
    while (work.deliveries.size() < limit) {
      // The next consumer with credit, round robin (the turn passes only
      // when it gets a delivery).
      ConsumerState* consumer = nullptr;
      size_t next_consumer = 0;
      for (size_t i = 0; i < group.consumers.size(); ++i) {
        ConsumerState* c =
            group.consumers[(group.next_consumer + i) % group.consumers.size()];
        if (has_room(*c)) {
          consumer = c;
          next_consumer =
              (group.next_consumer + i + 1) % group.consumers.size();
          break;
        }
      }
      if (consumer == nullptr) break;
      if (group.window.WantsRefill()) {
        if (absl::Status s = state_->Refill(group); !s.ok()) return s;
      }
      // Whichever is due first: a redelivery or the ready queue's head.
      std::optional<ReadyItem> head = group.window.Front();
      const bool redeliver =
          !group.redeliverable.empty() &&
          (!head.has_value() || *group.redeliverable.begin() < head->key);
      if (!redeliver && !head.has_value()) break;

      Assignment a;
      a.group = &group;
      a.consumer = consumer->id;
      a.ack_timeout = consumer->ack_timeout;
      if (redeliver) {
        const DueKey key = *group.redeliverable.begin();
        group.redeliverable.erase(group.redeliverable.begin());
        auto entry = group.in_flight.find(key.sequence);
        if (entry->second.attempt >= options.max_attempts) {
          Work::DeadLetter dead{&group, std::move(entry->second)};
          group.in_flight.erase(entry);
          absl::StatusOr<bool> held = state_->HeldElsewhere(group, key);
          if (!held.ok()) {
            // Keep it, as it was, for the undo.
            work.dead_letters.push_back(std::move(dead));
            return held.status();
          }
          dead.delete_message = !*held;
          work.dead_letters.push_back(std::move(dead));
          continue;
        }
        InFlight& e = entry->second;
        a.previous_attempt = e.attempt;
        e.attempt += 1;
        e.waiting = false;
        e.owner = consumer;
        e.token = state_->NextToken();
        a.sequence = key.sequence;
        a.token = e.token;
        a.attempt = e.attempt;
      } else {
        group.window.PopFront();
        InFlight e;
        e.key = head->key;
        e.attempt = head->attempt + 1;
        e.owner = consumer;
        e.token = state_->NextToken();
        a.sequence = head->key.sequence;
        a.token = e.token;
        a.attempt = e.attempt;
        a.previous_attempt = head->attempt;
        a.from_window = *head;
        group.in_flight.insert_or_assign(head->key.sequence, std::move(e));
      }
      group.next_consumer = next_consumer;
      consumer->owned.insert(a.sequence);
      ++given[consumer];
      work.outbox_room.try_emplace(
          consumer->id, options.max_unsent_bytes - consumer->unsent_bytes);
      work.deliveries.push_back(std::move(a));
    }
  }
  return absl::OkStatus();
}

void DeliveryStep::BuildAckBatch(Work& work, Changes& changes) {
  std::vector<Finished> nacks;
  changes.Reserve(3 * work.finished.size() + 4);
  for (Finished& f : work.finished) {
    if (f.kind != Finished::Kind::kAck) {
      nacks.push_back(std::move(f));
      continue;
    }
    const GroupState& group = *f.group;
    lifecycle::Ack(changes, group.topic, group.name, f.entry.key, f.entry.id,
                   /*last_holder=*/f.delete_message);
    work.acked.push_back(std::move(f));
  }
  work.finished = std::move(nacks);
  // Whatever happens to the rest of the step, the acks are not taken back.
  work.finished_taken = 0;
}

absl::Status DeliveryStep::BuildBatch(int64_t now_ms, Work& work,
                                      Changes& changes) {
  // The records of the deliveries, then of the dead letters, in one read.
  std::vector<uint64_t> sequences;
  sequences.reserve(work.deliveries.size() + work.dead_letters.size());
  for (const Assignment& a : work.deliveries) sequences.push_back(a.sequence);
  for (const Work::DeadLetter& dead : work.dead_letters) {
    sequences.push_back(dead.entry.key.sequence);
  }
  absl::StatusOr<std::vector<std::optional<std::string>>> values;
  if (!sequences.empty()) {
    values = lifecycle::ReadMessageValues(*store_, sequences);
    if (!values.ok()) return values.status();
  }
  size_t next_value = 0;
  // The next record read, in the order above, on the step's arena; null if
  // it is gone.
  auto read_record =
      [&](uint64_t sequence) -> absl::StatusOr<storage::MessageRecord*> {
    std::optional<std::string>& value = (*values)[next_value++];
    if (!value.has_value()) return nullptr;
    auto* record =
        google::protobuf::Arena::CreateMessage<storage::MessageRecord>(
            &work.arena);
    if (!record->ParseFromString(*value)) {
      return absl::DataLossError(
          absl::StrCat("message ", sequence, " is malformed"));
    }
    return record;
  };
  // One operation per nack, up to three per delivery.
  changes.Reserve(work.finished.size() + 3 * work.deliveries.size() +
                  8 * work.dead_letters.size() + 16);

  // Nacks: BuildAckBatch took the acks.
  for (const Finished& f : work.finished) {
    storage::InFlightRecord record;
    record.set_attempt(f.entry.attempt);
    record.set_deliver_at_ms(f.entry.key.deliver_at_ms);
    record.set_redeliver_at_ms(f.redeliver_at_ms);
    record.set_waiting(true);
    lifecycle::Nack(changes, f.group->topic, f.group->name,
                    f.entry.key.sequence, record);
  }

  for (Assignment& a : work.deliveries) {
    absl::StatusOr<storage::MessageRecord*> record = read_record(a.sequence);
    if (!record.ok()) return record.status();
    std::optional<ReadyPlace> from;
    if (a.from_window.has_value()) {
      from = ReadyPlace{a.from_window->waiting_area
                            ? std::string_view()
                            : std::string_view(a.group->name),
                        a.from_window->key};
    }
    if (*record != nullptr && PastDeadline(**record, now_ms)) {
      absl::Status expired =
          Expire(now_ms, a, from ? &*from : nullptr, **record, work, changes);
      if (!expired.ok()) return expired;
      continue;
    }
    if (*record != nullptr) {
      // The stream's outbox takes deliveries while it has room, the last
      // of them possibly past its limit; the rest wait for a later step.
      size_t& room = work.outbox_room[a.consumer];
      if (room == 0) {
        a.deferred = true;
        continue;
      }
      room -= std::min(room, RecordBytes(**record));
    }
    if (*record == nullptr) {
      // Gone (purged): nothing to deliver.
      lifecycle::DeliveryOfGone(changes, a.group->topic, a.group->name,
                                a.sequence, from ? &*from : nullptr);
      continue;
    }
    a.record = *record;
    storage::InFlightRecord in_flight;
    in_flight.set_attempt(a.attempt);
    in_flight.set_deliver_at_ms(a.record->deliver_at_ms());
    in_flight.set_redeliver_at_ms(now_ms +
                                  absl::ToInt64Milliseconds(a.ack_timeout));
    if (from.has_value()) {
      lifecycle::Deliver(changes, a.group->topic, a.group->name, *from,
                         in_flight);
    } else {
      lifecycle::Redeliver(changes, a.group->topic, a.group->name, a.sequence,
                           in_flight);
    }
  }

  for (Work::DeadLetter& dead : work.dead_letters) {
    const uint64_t sequence = dead.entry.key.sequence;
    absl::StatusOr<storage::MessageRecord*> record = read_record(sequence);
    if (!record.ok()) return record.status();
    const GroupState& group = *dead.group;
    if (*record == nullptr) {
      lifecycle::DropInFlight(changes, group.topic, group.name, sequence);
      continue;
    }
    storage::MessageRecord& r = **record;
    // Past its deadline, it expires: dead-lettered only if it asks to be.
    dead.expired = PastDeadline(r, now_ms);
    if (dead.expired) {
      lifecycle::Expire(changes, group.topic, group.name, dead.entry.key,
                        r.id(), /*from=*/nullptr, dead.delete_message);
      if (!r.dead_letter_on_expire()) continue;
    } else {
      lifecycle::DeadLetter(changes, group.topic, group.name, dead.entry.key,
                            r.id(), /*last_holder=*/dead.delete_message);
    }
    if (!work.lettered.emplace(group.topic, r.id()).second) continue;
    std::vector<NewMessage> letters;
    letters.push_back(
        Letter(group.topic, group.name, r, dead.entry.attempt, now_ms));
    absl::StatusOr<PreparedPublish> prepared =
        publisher_->Prepare(std::move(letters));
    if (!prepared.ok()) return prepared.status();
    changes.Append(std::move(prepared->changes));
    dead.prepared = *std::move(prepared);
  }
  return absl::OkStatus();
}

absl::Status DeliveryStep::Expire(int64_t now_ms, Assignment& a,
                                  const ReadyPlace* from,
                                  storage::MessageRecord& record, Work& work,
                                  Changes& changes) {
  GroupState& group = *a.group;
  auto entry = group.in_flight.find(a.sequence);
  if (entry == group.in_flight.end() || entry->second.token != a.token) {
    return absl::InternalError(absl::StrCat("delivery of message ", a.sequence,
                                            " lost its in-flight entry"));
  }
  // Out of the group first, so that another group expiring the message in
  // this step finds this one no longer holding it.
  a.expired = std::move(entry->second);
  group.in_flight.erase(entry);
  absl::StatusOr<bool> held = state_->HeldElsewhere(group, a.expired->key);
  if (!held.ok()) return held.status();  // Undo puts the entry back.
  lifecycle::Expire(changes, group.topic, group.name, a.expired->key,
                    record.id(), from, /*last_holder=*/!*held);
  if (!record.dead_letter_on_expire() ||
      !work.lettered.emplace(group.topic, record.id()).second) {
    return absl::OkStatus();
  }
  std::vector<NewMessage> letters;
  letters.push_back(
      Letter(group.topic, group.name, record, a.previous_attempt, now_ms));
  absl::StatusOr<PreparedPublish> prepared =
      publisher_->Prepare(std::move(letters));
  if (!prepared.ok()) return prepared.status();
  changes.Append(std::move(prepared->changes));
  work.expiry_letters.push_back(*std::move(prepared));
  return absl::OkStatus();
}

void DeliveryStep::Commit(Work& work) {
  // Ack timeouts run from the hand-over, which follows at once: a stream
  // that stalls cannot keep its deliveries from other consumers.
  const absl::Time now = state_->clock()->Now();
  for (Assignment& a : work.deliveries) {
    if (a.expired.has_value()) {
      // Left the group: its consumer's credit is free again.
      state_->ReleaseFromOwner(*a.expired);
      state_->ClearTimer(*a.expired);
      continue;
    }
    if (a.deferred) {
      UndoDelivery(a);
      continue;
    }
    auto entry = a.group->in_flight.find(a.sequence);
    if (entry == a.group->in_flight.end()) continue;
    InFlight& e = entry->second;
    if (a.record == nullptr) {
      // The message is gone; so is this entry.
      if (e.token == a.token) {
        state_->ReleaseFromOwner(e);
        state_->ClearTimer(e);
        a.group->redeliverable.erase(e.key);
        a.group->in_flight.erase(entry);
      }
      continue;
    }
    e.id = a.record->id();
    if (e.token != a.token) continue;  // Handed back meanwhile.
    ConsumerState* consumer = state_->FindConsumer(a.consumer);
    if (consumer == nullptr) continue;
    consumer->by_id[e.id] = a.sequence;
    state_->SetTimer(*a.group, e, CeilMillis(now + a.ack_timeout));
  }
}

void DeliveryStep::UndoDelivery(Assignment& a) {
  if (a.expired.has_value()) {
    a.group->in_flight.insert_or_assign(a.sequence, *std::move(a.expired));
    a.expired.reset();
  }
  auto entry = a.group->in_flight.find(a.sequence);
  if (entry == a.group->in_flight.end()) return;
  InFlight& e = entry->second;
  state_->ReleaseFromOwner(e);
  state_->ClearTimer(e);
  if (a.from_window.has_value()) {
    a.group->redeliverable.erase(e.key);
    a.group->in_flight.erase(entry);
    a.group->window.Add(*a.from_window);  // Its ready key is still there.
  } else {
    e.attempt = a.previous_attempt;
    e.token = state_->NextToken();
    a.group->redeliverable.insert(e.key);
  }
}

void DeliveryStep::Undo(Work& work) {
  // Deliveries: back where they came from, in reverse order.
  for (auto a = work.deliveries.rbegin(); a != work.deliveries.rend(); ++a) {
    UndoDelivery(*a);
  }
  // Dead letters: redeliverable again, to be retried.
  for (Work::DeadLetter& dead : work.dead_letters) {
    const DueKey key = dead.entry.key;
    dead.entry.owner = nullptr;
    dead.entry.timer.reset();
    dead.entry.token = state_->NextToken();
    dead.group->in_flight.insert_or_assign(key.sequence, std::move(dead.entry));
    dead.group->redeliverable.insert(key);
  }
  // Acks and nacks: queued again, ahead of newer ones, with the counts of
  // the acks already taken restored.
  size_t restored = 0;
  for (Finished& f : work.finished) {
    if (f.kind != Finished::Kind::kAck || restored == work.finished_taken) {
      continue;
    }
    ++f.group->finishing[f.entry.key.sequence];
    ++restored;
  }
  work.finished_taken = 0;
  std::vector<Finished>& later = state_->finished();
  work.finished.insert(work.finished.end(),
                       std::make_move_iterator(later.begin()),
                       std::make_move_iterator(later.end()));
  later = std::move(work.finished);
  work.finished.clear();
  work.deliveries.clear();
  work.dead_letters.clear();
}

absl::Status DeliveryStep::FinishAckWrite() {
  if (!ack_writer_->busy()) return absl::OkStatus();
  return ack_writer_->Finish(&unwritten_acks_);
}

void DeliveryStep::RecordActivity(const Work& work, absl::Time now) {
  absl::flat_hash_map<const GroupState*, uint64_t> acked;
  for (const Finished& f : work.acked) ++acked[f.group];
  for (const auto& [group, n] : acked) {
    activity_->Acked(group->topic, group->name, n);
  }
  for (const Work::DeadLetter& dead : work.dead_letters) {
    if (dead.expired) {
      activity_->Expired(dead.group->topic, 1);
    } else {
      activity_->DeadLettered(dead.group->topic, 1);
    }
  }
  // By topic: how late each first delivery was, and how many were again.
  struct TopicDeliveries {
    std::vector<absl::Duration> lateness;
    uint64_t again = 0;
  };
  absl::flat_hash_map<std::string_view, TopicDeliveries> delivered;
  for (const Assignment& a : work.deliveries) {
    if (a.expired.has_value()) activity_->Expired(a.group->topic, 1);
    if (a.record == nullptr || a.deferred) continue;
    TopicDeliveries& d = delivered[a.group->topic];
    if (a.attempt == 1) {
      d.lateness.push_back(now -
                           absl::FromUnixMillis(a.record->deliver_at_ms()));
    } else {
      ++d.again;
    }
  }
  for (const auto& [topic, d] : delivered) {
    activity_->Delivered(topic, d.lateness);
    if (d.again > 0) activity_->Redelivered(topic, d.again);
  }
}

}  // namespace hourglass::broker
