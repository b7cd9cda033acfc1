// What does one unbatched Publish cost in gRPC alone, on this machine? A
// Broker service whose Publish stores nothing and answers with a receipt at
// once, and a client that keeps 64 calls in flight on one channel (what
// `hourglass bench --batch=1 --concurrency=64` does), both in this process
// over 127.0.0.1. It bounds what hourglassd can reach unbatched: every real
// publish also validates, writes and syncs.
//
//   Inline           the handler finishes the call on gRPC's thread.
//   OtherThread      the handler hands the call to a thread of its own,
//                    which finishes it (as hourglassd's commit queue does).
//
// Counters: calls/s (items_per_second), and cpu_us_per_call: the process's
// user + system CPU per call, client and server together.
//
//   build/bench/tests/bench/grpc_unary_floor_bench

#include <sys/resource.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "benchmark/benchmark.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "hourglass/v1/broker.grpc.pb.h"

namespace hourglass {
namespace {

constexpr int kInFlight = 64;
constexpr int kCallsPerIteration = 20000;

// Finishes the reactors handed to it, in order, on its own thread.
class Finisher {
 public:
  Finisher() : thread_([this] { Run(); }) {}
  ~Finisher() {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    thread_.join();
  }
  void Add(grpc::ServerUnaryReactor* reactor) {
    absl::MutexLock lock(&mu_);
    queue_.push_back(reactor);
  }

 private:
  void Run() {
    while (true) {
      std::deque<grpc::ServerUnaryReactor*> batch;
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(
            +[](Finisher* f) ABSL_EXCLUSIVE_LOCKS_REQUIRED(f->mu_) {
              return f->stopping_ || !f->queue_.empty();
            },
            this));
        if (queue_.empty()) return;
        batch.swap(queue_);
      }
      for (grpc::ServerUnaryReactor* r : batch) r->Finish(grpc::Status::OK);
    }
  }

  absl::Mutex mu_;
  std::deque<grpc::ServerUnaryReactor*> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

class NullBroker final : public v1::Broker::CallbackService {
 public:
  explicit NullBroker(Finisher* finisher) : finisher_(finisher) {}
  grpc::ServerUnaryReactor* Publish(grpc::CallbackServerContext* context,
                                    const v1::PublishRequest* request,
                                    v1::PublishResponse* response) override {
    for (const v1::Message& m : request->messages()) {
      v1::Receipt* receipt = response->add_receipts();
      receipt->set_id(m.id().empty() ? "hg-0000000000000001" : m.id());
      receipt->mutable_deliver_at()->set_seconds(1);
    }
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    if (finisher_ == nullptr) {
      reactor->Finish(grpc::Status::OK);
    } else {
      finisher_->Add(reactor);
    }
    return reactor;
  }

 private:
  Finisher* const finisher_;
};

double CpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

// Makes `calls` calls with kInFlight in flight; returns when all answered.
void Drive(v1::Broker::Stub& stub, int calls) {
  struct Slot {
    grpc::ClientContext context;
    v1::PublishRequest request;
    v1::PublishResponse response;
  };
  std::atomic<int> started{0};
  std::atomic<int> finished{0};
  absl::Notification done;
  // One slot per call in flight. A call's callback starts the next call in
  // its slot, destroying its own context, as `hourglass bench` does: gRPC
  // is done with a unary call's context once its callback runs.
  std::vector<std::unique_ptr<Slot>> slots(kInFlight);
  std::function<void(int)> start = [&](int i) {
    if (started.fetch_add(1) >= calls) return;
    slots[i] = std::make_unique<Slot>();
    Slot& slot = *slots[i];
    v1::Message* m = slot.request.add_messages();
    m->set_topic("orders");
    m->set_payload(std::string(100, 'x'));
    m->mutable_delay()->set_seconds(3600);
    stub.async()->Publish(&slot.context, &slot.request, &slot.response,
                          [&, i](grpc::Status status) {
                            if (!status.ok()) {
                              std::cerr << "Publish: " << status.error_message()
                                        << "\n";
                              std::abort();
                            }
                            if (finished.fetch_add(1) + 1 == calls) {
                              done.Notify();
                              return;
                            }
                            start(i);
                          });
  };
  for (int i = 0; i < kInFlight; ++i) start(i);
  done.WaitForNotification();
}

void BM_Publish(benchmark::State& state, bool other_thread) {
  std::unique_ptr<Finisher> finisher;
  if (other_thread) finisher = std::make_unique<Finisher>();
  NullBroker service(finisher.get());
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                           &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    state.SkipWithError("cannot start the server");
    return;
  }
  auto stub = v1::Broker::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  Drive(*stub, 1000);  // Connects and warms up.
  const double cpu_before = CpuSeconds();
  for (auto _ : state) Drive(*stub, kCallsPerIteration);
  const double calls =
      static_cast<double>(state.iterations()) * kCallsPerIteration;
  state.SetItemsProcessed(static_cast<int64_t>(calls));
  state.counters["cpu_us_per_call"] = (CpuSeconds() - cpu_before) * 1e6 / calls;
  server->Shutdown();
}

BENCHMARK_CAPTURE(BM_Publish, Inline, false)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Publish, OtherThread, true)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace hourglass

BENCHMARK_MAIN();
