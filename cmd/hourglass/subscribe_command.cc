// hourglass subscribe: prints deliveries of a topic to a group as they
// arrive, and acknowledges them as --ack says.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/consumer.h"
#include "cmd/common/connection.h"
#include "cmd/common/duration.h"
#include "cmd/common/errors.h"
#include "cmd/common/output.h"
#include "cmd/common/signal_watcher.h"
#include "cmd/hourglass/command.h"
#include "cmd/hourglass/stdin_lines.h"
#include "hourglass/v1/broker.pb.h"

namespace hourglass::cli {
namespace {

using client::Consumer;
using client::Delivery;

struct SubscribeOptions {
  std::string topic;
  std::string group;
  std::string ack = "auto";
  uint32_t max_in_flight = 0;
  std::string ack_timeout;
  uint64_t count = 0;
};

// Where Ctrl-C goes: before the consumer is subscribed it ends the process
// at once (nothing was printed yet); afterwards it interrupts the consumer,
// which then ends cleanly; once the consumer is closed, nowhere.
class InterruptTarget {
 public:
  void Set(Consumer* consumer) {
    absl::MutexLock lock(&mu_);
    consumer_ = consumer;
  }
  // The consumer is closed and about to go.
  void Done() {
    absl::MutexLock lock(&mu_);
    consumer_ = nullptr;
    done_ = true;
  }
  void Interrupt() {
    absl::MutexLock lock(&mu_);
    if (done_) return;
    if (consumer_ == nullptr) std::_Exit(0);
    consumer_->Interrupt();
  }

