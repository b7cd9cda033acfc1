#include "node/shard_router.h"

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "api/redirect.h"
#include "cluster/shard_hash.h"
#include "node/cluster_snapshot.h"
#include "node/primary_gate.h"

namespace hourglass::node {
namespace {

constexpr int kShardShift = PrimaryGate::kGateIdBits;
constexpr uint64_t kGateIdMask = (uint64_t{1} << kShardShift) - 1;

// How many shards, and topics of each, a cross-shard refusal names.
constexpr size_t kNamedShards = 8;
constexpr size_t kNamedTopics = 3;

// "shards 1 (topic \"a\") and 3 (topics \"b\", \"c\")".
std::string DescribeShards(
    const std::map<int, std::set<std::string>>& topics_by_shard) {
  std::vector<std::string> parts;
  for (const auto& [shard, topics] : topics_by_shard) {
    if (parts.size() == kNamedShards) {
      parts.push_back(
          absl::StrCat(topics_by_shard.size() - kNamedShards, " more shards"));
      break;
    }
    std::vector<std::string> quoted;
    for (const std::string& topic : topics) {
      if (quoted.size() == kNamedTopics) {
        quoted.push_back(absl::StrCat(topics.size() - kNamedTopics, " more"));
        break;
      }
      quoted.push_back(absl::StrCat("\"", topic, "\""));
    }
    parts.push_back(absl::StrCat(shard, " (topic",
                                 topics.size() == 1 ? " " : "s ",
                                 absl::StrJoin(quoted, ", "), ")"));
  }
  const std::string last = parts.back();
  parts.pop_back();
  return absl::StrCat("shards ", absl::StrJoin(parts, ", "), " and ", last);
}

// Stats gathered from several sources (gates, remote primaries): answers
// once the last has answered, with every topic in name order, or the first
// error.
class StatsGather {
 public:
  using Done = ShardRouter::StatsCallback;
  StatsGather(size_t pending, Done done)
      : pending_(pending), done_(std::move(done)) {}

  void Add(absl::StatusOr<std::vector<broker::TopicStats>> stats) {
    Done done;
    absl::StatusOr<std::vector<broker::TopicStats>> all;
    {
      absl::MutexLock lock(&mu_);
      if (!stats.ok()) {
        if (error_.ok()) error_ = stats.status();
      } else {
        for (broker::TopicStats& t : *stats) topics_.push_back(std::move(t));
      }
      if (--pending_ > 0) return;
      done = std::move(done_);
      if (!error_.ok()) {
        all = error_;
      } else {
        std::sort(topics_.begin(), topics_.end(),
                  [](const broker::TopicStats& a, const broker::TopicStats& b) {
                    return a.topic < b.topic;
                  });
        all = std::move(topics_);
      }
    }
    std::move(done)(std::move(all));
  }

