// hourglass subscribe: prints deliveries of a topic to a group as they
// arrive, and acknowledges them as --ack says.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <map>
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
#include "cmd/common/connection.h"
#include "cmd/common/duration.h"
#include "cmd/common/errors.h"
#include "cmd/common/output.h"
#include "cmd/common/signal_watcher.h"
#include "cmd/hourglass/command.h"
#include "cmd/hourglass/stdin_lines.h"
#include "cmd/hourglass/subscription.h"
#include "hourglass/v1/broker.pb.h"

namespace hourglass::cli {
namespace {

using hourglass::v1::Delivery;

struct SubscribeOptions {
  std::string topic;
  std::string group;
  std::string ack = "auto";
  uint32_t max_in_flight = 0;
  std::string ack_timeout;
  uint64_t count = 0;
};

// Where Ctrl-C goes: before the stream is open it ends the process at once
// (nothing was printed yet); afterwards it interrupts the stream, which then
// ends cleanly.
class InterruptTarget {
 public:
  void Set(std::shared_ptr<Subscription> subscription) {
    absl::MutexLock lock(&mu_);
    subscription_ = std::move(subscription);
  }
  void Interrupt() {
    absl::MutexLock lock(&mu_);
    if (subscription_ == nullptr) std::_Exit(0);
    subscription_->Interrupt();
  }

 private:
  absl::Mutex mu_;
  std::shared_ptr<Subscription> subscription_ ABSL_GUARDED_BY(mu_);
};

// One delivery as a key=value line, payload last:
//   id=m1 topic=orders attempt=1 deliver_at=2026-... header.k=v payload=hi
std::string HumanLine(const Delivery& d) {
  std::string line =
      absl::StrCat("id=", LogfmtValue(d.id()), " topic=", d.topic(),
                   " attempt=", d.attempt(),
                   " deliver_at=", Rfc3339(FromProto(d.deliver_at())),
                   " published_at=", Rfc3339(FromProto(d.published_at())));
  const std::map<std::string, std::string> headers(d.headers().begin(),
                                                   d.headers().end());
  for (const auto& [key, value] : headers) {
    absl::StrAppend(&line, " header.", LogfmtValue(key), "=",
                    LogfmtValue(value));
  }
  absl::StrAppend(&line, " payload=", LogfmtValue(d.payload()), "\n");
  return line;
}

absl::Status Subscribe(const GlobalOptions& globals,
                       const SubscribeOptions& options) {
  hourglass::v1::Open open;
  open.set_topic(options.topic);
  open.set_group(options.group);
  open.set_max_in_flight(options.max_in_flight);
  if (!options.ack_timeout.empty()) {
    absl::StatusOr<absl::Duration> timeout = ParseDuration(options.ack_timeout);
    if (!timeout.ok()) {
      return UsageError("--ack-timeout", timeout.status().message());
    }
    *open.mutable_ack_timeout() = ToProto(*timeout);
  }
  absl::StatusOr<absl::Duration> timeout = ParseTimeout(globals.timeout);
  if (!timeout.ok()) return timeout.status();

  // Before gRPC starts threads, so that they inherit the blocked signals.
  InterruptTarget target;
  SignalWatcher watcher([&target](int) { target.Interrupt(); });

  absl::StatusOr<std::unique_ptr<Connection>> connection =
      Connection::Open(globals);
  if (!connection.ok()) return connection.status();
  std::shared_ptr<Subscription> subscription =
      Subscription::Start((*connection)->broker(), open);
  target.Set(subscription);
  if (!subscription->WaitSubscribed(absl::Now() + *timeout)) {
    const grpc::Status status = subscription->Finish(absl::Now() + *timeout);
    if (subscription->interrupted()) return absl::OkStatus();
    if (!status.ok() && status.error_code() != grpc::StatusCode::CANCELLED) {
      return (*connection)->Check(status);
    }
    // The broker did not answer the open in time.
    return (*connection)
        ->Check(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, ""));
  }
  std::cerr << "subscribed to " << options.topic << " as group "
            << options.group << " (ack=" << options.ack << ")" << std::endl;

  std::optional<StdinLines> stdin_acks;
  if (options.ack == "manual") {
    // Each line is the id of a delivery to acknowledge; the end of input
    // ends the subscription, as no more acks can come.
    stdin_acks.emplace(
        [subscription](std::string id) {
          if (!id.empty()) subscription->Ack(id);
        },
        [subscription] { subscription->Interrupt(); });
  }

  absl::Status printed;
  uint64_t delivered = 0;
  while (printed.ok() && (options.count == 0 || delivered < options.count)) {
    const std::vector<Delivery> deliveries = subscription->Take(
        options.count == 0 ? SIZE_MAX : options.count - delivered);
    if (deliveries.empty()) break;  // Ended or interrupted.
    for (const Delivery& delivery : deliveries) {
      if (globals.json) {
        printed = PrintJson(delivery);
        if (!printed.ok()) break;
      } else {
        std::cout << HumanLine(delivery) << std::flush;
      }
      if (options.ack == "auto") subscription->Ack(delivery.id());
      ++delivered;
    }
  }
  if (printed.ok() && options.ack == "manual") subscription->WaitAcked();

  // Deliveries taken but not acked go back to the group as the stream ends.
  const grpc::Status status = subscription->Finish(absl::Now() + *timeout);
  stdin_acks.reset();
  if (!printed.ok()) return printed;
  if (status.ok() || status.error_code() == grpc::StatusCode::CANCELLED) {
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
