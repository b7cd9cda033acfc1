#ifndef HOURGLASS_BROKER_CONSUMER_H_
#define HOURGLASS_BROKER_CONSUMER_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace hourglass::broker {

// A consumer stream, as the broker knows it while it is subscribed.
using ConsumerId = uint64_t;

// What a consumer stream asks for when it subscribes (Broker::Subscribe).
struct SubscribeOptions {
  std::string topic;
  std::string group;
  // Credit: deliveries in flight at once; 0 means the broker's default.
  uint32_t max_in_flight = 0;
  // Zero means the broker's default. REQUIRES: not negative.
  absl::Duration ack_timeout = absl::ZeroDuration();
  // Whether subscribing may register the group if it does not exist.
  bool may_create_group = true;
};

// One message handed to a consumer.
struct Delivery {
  std::string id;
  std::string topic;
  std::string payload;
  std::map<std::string, std::string> headers;
  absl::Time deliver_at;
  absl::Time published_at;
  // 1 for the first delivery to the group (plus, for a dead letter, the
  // deliveries made in the original topic).
  uint32_t attempt = 0;
};

// The bytes a delivery costs a stream's outbox: its id, topic, payload and
// headers. The dispatcher counts what it hands a stream with it, and the
// stream reports what it wrote with it (Dispatcher::Written), so the two
// counts agree.
size_t DeliveryBytes(const Delivery& delivery);

// A consumer stream as the dispatcher sees it. The API's Subscribe reactor
// implements it; so do tests.
//
// The dispatcher calls Send from its own thread, in delivery order, and End
// or Abort at most once (one of them), never while holding a lock; no Send
// follows either. All may come after Unsubscribe (the stream then drops
// them). None may block.
//
// What the dispatcher sends waits in the stream's outbox until it is
// written to the network. The stream reports what it has written with
// Dispatcher::Written, any number of deliveries per call, soon after the
// writes (how the API's reactor groups its reports: api/subscribe_stream.cc,
// OnWriteDone). The dispatcher bounds each outbox by those reports (in
// deliveries and in bytes) and ends a stream that writes nothing for too
// long; a delivery's ack timeout does not wait for them: it runs from the
// hand-over.
class Consumer {
 public:
  virtual ~Consumer() = default;
  virtual void Send(std::vector<Delivery> deliveries) = 0;
  // The broker ends the stream (it is shutting down, or the stream's group
  // was deleted): a write in progress may finish first.
  virtual void End(absl::Status status) = 0;
  // The broker ends the stream at once (it wrote nothing for the stall
  // timeout): a write in progress is abandoned, since it may never finish.
  // Default: End.
  virtual void Abort(absl::Status status) { End(std::move(status)); }
};

}  // namespace hourglass::broker

#endif  // HOURGLASS_BROKER_CONSUMER_H_
