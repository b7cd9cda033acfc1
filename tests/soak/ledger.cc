#include "tests/soak/ledger.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace hourglass::soak {
namespace {

// Violations kept word for word; beyond it they are only counted.
constexpr size_t kMaxViolationTexts = 1000;

std::string Show(absl::Time t) {
  return absl::FormatTime("%H:%M:%E3S", t, absl::UTCTimeZone());
}

}  // namespace

std::string GroupName(int group) { return absl::StrCat("g", group + 1); }

std::string Ledger::Payload(const std::string& id, size_t size) {
  std::string payload;
  payload.reserve(size);
  while (payload.size() < size) {
    payload.append(id).push_back('.');
  }
  payload.resize(size);
  return payload;
}

Ledger::Ledger(std::string topic, int groups, uint32_t max_attempts)
    : topic_(std::move(topic)), groups_(groups), max_attempts_(max_attempts) {}

uint64_t Ledger::OwedBy(const Message& m) const {
  if (!m.succeeded || m.refusable || m.cancel == Cancel::kSucceeded ||
      m.cancel == Cancel::kUnknown) {
    return 0;
  }
  return std::count_if(m.groups.begin(), m.groups.end(),
                       [](const GroupState& g) { return !g.acked; });
}

template <typename F>
void Ledger::Change(Message& m, F change) {
  const uint64_t before = OwedBy(m);
  change(m);
  owed_ = owed_ - before + OwedBy(m);
}

void Ledger::Violation(std::string text) {
  ++counts_.violations;
  if (violations_.size() < kMaxViolationTexts) {
    violations_.push_back(std::move(text));
  }
}

void Ledger::AddViolation(std::string text) {
  absl::MutexLock lock(&mu_);
  Violation(std::move(text));
}

void Ledger::NewMessage(const std::string& id, size_t payload_size,
                        absl::Time earliest, bool refusable) {
  absl::MutexLock lock(&mu_);
  auto [it, inserted] = messages_.try_emplace(id);
  if (!inserted) {
    Violation(absl::StrCat("soak bug: id ", id, " used twice"));
    return;
  }
  Message& m = it->second;
  m.earliest = earliest;
  m.payload_size = static_cast<uint32_t>(payload_size);
  m.refusable = refusable;
  m.attempts = 1;
  m.in_progress = 1;
  m.groups.resize(groups_);
}

void Ledger::PublishStarted(const std::string& id) {
  absl::MutexLock lock(&mu_);
  Message& m = messages_[id];
  ++m.attempts;
  ++m.in_progress;
}

void Ledger::PublishSucceeded(const std::string& id,
                              const client::Receipt& receipt) {
  absl::MutexLock lock(&mu_);
  Message& m = messages_[id];
  --m.in_progress;
  if (receipt.id != id) {
    Violation(
        absl::StrCat("publish of ", id, ": the receipt names id ", receipt.id));
  }
  const absl::Time deliver_at = receipt.deliver_at;
  if (deliver_at < m.earliest) {
    Violation(absl::StrCat("publish of ", id, ": receipt deliver_at ",
                           Show(deliver_at), " is before the earliest ",
                           Show(m.earliest), " the request allows"));
  }
  if (receipt.duplicate) {
    ++counts_.duplicates;
    // Only an earlier attempt with an unknown outcome may have stored it
    // (the soak never reuses an id).
    if (!m.unknown) {
      Violation(absl::StrCat("publish of ", id,
                             ": receipt says duplicate, but no earlier "
                             "attempt can have stored it"));
    }
  }
  Change(m, [&](Message& m) {
    m.receipt_deliver_at = deliver_at;
    m.succeeded = true;
  });
}

void Ledger::PublishRefused(const std::string& id) {
  absl::MutexLock lock(&mu_);
  --messages_[id].in_progress;
}

void Ledger::PublishUnknown(const std::string& id) {
  absl::MutexLock lock(&mu_);
  Message& m = messages_[id];
  --m.in_progress;
  m.unknown = true;
}

