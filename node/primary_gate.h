#ifndef HOURGLASS_NODE_PRIMARY_GATE_H_
#define HOURGLASS_NODE_PRIMARY_GATE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "broker/broker.h"

namespace hourglass::node {

// The broker the gRPC services of a cluster node call: the engine of the
// shard while this node is its primary, and otherwise a refusal
// (UNAVAILABLE, saying why; api/redirect.h adds where the primary is). The
// engine comes and goes with the node's role, under calls in progress.
//
// Consumer ids are given out with the engine's generation above the
// engine's own id (kGateIdBits in all), so that an ack for a stream of an
// engine that has since gone is ignored rather than taken by the next one.
// The bits above kGateIdBits are 0, for the ShardRouter's shard.
//
// Thread-safe. A call holds no lock while it runs in the engine.
class PrimaryGate final : public broker::Broker {
 public:
  // Consumer ids: the engine's in the low kEngineIdBits, the generation of
  // the engine (the gate's count of Open calls, modulo 2^12) in the next
  // 12 bits. An id of an engine opened 4,096 openings ago would be taken
  // for the current engine's; by then its stream has long ended (closing
  // the gate shuts the engine and its streams down).
  static constexpr int kEngineIdBits = 40;
  static constexpr int kGateIdBits = 52;

  // Refuses with UNAVAILABLE `reason` until Open.
  explicit PrimaryGate(std::string reason);

  // Forwards calls to `engine` from now on. REQUIRES: closed (no engine).
  // `engine` must stay alive until Close returns.
  void Open(broker::Broker* engine);
  // Refuses every call from now on with `refusal`, and waits until no call
  // is inside the engine: it may then be shut down and destroyed. Called
  // while closed, it only changes the refusal. REQUIRES: refusal is
  // UNAVAILABLE (it may name the shard's primary: api::WithPrimary).
  void Close(absl::Status refusal);
  bool open() const;
  // Why calls are refused now (OK while open).
  absl::Status refusal() const;

  // broker::Broker.
  void Publish(std::vector<broker::NewMessage> messages,
               Callback<absl::StatusOr<std::vector<broker::PublishReceipt>>>
                   done) override;
  void Cancel(std::string topic, std::string id,
              Callback<absl::Status> done) override;
  void Reschedule(std::string topic, std::string id, absl::Time deliver_at,
                  Callback<absl::StatusOr<broker::PublishReceipt>> done)
      override;
  void Subscribe(broker::SubscribeOptions options,
                 std::shared_ptr<broker::Consumer> consumer,
                 Callback<absl::StatusOr<broker::ConsumerId>> done) override;
  void Unsubscribe(broker::ConsumerId id) override;
  void Ack(broker::ConsumerId id,
           absl::Span<const std::string_view> message_ids) override;
  void Nack(broker::ConsumerId id, std::string_view message_id,
            absl::Duration delay) override;
  void Written(broker::ConsumerId id, size_t deliveries, size_t bytes) override;
  void Stats(std::optional<std::string> topic,
             Callback<absl::StatusOr<std::vector<broker::TopicStats>>> done)
      override;
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
  // A call's hold on the engine: engine is null (and refusal says why)
  // when closed.
  class Entry;

  mutable absl::Mutex mu_;
  broker::Broker* engine_ ABSL_GUARDED_BY(mu_) = nullptr;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status refusal_ ABSL_GUARDED_BY(mu_);
  int inside_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace hourglass::node

#endif  // HOURGLASS_NODE_PRIMARY_GATE_H_
