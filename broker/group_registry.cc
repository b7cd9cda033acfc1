#include "broker/group_registry.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "broker/lifecycle.h"
#include "broker/lifecycle_reads.h"
#include "broker/publisher.h"

namespace hourglass::broker {

GroupRegistry::GroupRegistry(storage::MessageStore* store,
                             storage::CommitQueue* commits, Clock* clock,
                             Options options)
    : store_(store), commits_(commits), clock_(clock), options_(options) {}

absl::StatusOr<std::unique_ptr<GroupRegistry>> GroupRegistry::Open(
    storage::MessageStore* store, storage::CommitQueue* commits, Clock* clock,
    Options options) {
  absl::StatusOr<std::vector<lifecycle::StoredGroup>> stored =
      lifecycle::ReadGroups(*store);
  if (!stored.ok()) return stored.status();
  std::unique_ptr<GroupRegistry> registry(
      new GroupRegistry(store, commits, clock, options));
  // By topic, in name order (ReadGroups' order).
  std::map<std::string, std::vector<Group>> topics;
  for (lifecycle::StoredGroup& g : *stored) {
    topics[g.topic].push_back(Group{
        0, g.topic, g.group, absl::FromUnixMillis(g.record.created_at_ms()),
        g.record.owns_waiting_area()});
  }
  absl::MutexLock lock(&registry->mu_);
  for (auto& [topic, groups] : topics) {
    if (std::none_of(groups.begin(), groups.end(),
                     [](const Group& g) { return g.owns_waiting_area; })) {
      std::min_element(groups.begin(), groups.end(),
                       [](const Group& a, const Group& b) {
                         return a.created_at < b.created_at;
                       })
          ->owns_waiting_area = true;
    }
    for (Group& g : groups) registry->AddLocked(std::move(g));
  }
  return registry;
}

void GroupRegistry::SetOnAdded(
    absl::AnyInvocable<void(const Group&)> on_added) {
  absl::MutexLock lock(&mu_);
  on_added_ = std::move(on_added);
}

GroupRegistry::Entry* GroupRegistry::FindLocked(std::string_view topic,
                                                std::string_view group) const {
  auto t = topics_.find(topic);
  if (t == topics_.end()) return nullptr;
  auto g = t->second.find(std::string(group));
  return g == t->second.end() ? nullptr : g->second.get();
}

GroupRegistry::Entry& GroupRegistry::AddLocked(Group group) {
  group.id = next_id_++;
  auto entry = std::make_unique<Entry>();
  entry->group = std::move(group);
  Entry& added = *entry;
  by_id_[added.group.id] = &added;
  topics_[added.group.topic][added.group.name] = std::move(entry);
  return added;
}

absl::Status GroupRegistry::CheckLimitLocked(const std::string& topic) const {
  if (options_.max_groups_per_topic == 0) return absl::OkStatus();
  size_t groups = 0;
  if (auto t = topics_.find(topic); t != topics_.end()) {
    for (const auto& [name, entry] : t->second) {
      if (!entry->deleting) ++groups;
    }
  }
  for (auto r = registering_.lower_bound({topic, ""});
       r != registering_.end() && r->first.first == topic; ++r) {
    ++groups;
  }
  if (groups < options_.max_groups_per_topic) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "topic ", Quoted(topic), " has ", groups, " groups; the limit is ",
      options_.max_groups_per_topic, " (--max_groups_per_topic)"));
}

