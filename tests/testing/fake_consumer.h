#ifndef HOURGLASS_TESTS_TESTING_FAKE_CONSUMER_H_
#define HOURGLASS_TESTS_TESTING_FAKE_CONSUMER_H_

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "broker/consumer.h"
#include "broker/dispatcher.h"

namespace hourglass::testing {

// A consumer stream that records what it is sent and, like a real one,
// reports the deliveries of each Send as written at once, in one call;
// or, once HoldWrites was called, like a stream whose client stopped
// reading, reports nothing until WriteHeld. For tests that drive a
// Dispatcher (tests/broker/dispatcher_test.cc, expiry_test.cc).
//
// Thread-safe: the dispatcher's step calls Send, End and Abort while the
// test calls the rest.
class FakeConsumer final : public broker::Consumer {
 public:
  void Send(std::vector<broker::Delivery> deliveries) override {
    const size_t count = deliveries.size();
    size_t bytes = 0;
    bool report = false;
    {
      absl::MutexLock lock(&mu_);
      for (broker::Delivery& d : deliveries) {
        bytes += broker::DeliveryBytes(d);
        received_.push_back(std::move(d));
      }
      if (holding_) {
        held_ += count;
        held_bytes_ += bytes;
      } else {
        report = true;
      }
    }
    if (report && dispatcher_ != nullptr) {
      dispatcher_->Written(id_, count, bytes);
    }
  }
  // Reports writes to `dispatcher` as consumer `id` from now on.
  void Attach(broker::Dispatcher* dispatcher,
              broker::Dispatcher::ConsumerId id) {
    dispatcher_ = dispatcher;
    id_ = id;
  }
  void End(absl::Status status) override {
    absl::MutexLock lock(&mu_);
    ended_ = std::move(status);
  }
  void Abort(absl::Status status) override {
    absl::MutexLock lock(&mu_);
    aborted_ = std::move(status);
  }

  // From now on, what arrives is not written until WriteHeld.
  void HoldWrites() {
    absl::MutexLock lock(&mu_);
    holding_ = true;
  }
  // Writes what was held (and reports it), and writes at once again.
  void WriteHeld() {
    size_t count, bytes;
    {
      absl::MutexLock lock(&mu_);
      holding_ = false;
      count = std::exchange(held_, 0);
      bytes = std::exchange(held_bytes_, 0);
    }
    if (count > 0) dispatcher_->Written(id_, count, bytes);
  }

  // Takes what arrived since the last call.
  std::vector<broker::Delivery> Take() {
    absl::MutexLock lock(&mu_);
    return std::exchange(received_, {});
  }
  std::optional<absl::Status> ended() {
    absl::MutexLock lock(&mu_);
    return ended_;
  }
  std::optional<absl::Status> aborted() {
    absl::MutexLock lock(&mu_);
    return aborted_;
  }

 private:
  absl::Mutex mu_;
  std::vector<broker::Delivery> received_ ABSL_GUARDED_BY(mu_);
  std::optional<absl::Status> ended_ ABSL_GUARDED_BY(mu_);
  std::optional<absl::Status> aborted_ ABSL_GUARDED_BY(mu_);
  bool holding_ ABSL_GUARDED_BY(mu_) = false;
  size_t held_ ABSL_GUARDED_BY(mu_) = 0;
  size_t held_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // Set before any step that could send to it.
  broker::Dispatcher* dispatcher_ = nullptr;
  broker::Dispatcher::ConsumerId id_ = 0;
};

// "id@attempt", for compact expectations.
inline std::vector<std::string> Ids(
    const std::vector<broker::Delivery>& deliveries) {
  std::vector<std::string> ids;
  for (const broker::Delivery& d : deliveries) {
    ids.push_back(absl::StrCat(d.id, "@", d.attempt));
  }
  return ids;
}

}  // namespace hourglass::testing

#endif  // HOURGLASS_TESTS_TESTING_FAKE_CONSUMER_H_
