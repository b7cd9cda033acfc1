#include "tests/cluster/ledger.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace hourglass::testing {

std::string Ledger::Report::ToString() const {
  std::string line = absl::StrCat(
      "acknowledged ", acknowledged, ", uncertain ", uncertain, ", cancelled ",
      cancelled, ", delivered ", delivered, " (", deliveries, " deliveries, ",
      duplicates, " duplicates, ", other_copies, " of other copies); lost ",
      lost, ", after cancel ", after_cancel, ", early ", early,
      ", cancel not found ", cancel_missing);
  if (!examples.empty()) {
    absl::StrAppend(&line, "; e.g. ", absl::StrJoin(examples, ", "));
  }
  return line;
}

void Ledger::Published(const std::string& id, absl::Time deliver_at) {
  absl::MutexLock lock(&mu_);
  Entry& e = entries_[id];
  e.acknowledged = true;
  e.acknowledged_at = absl::Now();
  e.deliver_at = deliver_at;
}

void Ledger::PublishUncertain(const std::string& id) {
  absl::MutexLock lock(&mu_);
  entries_[id].publish_uncertain = true;
}

void Ledger::Cancelled(const std::string& id) {
  absl::MutexLock lock(&mu_);
  entries_[id].cancel_acknowledged = true;
}

void Ledger::CancelUncertain(const std::string& id) {
  absl::MutexLock lock(&mu_);
  entries_[id].cancel_uncertain = true;
}

void Ledger::CancelNotFound(const std::string& id, absl::Time answered_at) {
  absl::MutexLock lock(&mu_);
  Entry& e = entries_[id];
  // Only an answer given before the message came due proves it missing: a
  // due message is no longer scheduled, and NOT_FOUND is then right.
  if (e.acknowledged && answered_at < e.deliver_at) e.cancel_missing = true;
}

void Ledger::Delivered(const std::string& id, absl::Time received_at,
                       absl::Time deliver_at) {
  absl::MutexLock lock(&mu_);
  entries_[id].deliveries.push_back({received_at, deliver_at});
}

bool Ledger::Owed(const Entry& e) {
  return e.acknowledged && !e.cancel_acknowledged && !e.cancel_uncertain;
}

int64_t Ledger::Outstanding() const {
  absl::MutexLock lock(&mu_);
  return std::count_if(entries_.begin(), entries_.end(), [](const auto& kv) {
    return Owed(kv.second) && kv.second.deliveries.empty();
  });
}

absl::Time Ledger::LastDue() const {
  absl::MutexLock lock(&mu_);
  absl::Time last = absl::InfinitePast();
  for (const auto& [id, e] : entries_) {
    if (e.acknowledged) last = std::max(last, e.deliver_at);
  }
  return last;
}

std::string Ledger::Describe(const std::string& id) const {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return absl::StrCat(id, ": never published");
  const Entry& e = it->second;
  auto at = [](absl::Time t) {
    return absl::FormatTime("%H:%M:%E3S", t, absl::UTCTimeZone());
  };
  std::string line = id;
  if (e.acknowledged) {
    absl::StrAppend(&line, ": acknowledged at ", at(e.acknowledged_at),
                    ", due at ", at(e.deliver_at));
  } else {
    absl::StrAppend(&line, ": not acknowledged");
  }
  if (e.publish_uncertain) absl::StrAppend(&line, ", an attempt failed");
  if (e.cancel_acknowledged) absl::StrAppend(&line, ", cancelled");
  if (e.cancel_uncertain) absl::StrAppend(&line, ", a cancel failed");
  absl::StrAppend(&line, ", ", e.deliveries.size(), " deliveries");
  return line;
}

Ledger::Report Ledger::Check() const {
  absl::MutexLock lock(&mu_);
  Report r;
  auto example = [&r](const char* what, const std::string& id) {
    if (r.examples.size() < 10)
      r.examples.push_back(absl::StrCat(what, " ", id));
  };
  for (const auto& [id, e] : entries_) {
    if (e.acknowledged) ++r.acknowledged;
    if (e.publish_uncertain && !e.acknowledged) ++r.uncertain;
    if (e.cancel_acknowledged) ++r.cancelled;
    if (!e.deliveries.empty()) ++r.delivered;
    r.deliveries += static_cast<int64_t>(e.deliveries.size());
    if (e.deliveries.size() > 1) {
      r.duplicates += static_cast<int64_t>(e.deliveries.size()) - 1;
    }
    if (Owed(e) && e.deliveries.empty()) {
      ++r.lost;
      example("lost", id);
    }
    if (e.cancel_missing) {
      ++r.cancel_missing;
      example("cancel-not-found", id);
    }
    for (const Entry::Delivery& d : e.deliveries) {
      const bool acknowledged_copy = d.deliver_at == e.deliver_at;
      if (e.acknowledged && !acknowledged_copy) ++r.other_copies;
      if (e.cancel_acknowledged && acknowledged_copy) {
        ++r.after_cancel;
        example("after-cancel", id);
      }
      if (d.received_at < d.deliver_at) {
        ++r.early;
        example("early", id);
      }
    }
  }
  return r;
}

}  // namespace hourglass::testing
