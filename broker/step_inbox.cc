#include "broker/step_inbox.h"

#include <algorithm>
#include <map>

namespace hourglass::broker {

void StepInbox::Post(ConsumerEvent event) {
  absl::MutexLock lock(&mu_);
  work_.events.push_back(std::move(event));
  wake_ = true;
}

void StepInbox::Call(absl::AnyInvocable<void() &&> call) {
  absl::MutexLock lock(&mu_);
  work_.calls.push_back(std::move(call));
  wake_ = true;
}

StepInbox::ReadyMove StepInbox::BeginReady(std::vector<ReadyEntry> entries) {
  absl::MutexLock lock(&mu_);
  const uint64_t ticket = next_ticket_++;
  for (const ReadyEntry& entry : entries) {
    ++pending_[entry.key.sequence];
    if (entry.group != 0) ++pending_groups_[entry.group];
  }
  moves_.emplace(ticket, Move{std::move(entries)});
  return ReadyMove(this, ticket);
}

void StepInbox::ReadyMove::End(bool written) && {
  StepInbox* inbox = std::exchange(inbox_, nullptr);
  inbox->EndReady(ticket_, written);
}

void StepInbox::EndReady(uint64_t ticket, bool written) {
  absl::MutexLock lock(&mu_);
  Move& move = moves_.at(ticket);
  move.ended = true;
  move.written = written;
  wake_ = true;
}

StepInbox::Work StepInbox::Take() {
  absl::MutexLock lock(&mu_);
  Work work = std::exchange(work_, Work());
  // The ended moves, in the order they began.
  std::map<uint64_t, Move*> ended;
  for (auto& [ticket, move] : moves_) {
    if (move.ended) ended.emplace(ticket, &move);
  }
  for (auto& [ticket, move] : ended) {
    for (const ReadyEntry& entry : move->entries) {
      auto p = pending_.find(entry.key.sequence);
      if (--p->second == 0) pending_.erase(p);
      if (entry.group == 0) continue;
      auto g = pending_groups_.find(entry.group);
      if (--g->second == 0) pending_groups_.erase(g);
    }
    work.ready.push_back({std::move(move->entries), move->written});
    moves_.erase(ticket);
  }
  return work;
}

bool StepInbox::IsPending(uint64_t sequence) const {
  absl::MutexLock lock(&mu_);
  return pending_.contains(sequence);
}

bool StepInbox::NamesGroup(GroupId id) const {
  absl::MutexLock lock(&mu_);
  return pending_groups_.contains(id);
}

void StepInbox::Wake() {
  absl::MutexLock lock(&mu_);
  wake_ = true;
}

bool StepInbox::Wait(absl::Duration timeout, bool wake_on_work) {
  absl::MutexLock lock(&mu_);
  wake_on_work_ = wake_on_work;
  mu_.AwaitWithTimeout(
      absl::Condition(
          +[](StepInbox* inbox) ABSL_EXCLUSIVE_LOCKS_REQUIRED(inbox->mu_) {
            return (inbox->wake_ && inbox->wake_on_work_) || inbox->stopping_;
          },
          this),
      timeout);
  wake_ = false;
  return !stopping_;
}

void StepInbox::Stop() {
  absl::MutexLock lock(&mu_);
  stopping_ = true;
}

}  // namespace hourglass::broker
