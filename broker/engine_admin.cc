// The Engine as the Broker of api/: consumer calls forwarded to the
// Dispatcher, admin queries on the reads queue, admin tasks on the tasks
// queue (engine.h).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "broker/engine.h"

namespace hourglass::broker {

void Engine::Subscribe(SubscribeOptions options,
                       std::shared_ptr<Consumer> consumer,
                       Callback<absl::StatusOr<ConsumerId>> done) {
  dispatcher_->Subscribe(std::move(options), std::move(consumer),
                         std::move(done));
}

void Engine::Unsubscribe(ConsumerId id) { dispatcher_->Unsubscribe(id); }

void Engine::Ack(ConsumerId id,
                 absl::Span<const std::string_view> message_ids) {
  dispatcher_->Ack(id, message_ids);
}

void Engine::Nack(ConsumerId id, std::string_view message_id,
                  absl::Duration delay) {
  dispatcher_->Nack(id, message_id, delay);
}

void Engine::Written(ConsumerId id, size_t deliveries, size_t bytes) {
  dispatcher_->Written(id, deliveries, bytes);
}

void Engine::Stats(std::optional<std::string> topic,
                   Callback<absl::StatusOr<std::vector<TopicStats>>> done) {
  reads_->Post(
      [this, topic = std::move(topic), done = std::move(done)]() mutable {
        std::move(done)(inspector_->Stats(topic));
      });
}

void Engine::ListMessages(ListQuery query,
                          Callback<absl::StatusOr<ListPage>> done) {
  reads_->Post(
      [this, query = std::move(query), done = std::move(done)]() mutable {
        std::move(done)(inspector_->List(query));
      });
}

void Engine::GetSchedule(
    ScheduleQuery query,
    Callback<absl::StatusOr<std::vector<ScheduleBucket>>> done) {
  reads_->Post(
      [this, query = std::move(query), done = std::move(done)]() mutable {
        std::move(done)(inspector_->Schedule(query));
      });
}

void Engine::GetMessage(std::string topic, std::string id, size_t preview_bytes,
                        Callback<absl::StatusOr<MessageView>> done) {
  reads_->Post([this, topic = std::move(topic), id = std::move(id),
                preview_bytes, done = std::move(done)]() mutable {
    std::move(done)(inspector_->GetMessage(topic, id, preview_bytes));
  });
}

void Engine::CreateGroup(std::string topic, std::string group,
                         Callback<absl::StatusOr<absl::Time>> done) {
  dispatcher_->CreateGroup(
      topic, group,
      [this, topic, group, done = std::move(done)](absl::Status s) mutable {
        if (!s.ok()) {
          std::move(done)(s);
          return;
        }
        for (const Dispatcher::GroupInfo& g : dispatcher_->Groups()) {
          if (g.topic == topic && g.group == group) {
            std::move(done)(g.created_at);
            return;
          }
        }
        // Deleted as soon as it was created.
        std::move(done)(absl::NotFoundError("the group was deleted meanwhile"));
      });
}

void Engine::DeleteGroup(std::string topic, std::string group,
                         Callback<absl::StatusOr<uint64_t>> done) {
  dispatcher_->DeleteGroup(std::move(topic), std::move(group), std::move(done));
}

void Engine::Redrive(std::string topic, std::vector<std::string> ids,
                     Callback<absl::StatusOr<uint64_t>> done) {
  // The ids are looked up first, with store reads.
  tasks_->Post([this, topic = std::move(topic), ids = std::move(ids),
                done = std::move(done)]() mutable {
    dispatcher_->Redrive(std::move(topic), std::move(ids), std::move(done));
  });
}

void Engine::Purge(std::string topic, bool scheduled, bool ready,
                   Callback<absl::StatusOr<uint64_t>> done) {
  tasks_->Post([this, topic = std::move(topic), scheduled, ready,
                done = std::move(done)]() mutable {
    uint64_t purged = 0;
    if (scheduled) {
      absl::StatusOr<uint64_t> n = PurgeScheduled(topic);
      if (!n.ok()) {
        std::move(done)(n.status());
        return;
      }
      purged = *n;
    }
    if (!ready) {
      std::move(done)(purged);
      return;
    }
    dispatcher_->PurgeReady(
        std::move(topic),
        [purged, done = std::move(done)](absl::StatusOr<uint64_t> n) mutable {
          if (n.ok()) n = *n + purged;
          std::move(done)(std::move(n));
        });
  });
}

void Engine::CreateSnapshot(std::string dir,
                            Callback<absl::StatusOr<SnapshotInfo>> done) {
  tasks_->Post([this, dir = std::move(dir), done = std::move(done)]() mutable {
    const absl::Time started_at = clock_->Now();
    const absl::Time start = absl::Now();
    absl::StatusOr<storage::CheckpointInfo> written = store_->Checkpoint(dir);
    if (!written.ok()) {
      std::move(done)(written.status());
      return;
    }
    SnapshotInfo info;
    info.dir = std::move(written->dir);
    info.files = written->files;
    info.bytes = written->bytes;
    info.format_version = format_version_;
    info.store_id = store_id_;
    info.started_at = started_at;
    info.took = absl::Now() - start;
    std::move(done)(std::move(info));
  });
}

BrokerInfo Engine::Info() {
  return BrokerInfo{format_version_, store_id_, store_health_->status()};
}

}  // namespace hourglass::broker
