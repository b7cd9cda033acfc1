#ifndef HOURGLASS_BROKER_GROUP_REGISTRY_H_
#define HOURGLASS_BROKER_GROUP_REGISTRY_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "broker/clock.h"
#include "storage/commit_queue.h"
#include "storage/message_store.h"

namespace hourglass::broker {

// The consumer groups of every topic: which exist, which one takes its
// topic's waiting area (messages that came due while the topic had no
// group), which are being deleted; their durable registration; and what
// introspection shows of each. A group's delivery state (its ready window,
// in-flight entries and consumers) is the dispatcher step's
// (delivery_state.h); the registry tells the step of each group it adds
// before anyone else can see the group, so that anything naming a group
// reaches the step after the group does.
//
// Each group has a number, unique for the life of the registry, that
// names it across threads (GroupId); 0 names no group.
//
// Thread-safe. Its lock is never held during I/O: a registration is
// written through the commit queue, and the registry changes once it is
// durable. Lock order: the registry's, then the step inbox's.
class GroupRegistry {
 public:
  using GroupId = uint64_t;

  struct Options {
    // Most groups of one topic (each group multiplies every later message
    // of its topic); 0: no limit. Default: 64.
    size_t max_groups_per_topic = 64;
  };

  // A registered group.
  struct Group {
    GroupId id = 0;
    std::string topic;
    std::string name;
    absl::Time created_at;
    // The topic's first group: it also takes the topic's waiting area.
    bool owns_waiting_area = false;
  };

  // What Groups lists of a group.
  struct Info {
    std::string topic;
    std::string group;
    absl::Time created_at;
    size_t in_flight = 0;  // Deliveries not yet acknowledged.
    size_t consumers = 0;  // Connected streams.
    bool owns_waiting_area = false;
  };

  using Done = absl::AnyInvocable<void(absl::Status) &&>;

  // Reads the registered groups (lifecycle::ReadGroups). A topic none of
  // whose groups owns its waiting area (its owner was deleted, or its
  // registration failed while a later one's did not) hands it to its
  // oldest group, so that nothing left there waits for ever.
  // REQUIRES: the pointers outlive the registry.
  static absl::StatusOr<std::unique_ptr<GroupRegistry>> Open(
      storage::MessageStore* store, storage::CommitQueue* commits, Clock* clock,
      Options options);

  GroupRegistry(const GroupRegistry&) = delete;
  GroupRegistry& operator=(const GroupRegistry&) = delete;

  // Who is told of each group registered from now on, under the
  // registry's lock (so before anyone can see the group): it must not
  // block nor call the registry. Set once, before any Register.
  void SetOnAdded(absl::AnyInvocable<void(const Group&)> on_added);

  // Registers `group` on `topic`, durably. `done` gets OK (also if the
  // group exists, or is being deleted, and `must_be_new` is false),
  // ALREADY_EXISTS if it exists, is being deleted or is being registered
  // and `must_be_new`, RESOURCE_EXHAUSTED if the topic has
  // Options::max_groups_per_topic groups, or the store's error. `done` runs
  // on the commit queue's thread, or at once on this one, and must not
  // block.
  void Register(std::string topic, std::string group, bool must_be_new,
                Done done);

  // Whether `group` of `topic` is registered and not being deleted.
  bool Exists(std::string_view topic, std::string_view group) const;

  // A group that takes what comes due now: registered, not being deleted.
  struct Taker {
    GroupId id;
    std::string_view name;  // Valid until the group's EndDelete.
  };
  // For each of `topics`, calls `visit` with the topic's takers in name
  // order (none: its waiting area), then `then`, all under the registry's
  // lock (they must not block nor call the registry): a group named by
  // `visit` cannot begin being deleted before `then` returns, so `then`
  // can make it wait (see StepInbox::BeginReady).
  void VisitTakers(
      absl::Span<const std::string_view> topics,
      absl::FunctionRef<void(size_t index, absl::Span<const Taker> takers)>
          visit,
      absl::FunctionRef<void()> then) const;

  // Starts deleting `group` of `topic`: from now on it takes nothing new
  // and does not exist for Register or Exists. Its id, or NOT_FOUND.
  absl::StatusOr<GroupId> BeginDelete(std::string_view topic,
                                      std::string_view group);
  // Forgets a group whose deletion is complete (its entries are gone and
  // its registration deleted).
  void EndDelete(GroupId id);

  // The counts Groups shows of `id`: the step's, as they change.
  void SetCounts(GroupId id, size_t in_flight, size_t consumers);

  // Every registered group, with or without those being deleted.
  std::vector<Group> All() const;
  // Every group not being deleted, by topic and name.
  std::vector<Info> Groups() const;

 private:
  struct Entry {
    Group group;
    bool deleting = false;
    size_t in_flight = 0;
    size_t consumers = 0;
  };

  GroupRegistry(storage::MessageStore* store, storage::CommitQueue* commits,
                Clock* clock, Options options);

  // OK, or RESOURCE_EXHAUSTED if `topic` has max_groups_per_topic groups,
  // counting those being registered.
  absl::Status CheckLimitLocked(const std::string& topic) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Entry* FindLocked(std::string_view topic, std::string_view group) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Entry& AddLocked(Group group) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  storage::MessageStore* const store_;
  storage::CommitQueue* const commits_;
  Clock* const clock_;
  const Options options_;

  mutable absl::Mutex mu_;
  absl::AnyInvocable<void(const Group&)> on_added_ ABSL_GUARDED_BY(mu_);
  // By topic, then name.
  std::map<std::string, std::map<std::string, std::unique_ptr<Entry>>,
           std::less<>>
      topics_ ABSL_GUARDED_BY(mu_);
  std::map<GroupId, Entry*> by_id_ ABSL_GUARDED_BY(mu_);
  // Registrations being written: (topic, group) -> callers waiting.
  std::map<std::pair<std::string, std::string>, std::vector<Done>> registering_
      ABSL_GUARDED_BY(mu_);
  GroupId next_id_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace hourglass::broker

#endif  // HOURGLASS_BROKER_GROUP_REGISTRY_H_