void Ledger::CancelSucceeded(const std::string& id, absl::Time answered_at) {
  absl::MutexLock lock(&mu_);
  ++counts_.cancelled;
  Message& m = messages_[id];
  // The canceller only cancels messages whose publish succeeded: the copy
  // cancelled is the one the last receipt describes.
  bool other_copy = false;
  for (int g = 0; g < groups_; ++g) {
    for (const Seen& seen : m.groups[g].seen) {
      if (seen.deliver_at != m.receipt_deliver_at) {
        other_copy = true;
        continue;
      }
      Violation(absl::StrCat("cancel of ", id, " (deliver_at ",
                             Show(m.receipt_deliver_at), ") succeeded at ",
                             Show(answered_at), ", but ", GroupName(g),
                             " had received it as attempt ", seen.attempt,
                             " at ", Show(seen.arrived)));
    }
  }
  if (other_copy) ++counts_.cancelled_second_copies;
  Change(m, [](Message& m) {
    m.cancel = Cancel::kSucceeded;
    m.cancelled_deliver_at = m.receipt_deliver_at;
  });
}

void Ledger::CancelNotFound(const std::string& id, absl::Time answered_at) {
  absl::MutexLock lock(&mu_);
  ++counts_.cancel_not_found;
  Message& m = messages_[id];
  // The canceller only cancels messages whose publish succeeded: one not
  // yet due must still be scheduled.
  if (answered_at < m.receipt_deliver_at) {
    Violation(absl::StrCat("cancel of ", id, " answered NOT_FOUND at ",
                           Show(answered_at), ", before its deliver_at ",
                           Show(m.receipt_deliver_at),
                           ": the broker lost a scheduled message"));
  }
  Change(m, [](Message& m) { m.cancel = Cancel::kNotFound; });
}

void Ledger::CancelUnknown(const std::string& id) {
  absl::MutexLock lock(&mu_);
  ++counts_.cancel_unknown;
  Change(messages_[id], [](Message& m) { m.cancel = Cancel::kUnknown; });
}

void Ledger::CheckDelivery(const std::string& group_name, const Message& m,
                           const client::Delivery& d, absl::Time arrived) {
  const std::string what =
      absl::StrCat(d.id, " (attempt ", d.attempt, ") to ", group_name);
  const absl::Time deliver_at = d.deliver_at;
  if (arrived < deliver_at) {
    Violation(absl::StrCat("early: ", what, " arrived at ", Show(arrived),
                           ", before its deliver_at ", Show(deliver_at)));
  }
  if (deliver_at < m.earliest) {
    Violation(absl::StrCat("early: ", what, " has deliver_at ",
                           Show(deliver_at), ", before the earliest ",
                           Show(m.earliest), " its publish allows"));
  }
  // A message published once has one deliver_at; after a retry the copy
  // delivered may be either attempt's.
  if (m.attempts == 1 && m.succeeded && deliver_at != m.receipt_deliver_at) {
    Violation(absl::StrCat(what, " has deliver_at ", Show(deliver_at),
                           ", its receipt said ", Show(m.receipt_deliver_at)));
  }
  if (m.refusable) {
    Violation(absl::StrCat(what,
                           " was delivered, but its batch held a bad "
                           "message and must have been refused"));
  }
  if (m.cancel == Cancel::kSucceeded && deliver_at == m.cancelled_deliver_at) {
    Violation(absl::StrCat(what, " was delivered at ", Show(arrived),
                           " after its cancel succeeded"));
  }
  if (d.topic != topic_) {
    Violation(absl::StrCat(what, " names topic ", d.topic));
  }
  if (d.payload != Payload(d.id, m.payload_size)) {
    Violation(absl::StrCat(what, " has a payload of ", d.payload.size(),
                           " bytes unlike the ", m.payload_size, " published"));
  }
  auto header = d.headers.find("soak-id");
  if (d.headers.size() != 1 || header == d.headers.end() ||
      header->second != d.id) {
    Violation(absl::StrCat(what, " lost or changed its headers"));
  }
  if (d.attempt < 1 || d.attempt > max_attempts_) {
    Violation(absl::StrCat(what, ": attempt out of [1, ", max_attempts_, "]"));
  }
}

