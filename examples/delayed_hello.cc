// delayed_hello: publishes a message due in one second and consumes it, on
// the installed client library (find_package(Hourglass), Hourglass::client).
//
//   delayed_hello [HOST:PORT]     (default 127.0.0.1:7070)
//
// Prints the receipt and the delivery, and exits 0 once the message came,
// no earlier than it was due, and was acknowledged; 1 otherwise.

#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "hourglass/client/channel.h"
#include "hourglass/client/consumer.h"
#include "hourglass/client/publisher.h"

namespace {

int Fail(const std::string& what, const absl::Status& status) {
  std::cerr << "delayed_hello: " << what << ": " << status << std::endl;
  return 1;
}

namespace hg = hourglass::client;

int Run(const std::string& address) {
  hg::ChannelOptions options;
  options.address = address;
  absl::StatusOr<std::shared_ptr<hg::Channel>> channel =
      hg::Channel::Create(options);
  if (!channel.ok()) return Fail("options", channel.status());
  if (absl::Status s = (*channel)->Connect(absl::Seconds(10)); !s.ok()) {
    return Fail("connect", s);
  }

  // Subscribe first: a group receives what comes due after it exists.
  const std::string id = absl::StrCat("hello-", absl::ToUnixNanos(absl::Now()));
  hg::ConsumerOptions consume;
  consume.topic = "examples";
  consume.group = id;  // A group of its own, so that no other run takes it.
  absl::StatusOr<std::unique_ptr<hg::Consumer>> consumer =
      hg::Consumer::Subscribe(*channel, consume);
  if (!consumer.ok()) return Fail("subscribe", consumer.status());

  hg::Publisher publisher(*channel);
  hg::Message message;
  message.topic = "examples";
  message.id = id;
  message.payload = "hello from one second ago";
  message.delay = absl::Seconds(1);
  absl::StatusOr<hg::Receipt> receipt = publisher.Publish(message);
  if (!receipt.ok()) return Fail("publish", receipt.status());
  std::cout << "published " << receipt->id << ", due at "
            << absl::FormatTime(receipt->deliver_at) << std::endl;

  // Others' messages on the topic may come too: wait for ours.
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (absl::Now() < give_up) {
    for (const hg::Delivery& d : (*consumer)->Receive(100, give_up)) {
      if (absl::Status s = (*consumer)->Ack(d.id); !s.ok()) {
        return Fail("ack", s);
      }
      if (d.id != id) continue;
      std::cout << "received " << d.id << " (\"" << d.payload << "\") "
                << absl::FormatDuration(d.received_at - d.deliver_at)
                << " after it was due" << std::endl;
      if (d.received_at < d.deliver_at) {
        return Fail("delivery", absl::InternalError("it came early"));
      }
      if (absl::Status s = (*consumer)->Close(absl::Now() + absl::Seconds(10));
          !s.ok()) {
        return Fail("close", s);
      }
      return 0;
    }
  }
  return Fail("receive", absl::DeadlineExceededError(
                             "the message did not come within 30s"));
}

}  // namespace

int main(int argc, char** argv) {
  const int status = Run(argc > 1 ? argv[1] : "127.0.0.1:7070");
  // The channel and clients are gone: let gRPC finish shutting down before
  // the process exits.
  hg::AwaitGrpcShutdown(absl::Seconds(5));
  return status;
}
