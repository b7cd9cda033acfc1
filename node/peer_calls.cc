#include "node/peer_calls.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "grpcpp/grpcpp.h"
#include "replication/checkpoint_fetch.h"
#include "replication/replication.grpc.pb.h"

namespace hourglass::node {
namespace {

namespace v1 = ::hourglass::replication::v1;

int64_t Micros(absl::Duration d) { return absl::ToInt64Microseconds(d); }

void ToProto(const broker::TopicStats& in, v1::ShardTopicStats* out) {
  out->set_topic(in.topic);
  out->set_scheduled(in.scheduled);
  out->set_ready(in.ready);
  out->set_in_flight(in.in_flight);
  out->set_messages(in.messages);
  out->set_dead_lettered(in.dead_lettered);
  out->set_publish_rate(in.activity.publish_rate);
  out->set_delivery_rate(in.activity.delivery_rate);
  out->set_lateness_p50_us(Micros(in.activity.lateness.p50));
  out->set_lateness_p90_us(Micros(in.activity.lateness.p90));
  out->set_lateness_p99_us(Micros(in.activity.lateness.p99));
  out->set_lateness_max_us(Micros(in.activity.lateness.max));
  for (const broker::GroupStats& g : in.groups) {
    v1::ShardGroupStats* group = out->add_groups();
    group->set_group(g.group);
    group->set_created_at_ms(absl::ToUnixMillis(g.created_at));
    group->set_ready(g.ready);
    group->set_in_flight(g.in_flight);
    group->set_consumers(g.consumers);
    group->set_ack_rate(g.ack_rate);
  }
}

broker::TopicStats FromProto(const v1::ShardTopicStats& in) {
  broker::TopicStats out;
  out.topic = in.topic();
  out.scheduled = in.scheduled();
  out.ready = in.ready();
  out.in_flight = in.in_flight();
  out.messages = in.messages();
  out.dead_lettered = in.dead_lettered();
  out.activity.publish_rate = in.publish_rate();
  out.activity.delivery_rate = in.delivery_rate();
  out.activity.lateness = {absl::Microseconds(in.lateness_p50_us()),
                           absl::Microseconds(in.lateness_p90_us()),
                           absl::Microseconds(in.lateness_p99_us()),
                           absl::Microseconds(in.lateness_max_us())};
  for (const v1::ShardGroupStats& g : in.groups()) {
    out.groups.push_back({.group = g.group(),
                          .created_at = absl::FromUnixMillis(g.created_at_ms()),
                          .ready = g.ready(),
                          .in_flight = g.in_flight(),
                          .consumers = g.consumers(),
                          .ack_rate = g.ack_rate()});
  }
  return out;
}

// One GetShardStats call in flight; deletes itself when it ends.
struct Call {
  std::string address;
  std::vector<int> shards;
  ShardRouter::StatsCallback done;
  std::unique_ptr<v1::Replication::Stub> stub;
  grpc::ClientContext context;
  v1::ShardStatsRequest request;
  v1::ShardStatsResponse response;

  void Finish(const grpc::Status& status) {
    if (!status.ok()) {
      std::move(done)(absl::Status(
          static_cast<absl::StatusCode>(status.error_code()),
          absl::StrCat("the stats of shard", shards.size() == 1 ? " " : "s ",
                       absl::StrJoin(shards, ","), " from their primary at ",
                       address, ": ", status.error_message())));
      return;
    }
    std::vector<broker::TopicStats> stats;
    stats.reserve(static_cast<size_t>(response.topics_size()));
    for (const v1::ShardTopicStats& t : response.topics()) {
      stats.push_back(FromProto(t));
    }
    std::move(done)(std::move(stats));
  }
};

}  // namespace

PeerCalls::PeerCalls(
    std::function<std::shared_ptr<grpc::Channel>(const std::string&)> channel,
    std::string node_id, absl::Duration timeout,
    absl::Duration checkpoint_timeout)
    : channel_(std::move(channel)),
      node_id_(std::move(node_id)),
      timeout_(timeout),
      checkpoint_timeout_(checkpoint_timeout) {}

PeerCalls::~PeerCalls() {
  // A copy's callback may start the next (the next shard of a snapshot).
  while (true) {
    std::vector<Copy> copies;
    {
      absl::MutexLock lock(&mu_);
      copies.swap(copies_);
    }
    if (copies.empty()) return;
    for (Copy& copy : copies) copy.thread.join();
  }
}

std::shared_ptr<grpc::Channel> PeerCalls::ChannelTo(
    const std::string& address) {
  absl::MutexLock lock(&mu_);
  std::shared_ptr<grpc::Channel>& channel = channels_[address];
  if (channel == nullptr) channel = channel_(address);
  return channel;
}

void PeerCalls::Stats(const std::string& address, std::vector<int> shards,
                      ShardRouter::StatsCallback done) {
  auto* call = new Call;
  call->address = address;
  call->done = std::move(done);
  for (int shard : shards) call->request.add_shards(shard);
  call->shards = std::move(shards);
  call->stub = v1::Replication::NewStub(ChannelTo(address));
  call->context.set_deadline(absl::ToChronoTime(absl::Now() + timeout_));
  call->stub->async()->GetShardStats(&call->context, &call->request,
                                     &call->response,
                                     [call](grpc::Status status) {
                                       call->Finish(status);
                                       delete call;
                                     });
}

void PeerCalls::Checkpoint(
    const std::string& address, int shard, std::string dir,
    broker::Broker::Callback<absl::StatusOr<storage::CheckpointInfo>> done) {
  std::shared_ptr<grpc::Channel> channel = ChannelTo(address);
  std::vector<Copy> ended;
  {
    absl::MutexLock lock(&mu_);
    auto running =
        std::partition(copies_.begin(), copies_.end(),
                       [](const Copy& copy) { return !copy.finished->load(); });
    std::move(running, copies_.end(), std::back_inserter(ended));
    copies_.erase(running, copies_.end());
    auto finished = std::make_shared<std::atomic<bool>>(false);
    copies_.push_back(
        {std::thread([channel = std::move(channel), shard, dir = std::move(dir),
                      done = std::move(done), timeout = checkpoint_timeout_,
                      asker = replication::CheckpointAsker{.node = node_id_,
                                                           .snapshot = true},
                      finished]() mutable {
           std::move(done)(replication::FetchCheckpoint(
               std::move(channel), shard, asker, dir, timeout));
           finished->store(true);
         }),
         finished});
  }
  // Ended or about to: their last step was to say so.
  for (Copy& copy : ended) copy.thread.join();
}

absl::Status PeerCalls::Serve(ShardRouter& router,
                              const v1::ShardStatsRequest& request,
                              v1::ShardStatsResponse* response) {
  const std::vector<int> shards(request.shards().begin(),
                                request.shards().end());
  absl::Notification answered;
  absl::StatusOr<std::vector<broker::TopicStats>> stats;
  router.LocalStats(shards,
                    [&](absl::StatusOr<std::vector<broker::TopicStats>> got) {
                      stats = std::move(got);
                      answered.Notify();
                    });
  // The broker answers every call exactly once (broker/broker.h).
  answered.WaitForNotification();
  if (!stats.ok()) return stats.status();
  for (const broker::TopicStats& t : *stats) ToProto(t, response->add_topics());
  return absl::OkStatus();
}

}  // namespace hourglass::node
