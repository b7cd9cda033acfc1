#ifndef HOURGLASS_TESTS_CLIENT_FAKE_BROKER_H_
#define HOURGLASS_TESTS_CLIENT_FAKE_BROKER_H_

#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "grpcpp/server_context.h"
#include "hourglass/v1/broker.grpc.pb.h"

namespace hourglass::testing {

// A Broker service whose answers a test scripts, on 127.0.0.1 with a port
// the OS picks: for what a real broker does only by accident (UNAVAILABLE
// mid-publish, ABORTED, no answer at all). It records what it was sent.
//
// Thread-safe: gRPC's threads serve, the test scripts and reads.
class FakeBroker final : public hourglass::v1::Broker::Service {
 public:
  // What the next Publish call, or the next request on a PublishStream,
  // gets: an error, receipts (OK), no answer until the test releases it
  // (kHang), or, on a stream, the stream's end with UNAVAILABLE (kBreak).
  struct Answer {
    enum class Kind { kStatus, kHang, kBreak } kind = Kind::kStatus;
    grpc::Status status;
    // Trailing metadata sent with it (a redirect's, a shard count).
    std::vector<std::pair<std::string, std::string>> trailers;
  };
  static Answer Ok() { return {}; }
  static Answer Fail(grpc::StatusCode code, std::string message) {
    return {Answer::Kind::kStatus, grpc::Status(code, std::move(message))};
  }
  static Answer Hang() { return {Answer::Kind::kHang, grpc::Status::OK}; }
  static Answer Break() { return {Answer::Kind::kBreak, grpc::Status::OK}; }

  FakeBroker() {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port_);
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
  }
  ~FakeBroker() override {
    Release();
    server_->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  }

  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }

  // Answers to come, in order; once used up, OK.
  void Script(std::vector<Answer> answers) {
    absl::MutexLock lock(&mu_);
    for (Answer& a : answers) script_.push_back(std::move(a));
  }
  // Lets the hung answers go (with UNAVAILABLE). From the test's thread.
  void Release() {
    if (!release_.HasBeenNotified()) release_.Notify();
  }

  // The Publish calls, and the requests on PublishStreams, in order.
  std::vector<hourglass::v1::PublishRequest> publishes() {
    absl::MutexLock lock(&mu_);
    return publishes_;
  }
  int streams() {
    absl::MutexLock lock(&mu_);
    return streams_;
  }
  int cancels() {
    absl::MutexLock lock(&mu_);
    return cancels_;
  }
  // The "authorization" metadata of every call, in order ("" if none).
  std::vector<std::string> authorizations() {
    absl::MutexLock lock(&mu_);
    return authorizations_;
  }

  grpc::Status Publish(grpc::ServerContext* context,
                       const hourglass::v1::PublishRequest* request,
                       hourglass::v1::PublishResponse* response) override {
    const Answer answer = Next(context, *request);
    for (const auto& [key, value] : answer.trailers) {
      context->AddTrailingMetadata(key, value);
    }
    if (answer.kind == Answer::Kind::kHang) {
      release_.WaitForNotification();
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "released");
    }
    if (!answer.status.ok()) return answer.status;
    Fill(*request, *response->mutable_receipts());
    return grpc::Status::OK;
  }

  grpc::Status PublishStream(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<hourglass::v1::PublishStreamResponse,
                               hourglass::v1::PublishRequest>* stream)
      override {
    {
      absl::MutexLock lock(&mu_);
      ++streams_;
    }
    hourglass::v1::PublishRequest request;
    while (stream->Read(&request)) {
      const Answer answer = Next(context, request);
      if (answer.kind == Answer::Kind::kHang) {
        release_.WaitForNotification();
        return grpc::Status(grpc::StatusCode::UNAVAILABLE, "released");
      }
      if (answer.kind == Answer::Kind::kBreak) {
        return grpc::Status(grpc::StatusCode::UNAVAILABLE, "going away");
      }
      hourglass::v1::PublishStreamResponse response;
      hourglass::v1::PublishAnswer* a = response.add_answers();
      a->set_code(answer.status.error_code());
      a->set_message(answer.status.error_message());
      if (answer.status.ok()) Fill(request, *a->mutable_receipts());
      if (!stream->Write(response)) break;
    }
    return grpc::Status::OK;
  }

  grpc::Status Cancel(grpc::ServerContext* context,
                      const hourglass::v1::CancelRequest* request,
                      hourglass::v1::CancelResponse* response) override {
    Answer answer;
    {
      absl::MutexLock lock(&mu_);
      ++cancels_;
      authorizations_.push_back(Authorization(*context));
      if (!script_.empty()) {
        answer = std::move(script_.front());
        script_.pop_front();
      }
    }
    return answer.status;
  }

 private:
  static std::string Authorization(const grpc::ServerContext& context) {
    const auto& metadata = context.client_metadata();
    const auto it = metadata.find("authorization");
    return it == metadata.end()
               ? ""
               : std::string(it->second.data(), it->second.size());
  }

  // Records `request` and takes the next scripted answer.
  Answer Next(grpc::ServerContext* context,
              const hourglass::v1::PublishRequest& request) {
    absl::MutexLock lock(&mu_);
    publishes_.push_back(request);
    authorizations_.push_back(Authorization(*context));
    if (script_.empty()) return Ok();
    Answer answer = std::move(script_.front());
    script_.pop_front();
    return answer;
  }

  // A receipt per message: its id (or one made up), due in an hour.
  static void Fill(
      const hourglass::v1::PublishRequest& request,
      google::protobuf::RepeatedPtrField<hourglass::v1::Receipt>& receipts) {
    int i = 0;
    for (const hourglass::v1::Message& m : request.messages()) {
      hourglass::v1::Receipt* r = receipts.Add();
      r->set_id(m.id().empty() ? absl::StrCat("fake-", i) : m.id());
      r->mutable_deliver_at()->set_seconds(absl::ToUnixSeconds(absl::Now()) +
                                           3600);
      ++i;
    }
  }

  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  absl::Notification release_;

  absl::Mutex mu_;
  std::deque<Answer> script_ ABSL_GUARDED_BY(mu_);
  std::vector<hourglass::v1::PublishRequest> publishes_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> authorizations_ ABSL_GUARDED_BY(mu_);
  int streams_ ABSL_GUARDED_BY(mu_) = 0;
  int cancels_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace hourglass::testing

#endif  // HOURGLASS_TESTS_CLIENT_FAKE_BROKER_H_