void GroupRegistry::Register(std::string topic, std::string group,
                             bool must_be_new, Done done) {
  absl::Status refused;
  {
    absl::MutexLock lock(&mu_);
    auto waiting = registering_.find({topic, group});
    if (FindLocked(topic, group) == nullptr) {
      if (waiting != registering_.end()) {
        if (!must_be_new) {
          waiting->second.push_back(std::move(done));
          return;
        }
      } else {
        refused = CheckLimitLocked(topic);
        if (refused.ok()) {
          // The topic's first group also takes its waiting area.
          // Registrations of one topic are decided here one at a time, so
          // only one is first; and each is queued before the lock is
          // released, so the first reaches the store first and a crash
          // never keeps a later one without it.
          auto t = topics_.find(topic);
          auto same_topic = registering_.lower_bound({topic, ""});
          const bool owns_waiting_area =
              (t == topics_.end() || t->second.empty()) &&
              !(same_topic != registering_.end() &&
                same_topic->first.first == topic);
          registering_[{topic, group}].push_back(std::move(done));
          Group registered{
              0, std::move(topic), std::move(group),
              absl::FromUnixMillis(absl::ToUnixMillis(clock_->Now())),
              owns_waiting_area};
          storage::GroupRecord record;
          record.set_created_at_ms(absl::ToUnixMillis(registered.created_at));
          record.set_owns_waiting_area(owns_waiting_area);
          Changes changes;
          lifecycle::RegisterGroup(changes, registered.topic, registered.name,
                                   record);
          commits_->Submit(changes.Take(), [this,
                                            registered = std::move(registered)](
                                               absl::Status status) mutable {
            std::vector<Done> waiters;
            {
              absl::MutexLock lock(&mu_);
              auto it = registering_.find({registered.topic, registered.name});
              waiters = std::move(it->second);
              registering_.erase(it);
              if (status.ok()) {
                Entry& added = AddLocked(std::move(registered));
                if (on_added_) on_added_(added.group);
              }
            }
            for (Done& waiter : waiters) std::move(waiter)(status);
          });
          return;
        }
      }
    }
  }
  if (!refused.ok()) {
    std::move(done)(std::move(refused));
    return;
  }
  // The group exists, or is being registered and must be new.
  std::move(done)(must_be_new ? absl::AlreadyExistsError(absl::StrCat(
                                    "group ", Quoted(group), " of topic ",
                                    Quoted(topic), " already exists"))
                              : absl::OkStatus());
}

bool GroupRegistry::Exists(std::string_view topic,
                           std::string_view group) const {
  absl::MutexLock lock(&mu_);
  const Entry* entry = FindLocked(topic, group);
  return entry != nullptr && !entry->deleting;
}

void GroupRegistry::VisitTakers(
    absl::Span<const std::string_view> topics,
    absl::FunctionRef<void(size_t index, absl::Span<const Taker> takers)> visit,
    absl::FunctionRef<void()> then) const {
  std::vector<Taker> takers;
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < topics.size(); ++i) {
    takers.clear();
    if (auto t = topics_.find(topics[i]); t != topics_.end()) {
      for (const auto& [name, entry] : t->second) {
        if (!entry->deleting) takers.push_back({entry->group.id, name});
      }
    }
    visit(i, takers);
  }
  then();
}

absl::StatusOr<GroupRegistry::GroupId> GroupRegistry::BeginDelete(
    std::string_view topic, std::string_view group) {
  absl::MutexLock lock(&mu_);
  Entry* entry = FindLocked(topic, group);
  if (entry == nullptr || entry->deleting) {
    return absl::NotFoundError(
        absl::StrCat("no group ", Quoted(group), " in topic ", Quoted(topic)));
  }
  entry->deleting = true;
  return entry->group.id;
}

void GroupRegistry::EndDelete(GroupId id) {
  absl::MutexLock lock(&mu_);
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return;
  const std::string topic = it->second->group.topic;
  const std::string name = it->second->group.name;
  by_id_.erase(it);
  auto t = topics_.find(topic);
  t->second.erase(name);
  if (t->second.empty()) topics_.erase(t);
}

void GroupRegistry::SetCounts(GroupId id, size_t in_flight, size_t consumers) {
  absl::MutexLock lock(&mu_);
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return;
  it->second->in_flight = in_flight;
  it->second->consumers = consumers;
}

std::vector<GroupRegistry::Group> GroupRegistry::All() const {
  absl::MutexLock lock(&mu_);
  std::vector<Group> all;
  for (const auto& [topic, groups] : topics_) {
    for (const auto& [name, entry] : groups) all.push_back(entry->group);
  }
  return all;
}

std::vector<GroupRegistry::Info> GroupRegistry::Groups() const {
  absl::MutexLock lock(&mu_);
  std::vector<Info> groups;
  for (const auto& [topic, by_name] : topics_) {
    for (const auto& [name, entry] : by_name) {
      if (entry->deleting) continue;
      groups.push_back({topic, name, entry->group.created_at, entry->in_flight,
                        entry->consumers, entry->group.owns_waiting_area});
    }
  }
  return groups;
}

}  // namespace hourglass::broker