 private:
  absl::Mutex mu_;
  size_t pending_ ABSL_GUARDED_BY(mu_);
  Done done_ ABSL_GUARDED_BY(mu_);
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  std::vector<broker::TopicStats> topics_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

ShardRouter::ShardRouter(std::vector<PrimaryGate*> gates, Remote* remote)
    : gates_(std::move(gates)), remote_(remote) {}

int ShardRouter::ShardOfTopic(std::string_view topic) const {
  return cluster::ShardOf(topic, shards());
}

PrimaryGate& ShardRouter::GateOf(std::string_view topic) const {
  return *gates_[ShardOfTopic(topic)];
}

std::optional<ShardRouter::GateId> ShardRouter::Split(
    broker::ConsumerId id) const {
  const uint64_t shard = id >> kShardShift;
  if (shard >= gates_.size()) return std::nullopt;
  return GateId{static_cast<int>(shard), id & kGateIdMask};
}

std::vector<PrimaryGate*> ShardRouter::OpenGates() const {
  std::vector<PrimaryGate*> open;
  for (PrimaryGate* gate : gates_) {
    if (gate->open()) open.push_back(gate);
  }
  return open;
}

void ShardRouter::Publish(
    std::vector<broker::NewMessage> messages,
    Callback<absl::StatusOr<std::vector<broker::PublishReceipt>>> done) {
  if (messages.empty()) {
    return gates_[0]->Publish(std::move(messages), std::move(done));
  }
  const int shard = ShardOfTopic(messages.front().topic);
  std::map<int, std::set<std::string>> topics_by_shard;
  for (const broker::NewMessage& m : messages) {
    topics_by_shard[ShardOfTopic(m.topic)].insert(m.topic);
  }
  if (topics_by_shard.size() > 1) {
    // The shard count rides along (the hourglass-shards trailer), for
    // clients to split the batch.
    return std::move(done)(api::WithPrimary(
        absl::FailedPreconditionError(absl::StrCat(
            "the request's messages fall in ", DescribeShards(topics_by_shard),
            " of this cluster's ", shards(),
            ": a publish is all-or-nothing within one shard only; send each "
            "shard's messages in a request of their own (client libraries "
            "split batches by shard)")),
        api::Primary{.shard_count = shards()}));
  }
  gates_[shard]->Publish(std::move(messages), std::move(done));
}

void ShardRouter::Cancel(std::string topic, std::string id,
                         Callback<absl::Status> done) {
  PrimaryGate& gate = GateOf(topic);
  gate.Cancel(std::move(topic), std::move(id), std::move(done));
}

void ShardRouter::Reschedule(
    std::string topic, std::string id, absl::Time deliver_at,
    Callback<absl::StatusOr<broker::PublishReceipt>> done) {
  PrimaryGate& gate = GateOf(topic);
  gate.Reschedule(std::move(topic), std::move(id), deliver_at, std::move(done));
}

void ShardRouter::Subscribe(broker::SubscribeOptions options,
                            std::shared_ptr<broker::Consumer> consumer,
                            Callback<absl::StatusOr<broker::ConsumerId>> done) {
  const uint64_t shard = static_cast<uint64_t>(ShardOfTopic(options.topic));
  gates_[shard]->Subscribe(std::move(options), std::move(consumer),
                           [shard, done = std::move(done)](
                               absl::StatusOr<broker::ConsumerId> id) mutable {
                             if (id.ok())
                               id =
                                   (shard << kShardShift) | (*id & kGateIdMask);
                             std::move(done)(std::move(id));
                           });
}

void ShardRouter::Unsubscribe(broker::ConsumerId id) {
  if (std::optional<GateId> own = Split(id)) {
    gates_[own->shard]->Unsubscribe(own->id);
  }
}

void ShardRouter::Ack(broker::ConsumerId id,
                      absl::Span<const std::string_view> message_ids) {
  if (std::optional<GateId> own = Split(id)) {
    gates_[own->shard]->Ack(own->id, message_ids);
  }
}

void ShardRouter::Nack(broker::ConsumerId id, std::string_view message_id,
                       absl::Duration delay) {
  if (std::optional<GateId> own = Split(id)) {
    gates_[own->shard]->Nack(own->id, message_id, delay);
  }
}

void ShardRouter::Written(broker::ConsumerId id, size_t deliveries,
                          size_t bytes) {
  if (std::optional<GateId> own = Split(id)) {
    gates_[own->shard]->Written(own->id, deliveries, bytes);
  }
}

void ShardRouter::Stats(
    std::optional<std::string> topic,
    Callback<absl::StatusOr<std::vector<broker::TopicStats>>> done) {
  if (topic.has_value()) {
    PrimaryGate& gate = GateOf(*topic);
    return gate.Stats(std::move(topic), std::move(done));
  }
  GatherStats(std::move(done));
}

void ShardRouter::GatherStats(StatsCallback done) {
  if (shards() == 1) return gates_[0]->Stats(std::nullopt, std::move(done));
  // Each shard here if this node is its primary, or from its primary.
  std::vector<PrimaryGate*> here;
  std::map<std::string, std::vector<int>> elsewhere;
  for (int shard = 0; shard < shards(); ++shard) {
    PrimaryGate* gate = gates_[shard];
    const absl::Status refusal = gate->refusal();
    if (refusal.ok()) {
      here.push_back(gate);
      continue;
    }
    const std::optional<api::Primary> primary = api::PrimaryOf(refusal);
    if (remote_ == nullptr || !primary.has_value()) {
      // No primary to ask (a failover under way, the shard not created):
      // the shard's own refusal says why, and the call may be retried.
      return std::move(done)(refusal);
    }
    elsewhere[primary->address].push_back(shard);
  }
  auto gather = std::make_shared<StatsGather>(here.size() + elsewhere.size(),
                                              std::move(done));
  auto add = [gather](absl::StatusOr<std::vector<broker::TopicStats>> stats) {
    gather->Add(std::move(stats));
  };
  for (PrimaryGate* gate : here) gate->Stats(std::nullopt, add);
  for (auto& [address, shards] : elsewhere) {
    remote_->Stats(address, std::move(shards), add);
  }
}

void ShardRouter::LocalStats(const std::vector<int>& shards,
                             StatsCallback done) {
  for (int shard : shards) {
    if (shard < 0 || shard >= this->shards()) {
      return std::move(done)(absl::InvalidArgumentError(
          absl::StrCat("shard ", shard, " does not exist: this cluster has ",
                       this->shards(), " shards")));
    }
  }
  if (shards.empty()) {
    return std::move(done)(std::vector<broker::TopicStats>());
  }
  auto gather = std::make_shared<StatsGather>(shards.size(), std::move(done));
  for (int shard : shards) {
    gates_[shard]->Stats(
        std::nullopt,
        [gather](absl::StatusOr<std::vector<broker::TopicStats>> stats) {
          gather->Add(std::move(stats));
        });
  }
}

void ShardRouter::ListMessages(
    broker::ListQuery query, Callback<absl::StatusOr<broker::ListPage>> done) {
  PrimaryGate& gate = GateOf(query.topic);
  gate.ListMessages(std::move(query), std::move(done));
}

void ShardRouter::GetSchedule(
    broker::ScheduleQuery query,
    Callback<absl::StatusOr<std::vector<broker::ScheduleBucket>>> done) {
  PrimaryGate& gate = GateOf(query.topic);
  gate.GetSchedule(std::move(query), std::move(done));
}

void ShardRouter::GetMessage(
    std::string topic, std::string id, size_t preview_bytes,
    Callback<absl::StatusOr<broker::MessageView>> done) {
  PrimaryGate& gate = GateOf(topic);
  gate.GetMessage(std::move(topic), std::move(id), preview_bytes,
                  std::move(done));
}

void ShardRouter::CreateGroup(std::string topic, std::string group,
                              Callback<absl::StatusOr<absl::Time>> done) {
  PrimaryGate& gate = GateOf(topic);
  gate.CreateGroup(std::move(topic), std::move(group), std::move(done));
}

void ShardRouter::DeleteGroup(std::string topic, std::string group,
                              Callback<absl::StatusOr<uint64_t>> done) {
  PrimaryGate& gate = GateOf(topic);
  gate.DeleteGroup(std::move(topic), std::move(group), std::move(done));
}

void ShardRouter::Redrive(std::string topic, std::vector<std::string> ids,
                          Callback<absl::StatusOr<uint64_t>> done) {
  PrimaryGate& gate = GateOf(topic);
  gate.Redrive(std::move(topic), std::move(ids), std::move(done));
}

void ShardRouter::Purge(std::string topic, bool scheduled, bool ready,
                        Callback<absl::StatusOr<uint64_t>> done) {
  PrimaryGate& gate = GateOf(topic);
  gate.Purge(std::move(topic), scheduled, ready, std::move(done));
}

void ShardRouter::CreateSnapshot(
    std::string dir, Callback<absl::StatusOr<broker::SnapshotInfo>> done) {
  if (shards() == 1) {
    return gates_[0]->CreateSnapshot(std::move(dir), std::move(done));
  }
  SnapshotShards(gates_, remote_, std::move(dir), std::move(done));
}

broker::BrokerInfo ShardRouter::Info() {
  const std::vector<PrimaryGate*> open = OpenGates();
  if (open.empty()) return gates_[0]->Info();
  broker::BrokerInfo info = open[0]->Info();
  for (size_t i = 1; i < open.size() && info.store_health.ok(); ++i) {
    info.store_health = open[i]->Info().store_health;
  }
  return info;
}

}  // namespace hourglass::node
