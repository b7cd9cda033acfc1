#ifndef HOURGLASS_TESTS_SOAK_CONTEXT_H_
#define HOURGLASS_TESTS_SOAK_CONTEXT_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <random>
#include <string>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "client/admin.h"
#include "client/channel.h"
#include "client/publisher.h"
#include "tests/soak/ledger.h"

namespace hourglass::soak {

// What the soak driver's flags set. Constant once the workers start.
struct Config {
  uint64_t seed = 0;
  std::string topic = "soak";
  int producers = 3;
  int groups = 2;
  int consumers_per_group = 2;
  // Mean pause between two publishes of one producer.
  absl::Duration publish_gap = absl::Milliseconds(40);
  // Delays are drawn from [0, max_delay].
  absl::Duration max_delay = absl::Seconds(3);
  // Mean time a consumer stays connected before it disconnects itself.
  absl::Duration mean_connected = absl::Seconds(8);
  // The broker's --max_attempts; consumers always ack from half of it on,
  // so that nothing is dead-lettered.
  uint32_t max_attempts = 16;
  // Deadline of each unary call and of each connection attempt.
  absl::Duration call_timeout = absl::Seconds(10);
};

// Event counts the ledger does not keep. Any thread.
struct Counters {
  std::atomic<uint64_t> publish_calls{0};
  std::atomic<uint64_t> publish_unknown{0};      // UNAVAILABLE, deadline, ...
  std::atomic<uint64_t> publish_retry_later{0};  // RESOURCE_EXHAUSTED, ABORTED
  std::atomic<uint64_t> bad_batches{0};          // sent with a bad message
  std::atomic<uint64_t> cancel_calls{0};
  std::atomic<uint64_t> nacks{0};
  std::atomic<uint64_t> ignored{0};      // left to the ack timeout
  std::atomic<uint64_t> disconnects{0};  // by the consumer
  std::atomic<uint64_t> stream_ends{0};  // by the broker or the network
  std::atomic<uint64_t> connects{0};
  std::atomic<uint64_t> unexpected_codes{0};  // logged as they happen
};

// Everything the workers share.
struct Shared {
  Config config;
  std::string addr_file;
  Ledger* ledger = nullptr;
  Counters counters;
  // Producers and the canceller stop at the first; consumers turn to
  // acking everything at once, and stop at the second.
  absl::Notification stop_producing;
  absl::Notification stop_all;
};

// A worker's random numbers: its own generator, derived from the seed, its
// role and its index, so that a seed reproduces each worker's choices.
std::mt19937_64 WorkerRng(uint64_t seed, int role, int index);

// Waits between attempts to reach the broker: 50 ms, doubling up to 1 s,
// with jitter. Not thread-safe: one per worker.
class Backoff {
 public:
  explicit Backoff(std::mt19937_64* rng) : rng_(rng) {}
  void Reset() { next_ = kFirst; }
  // Waits the next delay; false if `stop` was notified instead.
  bool Wait(const absl::Notification& stop);

 private:
  static constexpr absl::Duration kFirst = absl::Milliseconds(50);
  static constexpr absl::Duration kMax = absl::Seconds(1);
  std::mt19937_64* const rng_;
  absl::Duration next_ = kFirst;
};

// A worker's connection to the broker: a client::Channel of its own, and
// the clients on it. The Publisher makes one attempt per call (its retries
// are off): the soak retries itself, telling the ledger of every attempt.
struct Connection {
  std::shared_ptr<client::Channel> channel;
  std::unique_ptr<client::Publisher> publisher;
  std::unique_ptr<client::Admin> admin;
};

// Connects to the broker at the address the soak script last wrote to
// `shared.addr_file` (it changes only if a restart could not bind the old
// port), on a TCP connection of its own, retrying with `backoff` until it
// succeeds; nullptr once `stop` is notified or `deadline` passed.
std::unique_ptr<Connection> Connect(
    Shared& shared, const absl::Notification& stop, Backoff& backoff,
    absl::Time deadline = absl::InfiniteFuture());

// True for codes after which a call's effect is unknown: it may or may not
// have reached the broker and taken effect.
bool OutcomeUnknown(absl::StatusCode code);

// Counts and logs a status the soak does not expect from a call.
void ReportUnexpected(Shared& shared, const std::string& call,
                      const absl::Status& status);

}  // namespace hourglass::soak

#endif  // HOURGLASS_TESTS_SOAK_CONTEXT_H_