void Ledger::Delivered(int group, const client::Delivery& delivery,
                       absl::Time arrived) {
  absl::MutexLock lock(&mu_);
  ++counts_.deliveries;
  if (delivery.attempt > 1) ++counts_.redeliveries;
  const std::string group_name = GroupName(group);
  auto it = messages_.find(delivery.id);
  if (it == messages_.end()) {
    Violation(absl::StrCat("unknown id ", delivery.id, " (attempt ",
                           delivery.attempt, ") delivered to ", group_name));
    return;
  }
  Message& m = it->second;
  CheckDelivery(group_name, m, delivery, arrived);
  GroupState& g = m.groups[group];
  if (g.acked) ++counts_.after_ack;
  // Attempts rise with each delivery of a copy to a group (they survive
  // restarts in the inflight table).
  const absl::Time deliver_at = delivery.deliver_at;
  for (const Seen& seen : g.seen) {
    if (seen.deliver_at == deliver_at && seen.attempt == delivery.attempt) {
      Violation(absl::StrCat(delivery.id, " delivered to ", group_name,
                             " twice as attempt ", delivery.attempt, ", at ",
                             Show(seen.arrived), " and ", Show(arrived)));
      break;
    }
  }
  g.seen.push_back({deliver_at, delivery.attempt, arrived});
}

void Ledger::Acked(int group, const std::string& id) {
  absl::MutexLock lock(&mu_);
  ++counts_.acks;
  auto it = messages_.find(id);
  if (it == messages_.end()) return;  // Delivered reported it.
  Change(it->second, [group](Message& m) { m.groups[group].acked = true; });
}

bool Ledger::AwaitSettled(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto settled = [this]()
                     ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return owed_ == 0; };
  return mu_.AwaitWithDeadline(absl::Condition(&settled), deadline);
}

Ledger::Counts Ledger::counts() const {
  absl::MutexLock lock(&mu_);
  Counts counts = counts_;
  counts.owed = owed_;
  for (const auto& [id, m] : messages_) {
    ++counts.messages;
    if (m.succeeded) {
      ++counts.published;
    } else if (m.unknown) {
      ++counts.unknown_only;
    } else {
      ++counts.refused;
    }
    if (m.attempts > 1) ++counts.retried;
  }
  return counts;
}

std::vector<std::string> Ledger::Verify() {
  absl::MutexLock lock(&mu_);
  // Sorted, so that a run's report reads the same way each time.
  std::vector<const std::pair<const std::string, Message>*> sorted;
  sorted.reserve(messages_.size());
  for (const auto& entry : messages_) sorted.push_back(&entry);
  std::sort(sorted.begin(), sorted.end(),
            [](const auto* a, const auto* b) { return a->first < b->first; });
  for (const auto* entry : sorted) {
    const std::string& id = entry->first;
    const Message& m = entry->second;
    if (m.in_progress != 0) {
      Violation(absl::StrCat("soak bug: ", id, " has ", m.in_progress,
                             " publish attempts without an outcome"));
    }
    for (int g = 0; g < groups_; ++g) {
      const GroupState& group = m.groups[g];
      if (OwedBy(m) > 0 && !group.acked) {
        Violation(absl::StrCat("lost: ", id, " (publish succeeded, deliver_at ",
                               Show(m.receipt_deliver_at), ") never acked by ",
                               GroupName(g), "; delivered ", group.seen.size(),
                               " time(s)"));
      }
      // Refused messages were reported at delivery; here the ones whose
      // every attempt was refused without the batch being bad.
      if (!m.succeeded && !m.unknown && !m.refusable && !group.seen.empty()) {
        Violation(absl::StrCat("phantom: ", id, " delivered to ", GroupName(g),
                               " though every publish of it was refused"));
      }
    }
  }
  return violations_;
}

}  // namespace hourglass::soak
