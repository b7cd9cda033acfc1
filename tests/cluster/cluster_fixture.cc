#include "tests/cluster/cluster_fixture.h"

#include <iostream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/channel.h"
#include "cluster/shard_hash.h"
#include "grpcpp/grpcpp.h"
#include "hourglass/v1/admin.grpc.pb.h"
#include "hourglass/v1/broker.grpc.pb.h"
#include "hourglass/v1/cluster.grpc.pb.h"
#include "tests/testing/eventually.h"
#include "tests/testing/peer_secret.h"

namespace hourglass::testing {
namespace {

std::string Trailer(const grpc::ClientContext& context, const char* key) {
  const auto& trailers = context.GetServerTrailingMetadata();
  auto it = trailers.find(key);
  return it == trailers.end()
             ? ""
             : std::string(it->second.data(), it->second.size());
}

Answer AnswerOf(const grpc::Status& status,
                const grpc::ClientContext& context) {
  return {status.error_code(), status.error_message(),
          Trailer(context, "hourglass-primary"),
          Trailer(context, "hourglass-epoch")};
}

}  // namespace

void ClusterFixture::SetUp() {
  absl::StatusOr<std::unique_ptr<EtcdServer>> etcd = EtcdServer::Start();
  ASSERT_TRUE(etcd.ok()) << etcd.status();
  etcd_ = *std::move(etcd);
}

void ClusterFixture::TearDown() {
  if (!HasFailure()) return;
  constexpr size_t kTail = 6000;
  for (auto& [id, node] : nodes_) {
    if (!node->process().Exited()) {
      node->process().ReadUntil(absl::Now() + absl::Milliseconds(200));
    }
    const std::string& log = node->process().output();
    std::cout << "--- the end of node " << id << "'s log:\n"
              << (log.size() > kTail ? log.substr(log.size() - kTail) : log)
              << std::endl;
  }
}

void ClusterFixture::StartNodes(std::vector<std::string> ids,
                                std::vector<std::string> flags) {
  for (const std::string& id : ids) {
    std::vector<std::string> all = {
        "--etcd=" + etcd_->endpoint(), "--node_id=" + id, "--lease_ttl=2s",
        "--shutdown_grace=500ms", testing::PeerSecretFlag(dir_.path())};
    all.insert(all.end(), flags.begin(), flags.end());
    absl::StatusOr<std::unique_ptr<Daemon>> node =
        Daemon::Start(HOURGLASSD_PATH, dir_.path() + "/" + id, all);
    ASSERT_TRUE(node.ok()) << node.status();
    nodes_[id] = *std::move(node);
  }
}

Answer ClusterFixture::Publish(const std::string& node,
                               const std::string& topic, const std::string& id,
                               absl::Duration delay) {
  return PublishBatch(node, {topic}, id, delay);
}

Answer ClusterFixture::PublishBatch(const std::string& node,
                                    const std::vector<std::string>& topics,
                                    const std::string& id,
                                    absl::Duration delay) {
  auto stub = v1::Broker::NewStub(nodes_.at(node)->Channel());
  grpc::ClientContext context;
  Authorize(context);
  context.set_deadline(absl::ToChronoTime(absl::Now() + kClusterPatience));
  v1::PublishRequest request;
  for (size_t i = 0; i < topics.size(); ++i) {
    const std::string message_id = i == 0 ? id : absl::StrCat(id, "-", i);
    v1::Message& m = *request.add_messages();
    m.set_topic(topics[i]);
    m.set_id(message_id);
    m.set_payload("payload of " + message_id);
    m.mutable_delay()->set_seconds(absl::ToInt64Seconds(delay));
    m.mutable_delay()->set_nanos(static_cast<int32_t>(
        absl::ToInt64Nanoseconds(delay % absl::Seconds(1))));
  }
  v1::PublishResponse response;
  const grpc::Status status = stub->Publish(&context, request, &response);
  return AnswerOf(status, context);
}

grpc::StatusCode ClusterFixture::Cancel(const std::string& node,
                                        const std::string& topic,
                                        const std::string& id) {
  auto stub = v1::Broker::NewStub(nodes_.at(node)->Channel());
  grpc::ClientContext context;
  Authorize(context);
  context.set_deadline(absl::ToChronoTime(absl::Now() + kClusterPatience));
  v1::CancelRequest request;
  request.set_topic(topic);
  request.set_id(id);
  v1::CancelResponse response;
  return stub->Cancel(&context, request, &response).error_code();
}

Answer ClusterFixture::Stats(const std::string& node) {
  auto stub = v1::Admin::NewStub(nodes_.at(node)->Channel());
  grpc::ClientContext context;
  Authorize(context);
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  v1::GetStatsRequest request;
  v1::GetStatsResponse response;
  const grpc::Status status = stub->GetStats(&context, request, &response);
  return AnswerOf(status, context);
}

absl::StatusOr<v1::ClusterMap> ClusterFixture::MapOf(const std::string& node) {
  auto stub = v1::Cluster::NewStub(nodes_.at(node)->Channel());
  grpc::ClientContext context;
  Authorize(context);
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  v1::ClusterMap map;
  const grpc::Status status =
      stub->GetClusterMap(&context, v1::GetClusterMapRequest(), &map);
  if (!status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                        status.error_message());
  }
  return map;
}

std::string ClusterFixture::AwaitPrimary(
    const std::vector<std::string>& candidates) {
  std::string primary;
  Eventually(
      [&] {
        for (const std::string& id : candidates) {
          if (Stats(id).code == grpc::StatusCode::OK) {
            primary = id;
            return true;
          }
        }
        return false;
      },
      kClusterPatience);
  return primary;
}

bool ClusterFixture::AwaitEveryoneSees(const std::vector<std::string>& ids,
                                       int64_t epoch,
                                       const std::string& primary) {
  return Eventually(
      [&] {
        for (const std::string& id : ids) {
          absl::StatusOr<v1::ClusterMap> map = MapOf(id);
          if (!map.ok() || map->shards_size() != 1 ||
              map->shards(0).epoch() != epoch ||
              map->shards(0).primary() != primary) {
            return false;
          }
        }
        return true;
      },
      kClusterPatience);
}

std::vector<std::string> TopicPerShard(int shards) {
  std::vector<std::string> topics(static_cast<size_t>(shards));
  for (int i = 0, found = 0; found < shards; ++i) {
    const std::string topic = absl::StrCat("orders-", i);
    std::string& slot = topics[cluster::ShardOf(topic, shards)];
    if (slot.empty()) {
      slot = topic;
      ++found;
    }
  }
  return topics;
}

void ClusterFixture::Authorize(grpc::ClientContext& context) const {
  if (!token_.empty()) context.AddMetadata("authorization", "Bearer " + token_);
}

std::shared_ptr<client::Channel> ClusterFixture::ChannelTo(
    const std::string& id) {
  return ChannelToNodes({id});
}

std::shared_ptr<client::Channel> ClusterFixture::ChannelToNodes(
    const std::vector<std::string>& ids) {
  client::ChannelOptions options;
  options.token = token_;
  options.address.clear();
  for (const std::string& id : ids) {
    if (!options.address.empty()) options.address += ",";
    options.address += nodes_.at(id)->address();
  }
  absl::StatusOr<std::shared_ptr<client::Channel>> channel =
      client::Channel::Create(options);
  EXPECT_TRUE(channel.ok()) << channel.status();
  return channel.ok() ? *std::move(channel) : nullptr;
}

}  // namespace hourglass::testing
