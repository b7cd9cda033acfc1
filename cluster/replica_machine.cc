#include "cluster/replica_machine.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cluster/placement.h"

namespace hourglass::cluster {
namespace {

namespace act = replica_action;

// How long a record write made from one revision keeps another from being
// made from it: a write that succeeded moves the record on within
// milliseconds; one that failed (etcd did not answer) is tried again.
constexpr absl::Duration kRetryWrite = absl::Seconds(1);

// How long after asking for an engine that did not open it is asked again.
constexpr absl::Duration kEngineRetry = absl::Milliseconds(500);

std::vector<std::string> Without(std::vector<std::string> nodes,
                                 const std::string& node) {
  std::erase(nodes, node);
  return nodes;
}

// When adding `node` last failed (InfinitePast if never).
template <typename Primary>
absl::Time FailedAt(const Primary& primary, const std::string& node) {
  auto it = primary.add_failed.find(node);
  return it == primary.add_failed.end() ? absl::InfinitePast() : it->second;
}

std::string At(LogEnd end) {
  return absl::StrCat("entry ", end.index, " of epoch ", end.epoch);
}

}  // namespace

const char* RoleName(ReplicaMachine::Role role) {
  switch (role) {
    case ReplicaMachine::Role::kNone:
      return "none";
    case ReplicaMachine::Role::kLearner:
      return "learner";
    case ReplicaMachine::Role::kBackup:
      return "backup";
    case ReplicaMachine::Role::kPrimary:
      return "primary";
  }
  return "?";
}

std::string Describe(const ReplicaAction& action) {
  struct Describer {
    std::string operator()(const act::OpenPrimary& a) const {
      return absl::StrCat("OpenPrimary epoch ", a.epoch, " in sync [",
                          absl::StrJoin(a.in_sync, ","), "]");
    }
    std::string operator()(const act::StepDown& a) const {
      return absl::StrCat("StepDown: ", a.reason);
    }
    std::string operator()(const act::StartShipper& a) const {
      return absl::StrCat("StartShipper ", a.node, " at ", a.address);
    }
    std::string operator()(const act::StopShipper& a) const {
      return absl::StrCat("StopShipper ", a.node);
    }
    std::string operator()(const act::AddInSync& a) const {
      return absl::StrCat("AddInSync ", a.node);
    }
    std::string operator()(const act::RemoveInSync& a) const {
      return absl::StrCat("RemoveInSync ", a.node);
    }
    std::string operator()(const act::CountInSync& a) const {
      return absl::StrCat("CountInSync ", a.node);
    }
    std::string operator()(const act::WriteRecord& a) const {
      const ShardRecord& r = a.next;
      return absl::StrCat("WriteRecord epoch ", r.epoch, " primary ",
                          r.primary.empty() ? "-" : r.primary, " isr [",
                          absl::StrJoin(r.isr, ","), "] eligible [",
                          absl::StrJoin(r.eligible, ","), "]");
    }
    std::string operator()(const act::OpenEngine&) const {
      return "OpenEngine";
    }
    std::string operator()(const act::CloseEngine& a) const {
      return absl::StrCat("CloseEngine: ", a.reason);
    }
    std::string operator()(const act::Refuse&) const { return "Refuse"; }
    std::string operator()(const act::Follow&) const { return "Follow"; }
    std::string operator()(const act::StopFollowing&) const {
      return "StopFollowing";
    }
    std::string operator()(const act::Rebuild& a) const {
      return absl::StrCat("Rebuild from ", a.from);
    }
    std::string operator()(const act::OpenCopy&) const { return "OpenCopy"; }
    std::string operator()(const act::RemoveCopy&) const {
      return "RemoveCopy";
    }
    std::string operator()(const act::KeepCopy& a) const {
      return absl::StrCat("KeepCopy of epoch ", a.accepted_epoch);
    }
    std::string operator()(const act::HandedOver& a) const {
      return absl::StrCat("HandedOver at ", a.index);
    }
  };
  return std::visit(Describer{}, action);
}

ReplicaMachine::ReplicaMachine(ReplicaMachineOptions options)
    : options_(std::move(options)), role_(None{}) {}

ReplicaMachine::Role ReplicaMachine::role() const {
  if (std::holds_alternative<Primary>(role_)) return Role::kPrimary;
  if (std::holds_alternative<Backup>(role_)) return Role::kBackup;
  if (std::holds_alternative<Learner>(role_)) return Role::kLearner;
  return Role::kNone;
}

int64_t ReplicaMachine::epoch() const {
  const Primary* primary = std::get_if<Primary>(&role_);
  return primary == nullptr ? 0 : primary->epoch;
}

std::optional<int64_t> ReplicaMachine::handed_over() const {
  const Primary* primary = std::get_if<Primary>(&role_);
  return primary == nullptr ? std::nullopt : primary->handed_over;
}

std::vector<ReplicaAction> ReplicaMachine::Step(const ReplicaFacts& facts) {
  std::vector<ReplicaAction> out;
  // The host's primary store says whether this node leads: a role it does
  // not back (its store failed to open, or was closed) is over.
  if (const Primary* primary = std::get_if<Primary>(&role_);
      primary != nullptr &&
      (!facts.primary.has_value() || facts.primary->epoch != primary->epoch)) {
    role_ = None{};
  }
  if (facts.leaving) {
    if (facts.primary.has_value()) {
      out.push_back(act::StepDown{"this node is leaving the cluster"});
    }
    if (facts.following) out.push_back(act::StopFollowing{});
    role_ = None{};
    return out;
  }
  if (!facts.record.has_value()) {
    if (facts.primary.has_value()) {
      out.push_back(act::StepDown{
          absl::StrCat("shard ", options_.shard, " has no record in etcd")});
    }
    out.push_back(act::Refuse{});
    role_ = None{};
    return out;
  }
  const ShardRecord& record = *facts.record;
  const std::string& me = options_.node;
  if (record.primary == me) {
    StepPrimary(facts, record, out);
    return out;
  }
  out.push_back(act::Refuse{});
  if (facts.primary.has_value()) {
    out.push_back(act::StepDown{
        record.primary.empty()
            ? std::string("the shard was given back to the controller")
            : absl::StrCat("a newer primary exists (", record.primary,
                           " at epoch ", record.epoch, ")")});
  }
  if (record.IsReplica(me)) {
    if (!facts.rebuild_asked.empty()) {
      auto primary = facts.alive.find(record.primary);
      if (primary != facts.alive.end()) {
        out.push_back(act::Rebuild{primary->second, facts.rebuild_asked});
        role_ = Learner{};
        return out;
      }
    }
    if (!facts.has_copy) {
      out.push_back(act::OpenCopy{});
      role_ = Learner{};
      return out;
    }
    if (!facts.alive.contains(record.primary)) {
      // Its primary is gone, or gave the shard back: nothing more of the
      // old primary's stream is applied, so the position this node reports
      // for the controller to rank (PositionsToReport) is where its copy
      // stays until a primary it sees alive ships to it again.
      if (facts.following) out.push_back(act::StopFollowing{});
    } else if (!facts.following) {
      out.push_back(act::Follow{});
    }
    if (record.InIsr(me)) {
      role_ = Backup{};
    } else {
      role_ = Learner{};
    }
    return out;
  }
  // The record does not name this node: its copy does not count.
  if (facts.following) out.push_back(act::StopFollowing{});
  if (facts.has_copy) {
    if (facts.accepted_epoch > record.epoch) {
      if (!kept_copy_said_) {
        out.push_back(act::KeepCopy{record.epoch, facts.accepted_epoch});
        kept_copy_said_ = true;
      }
    } else {
      out.push_back(act::RemoveCopy{});
      kept_copy_said_ = false;
    }
  }
  role_ = None{};
  return out;
}

void ReplicaMachine::StepPrimary(const ReplicaFacts& facts,
                                 const ShardRecord& record,
                                 std::vector<ReplicaAction>& out) {
  const std::string& me = options_.node;
  // The primary store this node holds at the record's epoch, if any.
  const ReplicaFacts::Primary* store =
      facts.primary.has_value() && facts.primary->epoch == record.epoch
          ? &*facts.primary
          : nullptr;
  if (facts.primary.has_value() && store == nullptr) {
    out.push_back(
        act::StepDown{absl::StrCat("epoch ", facts.primary->epoch, " ended")});
    role_ = None{};
  }
  // A store that closed (writes not acknowledged in time, or the in-sync
  // set fell below --min_insync under waiting writes): the shard goes back
  // to the controller, which promotes a copy at a new epoch.
  if (store != nullptr && store->closed) {
    out.push_back(act::StepDown{store->close_reason});
    role_ = None{std::pair{record.epoch, store->close_reason}};
    store = nullptr;
  }
  if (None* none = std::get_if<None>(&role_);
      none != nullptr && none->gave_back.has_value()) {
    if (none->gave_back->first == record.epoch) {
      ShardRecord next = record;
      next.primary.clear();
      next.transfer_to.clear();
      Write(
          facts, std::move(next),
          absl::StrCat("gives shard ", options_.shard, " back at epoch ",
                       record.epoch, " for the controller to promote a copy: ",
                       none->gave_back->second),
          "", out);
      return;
    }
    none->gave_back.reset();
  }
  if (store == nullptr) {
    if (!facts.has_copy) return;  // Nothing to lead from (a rebuild failed).
    if (facts.accepted_epoch >= record.epoch) {
      // It led at this epoch before (it restarted before another copy was
      // promoted): it must not write at it again, and its copy may be
      // behind another (it lost what it had not synced when the power went,
      // and a backup kept it). The controller promotes the most advanced
      // in-sync copy, perhaps this one, at a new epoch.
      ShardRecord next = record;
      next.primary.clear();
      next.transfer_to.clear();
      Write(facts, std::move(next),
            absl::StrCat("gives shard ", options_.shard, " back at epoch ",
                         record.epoch, ": its copy had accepted that epoch ",
                         "before (a primary never writes at an epoch twice), "
                         "and the controller promotes the most advanced copy"),
            "", out);
      return;
    }
    if (facts.following) out.push_back(act::StopFollowing{});
    out.push_back(act::OpenPrimary{record.epoch, Without(record.isr, me)});
    role_ = Primary{.epoch = record.epoch, .since = facts.now};
    return;  // The rest once the store is open.
  }
  if (!std::holds_alternative<Primary>(role_)) {
    role_ = Primary{.epoch = record.epoch, .since = facts.now};
  }
  Primary& primary = std::get<Primary>(role_);
  KeepShippers(facts, record, out);
  KeepInSyncSet(facts, record, primary, out);
  if (!record.transfer_to.empty()) {
    HandOver(facts, record, primary, out);
    return;
  }
  // A transfer the controller gave up: the engine opens again (below).
  primary.handing_over_to.clear();
  primary.handed_over.reset();
  // Not while the in-sync set is too small to acknowledge a write: the
  // engine could not open (it writes as it does), nor serve.
  if (facts.engine == ReplicaFacts::Engine::kClosed &&
      static_cast<int>(record.isr.size()) >= options_.min_insync &&
      facts.now - primary.engine_asked >= kEngineRetry) {
    primary.engine_asked = facts.now;
    out.push_back(act::OpenEngine{});
  }
}

void ReplicaMachine::KeepShippers(const ReplicaFacts& facts,
                                  const ShardRecord& record,
                                  std::vector<ReplicaAction>& out) {
  std::map<std::string, std::string> wanted;
  for (const std::string& node : record.replicas) {
    if (node == options_.node) continue;
    auto it = facts.alive.find(node);
    if (it != facts.alive.end()) wanted[node] = it->second;
  }
  for (const auto& [node, address] : facts.shippers) {
    auto want = wanted.find(node);
    if (want == wanted.end() || want->second != address) {
      out.push_back(act::StopShipper{node});
    }
  }
  for (const auto& [node, address] : wanted) {
    auto running = facts.shippers.find(node);
    if (running == facts.shippers.end() || running->second != address) {
      out.push_back(act::StartShipper{node, address});
    }
  }
}

void ReplicaMachine::KeepInSyncSet(const ReplicaFacts& facts,
                                   const ShardRecord& record, Primary& primary,
                                   std::vector<ReplicaAction>& out) {
  const ReplicaFacts::Primary& store = *facts.primary;
  const std::string& me = options_.node;
  const absl::Time now = facts.now;
  auto backup = [&store](const std::string& node) {
    auto it = store.backups.find(node);
    return it == store.backups.end() ? ReplicaFacts::Backup{} : it->second;
  };
  // The set writes wait for holds every backup the record's in-sync set
  // names (added locally before the record says so, removed after), and no
  // other but one being added.
  for (const std::string& node : record.isr) {
    if (node == me) continue;
    if (!backup(node).in_sync) out.push_back(act::AddInSync{node, ""});
    if (!backup(node).counted) out.push_back(act::CountInSync{node});
  }
  for (const auto& [node, state] : store.backups) {
    const bool adding =
        primary.adding.has_value() && primary.adding->node == node;
    if (state.in_sync && !record.InIsr(node) && !adding) {
      out.push_back(act::RemoveInSync{
          node, record.IsReplica(node)
                    ? ""
                    : absl::StrCat("no longer waits for ", node, " in shard ",
                                   options_.shard,
                                   ": it is not a replica any more")});
    }
  }
  auto with = [&](std::vector<std::string> isr) {
    ShardRecord next = record;
    next.isr = std::move(isr);
    next.acknowledged = std::max(next.acknowledged, store.acknowledged);
    KeepEligible(record, next, options_.min_insync);
    return next;
  };
  auto set_to = [&](const ShardRecord& next) {
    return absl::StrCat("set the in-sync set of shard ", options_.shard,
                        " at epoch ", record.epoch, " to [",
                        absl::StrJoin(next.isr, ","), "] (was [",
                        absl::StrJoin(record.isr, ","), "]); eligible copies [",
                        absl::StrJoin(next.eligible, ","), "]");
  };
  // A backup being added joins the record once it made the log durable up
  // to where it was when writes began to wait for it: it then holds every
  // entry acknowledged.
  if (primary.adding.has_value()) {
    const Primary::Adding& adding = *primary.adding;
    if (record.InIsr(adding.node)) {
      primary.adding.reset();
    } else if (!record.IsReplica(adding.node) ||
               !facts.alive.contains(adding.node) || now > adding.deadline) {
      out.push_back(act::RemoveInSync{
          adding.node,
          absl::StrCat(
              "did not add ", adding.node, " to the in-sync set of shard ",
              options_.shard, ": it did not make entry ", adding.mark,
              " durable within ", absl::FormatDuration(options_.lag_timeout))});
      primary.add_failed[adding.node] = now;
      primary.adding.reset();
      return;  // One change at a time.
    } else {
      // Its position counts only while its stream is up: one kept from an
      // earlier stream may be of a copy the node lost since (a wiped disk).
      const ReplicaFacts::Backup state = backup(adding.node);
      if (state.connected && state.durable.index >= adding.mark) {
        std::vector<std::string> isr = record.isr;
        isr.push_back(adding.node);
        ShardRecord next = with(std::move(isr));
        std::string what = set_to(next);
        Write(
            facts, std::move(next), std::move(what),
            absl::StrCat("added ", adding.node, " to the in-sync set of shard ",
                         options_.shard, " (at entry ", adding.mark, ")"),
            out);
      }
      return;  // One change at a time.
    }
  }
  // An in-sync set naming a node the replicas do not: no shipper feeds that
  // node, and the controller could promote it.
  for (const std::string& node : record.isr) {
    if (record.IsReplica(node)) continue;
    std::vector<std::string> isr;
    for (const std::string& n : record.isr) {
      if (record.IsReplica(n)) isr.push_back(n);
    }
    ShardRecord next = with(std::move(isr));
    std::string what = set_to(next);
    Write(facts, std::move(next), std::move(what),
          absl::StrCat("removed ", node, " from the in-sync set of shard ",
                       options_.shard, ": it is not a replica"),
          out);
    return;
  }
  for (const std::string& node : record.replicas) {
    if (node == me) continue;
    const ReplicaFacts::Backup state = backup(node);
    const bool alive = facts.alive.contains(node);
    if (record.InIsr(node)) {
      // Lacking an entry written more than lag_timeout ago: silent, or
      // answering but applying nothing (a full disk). One that went long
      // without news because nothing was written is not stuck.
      const bool stuck = now - std::max(state.lacking_since, primary.since) >
                         options_.lag_timeout;
      if (!alive || stuck) {
        ShardRecord next = with(Without(record.isr, node));
        std::string what = set_to(next);
        Write(
            facts, std::move(next), std::move(what),
            absl::StrCat(
                "removed ", node, " from the in-sync set of shard ",
                options_.shard, ": ",
                alive ? absl::StrCat("it lacks an entry written more than ",
                                     absl::FormatDuration(options_.lag_timeout),
                                     " ago")
                      : std::string("its node is gone"),
                " (at ", At(state.applied), "; the log ends at ",
                At(store.last), ")"),
            out);
        return;  // One change per record revision.
      }
    } else if (alive && state.connected &&
               (now - state.last_heard < options_.lag_timeout ||
                state.applied == store.last) &&
               state.applied.epoch == store.last.epoch &&
               state.lag_bytes <= options_.rejoin_bytes &&
               now - FailedAt(primary, node) >= options_.lag_timeout) {
      // Close behind (under sustained writes a follower is rarely at the
      // very last entry when asked): writes wait for it from now on, so it
      // falls no further behind. A connected copy holding every entry is
      // added however long ago it last answered: with nothing written, it
      // has nothing to answer.
      out.push_back(act::AddInSync{node, ""});
      primary.adding = Primary::Adding{.node = node,
                                       .mark = store.last.index,
                                       .deadline = now + options_.lag_timeout};
      return;
    }
  }
}

void ReplicaMachine::HandOver(const ReplicaFacts& facts,
                              const ShardRecord& record, Primary& primary,
                              std::vector<ReplicaAction>& out) {
  const std::string& to = record.transfer_to;
  if (primary.handing_over_to != to) {
    primary.handing_over_to = to;
    primary.handed_over.reset();
    out.push_back(act::CloseEngine{
        absl::StrCat("shard ", options_.shard, " is being handed over from ",
                     options_.node, " to ", to, "; retry shortly")});
    return;
  }
  // No writer may be left: an engine opening writes too.
  if (primary.handed_over.has_value() ||
      facts.engine != ReplicaFacts::Engine::kClosed) {
    return;
  }
  const ReplicaFacts::Primary& store = *facts.primary;
  auto target = store.backups.find(to);
  if (target != store.backups.end() &&
      target->second.durable.index >= store.last.index) {
    primary.handed_over = store.last.index;
    out.push_back(act::HandedOver{store.last.index});
  }
}

void ReplicaMachine::Write(const ReplicaFacts& facts, ShardRecord next,
                           std::string what, std::string then,
                           std::vector<ReplicaAction>& out) {
  if (wrote_from_ == facts.record_revision &&
      facts.now < wrote_at_ + kRetryWrite) {
    return;
  }
  wrote_from_ = facts.record_revision;
  wrote_at_ = facts.now;
  out.push_back(
      act::WriteRecord{std::move(next), std::move(what), std::move(then)});
}

}  // namespace hourglass::cluster
