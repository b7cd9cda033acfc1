#ifndef HOURGLASS_TESTS_CLUSTER_CHAOS_LOAD_H_
#define HOURGLASS_TESTS_CLUSTER_CHAOS_LOAD_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "client/channel.h"
#include "client/consumer.h"
#include "tests/cluster/ledger.h"

namespace hourglass::testing {

// The chaos harness's clients, at a steady pace, over the client library
// (which routes each call by topic to its shard's primary): two publishers
// (about 100 messages a second each, in turn over `topics`; a fifth of
// them due in 2 to 4 s, half of those cancelled at once by a third
// thread), and a consumer per topic in group "ledger" acking all.
// Everything they learn goes to the ledger.
//
// Start, StopPublishing, SetPayloadSize and Close are for one test thread;
// the clients run on threads of their own.
class ChaosLoad {
 public:
  // `addresses`: the cluster's nodes, comma-separated; `seed` draws the
  // delays.
  ChaosLoad(std::string addresses, std::vector<std::string> topics,
            uint64_t seed, Ledger& ledger)
      : addresses_(std::move(addresses)),
        topics_(std::move(topics)),
        seed_(seed),
        ledger_(ledger) {}
  ~ChaosLoad();

  absl::Status Start();
  // Stops publishing and cancelling; the consumers go on.
  void StopPublishing();
  // From now on, payloads of `bytes` (at least the id): large ones make the
  // nodes' RocksDB flush and switch logs within seconds, which is when a
  // full disk shows (log space is allocated ahead).
  void SetPayloadSize(size_t bytes) { payload_bytes_.store(bytes); }
  // Closes the consumers.
  void Close();

 private:
  struct ToCancel {
    std::string topic;
    std::string id;
  };

  void Publish(int publisher);
  void CancelSome();

  const std::string addresses_;
  const std::vector<std::string> topics_;
  const uint64_t seed_;
  Ledger& ledger_;
  std::shared_ptr<client::Channel> channel_;
  std::vector<std::unique_ptr<client::Consumer>> consumers_;
  std::vector<std::thread> threads_;
  std::atomic<size_t> payload_bytes_{0};

  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<ToCancel> to_cancel_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hourglass::testing

#endif  // HOURGLASS_TESTS_CLUSTER_CHAOS_LOAD_H_
