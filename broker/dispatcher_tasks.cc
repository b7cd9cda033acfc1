// The dispatcher's admin tasks: purging ready messages, deleting a group,
// redriving dead letters. Each runs a chunk per step on the dispatcher's
// thread, so it never races deliveries, refills or ack decisions; a chunk
// changes memory under the lock, writes one batch, and is undone if the
// write fails.

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "broker/dispatcher.h"
#include "broker/dispatcher_internal.h"
#include "broker/lifecycle.h"
#include "broker/lifecycle_reads.h"
#include "storage/keys.h"
#include "storage/records.pb.h"

namespace hourglass::broker {
namespace {

// Ready entries, in-flight entries or dead letters handled per chunk.
constexpr size_t kChunk = 1024;

}  // namespace

void Dispatcher::PurgeReady(std::string topic, CountCallback done) {
  auto task = std::make_unique<Task>();
  task->kind = Task::Kind::kPurgeReady;
  task->topic = std::move(topic);
  task->done = std::move(done);
  absl::MutexLock lock(&mu_);
  tasks_.push_back(std::move(task));
  WakeLocked();
}

void Dispatcher::DeleteGroup(std::string topic, std::string group,
                             CountCallback done) {
  std::vector<std::shared_ptr<Consumer>> ended;
  std::optional<absl::Status> refused;
  {
    absl::MutexLock lock(&mu_);
    Group* g = FindGroupLocked(topic, group);
    if (g == nullptr || g->deleting) {
      refused = absl::NotFoundError(absl::StrCat("no group ", Quoted(group),
                                                 " in topic ", Quoted(topic)));
    } else {
      // From now on the group holds nothing and takes no consumers; its
      // streams end, and the task removes its entries.
      g->deleting = true;
      for (ConsumerState* consumer : g->consumers) {
        const std::vector<uint64_t> owned(consumer->owned.begin(),
                                          consumer->owned.end());
        for (uint64_t sequence : owned) {
          auto entry = g->in_flight.find(sequence);
          if (entry == g->in_flight.end()) continue;
          ReleaseFromOwnerLocked(entry->second);
          ClearTimerLocked(entry->second);
        }
        ended.push_back(consumer->sink);
        consumers_.erase(consumer->id);
      }
      g->consumers.clear();
      g->redeliverable.clear();
      for (auto& [sequence, entry] : g->in_flight) ClearTimerLocked(entry);
      auto task = std::make_unique<Task>();
      task->kind = Task::Kind::kDeleteGroup;
      task->topic = std::move(topic);
      task->group = g;
      task->done = std::move(done);
      tasks_.push_back(std::move(task));
      WakeLocked();
    }
  }
  if (refused.has_value()) {
    std::move(done)(*refused);
    return;
  }
  const absl::Status gone = absl::NotFoundError(
      absl::StrCat("group ", Quoted(group), " was deleted"));
  for (const std::shared_ptr<Consumer>& sink : ended) sink->End(gone);
}

void Dispatcher::Redrive(std::string topic, std::vector<std::string> ids,
                         CountCallback done) {
  // The letters named must all exist before anything moves.
  const std::string dead_topic = absl::StrCat(topic, ".dlq");
  std::vector<std::pair<DueKey, std::string>> chosen;
  for (std::string& id : ids) {
    absl::StatusOr<std::optional<DueKey>> key =
        lifecycle::FindId(*store_, dead_topic, id);
    if (!key.ok()) {
      std::move(done)(key.status());
      return;
    }
    if (!key->has_value()) {
      std::move(done)(absl::NotFoundError(
          absl::StrCat("no dead letter with id ", Quoted(id), " of topic ",
                       Quoted(topic), " (in ", Quoted(dead_topic), ")")));
      return;
    }
    chosen.emplace_back(**key, std::move(id));
  }
  auto task = std::make_unique<Task>();
  task->kind = Task::Kind::kRedrive;
  task->topic = std::move(topic);
  task->all = chosen.empty();
  task->chosen = std::move(chosen);
  task->done = std::move(done);
  absl::MutexLock lock(&mu_);
  tasks_.push_back(std::move(task));
  WakeLocked();
}

absl::StatusOr<bool> Dispatcher::RunTask() {
  TaskChunk chunk;
  {
    absl::MutexLock lock(&mu_);
    if (tasks_.empty()) return false;
    if (absl::Status s = BuildChunkLocked(*tasks_.front(), chunk); !s.ok()) {
      UndoChunkLocked(chunk);
      return s;
    }
  }
  absl::Status status = absl::OkStatus();
  if (!chunk.changes.empty()) status = commits_->Commit(chunk.changes.Take());
  for (PreparedPublish& prepared : chunk.publishes) {
    (void)publisher_->Finish(std::move(prepared), status);
  }
  std::unique_ptr<Task> finished;
  {
    absl::MutexLock lock(&mu_);
    if (!status.ok()) {
      UndoChunkLocked(chunk);
      return status;
    }
    Task& task = *tasks_.front();
    task.count += chunk.count;
    if (chunk.finished) {
      finished = std::move(tasks_.front());
      tasks_.pop_front();
      if (finished->kind == Task::Kind::kDeleteGroup) {
        // Nothing of it is left: no entries, no dispatch or ack in progress.
        Group* group = finished->group;
        for (auto& [sequence, entry] : group->in_flight)
          ClearTimerLocked(entry);
        topics_[group->topic].erase(group->name);
        if (topics_[finished->topic].empty()) topics_.erase(finished->topic);
      }
    }
  }
  if (finished != nullptr) std::move(finished->done)(finished->count);
  return true;
}

absl::Status Dispatcher::BuildChunkLocked(Task& task, TaskChunk& chunk) {
  switch (task.kind) {
    case Task::Kind::kPurgeReady:
      return PurgeChunkLocked(task, chunk);
    case Task::Kind::kDeleteGroup:
      return DeleteGroupChunkLocked(task, chunk);
    case Task::Kind::kRedrive:
      return RedriveChunkLocked(task, chunk);
  }
  return absl::InternalError("unknown task");
}

absl::StatusOr<size_t> Dispatcher::RemoveReadyLocked(
    Task& task, TaskChunk& chunk, const std::string& stored_under,
    Group* holder, size_t limit) {
  DueKey& position = task.positions[stored_under];
  std::vector<DueKey> keys;
  absl::Status scanned =
      lifecycle::ScanReady(*store_, task.topic, stored_under, position,
                           [&](const DueKey& due, uint32_t) {
                             // A dispatch still being written: it came due
                             // after the task started, and is left alone.
                             if (!pending_ready_.contains(due.sequence))
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

absl::StatusOr<bool> Dispatcher::DeleteIfUnheldLocked(const std::string& topic,
                                                      const DueKey& key,
                                                      const Group* except,
                                                      TaskChunk& chunk) {
  if (chunk.deleted.contains(key.sequence)) return false;
  absl::StatusOr<bool> held = HeldLocked(topic, key, except, &chunk.removing);
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

absl::Status Dispatcher::PurgeChunkLocked(Task& task, TaskChunk& chunk) {
  // Every place ready entries of the topic live: each group's own name and
  // the waiting area, with the group whose window holds them.
  std::vector<std::pair<std::string, Group*>> queues;
  Group* area_holder = nullptr;
  auto t = topics_.find(task.topic);
  if (t != topics_.end()) {
    for (auto& [name, group] : t->second) {
      queues.emplace_back(name, group.get());
      if (group->owns_waiting_area) area_holder = group.get();
    }
  }
  queues.emplace_back("", area_holder);
  size_t read = 0;
  for (const auto& [stored_under, holder] : queues) {
    absl::StatusOr<size_t> n =
        RemoveReadyLocked(task, chunk, stored_under, holder, kChunk - read);
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
        DeleteIfUnheldLocked(task.topic, key, nullptr, chunk);
    if (!deleted.ok()) return deleted.status();
    if (*deleted) ++chunk.count;
  }
  return absl::OkStatus();
}

absl::Status Dispatcher::DeleteGroupChunkLocked(Task& task, TaskChunk& chunk) {
  Group& group = *task.group;
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
        RemoveReadyLocked(task, chunk, group.name, &group, kChunk - read);
    if (!n.ok()) return n.status();
    read += *n;
    if (group.owns_waiting_area && read < kChunk) {
      n = RemoveReadyLocked(task, chunk, "", &group, kChunk - read);
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
        DeleteIfUnheldLocked(group.topic, key, &group, chunk);
    if (!deleted.ok()) return deleted.status();
  }
  if (read > 0) return absl::OkStatus();
  // Nothing left on disk or in memory. The group goes once no dispatch or
  // ack in progress still refers to it.
  for (const auto& [ticket, pending] : dispatching_) {
    for (const PendingDispatch& p : pending) {
      if (p.group == &group) return absl::OkStatus();  // Next step.
    }
  }
  for (const Finished& f : finished_) {
    if (f.group == &group) return absl::OkStatus();
  }
  if (!group.finishing.empty()) return absl::OkStatus();
  lifecycle::UnregisterGroup(chunk.changes, group.topic, group.name);
  chunk.finished = true;
  return absl::OkStatus();
}

absl::Status Dispatcher::RedriveChunkLocked(Task& task, TaskChunk& chunk) {
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
  std::vector<std::pair<DueKey, std::string>> busy;
  auto t = topics_.find(dead_topic);
  for (size_t i = 0; i < n; ++i) {
    const auto& [key, id] = task.chosen[i];
    // A letter just published (still scheduled), coming due (its dispatch
    // being written) or with an ack being written waits for a later chunk.
    absl::StatusOr<bool> scheduled = lifecycle::IsScheduled(*store_, key);
    if (!scheduled.ok()) return scheduled.status();
    bool wait = *scheduled || pending_ready_.contains(key.sequence);
    if (t != topics_.end()) {
      for (auto& [name, group] : t->second) {
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
    message.deliver_at = clock_->Now();
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
    if (t != topics_.end()) {
      for (auto& [name, group_ptr] : t->second) {
        Group& group = *group_ptr;
        if (std::optional<ReadyItem> item = group.window.Erase(key)) {
          chunk.from_windows.emplace_back(&group, *item);
        }
        auto entry = group.in_flight.find(key.sequence);
        if (entry != group.in_flight.end()) {
          ReleaseFromOwnerLocked(entry->second);
          ClearTimerLocked(entry->second);
          group.redeliverable.erase(key);
          chunk.from_in_flight.emplace_back(&group, std::move(entry->second));
          group.in_flight.erase(entry);
        }
        groups.push_back(name);
      }
    }
    // Ready entries: under each group's name and the waiting area. Deleting
    // an absent key is harmless, but the counters must only count present
    // ones.
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
    // Scheduled letters come due within milliseconds; give up on them only
    // after many chunks found them busy.
    if (chunk.count == 0 && ++task.deferrals > 1000) {
      return absl::UnavailableError(
          "dead letters stayed busy; retry the redrive");
    }
    task.chosen.insert(task.chosen.end(), busy.begin(), busy.end());
  }
  chunk.finished = !task.all && task.chosen.empty();
  return absl::OkStatus();
}

void Dispatcher::UndoChunkLocked(TaskChunk& chunk) {
  for (auto& [group, item] : chunk.from_windows) group->window.Add(item);
  for (auto& [group, entry] : chunk.from_in_flight) {
    const DueKey key = entry.key;
    entry.owner = nullptr;
    entry.timer.reset();
    entry.token = next_token_++;
    group->in_flight.insert_or_assign(key.sequence, std::move(entry));
    if (!group->deleting) group->redeliverable.insert(key);
  }
  chunk.from_windows.clear();
  chunk.from_in_flight.clear();
  WakeLocked();
}

}  // namespace hourglass::broker
