#include "node/primary_gate.h"

#include <utility>

namespace hourglass::node {
namespace {

constexpr int kGenerationShift = PrimaryGate::kEngineIdBits;
constexpr uint64_t kEngineIdMask = (uint64_t{1} << kGenerationShift) - 1;
constexpr uint64_t kGenerationMask =
    (uint64_t{1} << (PrimaryGate::kGateIdBits - kGenerationShift)) - 1;

}  // namespace

class PrimaryGate::Entry {
 public:
  explicit Entry(PrimaryGate* gate) : gate_(gate) {
    absl::MutexLock lock(&gate_->mu_);
    engine_ = gate_->engine_;
    generation_ = gate_->generation_ & kGenerationMask;
    refusal_ = gate_->refusal_;
    ++gate_->inside_;
  }
  ~Entry() {
    absl::MutexLock lock(&gate_->mu_);
    --gate_->inside_;
  }
  broker::Broker* engine() const { return engine_; }
  const absl::Status& refusal() const { return refusal_; }
  // The engine's id of a consumer id the gate gave, if it is of this
  // engine.
  std::optional<broker::ConsumerId> EngineId(broker::ConsumerId id) const {
    if (engine_ == nullptr || (id >> kGenerationShift) != generation_) {
      return std::nullopt;
    }
    return id & kEngineIdMask;
  }
  broker::ConsumerId GateId(broker::ConsumerId id) const {
    return (generation_ << kGenerationShift) | (id & kEngineIdMask);
  }

