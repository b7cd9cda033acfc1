#ifndef HOURGLASS_TESTS_SOAK_CONSUMER_H_
#define HOURGLASS_TESTS_SOAK_CONSUMER_H_

#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "client/consumer.h"
#include "tests/soak/context.h"

namespace hourglass::soak {

// One consumer of a group: on a thread and a connection of its own,
// subscribes with a random credit and ack timeout and answers each
// delivery with an ack (most), a nack with a delay of up to 500 ms, or
// nothing (the ack timeout redelivers it). Now and then it disconnects, by
// cancelling the call or by ending its side, and comes back; when the
// broker goes away it reconnects with backoff. Every delivery and ack goes
// to the ledger. Once the soak stops producing it acks everything and
// stays connected; from --max_attempts / 2 on it always acks, so that
// nothing is dead-lettered.
//
// Start and Join are for the driver's thread.
class Consumer {
 public:
  Consumer(Shared* shared, int group, int index);

  // Starts the thread; it stops at shared->stop_all.
  void Start();
  void Join();

 private:
  enum class End { kStop, kDisconnected, kLost };

  void Run();
  // Serves one subscription until the consumer leaves it or loses it.
  End Serve(client::Consumer& subscription);
  // Answers the deliveries just read; false if the stream is gone.
  bool Answer(client::Consumer& subscription,
              const std::vector<client::Delivery>& received);
  // The next subscription's options: a random credit and ack timeout, and
  // no reconnecting (the consumer does that, with a new connection).
  client::ConsumerOptions NextOptions();

  Shared* const shared_;
  const int group_;
  std::mt19937_64 rng_;
  // Touched only by the consumer's thread.
  std::unique_ptr<Connection> connection_;
  std::thread thread_;
};

}  // namespace hourglass::soak

#endif  // HOURGLASS_TESTS_SOAK_CONSUMER_H_
