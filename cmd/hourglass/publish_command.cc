// hourglass publish: publishes one message, or --count of them in batches,
// and prints the receipts.

#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/message.h"
#include "cmd/common/connection.h"
#include "cmd/common/duration.h"
#include "cmd/common/errors.h"
#include "cmd/common/output.h"
#include "cmd/hourglass/command.h"
#include "hourglass/v1/broker.pb.h"

namespace hourglass::cli {
namespace {

using client::Message;
using client::Receipt;

// A Publish request holds at most this many payload bytes (a batch also
// ends at --batch messages), so that large payloads do not make huge calls.
constexpr size_t kBatchBytes = 8 << 20;

struct PublishOptions {
  std::string topic;
  std::string data;
  CLI::Option* data_option = nullptr;
  std::string file;
  std::string delay;
  std::string at;
  std::string ttl;
  std::string expire_at;
  std::string on_expire = "drop";
  std::vector<std::string> headers;
  std::string id;
  uint32_t count = 1;
  uint32_t batch = 1000;
};

// The payload from --data, --file (- for stdin) or stdin.
absl::StatusOr<std::string> ReadPayload(const PublishOptions& options) {
  if (options.data_option->count() > 0) return options.data;
  if (options.file.empty() || options.file == "-") {
    if (options.file.empty() && isatty(STDIN_FILENO)) {
      return UsageError(
          "no payload: give --data, --file or pipe it to stdin (--data= "
          "publishes an empty one)");
    }
    return std::string(std::istreambuf_iterator<char>(std::cin), {});
  }
  std::ifstream in(options.file, std::ios::binary);
  if (!in.is_open()) {
    return UsageError("--file", absl::StrCat("cannot open \"", options.file,
                                             "\": ", ErrnoText(errno)));
  }
  std::string payload(std::istreambuf_iterator<char>(in), {});
  if (in.bad()) {
    return UsageError("--file",
                      absl::StrCat("cannot read \"", options.file, "\""));
  }
  return payload;
}

// The message every published copy starts from: topic, payload, headers
// and due time.
absl::StatusOr<Message> Prototype(const PublishOptions& options) {
  Message message;
  message.topic = options.topic;
  absl::StatusOr<std::string> payload = ReadPayload(options);
  if (!payload.ok()) return payload.status();
  message.payload = *std::move(payload);
  for (const std::string& header : options.headers) {
    const size_t equals = header.find('=');
    if (equals == std::string::npos || equals == 0) {
      return UsageError("--header",
                        absl::StrCat("\"", header, "\" is not KEY=VALUE"));
    }
    message.headers[header.substr(0, equals)] = header.substr(equals + 1);
  }
  if (!options.delay.empty()) {
    absl::StatusOr<absl::Duration> delay = ParseDuration(options.delay);
    if (!delay.ok()) return UsageError("--delay", delay.status().message());
    message.delay = *delay;
  }
  if (!options.at.empty()) {
    absl::StatusOr<absl::Time> at = ParseTime(options.at, absl::Now());
    if (!at.ok()) return UsageError("--at", at.status().message());
    message.deliver_at = *at;
  }
  if (!options.ttl.empty()) {
    absl::StatusOr<absl::Duration> ttl = ParseDuration(options.ttl);
    if (!ttl.ok()) return UsageError("--ttl", ttl.status().message());
    message.ttl = *ttl;
  }
  if (!options.expire_at.empty()) {
    absl::StatusOr<absl::Time> at = ParseTime(options.expire_at, absl::Now());
    if (!at.ok()) return UsageError("--expire_at", at.status().message());
    message.expire_at = *at;
  }
  if (options.on_expire == "dead_letter") {
    message.on_expire = Message::OnExpire::kDeadLetter;
  }
  return message;
}

// The receipts as protobuf's PublishResponse, for --json.
hourglass::v1::PublishResponse ReceiptsProto(
    const std::vector<Receipt>& receipts) {
  hourglass::v1::PublishResponse response;
  for (const Receipt& r : receipts) {
    hourglass::v1::Receipt* receipt = response.add_receipts();
    receipt->set_id(r.id);
    *receipt->mutable_deliver_at() = ToProto(r.deliver_at);
    receipt->set_duplicate(r.duplicate);
  }
  return response;
}

absl::Status Publish(const GlobalOptions& globals,
                     const PublishOptions& options) {
  absl::StatusOr<Message> prototype = Prototype(options);
  if (!prototype.ok()) return prototype.status();
  absl::StatusOr<std::unique_ptr<Connection>> connection =
      Connection::Open(globals);
  if (!connection.ok()) return connection.status();

  const absl::Time start = absl::Now();
  std::vector<Receipt> receipts;
  int calls = 0;
  for (uint32_t next = 0; next < options.count;) {
    std::vector<Message> batch;
    size_t bytes = 0;
    while (
        next < options.count && batch.size() < options.batch &&
        (batch.empty() || bytes + prototype->payload.size() <= kBatchBytes)) {
      Message& message = batch.emplace_back(*prototype);
      if (!options.id.empty()) {
        message.id = options.count == 1
                         ? options.id
                         : absl::StrCat(options.id, "-", next + 1);
      }
      bytes += message.payload.size();
      ++next;
    }
    absl::StatusOr<std::vector<Receipt>> published =
        (*connection)->publisher().PublishBatch(std::move(batch));
    ++calls;
    if (!published.ok()) {
      absl::Status failed = (*connection)->Check(published.status());
      if (options.count == 1) return failed;
      // Earlier batches are stored: say how far it got.
      return absl::Status(
          failed.code(),
          absl::StrCat(failed.message(), " (after ", receipts.size(), " of ",
                       options.count, " messages were published)"));
    }
    for (Receipt& receipt : *published) receipts.push_back(std::move(receipt));
  }
  const absl::Duration took = absl::Now() - start;

  if (globals.json) {
    if (absl::Status s = PrintJson(ReceiptsProto(receipts)); !s.ok()) return s;
  } else {
    Table table({"ID", "DELIVER_AT", "DUPLICATE"});
    for (const Receipt& receipt : receipts) {
      table.AddRow(
          {receipt.id, Rfc3339(receipt.deliver_at), YesNo(receipt.duplicate)});
    }
    std::cout << table.Render() << std::flush;
  }
  if (options.count > 1) {
    std::cerr << absl::StrFormat(
        "published %d messages to %s in %d call%s in %s (%.0f/s)\n",
        options.count, options.topic, calls, calls == 1 ? "" : "s",
        HumanDuration(took),
        options.count / std::max(absl::ToDoubleSeconds(took), 1e-6));
  }
  return absl::OkStatus();
}

}  // namespace

void AddPublishCommand(Registry& registry) {
  auto options = std::make_shared<PublishOptions>();
  CLI::App* publish = registry.app().add_subcommand(
      "publish", "Publish a message (or --count of them) and print receipts");
  publish->add_option("--topic", options->topic, "Topic to publish to")
      ->required();
  options->data_option =
      publish->add_option("--data", options->data, "Payload text");
  publish
      ->add_option("--file", options->file,
                   "Read the payload from FILE (- for stdin)")
      ->excludes(options->data_option);
  CLI::Option* delay = publish->add_option(
      "--delay", options->delay,
      "Deliver after this long: 500ms, 30s, 15m, 2h, 3d, 1h30m (default: now)");
  publish
      ->add_option("--at", options->at,
                   "Deliver at this time: RFC 3339 (2026-01-02T15:04:05Z), "
                   "now, +30m")
      ->excludes(delay);
  CLI::Option* ttl = publish->add_option(
      "--ttl", options->ttl,
      "Deadline this long after publishing (not after --delay): a group that "
      "has not received the message by then never does (default: none)");
  publish
      ->add_option("--expire_at", options->expire_at,
                   "Deadline at this time: RFC 3339, now, +30m")
      ->excludes(ttl);
  publish
      ->add_option("--on_expire", options->on_expire,
                   "At the deadline: drop the message, or dead_letter it to "
                   "<topic>.dlq")
      ->capture_default_str()
      ->check(CLI::IsMember({"drop", "dead_letter"}));
  publish->add_option("--header", options->headers,
                      "Header KEY=VALUE; repeat for more");
  publish->add_option("--id", options->id,
                      "Idempotency key; with --count, ID-1 ... ID-N");
  publish
      ->add_option("--count", options->count,
                   "Publish N copies, for a quick load")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  publish
      ->add_option("--batch", options->batch,
                   "With --count: messages per Publish call")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  publish->footer(R"(
The payload is --data, the contents of --file, or stdin when neither is
given and stdin is not a terminal. Prints one receipt per message: the id
(yours or the broker's), when it comes due (UTC) and whether it duplicated
a pending message with the same id. With --count, a summary goes to stderr.

Examples:
  hourglass publish --topic=orders --delay=30m --id=order-42 --data='{"order":42}'
  hourglass publish --topic=reminders --at=2026-01-02T09:00:00Z --header=user=7 --data=hi
  hourglass publish --topic=offers --delay=1m --ttl=10m --on_expire=dead_letter --data=x
  echo hello | hourglass publish --topic=orders --delay=1h30m
  hourglass publish --topic=load --delay=5s --count=10000 --data=x
  hourglass --json publish --topic=orders --data=x)");
  registry.SetAction(publish, [&globals = registry.globals(), options] {
    return Publish(globals, *options);
  });
}

}  // namespace hourglass::cli