 private:
  absl::Mutex mu_;
  Consumer* consumer_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
};

// One delivery as a key=value line, payload last:
//   id=m1 topic=orders attempt=1 deliver_at=2026-... header.k=v payload=hi
std::string HumanLine(const Delivery& d) {
  std::string line = absl::StrCat("id=", LogfmtValue(d.id), " topic=", d.topic,
                                  " attempt=", d.attempt,
                                  " deliver_at=", Rfc3339(d.deliver_at),
                                  " published_at=", Rfc3339(d.published_at));
  for (const auto& [key, value] : d.headers) {
    absl::StrAppend(&line, " header.", LogfmtValue(key), "=",
                    LogfmtValue(value));
  }
  absl::StrAppend(&line, " payload=", LogfmtValue(d.payload), "\n");
  return line;
}

// The delivery as protobuf's Delivery, for --json.
hourglass::v1::Delivery DeliveryProto(const Delivery& d) {
  hourglass::v1::Delivery proto;
  proto.set_id(d.id);
  proto.set_topic(d.topic);
  proto.set_payload(d.payload);
  for (const auto& [key, value] : d.headers) {
    (*proto.mutable_headers())[key] = value;
  }
  *proto.mutable_deliver_at() = ToProto(d.deliver_at);
  *proto.mutable_published_at() = ToProto(d.published_at);
  proto.set_attempt(d.attempt);
  return proto;
}

absl::Status Subscribe(const GlobalOptions& globals,
                       const SubscribeOptions& options) {
  client::ConsumerOptions consumer_options;
  consumer_options.topic = options.topic;
  consumer_options.group = options.group;
  consumer_options.max_in_flight = options.max_in_flight;
  consumer_options.rpc = client::ConsumerOptions::Rpc::kSubscribe;
  // The command ends with the stream: a broker that went away is an error
  // to report, not something to wait out.
  consumer_options.reconnect = false;
  if (!options.ack_timeout.empty()) {
    absl::StatusOr<absl::Duration> timeout = ParseDuration(options.ack_timeout);
    if (!timeout.ok()) {
      return UsageError("--ack-timeout", timeout.status().message());
    }
    consumer_options.ack_timeout = *timeout;
  }
  absl::StatusOr<absl::Duration> timeout = ParseTimeout(globals.timeout);
  if (!timeout.ok()) return timeout.status();

  // Before gRPC starts threads, so that they inherit the blocked signals.
  InterruptTarget target;
  SignalWatcher watcher([&target](int) { target.Interrupt(); });

  absl::StatusOr<std::unique_ptr<Connection>> connection =
      Connection::Open(globals);
  if (!connection.ok()) return connection.status();
  absl::StatusOr<std::unique_ptr<Consumer>> consumer =
      Consumer::Subscribe((*connection)->channel(), consumer_options);
  if (!consumer.ok()) return (*connection)->Check(consumer.status());
  target.Set(consumer->get());
  std::cerr << "subscribed to " << options.topic << " as group "
            << options.group << " (ack=" << options.ack << ")" << std::endl;

  std::optional<StdinLines> stdin_acks;
  if (options.ack == "manual") {
    // Each line is the id of a delivery to acknowledge; the end of input
    // ends the subscription, as no more acks can come.
    Consumer* c = consumer->get();
    stdin_acks.emplace(
        [c](std::string id) {
          // An ack that cannot go out means the stream ended: Close says
          // why.
          if (!id.empty()) c->Ack(id).IgnoreError();
        },
        [c] { c->Interrupt(); });
  }

  absl::Status printed;
  uint64_t delivered = 0;
  while (printed.ok() && (options.count == 0 || delivered < options.count)) {
    const std::vector<Delivery> deliveries = (*consumer)->Receive(
        options.count == 0 ? SIZE_MAX : options.count - delivered);
    if (deliveries.empty()) break;  // Ended or interrupted.
    for (const Delivery& delivery : deliveries) {
      if (globals.json) {
        printed = PrintJson(DeliveryProto(delivery));
        if (!printed.ok()) break;
      } else {
        std::cout << HumanLine(delivery) << std::flush;
      }
      if (options.ack == "auto") (*consumer)->Ack(delivery.id).IgnoreError();
      ++delivered;
    }
  }
  if (printed.ok() && options.ack == "manual") (*consumer)->AwaitAcked();

  // Deliveries taken but not acked go back to the group as the stream ends.
  const absl::Status status = (*consumer)->Close(absl::Now() + *timeout);
  stdin_acks.reset();
  target.Done();
  if (!printed.ok()) return printed;
  if (status.ok() || status.code() == absl::StatusCode::kCancelled) {
    return absl::OkStatus();
  }
  return (*connection)->Check(status);
}

}  // namespace

void AddSubscribeCommand(Registry& registry) {
  auto options = std::make_shared<SubscribeOptions>();
  CLI::App* subscribe = registry.app().add_subcommand(
      "subscribe", "Print deliveries of a topic as they arrive");
  subscribe->add_option("--topic", options->topic, "Topic to consume")
      ->required();
  subscribe
      ->add_option("--group", options->group,
                   "Consumer group; registered on first use")
      ->required();
  subscribe
      ->add_option("--ack", options->ack,
                   "auto: ack each delivery once printed; manual: ack the "
                   "ids read from stdin, one per line; none: never ack")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "manual", "none"}));
  subscribe
      ->add_option("--max-in-flight", options->max_in_flight,
                   "Most unacknowledged deliveries at once (0: the broker's "
                   "default, 100)")
      ->capture_default_str();
  subscribe->add_option("--ack-timeout", options->ack_timeout,
                        "Redeliver what is not acked within this long, e.g. "
                        "30s (default: the broker's)");
  subscribe
      ->add_option("--count", options->count,
                   "Exit after N deliveries (0: run until Ctrl-C)")
      ->capture_default_str();
  subscribe->footer(R"(
Prints one line per delivery on stdout, in key=value form with the payload
last (values with spaces or unprintable bytes are quoted and escaped):
  id=m1 topic=orders attempt=1 deliver_at=2026-01-02T15:04:05.000Z published_at=2026-01-02T14:34:05.000Z header.k=v payload=hello
With --json, one JSON object per delivery (payload in base64). Once the
broker accepts the subscription, "subscribed to TOPIC as group GROUP" goes to
stderr.

--ack=auto acknowledges a delivery right after printing it. --ack=none never
does: the broker redelivers after the ack timeout. --ack=manual reads ids to
acknowledge from stdin, one per line; the end of stdin ends the subscription,
and with --count it exits once the N deliveries are acknowledged.

Ctrl-C (or SIGTERM) ends the subscription cleanly and exits 0; deliveries not
acknowledged go back to the group at once.

Examples:
  hourglass subscribe --topic=orders --group=billing
  hourglass subscribe --topic=orders --group=debug --ack=none --count=1
  hourglass --json subscribe --topic=orders --group=billing | jq -r .id)");
  registry.SetAction(subscribe, [&globals = registry.globals(), options] {
    return Subscribe(globals, *options);
  });
}

}  // namespace hourglass::cli
