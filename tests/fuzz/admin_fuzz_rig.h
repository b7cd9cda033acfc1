// The gRPC side of tests/fuzz/admin_fuzz.cc: a server built without a
// listening port, whose Admin and Broker services forward to the current
// input's services, called over its in-process channel; and a consumer
// stream as the dispatcher sees it.

#ifndef HOURGLASS_TESTS_FUZZ_ADMIN_FUZZ_RIG_H_
#define HOURGLASS_TESTS_FUZZ_ADMIN_FUZZ_RIG_H_

#include <atomic>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "api/admin_service.h"
#include "api/broker_service.h"
#include "broker/consumer.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "grpcpp/support/channel_arguments.h"
#include "hourglass/v1/admin.grpc.pb.h"
#include "hourglass/v1/broker.grpc.pb.h"
#include "tests/fuzz/fuzz_check.h"

namespace hourglass::api::admin_fuzz {

namespace v1 = hourglass::v1;
using broker::Delivery;

// ---- The gRPC server: one per process (building one costs more than an
// input's run); each input points it at its own services.

class AdminForwarder final : public v1::Admin::CallbackService {
 public:
  void Set(AdminService* target) { target_.store(target); }

  grpc::ServerUnaryReactor* GetStats(grpc::CallbackServerContext* c,
                                     const v1::GetStatsRequest* q,
                                     v1::GetStatsResponse* r) override {
    return target_.load()->GetStats(c, q, r);
  }
  grpc::ServerUnaryReactor* ListTopics(grpc::CallbackServerContext* c,
                                       const v1::ListTopicsRequest* q,
                                       v1::ListTopicsResponse* r) override {
    return target_.load()->ListTopics(c, q, r);
  }
  grpc::ServerUnaryReactor* ListGroups(grpc::CallbackServerContext* c,
                                       const v1::ListGroupsRequest* q,
                                       v1::ListGroupsResponse* r) override {
    return target_.load()->ListGroups(c, q, r);
  }
  grpc::ServerUnaryReactor* CreateGroup(grpc::CallbackServerContext* c,
                                        const v1::CreateGroupRequest* q,
                                        v1::Group* r) override {
    return target_.load()->CreateGroup(c, q, r);
  }
  grpc::ServerUnaryReactor* DeleteGroup(grpc::CallbackServerContext* c,
                                        const v1::DeleteGroupRequest* q,
                                        v1::DeleteGroupResponse* r) override {
    return target_.load()->DeleteGroup(c, q, r);
  }
  grpc::ServerUnaryReactor* ListMessages(grpc::CallbackServerContext* c,
                                         const v1::ListMessagesRequest* q,
                                         v1::ListMessagesResponse* r) override {
    return target_.load()->ListMessages(c, q, r);
  }
  grpc::ServerUnaryReactor* GetMessage(grpc::CallbackServerContext* c,
                                       const v1::GetMessageRequest* q,
                                       v1::MessageInfo* r) override {
    return target_.load()->GetMessage(c, q, r);
  }
  grpc::ServerUnaryReactor* CancelMessage(grpc::CallbackServerContext* c,
                                          const v1::CancelRequest* q,
                                          v1::CancelResponse* r) override {
    return target_.load()->CancelMessage(c, q, r);
  }
  grpc::ServerUnaryReactor* Reschedule(grpc::CallbackServerContext* c,
                                       const v1::RescheduleRequest* q,
                                       v1::Receipt* r) override {
    return target_.load()->Reschedule(c, q, r);
  }
  grpc::ServerUnaryReactor* RedriveDeadLetters(
      grpc::CallbackServerContext* c, const v1::RedriveDeadLettersRequest* q,
      v1::RedriveDeadLettersResponse* r) override {
    return target_.load()->RedriveDeadLetters(c, q, r);
  }
  grpc::ServerUnaryReactor* PurgeTopic(grpc::CallbackServerContext* c,
                                       const v1::PurgeTopicRequest* q,
                                       v1::PurgeTopicResponse* r) override {
    return target_.load()->PurgeTopic(c, q, r);
  }

 private:
  std::atomic<AdminService*> target_{nullptr};
};

// Broker.Publish only: the fuzzer's producers.
class BrokerForwarder final : public v1::Broker::CallbackService {
 public:
  void Set(BrokerService* target) { target_.store(target); }

  grpc::ServerUnaryReactor* Publish(grpc::CallbackServerContext* c,
                                    const v1::PublishRequest* q,
                                    v1::PublishResponse* r) override {
    return target_.load()->Publish(c, q, r);
  }

 private:
  std::atomic<BrokerService*> target_{nullptr};
};

struct Rig {
  AdminForwarder admin;
  BrokerForwarder broker;
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<v1::Admin::Stub> admin_stub;
  std::unique_ptr<v1::Broker::Stub> broker_stub;
};

// Built on first use, never destroyed (inputs run until the process ends).
inline Rig& TheRig() {
  static Rig* const rig = [] {
    auto* r = new Rig;
    grpc::ServerBuilder builder;
    builder.RegisterService(&r->admin);
    builder.RegisterService(&r->broker);
    r->server = builder.BuildAndStart();
    FUZZ_CHECK(r->server != nullptr, "the gRPC server did not start");
    std::shared_ptr<grpc::Channel> channel =
        r->server->InProcessChannel(grpc::ChannelArguments());
    r->admin_stub = v1::Admin::NewStub(channel);
    r->broker_stub = v1::Broker::NewStub(channel);
    return r;
  }();
  return *rig;
}

// ---- Consumers: streams as the dispatcher sees them.

class Inbox final : public broker::Consumer {
 public:
  void Send(std::vector<Delivery> deliveries) override {
    absl::MutexLock lock(&mu_);
    for (Delivery& d : deliveries) received_.push_back(std::move(d));
  }
  void End(absl::Status status) override {
    absl::MutexLock lock(&mu_);
    ended_ = std::move(status);
  }
  std::vector<Delivery> Take() {
    absl::MutexLock lock(&mu_);
    return std::exchange(received_, {});
  }
  std::optional<absl::Status> ended() {
    absl::MutexLock lock(&mu_);
    return ended_;
  }

 private:
  absl::Mutex mu_;
  std::vector<Delivery> received_ ABSL_GUARDED_BY(mu_);
  std::optional<absl::Status> ended_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hourglass::api::admin_fuzz

#endif  // HOURGLASS_TESTS_FUZZ_ADMIN_FUZZ_RIG_H_
