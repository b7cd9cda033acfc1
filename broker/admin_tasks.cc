#include "broker/admin_tasks.h"

#include <algorithm>
#include <optional>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "broker/lifecycle_reads.h"
#include "storage/records.pb.h"

namespace hourglass::broker {
namespace {

using storage::DueKey;

// Ready entries, in-flight entries or dead letters handled per chunk.
constexpr size_t kChunk = 1024;

}  // namespace

struct AdminTasks::Task {
  enum class Kind { kPurgeReady, kDeleteGroup, kRedrive };
  Kind kind;
  std::string topic;            // The topic purged, or redriven from its .dlq.
  GroupState* group = nullptr;  // kDeleteGroup.
  // Where each ready queue read has got to, by the name keys are stored
  // under ("" is the waiting area); absent: the start.
  std::map<std::string, DueKey> positions;
  // kRedrive: the dead letters still to move (all of `<topic>.dlq` when
  // `all`, read as the task goes).
  bool all = false;
  std::vector<std::pair<DueKey, std::string>> chosen;
  int deferrals = 0;  // Chunks that found every remaining letter busy.
  uint64_t count = 0;
  // Set when the task gives up: `done` gets it instead of the count.
  absl::Status failure;
  CountCallback done;
};

// What one chunk of a task changed in the delivery state, to undo if its
// write fails.
struct AdminTasks::Chunk {
  Changes changes;
  // Due keys of the ready entries removed, in the order removed.
  std::vector<DueKey> removed_ready;
  // Window entries taken out, by the group whose window held them.
  std::vector<std::pair<GroupState*, ReadyItem>> from_windows;
  // In-flight entries taken out (kDeleteGroup, kRedrive).
  std::vector<std::pair<GroupState*, InFlight>> from_in_flight;
  // Messages deleted in this chunk (by sequence), so that no later entry
  // of the chunk deletes one twice.
  absl::flat_hash_set<uint64_t> deleted;
  // Ready entries removed in this chunk: (stored-under name, sequence).
  absl::flat_hash_set<std::pair<std::string, uint64_t>> removing;
  std::vector<PreparedPublish> publishes;  // kRedrive.
  uint64_t count = 0;
  bool finished = false;
};

AdminTasks::AdminTasks(DeliveryState* state, storage::MessageStore* store,
                       storage::CommitQueue* commits, Publisher* publisher,
                       GroupRegistry* registry, StepInbox* inbox)
    : state_(state),
      store_(store),
      commits_(commits),
      publisher_(publisher),
      registry_(registry),
      inbox_(inbox) {}

AdminTasks::~AdminTasks() = default;

void AdminTasks::PurgeReady(std::string topic, CountCallback done) {
  auto task = std::make_unique<Task>();
  task->kind = Task::Kind::kPurgeReady;
  task->topic = std::move(topic);
  task->done = std::move(done);
  tasks_.push_back(std::move(task));
}

void AdminTasks::DeleteGroup(GroupRegistry::GroupId id, CountCallback done) {
  GroupState* group = state_->FindGroup(id);
  if (group == nullptr) {
    std::move(done)(absl::NotFoundError("no such group"));
    return;
  }
  // From now on the group holds nothing and takes no consumers; its
  // streams end, and the task removes its entries.
  group->deleting = true;
  const absl::Status gone = absl::NotFoundError(
      absl::StrCat("group ", Quoted(group->name), " was deleted"));
  const std::vector<ConsumerState*> consumers = group->consumers;
  for (ConsumerState* consumer : consumers) {
    const std::vector<uint64_t> owned(consumer->owned.begin(),
                                      consumer->owned.end());
    for (uint64_t sequence : owned) {
      auto entry = group->in_flight.find(sequence);
      if (entry == group->in_flight.end()) continue;
      state_->ReleaseFromOwner(entry->second);
    }
    state_->RemoveConsumer(*consumer)->End(gone);
  }
  group->redeliverable.clear();
  for (auto& [sequence, entry] : group->in_flight) state_->ClearTimer(entry);
  auto task = std::make_unique<Task>();
  task->kind = Task::Kind::kDeleteGroup;
  task->topic = group->topic;
  task->group = group;
  task->done = std::move(done);
  tasks_.push_back(std::move(task));
}

void AdminTasks::Redrive(std::string topic,
                         std::vector<std::pair<DueKey, std::string>> chosen,
                         CountCallback done) {
  auto task = std::make_unique<Task>();
  task->kind = Task::Kind::kRedrive;
  task->topic = std::move(topic);
  task->all = chosen.empty();
  task->chosen = std::move(chosen);
  task->done = std::move(done);
  tasks_.push_back(std::move(task));
}

void AdminTasks::Abandon(const absl::Status& status) {
  for (std::unique_ptr<Task>& task : tasks_) std::move(task->done)(status);
  tasks_.clear();
}

absl::StatusOr<bool> AdminTasks::RunChunk() {
  if (tasks_.empty()) return false;
  Chunk chunk;
  if (absl::Status s = BuildChunk(*tasks_.front(), chunk); !s.ok()) {
    Undo(chunk);
    // The publishes prepared before the failure end unwritten, so that
    // their ids are not held for ever (every retry, and every producer's
    // publish of those ids, would find them in progress): dropping one
    // ends its scheduler tokens, but only Finish frees its ids.
    for (PreparedPublish& prepared : chunk.publishes) {
      (void)publisher_->Finish(std::move(prepared), s);
    }
    return s;
  }
  absl::Status status = absl::OkStatus();
  if (!chunk.changes.empty()) status = commits_->Commit(chunk.changes.Take());
  for (PreparedPublish& prepared : chunk.publishes) {
    (void)publisher_->Finish(std::move(prepared), status);
  }
  if (!status.ok()) {
    Undo(chunk);
    return status;
  }
  Task& task = *tasks_.front();
  task.count += chunk.count;
  if (!chunk.finished) return true;
  std::unique_ptr<Task> finished = std::move(tasks_.front());
  tasks_.pop_front();
  if (finished->kind == Task::Kind::kDeleteGroup) {
    // Nothing of it is left: no entries, no move to ready or ack in
    // progress.
    const GroupRegistry::GroupId id = finished->group->id;
    state_->RemoveGroup(*finished->group);
    registry_->EndDelete(id);
  }
  if (finished->failure.ok()) {
    std::move(finished->done)(finished->count);
  } else {
    std::move(finished->done)(finished->failure);
  }
  return true;
}

absl::Status AdminTasks::BuildChunk(Task& task, Chunk& chunk) {
  switch (task.kind) {
    case Task::Kind::kPurgeReady:
      return PurgeChunk(task, chunk);
    case Task::Kind::kDeleteGroup:
      return DeleteGroupChunk(task, chunk);
    case Task::Kind::kRedrive:
      return RedriveChunk(task, chunk);
  }
  return absl::InternalError("unknown task");
}

absl::StatusOr<size_t> AdminTasks::RemoveReady(Task& task, Chunk& chunk,
                                               const std::string& stored_under,
                                               GroupState* holder,
                                               size_t limit) {
  DueKey& position = task.positions[stored_under];
  std::vector<DueKey> keys;
  absl::Status scanned =
      lifecycle::ScanReady(*store_, task.topic, stored_under, position,
                           [&](const DueKey& due, uint32_t) {
                             // A move to ready still being written: it came due
                             // after the task started, and is left alone.
                             if (!inbox_->IsPending(due.sequence))
                               keys.push_back(due);
                             position = {due.deliver_at_ms, due.sequence + 1};
                             return keys.size() < limit;
                           });
  if (!scanned.ok()) return scanned;
  for (const DueKey& key : keys) {
    if (holder != nullptr) {
      if (std::optional<ReadyItem> item = holder->window.Erase(key)) {
        chunk.from_windows.emplace_back(holder, *item);
      }
    }
    lifecycle::PurgeReady(chunk.changes, task.topic,
                          ReadyPlace{stored_under, key});
    chunk.removing.insert({stored_under, key.sequence});
    chunk.removed_ready.push_back(key);
  }
  return keys.size();
}

absl::StatusOr<bool> AdminTasks::DeleteIfUnheld(const std::string& topic,
                                                const DueKey& key,
                                                const GroupState* except,
                                                Chunk& chunk) {
  if (chunk.deleted.contains(key.sequence)) return false;
  absl::StatusOr<bool> held = state_->Held(topic, key, except, &chunk.removing);
  if (!held.ok()) return held.status();
  if (*held) return false;
  // Another path (an ack) may have deleted it already; IdAt tells.
  absl::StatusOr<std::optional<std::string>> id =
      lifecycle::IdAt(*store_, topic, key);
  if (!id.ok()) return id.status();
  if (!id->has_value()) return false;
  lifecycle::DeleteUnheld(chunk.changes, topic, key, **id);
  chunk.deleted.insert(key.sequence);
  return true;
}

absl::Status AdminTasks::PurgeChunk(Task& task, Chunk& chunk) {
  // Every place ready entries of the topic live: each group's own name and
  // the waiting area, with the group whose window holds them.
  std::vector<std::pair<std::string, GroupState*>> queues;
  GroupState* area_holder = nullptr;
  if (auto* groups = state_->GroupsOf(task.topic)) {
    for (auto& [name, group] : *groups) {
      queues.emplace_back(name, group.get());
      if (group->owns_waiting_area) area_holder = group.get();
    }
  }
  queues.emplace_back("", area_holder);
  size_t read = 0;
  for (const auto& [stored_under, holder] : queues) {
    absl::StatusOr<size_t> n =
        RemoveReady(task, chunk, stored_under, holder, kChunk - read);
    if (!n.ok()) return n.status();
    read += *n;
    if (read == kChunk) break;
  }
  chunk.finished = read < kChunk;
  // Messages the purge leaves unheld go too.
  std::vector<DueKey> keys = chunk.removed_ready;
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  for (const DueKey& key : keys) {
    absl::StatusOr<bool> deleted =
        DeleteIfUnheld(task.topic, key, nullptr, chunk);
    if (!deleted.ok()) return deleted.status();
    if (*deleted) ++chunk.count;
  }
  return absl::OkStatus();
}

absl::Status AdminTasks::DeleteGroupChunk(Task& task, Chunk& chunk) {
  GroupState& group = *task.group;
  // First the in-flight entries, then the ready ones.
  std::vector<DueKey> keys;
  for (auto it = group.in_flight.begin();
       it != group.in_flight.end() && keys.size() < kChunk;) {
    keys.push_back(it->second.key);
    lifecycle::DropInFlight(chunk.changes, group.topic, group.name, it->first);
    chunk.from_in_flight.emplace_back(&group, std::move(it->second));
    group.in_flight.erase(it++);
  }
  size_t read = keys.size();
  if (read < kChunk) {
    absl::StatusOr<size_t> n =
        RemoveReady(task, chunk, group.name, &group, kChunk - read);
    if (!n.ok()) return n.status();
    read += *n;
    if (group.owns_waiting_area && read < kChunk) {
      n = RemoveReady(task, chunk, "", &group, kChunk - read);
      if (!n.ok()) return n.status();
      read += *n;
    }
    for (const DueKey& key : chunk.removed_ready) keys.push_back(key);
  }
  chunk.count = read;
  for (const DueKey& key : keys) {
    // Acks of the group still queued decide for their messages.
    if (group.finishing.contains(key.sequence)) continue;
    absl::StatusOr<bool> deleted =
        DeleteIfUnheld(group.topic, key, &group, chunk);
    if (!deleted.ok()) return deleted.status();
  }
  if (read > 0) return absl::OkStatus();
  // Nothing left on disk or in memory. The group goes once no move to
  // ready or ack in progress still refers to it.
  if (inbox_->NamesGroup(group.id)) return absl::OkStatus();  // Next step.
  for (const Finished& f : state_->finished()) {
    if (f.group == &group) return absl::OkStatus();
  }
  if (!group.finishing.empty()) return absl::OkStatus();
  lifecycle::UnregisterGroup(chunk.changes, group.topic, group.name);
  chunk.finished = true;
  return absl::OkStatus();
}

absl::Status AdminTasks::RedriveChunk(Task& task, Chunk& chunk) {
  const std::string dead_topic = absl::StrCat(task.topic, ".dlq");
  if (task.all && task.chosen.empty()) {
    // The next letters, in due order.
    DueKey& position = task.positions[""];
    absl::Status s =
        lifecycle::ScanTopic(*store_, dead_topic, position,
                             [&](const DueKey& due, std::string_view id) {
                               task.chosen.emplace_back(due, std::string(id));
                               position = {due.deliver_at_ms, due.sequence + 1};
                               return task.chosen.size() < kChunk;
                             });
    if (!s.ok()) return s;
    if (task.chosen.empty()) {
      chunk.finished = true;
      return absl::OkStatus();
    }
  }
  const size_t n = std::min(task.chosen.size(), kChunk);
  const int64_t now_ms = absl::ToUnixMillis(state_->clock()->Now());
  std::vector<std::pair<DueKey, std::string>> busy;
  auto* dead_groups = state_->GroupsOf(dead_topic);
  for (size_t i = 0; i < n; ++i) {
    const auto& [key, id] = task.chosen[i];
    // A letter just published (still scheduled), coming due (its move to
    // ready being written) or with an ack being written waits for a later
    // chunk. A message scheduled for later (a producer's) is no dead letter
    // yet: it stays.
    absl::StatusOr<bool> scheduled = lifecycle::IsScheduled(*store_, key);
    if (!scheduled.ok()) return scheduled.status();
    if (*scheduled && key.deliver_at_ms > now_ms) continue;
    bool wait = *scheduled || inbox_->IsPending(key.sequence);
    if (dead_groups != nullptr) {
      for (auto& [name, group] : *dead_groups) {
        wait = wait || group->finishing.contains(key.sequence);
      }
    }
    if (wait) {
      busy.emplace_back(key, id);
      continue;
    }
    absl::StatusOr<std::optional<storage::MessageRecord>> stored =
        lifecycle::ReadMessage(*store_, key.sequence);
    if (!stored.ok()) return stored.status();
    if (!stored->has_value()) continue;  // Acked or purged meanwhile.
    storage::MessageRecord& record = **stored;
    // Back to the topic, due now, as the original message was.
    NewMessage message;
    message.topic = task.topic;
    message.id = record.id();
    message.payload = std::move(*record.mutable_payload());
    message.headers.insert(record.headers().begin(), record.headers().end());
    message.deliver_at = state_->clock()->Now();
    std::vector<NewMessage> messages;
    messages.push_back(std::move(message));
    absl::StatusOr<PreparedPublish> prepared =
        publisher_->Prepare(std::move(messages));
    if (!prepared.ok()) return prepared.status();
    if (prepared->changes.empty()) {
      // Pending in the topic again: the letter stays.
      chunk.publishes.push_back(*std::move(prepared));
      continue;
    }
    chunk.changes.Append(std::move(prepared->changes));
    chunk.publishes.push_back(*std::move(prepared));
    // Out of every group of the dead-letter topic, then deleted.
    std::vector<std::string_view> groups;
    if (dead_groups != nullptr) {
      for (auto& [name, group_ptr] : *dead_groups) {
        GroupState& group = *group_ptr;
        if (std::optional<ReadyItem> item = group.window.Erase(key)) {
          chunk.from_windows.emplace_back(&group, *item);
        }
        auto entry = group.in_flight.find(key.sequence);
        if (entry != group.in_flight.end()) {
          state_->ReleaseFromOwner(entry->second);
          state_->ClearTimer(entry->second);
          group.redeliverable.erase(key);
          chunk.from_in_flight.emplace_back(&group, std::move(entry->second));
          group.in_flight.erase(entry);
        }
        groups.push_back(name);
      }
    }
    // Ready entries: under each group's name and the waiting area. The
    // counters must only count present ones.
    std::vector<std::string_view> ready_under = {""};
    ready_under.insert(ready_under.end(), groups.begin(), groups.end());
    std::vector<std::string_view> present;
    for (std::string_view name : ready_under) {
      absl::StatusOr<std::optional<uint32_t>> ready =
          lifecycle::ReadReady(*store_, dead_topic, ReadyPlace{name, key});
      if (!ready.ok()) return ready.status();
      if (ready->has_value()) present.push_back(name);
    }
    lifecycle::Redrive(chunk.changes, dead_topic, key, id, present, groups);
    ++chunk.count;
  }
  task.chosen.erase(task.chosen.begin(), task.chosen.begin() + n);
  if (!busy.empty()) {
    // Letters come due within milliseconds; give up on them only after
    // many chunks found them busy. The task ends then, answering the
    // caller: a failed chunk would be undone and retried, and fail, at
    // every step, holding up every later task.
    if (chunk.count == 0 && ++task.deferrals > 1000) {
      task.failure =
          absl::UnavailableError("dead letters stayed busy; retry the redrive");
      chunk.finished = true;
      return absl::OkStatus();
    }
    task.chosen.insert(task.chosen.end(), busy.begin(), busy.end());
  }
  chunk.finished = !task.all && task.chosen.empty();
  return absl::OkStatus();
}

void AdminTasks::Undo(Chunk& chunk) {
  for (auto& [group, item] : chunk.from_windows) group->window.Add(item);
  for (auto& [group, entry] : chunk.from_in_flight) {
    const DueKey key = entry.key;
    entry.owner = nullptr;
    entry.timer.reset();
    entry.token = state_->NextToken();
    group->in_flight.insert_or_assign(key.sequence, std::move(entry));
    if (!group->deleting) group->redeliverable.insert(key);
  }
  chunk.from_windows.clear();
  chunk.from_in_flight.clear();
}

}  // namespace hourglass::broker