 private:
  PrimaryGate* const gate_;
  broker::Broker* engine_;
  uint64_t generation_;
  absl::Status refusal_;
};

PrimaryGate::PrimaryGate(std::string reason)
    : refusal_(absl::UnavailableError(std::move(reason))) {}

void PrimaryGate::Open(broker::Broker* engine) {
  absl::MutexLock lock(&mu_);
  engine_ = engine;
  ++generation_;
  refusal_ = absl::OkStatus();
}

void PrimaryGate::Close(absl::Status refusal) {
  absl::MutexLock lock(&mu_);
  engine_ = nullptr;
  refusal_ = std::move(refusal);
  mu_.Await(absl::Condition(
      +[](int* inside) { return *inside == 0; }, &inside_));
}

bool PrimaryGate::open() const {
  absl::MutexLock lock(&mu_);
  return engine_ != nullptr;
}

absl::Status PrimaryGate::refusal() const {
  absl::MutexLock lock(&mu_);
  return refusal_;
}

void PrimaryGate::Publish(
    std::vector<broker::NewMessage> messages,
    Callback<absl::StatusOr<std::vector<broker::PublishReceipt>>> done) {
  Entry entry(this);
  if (entry.engine() == nullptr) return std::move(done)(entry.refusal());
  entry.engine()->Publish(std::move(messages), std::move(done));
}

void PrimaryGate::Cancel(std::string topic, std::string id,
                         Callback<absl::Status> done) {
  Entry entry(this);
  if (entry.engine() == nullptr) return std::move(done)(entry.refusal());
  entry.engine()->Cancel(std::move(topic), std::move(id), std::move(done));
}

void PrimaryGate::Reschedule(
    std::string topic, std::string id, absl::Time deliver_at,
    Callback<absl::StatusOr<broker::PublishReceipt>> done) {
  Entry entry(this);
  if (entry.engine() == nullptr) return std::move(done)(entry.refusal());
  entry.engine()->Reschedule(std::move(topic), std::move(id), deliver_at,
                             std::move(done));
}

void PrimaryGate::Subscribe(
    broker::SubscribeOptions options,
    std::shared_ptr<broker::Consumer> consumer,
    Callback<absl::StatusOr<broker::ConsumerId>> done) {
  Entry entry(this);
  if (entry.engine() == nullptr) return std::move(done)(entry.refusal());
  const broker::ConsumerId tag = entry.GateId(0);
  entry.engine()->Subscribe(
      std::move(options), std::move(consumer),
      [tag, done = std::move(done)](
          absl::StatusOr<broker::ConsumerId> id) mutable {
        if (id.ok()) id = tag | (*id & kEngineIdMask);
        std::move(done)(std::move(id));
      });
}

void PrimaryGate::Unsubscribe(broker::ConsumerId id) {
  Entry entry(this);
  if (std::optional<broker::ConsumerId> own = entry.EngineId(id)) {
    entry.engine()->Unsubscribe(*own);
  }
}

void PrimaryGate::Ack(broker::ConsumerId id,
                      absl::Span<const std::string_view> message_ids) {
  Entry entry(this);
  if (std::optional<broker::ConsumerId> own = entry.EngineId(id)) {
    entry.engine()->Ack(*own, message_ids);
  }
}

void PrimaryGate::Nack(broker::ConsumerId id, std::string_view message_id,
                       absl::Duration delay) {
  Entry entry(this);
  if (std::optional<broker::ConsumerId> own = entry.EngineId(id)) {
    entry.engine()->Nack(*own, message_id, delay);
  }
}

void PrimaryGate::Written(broker::ConsumerId id, size_t deliveries,
                          size_t bytes) {
  Entry entry(this);
  if (std::optional<broker::ConsumerId> own = entry.EngineId(id)) {
    entry.engine()->Written(*own, deliveries, bytes);
  }
}

void PrimaryGate::Stats(
    std::optional<std::string> topic,
    Callback<absl::StatusOr<std::vector<broker::TopicStats>>> done) {
  Entry entry(this);
  if (entry.engine() == nullptr) return std::move(done)(entry.refusal());
  entry.engine()->Stats(std::move(topic), std::move(done));
}

void PrimaryGate::ListMessages(
    broker::ListQuery query, Callback<absl::StatusOr<broker::ListPage>> done) {
  Entry entry(this);
  if (entry.engine() == nullptr) return std::move(done)(entry.refusal());
  entry.engine()->ListMessages(std::move(query), std::move(done));
}

void PrimaryGate::GetSchedule(
    broker::ScheduleQuery query,
    Callback<absl::StatusOr<std::vector<broker::ScheduleBucket>>> done) {
  Entry entry(this);
  if (entry.engine() == nullptr) return std::move(done)(entry.refusal());
  entry.engine()->GetSchedule(std::move(query), std::move(done));
}

void PrimaryGate::GetMessage(
    std::string topic, std::string id, size_t preview_bytes,
    Callback<absl::StatusOr<broker::MessageView>> done) {
  Entry entry(this);
  if (entry.engine() == nullptr) return std::move(done)(entry.refusal());
  entry.engine()->GetMessage(std::move(topic), std::move(id), preview_bytes,
                             std::move(done));
}

void PrimaryGate::CreateGroup(std::string topic, std::string group,
                              Callback<absl::StatusOr<absl::Time>> done) {
  Entry entry(this);
  if (entry.engine() == nullptr) return std::move(done)(entry.refusal());
  entry.engine()->CreateGroup(std::move(topic), std::move(group),
                              std::move(done));
}

void PrimaryGate::DeleteGroup(std::string topic, std::string group,
                              Callback<absl::StatusOr<uint64_t>> done) {
  Entry entry(this);
  if (entry.engine() == nullptr) return std::move(done)(entry.refusal());
  entry.engine()->DeleteGroup(std::move(topic), std::move(group),
                              std::move(done));
}

void PrimaryGate::Redrive(std::string topic, std::vector<std::string> ids,
                          Callback<absl::StatusOr<uint64_t>> done) {
  Entry entry(this);
  if (entry.engine() == nullptr) return std::move(done)(entry.refusal());
  entry.engine()->Redrive(std::move(topic), std::move(ids), std::move(done));
}

void PrimaryGate::Purge(std::string topic, bool scheduled, bool ready,
                        Callback<absl::StatusOr<uint64_t>> done) {
  Entry entry(this);
  if (entry.engine() == nullptr) return std::move(done)(entry.refusal());
  entry.engine()->Purge(std::move(topic), scheduled, ready, std::move(done));
}

void PrimaryGate::CreateSnapshot(
    std::string dir, Callback<absl::StatusOr<broker::SnapshotInfo>> done) {
  Entry entry(this);
  if (entry.engine() == nullptr) return std::move(done)(entry.refusal());
  entry.engine()->CreateSnapshot(std::move(dir), std::move(done));
}

broker::BrokerInfo PrimaryGate::Info() {
  Entry entry(this);
  if (entry.engine() == nullptr) {
    broker::BrokerInfo info;
    info.store_health = entry.refusal();
    return info;
  }
  return entry.engine()->Info();
}

}  // namespace hourglass::node
