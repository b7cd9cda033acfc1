#ifndef HOURGLASS_NODE_SHARD_ROUTER_H_
#define HOURGLASS_NODE_SHARD_ROUTER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "broker/broker.h"
#include "cluster/shard_hash.h"
#include "storage/message_store.h"

namespace hourglass::node {

class PrimaryGate;

// The broker the gRPC services of a cluster node call: it sends each call
// to the gate of the shard the call needs (node/primary_gate.h), which lets
// it into the shard's engine while this node is the shard's primary and
// otherwise refuses it naming the primary (api/redirect.h).
//
//   by topic      Publish, Cancel, Reschedule, Subscribe, the admin calls of
//                 one topic, Stats of one topic: the shard
//                 cluster::ShardOf(topic, shards) (cluster/shard_hash.h; a
//                 topic and its ".dlq" share it). A Publish whose messages
//                 fall in more than one shard is refused whole with
//                 FAILED_PRECONDITION naming the shards and their topics:
//                 a publish is all-or-nothing within one shard only.
//   by consumer   Unsubscribe, Ack, Nack, Written: the shard whose gate gave
//                 the consumer id. The router's ids are the gate's
//                 (PrimaryGate::kGateIdBits) with the shard in the bits
//                 above, so no table is kept; ids of a shard that does not
//                 exist are ignored, as gates ignore ids not theirs.
//   every topic   Stats without a topic: gathered from every shard, merged
//                 in name order: from the shards whose gate is open (this
//                 node is their primary) here, from the others' primaries
//                 (the primary each gate's refusal names) through Remote,
//                 one call per primary. Any shard that cannot answer (no
//                 primary known, a failover under way, a primary that does
//                 not answer) fails the whole call with its error. Info:
//                 the open gates' (the first one's format and store id,
//                 the first failed store health); with none open, shard
//                 0's.
//   snapshot      CreateSnapshot: shard 0's in a cluster of one shard (a
//                 snapshot of one store, as a single node's); with more,
//                 a cluster snapshot of every shard, each from its primary
//                 (node/cluster_snapshot.h).
//
// Thread-safe, as the gates are; it holds no state of its own but the
// gates, constant after construction.
class ShardRouter final : public broker::Broker {
 public:
  // Most shards a router takes: the bits above PrimaryGate::kGateIdBits.
  static constexpr int kMaxShards = cluster::kMaxShardCount;

  using StatsCallback =
      Callback<absl::StatusOr<std::vector<broker::TopicStats>>>;

  // How the router reaches the primaries of the shards this node is not
  // the primary of (node/peer_calls.h). Thread-safe.
  class Remote {
   public:
    virtual ~Remote() = default;
    // The stats of every topic of `shards`, from the node at `address`
    // (their primary): LocalStats there. `done` runs once, on any thread.
    virtual void Stats(const std::string& address, std::vector<int> shards,
                       StatsCallback done) = 0;
    // Copies the checkpoint of `shard` that its primary at `address` makes
    // into `dir`, a new directory (replication/checkpoint_fetch.h). `done`
    // runs once, on any thread, with FetchCheckpoint's result.
    virtual void Checkpoint(
        const std::string& address, int shard, std::string dir,
        Callback<absl::StatusOr<storage::CheckpointInfo>> done) = 0;
  };

  // `gates[n]` is shard n's; `remote` may be null (Stats of every topic
  // then fails for a shard this node is not the primary of, with the
  // shard's refusal). REQUIRES: 1 <= gates.size() <= kMaxShards; the gates
  // and `remote` outlive the router.
  explicit ShardRouter(std::vector<PrimaryGate*> gates,
                       Remote* remote = nullptr);

  // The stats of every topic of `shards`, all of which this node must be
  // the primary of (what a node gathering asks through Remote): the first
  // refusal otherwise. INVALID_ARGUMENT for a shard out of range.
  void LocalStats(const std::vector<int>& shards, StatsCallback done);

  int shards() const { return static_cast<int>(gates_.size()); }
  // The shard of `topic`.
  int ShardOfTopic(std::string_view topic) const;

  // The shard whose gate gave consumer id `id`, and the gate's id; nullopt
  // if `id` is of no shard of this router.
  struct GateId {
    int shard;
    broker::ConsumerId id;
  };
  std::optional<GateId> Split(broker::ConsumerId id) const;

  // broker::Broker.
  void Publish(std::vector<broker::NewMessage> messages,
               Callback<absl::StatusOr<std::vector<broker::PublishReceipt>>>
                   done) override;
  void Cancel(std::string topic, std::string id,
              Callback<absl::Status> done) override;
  void Reschedule(
      std::string topic, std::string id, absl::Time deliver_at,
      Callback<absl::StatusOr<broker::PublishReceipt>> done) override;
  void Subscribe(broker::SubscribeOptions options,
                 std::shared_ptr<broker::Consumer> consumer,
                 Callback<absl::StatusOr<broker::ConsumerId>> done) override;
  void Unsubscribe(broker::ConsumerId id) override;
  void Ack(broker::ConsumerId id,
           absl::Span<const std::string_view> message_ids) override;
  void Nack(broker::ConsumerId id, std::string_view message_id,
            absl::Duration delay) override;
  void Written(broker::ConsumerId id, size_t deliveries, size_t bytes) override;
  void Stats(
      std::optional<std::string> topic,
      Callback<absl::StatusOr<std::vector<broker::TopicStats>>> done) override;
  void ListMessages(broker::ListQuery query,
                    Callback<absl::StatusOr<broker::ListPage>> done) override;
  void GetSchedule(broker::ScheduleQuery query,
                   Callback<absl::StatusOr<std::vector<broker::ScheduleBucket>>>
                       done) override;
  void GetMessage(std::string topic, std::string id, size_t preview_bytes,
                  Callback<absl::StatusOr<broker::MessageView>> done) override;
  void CreateGroup(std::string topic, std::string group,
                   Callback<absl::StatusOr<absl::Time>> done) override;
  void DeleteGroup(std::string topic, std::string group,
                   Callback<absl::StatusOr<uint64_t>> done) override;
  void Redrive(std::string topic, std::vector<std::string> ids,
               Callback<absl::StatusOr<uint64_t>> done) override;
  void Purge(std::string topic, bool scheduled, bool ready,
             Callback<absl::StatusOr<uint64_t>> done) override;
  void CreateSnapshot(
      std::string dir,
      Callback<absl::StatusOr<broker::SnapshotInfo>> done) override;
  broker::BrokerInfo Info() override;

 private:
  PrimaryGate& GateOf(std::string_view topic) const;
  // The gates open now (this node is their shard's primary).
  std::vector<PrimaryGate*> OpenGates() const;
  // Stats of every topic of every shard (Stats without a topic).
  void GatherStats(StatsCallback done);

  // Constant after construction.
  const std::vector<PrimaryGate*> gates_;
  Remote* const remote_;
};

}  // namespace hourglass::node

#endif  // HOURGLASS_NODE_SHARD_ROUTER_H_
