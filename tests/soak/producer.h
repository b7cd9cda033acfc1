#ifndef HOURGLASS_TESTS_SOAK_PRODUCER_H_
#define HOURGLASS_TESTS_SOAK_PRODUCER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/message.h"
#include "tests/soak/canceller.h"
#include "tests/soak/context.h"

namespace hourglass::soak {

// One producer: on a thread and a connection of its own, publishes batches
// of 1 to 20 messages with unique ids ("p<index>-<n>"), delays in
// [0, max_delay] (as a delay or as an absolute deliver_at), and now and then
// a batch with one bad message that the broker must refuse whole. A batch
// whose outcome is unknown (the broker went away mid-call) is sent again,
// with the same ids, until the broker answers it; the ledger hears of every
// attempt. Some published messages are offered to the canceller.
//
// Start and Join are for the driver's thread.
class Producer {
 public:
  Producer(Shared* shared, Canceller* canceller, int index);

  // Starts the thread; it stops publishing at shared->stop_producing, and
  // stops retrying the last batch at shared->stop_all.
  void Start();
  void Join();

 private:
  // A valid message of a batch, as the ledger hears of it.
  struct Entry {
    std::string id;
    size_t payload_size = 0;
    absl::Time earliest;  // The earliest deliver_at the broker may give it.
  };
  struct Batch {
    std::vector<client::Message> messages;
    // The valid messages, in request order, without the bad one.
    std::vector<Entry> entries;
    // The index in `messages` of the bad message; -1 if none.
    int bad_index = -1;
  };

  void Run();
  Batch NextBatch();
  // Sends `batch` until the broker answers it (or the soak stops).
  void Publish(const Batch& batch);
  // Handles the broker's answer to one attempt; false to send it again.
  bool Settle(const Batch& batch,
              const absl::StatusOr<std::vector<client::Receipt>>& receipts);
  void Succeeded(const Batch& batch,
                 const std::vector<client::Receipt>& receipts);
  // Offers some of the batch's messages to the canceller.
  void OfferCancels(const std::string& id, absl::Time deliver_at);

  Shared* const shared_;
  Canceller* const canceller_;
  const int index_;
  std::mt19937_64 rng_;
  uint64_t next_id_ = 0;
  // Touched only by the producer's thread.
  std::unique_ptr<Connection> connection_;
  std::thread thread_;
};

}  // namespace hourglass::soak

#endif  // HOURGLASS_TESTS_SOAK_PRODUCER_H_
