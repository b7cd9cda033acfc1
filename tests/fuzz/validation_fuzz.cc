// Fuzzes Publish: the request validation of api/validation.h, then the
// engine's Publish path on an in-memory store (with injected write
// failures), as api/broker_service.cc runs them, minus gRPC.
//
// An input is up to four Publish requests, each either parsed from the
// input's bytes as a hourglass.v1.PublishRequest or built field by field
// from them (names, payloads, ids and times near every limit). Checked
// against a model written independently of the code under test:
//   - validation accepts exactly the valid requests, and a rejection is
//     INVALID_ARGUMENT naming the first bad message;
//   - a rejected or failed publish stores nothing; every publish with a
//     message fails when its write does, one of duplicates only too;
//   - an accepted one stores every new message exactly once, with its
//     topic, id, payload, headers and deliver_at, answers receipts in
//     request order, and repeats the first receipt for an id still
//     pending (duplicate);
//   - every status code is one broker.proto documents for Publish.
//
// HOURGLASS_FUZZ_TRACE=1 prints each request, its injected fault and the
// engine's answer.

#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "api/status.h"
#include "api/validation.h"
#include "broker/engine.h"
#include "broker/lifecycle_reads.h"
#include "google/protobuf/stubs/logging.h"
#include "hourglass/v1/broker.pb.h"
#include "storage/keys.h"
#include "storage/message_store.h"
#include "storage/records.pb.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/testing/fake_clock.h"
#include "tests/testing/faulty_store.h"

namespace hourglass::api {
namespace {

using hourglass::v1::Message;
using hourglass::v1::PublishRequest;
using storage::Table;

constexpr int64_t kStartMs = 1'795'305'600'000;  // 2026-11-22T00:00:00Z
constexpr int64_t kNanosPerMilli = 1'000'000;
constexpr int64_t kNanosPerSecond = 1'000'000'000;
// Bounds of google.protobuf.Duration and Timestamp.
constexpr int64_t kMaxDurationSeconds = 315'576'000'000;
constexpr int64_t kMinTimestampSeconds = -62'135'596'800;
constexpr int64_t kMaxTimestampSeconds = 253'402'300'799;
constexpr int32_t kMaxNanos = 999'999'999;

// Small limits, so that inputs reach every one of them.
Limits FuzzLimits() {
  Limits limits;
  limits.max_payload_bytes = 64;
  limits.max_batch = 8;
  limits.max_id_bytes = 24;
  limits.max_headers = 1;
  limits.max_header_bytes = 10;
  return limits;
}

// ---- The model: what a message should be judged and stored as.

bool ValidName(const std::string& name) {
  if (name.empty() || name.size() > 200) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                    (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

__int128 DurationNanos(const google::protobuf::Duration& d) {
  return static_cast<__int128>(d.seconds()) * kNanosPerSecond + d.nanos();
}

// Ids of the form the broker assigns: "hg-" and 16 lowercase hex digits.
bool BrokerFormId(const std::string& id) {
  if (id.size() != 19 || id.compare(0, 3, "hg-") != 0) return false;
  for (size_t i = 3; i < id.size(); ++i) {
    const char c = id[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// A topic a producer may create: a name with room for ".dlq", or a
// dead-letter topic's name.
bool ValidNewTopic(const std::string& topic) {
  const bool dead_letters =
      topic.size() >= 4 && topic.compare(topic.size() - 4, 4, ".dlq") == 0;
  return ValidName(topic) && (topic.size() <= 196 || dead_letters);
}

bool ValidHeaders(const Message& m, const Limits& limits) {
  if (static_cast<size_t>(m.headers_size()) > limits.max_headers) return false;
  size_t bytes = 0;
  for (const auto& [key, value] : m.headers()) {
    if (!ValidName(key)) return false;
    bytes += key.size() + value.size();
  }
  return bytes <= limits.max_header_bytes;
}

// A valid delay or deliver_at gives the message's due time in ms; an invalid
// message gives nullopt.
std::optional<int64_t> ExpectedDueMs(const Message& m, const Limits& limits,
                                     int64_t now_ms) {
  if (!ValidNewTopic(m.topic()) ||
      m.payload().size() > limits.max_payload_bytes ||
      m.id().size() > limits.max_id_bytes || BrokerFormId(m.id()) ||
      !ValidHeaders(m, limits)) {
    return std::nullopt;
  }
  const __int128 now_ns = static_cast<__int128>(now_ms) * kNanosPerMilli;
  const __int128 max_delay_ns = absl::ToInt64Nanoseconds(limits.max_delay);
  if (m.has_delay()) {
    const google::protobuf::Duration& d = m.delay();
    const bool same_sign = !(d.seconds() > 0 && d.nanos() < 0) &&
                           !(d.seconds() < 0 && d.nanos() > 0);
    if (d.seconds() < -kMaxDurationSeconds ||
        d.seconds() > kMaxDurationSeconds || d.nanos() < -kMaxNanos ||
        d.nanos() > kMaxNanos || !same_sign) {
      return std::nullopt;
    }
    const __int128 delay_ns = DurationNanos(d);
    if (delay_ns < 0 || delay_ns > max_delay_ns) return std::nullopt;
    return static_cast<int64_t>((now_ns + delay_ns) / kNanosPerMilli);
  }
  if (m.has_deliver_at()) {
    const google::protobuf::Timestamp& t = m.deliver_at();
    if (t.seconds() < kMinTimestampSeconds ||
        t.seconds() > kMaxTimestampSeconds || t.nanos() < 0 ||
        t.nanos() > kMaxNanos) {
      return std::nullopt;
    }
    const __int128 at_ns =
        static_cast<__int128>(t.seconds()) * kNanosPerSecond + t.nanos();
    if (at_ns - now_ns > max_delay_ns) return std::nullopt;
    // A past time means now.
    return static_cast<int64_t>((at_ns > now_ns ? at_ns : now_ns) /
                                kNanosPerMilli);
  }
  return now_ms;
}

// Whether the message's deadline, if any, is acceptable for a message due
// at `due_ms`: a known on_expire (0 drop, 1 dead letter), at most one of ttl
// and expire_at, each valid and at most --max_delay ahead, ending after the
// due time (both in whole milliseconds).
bool ValidDeadline(const Message& m, const Limits& limits, int64_t now_ms,
                   int64_t due_ms) {
  if (m.on_expire() != 0 && m.on_expire() != 1) return false;
  if (m.has_ttl() && m.has_expire_at()) return false;
  const __int128 now_ns = static_cast<__int128>(now_ms) * kNanosPerMilli;
  const __int128 max_delay_ns = absl::ToInt64Nanoseconds(limits.max_delay);
  __int128 expire_ns;
  if (m.has_ttl()) {
    const google::protobuf::Duration& d = m.ttl();
    const bool same_sign = !(d.seconds() > 0 && d.nanos() < 0) &&
                           !(d.seconds() < 0 && d.nanos() > 0);
    if (d.seconds() < -kMaxDurationSeconds ||
        d.seconds() > kMaxDurationSeconds || d.nanos() < -kMaxNanos ||
        d.nanos() > kMaxNanos || !same_sign) {
      return false;
    }
    if (DurationNanos(d) > max_delay_ns) return false;
    expire_ns = now_ns + DurationNanos(d);
  } else if (m.has_expire_at()) {
    const google::protobuf::Timestamp& t = m.expire_at();
    if (t.seconds() < kMinTimestampSeconds ||
        t.seconds() > kMaxTimestampSeconds || t.nanos() < 0 ||
        t.nanos() > kMaxNanos) {
      return false;
    }
    expire_ns =
        static_cast<__int128>(t.seconds()) * kNanosPerSecond + t.nanos();
    if (expire_ns - now_ns > max_delay_ns) return false;
  } else {
    return true;
  }
  // Whole milliseconds, rounded down (toward the past, for times before
  // 1970 too).
  __int128 expire_ms = expire_ns / kNanosPerMilli;
  if (expire_ns < 0 && expire_ns % kNanosPerMilli != 0) --expire_ms;
  return expire_ms > due_ms;
}

// What the model expects of a request: accepted, or rejected at `bad`
// (-1 for the request as a whole).
struct Judgement {
  bool valid = true;
  int bad = -1;
  std::vector<int64_t> due_ms;
};

Judgement Judge(const PublishRequest& request, const Limits& limits,
                int64_t now_ms) {
  Judgement j;
  if (request.messages_size() == 0 ||
      static_cast<size_t>(request.messages_size()) > limits.max_batch) {
    j.valid = false;
    return j;
  }
  for (int i = 0; i < request.messages_size(); ++i) {
    std::optional<int64_t> due =
        ExpectedDueMs(request.messages(i), limits, now_ms);
    if (!due.has_value() ||
        !ValidDeadline(request.messages(i), limits, now_ms, *due)) {
      j.valid = false;
      j.bad = i;
      return j;
    }
    j.due_ms.push_back(*due);
  }
  return j;
}

// A pending message as the model knows it.
using Headers = std::map<std::string, std::string>;
struct Pending {
  int64_t deliver_at_ms;
  std::string payload;
  Headers headers;
};
using TopicId = std::pair<std::string, std::string>;

// ---- Building requests from the input.

using ::hourglass::fuzz::Utf8;

std::string ConsumeTopic(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange(0, 7)) {
    case 0:
      return "orders";
    case 1:
      return "orders.dlq";
    case 2:
      return "a";
    case 3:  // The longest topic, and the longest dead-letter topic.
      return in.ConsumeBool() ? std::string(196, 'x')
                              : std::string(196, 'x') + ".dlq";
    case 4:
      return std::string(in.ConsumeBool() ? 197 : 201, 'x');
    case 5:
      return "";
    default:
      return Utf8(in.ConsumeRandomLengthString(12));
  }
}

std::string ConsumeId(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange(0, 6)) {
    case 0:
    case 1:
      return "";  // The broker assigns one.
    case 2:
      return "a";
    case 3:  // The form of the ids the broker assigns.
      return absl::StrFormat("hg-%016x", in.ConsumeIntegralInRange(0, 12));
    case 4:
      return std::string(in.ConsumeBool() ? 24 : 25, 'i');
    default:
      return Utf8(in.ConsumeRandomLengthString(30));
  }
}

int64_t ConsumeSeconds(FuzzedDataProvider& in, int64_t max_delay_s) {
  switch (in.ConsumeIntegralInRange(0, 6)) {
    case 0:
      return 0;
    case 1:
      return in.ConsumeIntegralInRange<int64_t>(0, 100);
    case 2:  // At the --max_delay limit.
      return max_delay_s + in.ConsumeIntegralInRange<int64_t>(-1, 1);
    case 3:  // At the type's limits.
      return (in.ConsumeBool() ? 1 : -1) *
             (kMaxDurationSeconds + in.ConsumeIntegralInRange<int64_t>(-1, 1));
    case 4:
      return -in.ConsumeIntegralInRange<int64_t>(1, 100);
    default:
      return in.ConsumeIntegral<int64_t>();
  }
}

int32_t ConsumeNanos(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange(0, 5)) {
    case 0:
      return 0;
    case 1:
      return kMaxNanos + in.ConsumeIntegralInRange(0, 1);
    case 2:
      return -kMaxNanos - in.ConsumeIntegralInRange(0, 1);
    case 3:
      return in.ConsumeIntegralInRange(0, 3) * 1'000'000 +
             in.ConsumeIntegralInRange(-1, 1);
    default:
      return in.ConsumeIntegral<int32_t>();
  }
}

Message ConsumeMessage(FuzzedDataProvider& in, const Limits& limits,
                       int64_t now_ms) {
  Message m;
  m.set_topic(ConsumeTopic(in));
  m.set_id(ConsumeId(in));
  const size_t payload_size =
      in.ConsumeBool()
          ? limits.max_payload_bytes + in.ConsumeIntegralInRange(0, 1)
          : in.ConsumeIntegralInRange<size_t>(0, 8);
  m.set_payload(std::string(payload_size, 'p'));
  const int headers = in.ConsumeIntegralInRange(0, 2);
  for (int i = 0; i < headers; ++i) {
    std::string key = in.ConsumeBool() ? std::string("k")
                                       : Utf8(in.ConsumeRandomLengthString(6));
    (*m.mutable_headers())[std::move(key)] =
        Utf8(in.ConsumeRandomLengthString(10));
  }
  const int64_t max_delay_s = absl::ToInt64Seconds(limits.max_delay);
  switch (in.ConsumeIntegralInRange(0, 3)) {
    case 0:
      break;  // Due now.
    case 1:
      m.mutable_delay()->set_seconds(ConsumeSeconds(in, max_delay_s));
      m.mutable_delay()->set_nanos(ConsumeNanos(in));
      break;
    case 2: {  // Near now or near the limit ahead of it.
      const int64_t base = now_ms / 1000 + (in.ConsumeBool() ? max_delay_s : 0);
      m.mutable_deliver_at()->set_seconds(
          base + in.ConsumeIntegralInRange<int64_t>(-2, 2));
      m.mutable_deliver_at()->set_nanos(ConsumeNanos(in));
      break;
    }
    default: {  // At the type's limits, or anywhere.
      int64_t seconds = in.ConsumeIntegral<int64_t>();
      const int edge = in.ConsumeIntegralInRange(0, 2);
      if (edge == 1)
        seconds = kMinTimestampSeconds - in.ConsumeIntegralInRange(0, 1);
      if (edge == 2)
        seconds = kMaxTimestampSeconds + in.ConsumeIntegralInRange(0, 1);
      m.mutable_deliver_at()->set_seconds(seconds);
      m.mutable_deliver_at()->set_nanos(ConsumeNanos(in));
      break;
    }
  }
  return m;
}

std::optional<PublishRequest> ConsumeRequest(FuzzedDataProvider& in,
                                             const Limits& limits,
                                             int64_t now_ms) {
  PublishRequest request;
  if (in.ConsumeIntegralInRange(0, 3) == 0) {
    // The bytes as the wire format: what a client can send.
    const std::string bytes = in.ConsumeRandomLengthString(512);
    if (!request.ParseFromString(bytes)) return std::nullopt;
    return request;
  }
  const int n = in.ConsumeIntegralInRange(0, 9);
  for (int i = 0; i < n; ++i) {
    *request.add_messages() = ConsumeMessage(in, limits, now_ms);
  }
  return request;
}

// ---- Running a publish.

// Every table but meta (which holds the sequence reservation), key by key.
using Snapshot = std::map<std::pair<int, std::string>, std::string>;

Snapshot TakeSnapshot(storage::MessageStore& store) {
  Snapshot snapshot;
  for (int t = 0; t < storage::kNumTables; ++t) {
    if (static_cast<Table>(t) == Table::kMeta) continue;
    absl::Status s = store.Scan(static_cast<Table>(t), "", "",
                                [&](std::string_view k, std::string_view v) {
                                  snapshot[{t, std::string(k)}] = v;
                                  return true;
                                });
    FUZZ_CHECK(s.ok(), "scan: %s", s.ToString().c_str());
  }
  return snapshot;
}

// The codes broker.proto documents for Publish.
bool DocumentedCode(grpc::StatusCode code) {
  return code == grpc::StatusCode::OK ||
         code == grpc::StatusCode::INVALID_ARGUMENT ||
         code == grpc::StatusCode::RESOURCE_EXHAUSTED ||
         code == grpc::StatusCode::UNAVAILABLE;
}

class PublishFuzzer {
 public:
  PublishFuzzer() {
    absl::StatusOr<std::unique_ptr<broker::Engine>> engine =
        broker::Engine::Open(&store_, &clock_, broker::Engine::Options());
    FUZZ_CHECK(engine.ok(), "Engine::Open: %s",
               engine.status().ToString().c_str());
    engine_ = *std::move(engine);
  }

  void Run(FuzzedDataProvider& in) {
    const Limits limits = FuzzLimits();
    for (int round = 0; round < 4 && in.remaining_bytes() > 0; ++round) {
      clock_.Advance(absl::Milliseconds(in.ConsumeIntegralInRange(0, 3000)));
      const int64_t now_ms = absl::ToUnixMillis(clock_.Now());
      std::optional<PublishRequest> request =
          ConsumeRequest(in, limits, now_ms);
      if (!request.has_value()) continue;
      // Sometimes the disk fails: the write of this publish, not the next.
      std::optional<absl::Status> fault;
      switch (in.ConsumeIntegralInRange(0, 9)) {
        case 0:
          fault = absl::ResourceExhaustedError("injected: disk full");
          break;
        case 1:
          fault = absl::UnavailableError("injected: I/O error");
          break;
        default:
          break;
      }
      Publish(*request, limits, now_ms, fault);
    }
  }

 private:
  void Publish(const PublishRequest& request, const Limits& limits,
               int64_t now_ms, const std::optional<absl::Status>& fault) {
    TRACE("publish at %lld%s: %s\n", static_cast<long long>(now_ms),
          fault.has_value() ? absl::StrCat(" (", fault->ToString(), ")").c_str()
                            : "",
          request.ShortDebugString().c_str());
    const Judgement judged = Judge(request, limits, now_ms);
    const absl::Status valid =
        ValidatePublish(request, limits, absl::FromUnixMillis(now_ms));
    FUZZ_CHECK(
        valid.ok() == judged.valid, "validation said %s; model: %s",
        valid.ToString().c_str(),
        judged.valid ? "valid" : absl::StrCat("bad at ", judged.bad).c_str());
    if (!valid.ok()) {
      FUZZ_CHECK(valid.code() == absl::StatusCode::kInvalidArgument,
                 "rejected with %s", valid.ToString().c_str());
      const std::string prefix =
          judged.bad < 0 ? "the request has"
                         : absl::StrCat("message ", judged.bad, ": ");
      FUZZ_CHECK(absl::StartsWith(valid.message(), prefix),
                 "rejection \"%s\" does not start with \"%s\"",
                 std::string(valid.message()).c_str(), prefix.c_str());
      CheckCode(valid);
      return;  // The service stops here: nothing reaches the engine.
    }

    // As BrokerService::Publish translates it.
    const absl::Time now = absl::FromUnixMillis(now_ms);
    std::vector<broker::NewMessage> messages;
    for (const Message& m : request.messages()) {
      messages.push_back(
          broker::NewMessage{m.topic(), m.id(), m.payload(),
                             std::map<std::string, std::string>(
                                 m.headers().begin(), m.headers().end()),
                             DeliverAt(m, now)});
    }
    const Snapshot before = TakeSnapshot(store_);
    if (fault.has_value()) store_.FailWrites(*fault);
    absl::Notification done;
    absl::StatusOr<std::vector<broker::PublishReceipt>> result;
    engine_->Publish(
        std::move(messages),
        [&](absl::StatusOr<std::vector<broker::PublishReceipt>> r) {
          result = std::move(r);
          done.Notify();
        });
    done.WaitForNotification();
    store_.FailWrites(absl::OkStatus());
    TRACE("  -> %s\n", result.status().ToString().c_str());
    CheckCode(result.status());

    // Every publish with a message writes: its new messages, or, with
    // duplicates only, an empty synced batch, so that their receipts wait
    // until the first copy is durable (CommitQueue::SubmitBarrier).
    const bool writes = request.messages_size() > 0;
    if (!result.ok()) {
      FUZZ_CHECK(fault.has_value() && writes && result.status() == *fault,
                 "publish failed with %s", result.status().ToString().c_str());
      FUZZ_CHECK(TakeSnapshot(store_) == before,
                 "a failed publish changed the store");
      return;
    }
    FUZZ_CHECK(!fault.has_value() || !writes,
               "a publish succeeded although its write failed");
    CheckReceipts(request, judged, *result);
    CheckStore();
  }

  void CheckCode(const absl::Status& status) {
    const grpc::Status grpc_status = ToGrpcStatus(status);
    FUZZ_CHECK(DocumentedCode(grpc_status.error_code()),
               "undocumented code: %s", status.ToString().c_str());
  }

  // Receipts in request order; updates the model.
  void CheckReceipts(const PublishRequest& request, const Judgement& judged,
                     const std::vector<broker::PublishReceipt>& receipts) {
    FUZZ_CHECK(receipts.size() == static_cast<size_t>(request.messages_size()),
               "%zu receipts for %d messages", receipts.size(),
               request.messages_size());
    for (int i = 0; i < request.messages_size(); ++i) {
      const Message& m = request.messages(i);
      const broker::PublishReceipt& r = receipts[i];
      const int64_t receipt_ms = absl::ToUnixMillis(r.deliver_at);
      FUZZ_CHECK(r.deliver_at == absl::FromUnixMillis(receipt_ms),
                 "receipt %d: deliver_at not whole milliseconds", i);
      auto it =
          m.id().empty() ? pending_.end() : pending_.find({m.topic(), m.id()});
      if (it != pending_.end()) {
        FUZZ_CHECK(r.duplicate && r.id == m.id() &&
                       receipt_ms == it->second.deliver_at_ms,
                   "receipt %d: not the first receipt of id \"%s\"", i,
                   m.id().c_str());
        continue;
      }
      FUZZ_CHECK(!r.duplicate, "receipt %d: a new message is a duplicate", i);
      FUZZ_CHECK(m.id().empty() ? !r.id.empty() : r.id == m.id(),
                 "receipt %d: id \"%s\" for \"%s\"", i, r.id.c_str(),
                 m.id().c_str());
      FUZZ_CHECK(receipt_ms == judged.due_ms[i],
                 "receipt %d: due %lld, expected %lld", i,
                 static_cast<long long>(receipt_ms),
                 static_cast<long long>(judged.due_ms[i]));
      const auto [inserted, is_new] = pending_.try_emplace(
          {m.topic(), r.id},
          Pending{receipt_ms, m.payload(),
                  Headers(m.headers().begin(), m.headers().end())});
      FUZZ_CHECK(is_new,
                 "receipt %d: id \"%s\" is already pending in topic \"%s\"", i,
                 r.id.c_str(), m.topic().c_str());
    }
  }

  // The store holds exactly the model's pending messages, once each.
  void CheckStore() {
    std::map<TopicId, int> seen;
    size_t records = 0;
    absl::Status s = store_.Scan(
        Table::kMessages, "", "", [&](std::string_view k, std::string_view v) {
          ++records;
          storage::MessageRecord record;
          FUZZ_CHECK(record.ParseFromString(std::string(v)), "bad record");
          const TopicId key{record.topic(), record.id()};
          ++seen[key];
          auto it = pending_.find(key);
          FUZZ_CHECK(it != pending_.end(), "stored \"%s\" in \"%s\" unknown",
                     record.id().c_str(), record.topic().c_str());
          const Pending& p = it->second;
          const Headers headers(record.headers().begin(),
                                record.headers().end());
          FUZZ_CHECK(record.deliver_at_ms() == p.deliver_at_ms &&
                         record.payload() == p.payload && headers == p.headers,
                     "stored \"%s\" differs from what was published",
                     record.id().c_str());
          // Its id and schedule entries point back at it.
          const std::optional<uint64_t> sequence = storage::DecodeMessageKey(k);
          FUZZ_CHECK(sequence.has_value(), "bad message key");
          auto id =
              broker::lifecycle::FindId(store_, record.topic(), record.id());
          const storage::DueKey due{p.deliver_at_ms, *sequence};
          FUZZ_CHECK(id.ok() && id->has_value() && **id == due,
                     "id \"%s\" does not name message %llu",
                     record.id().c_str(),
                     static_cast<unsigned long long>(*sequence));
          auto scheduled =
              store_.Get(Table::kSchedule, storage::ScheduleKey(due));
          FUZZ_CHECK(scheduled.ok() && scheduled->has_value() &&
                         **scheduled == record.topic(),
                     "no schedule entry for \"%s\"", record.id().c_str());
          return true;
        });
    FUZZ_CHECK(s.ok(), "scan: %s", s.ToString().c_str());
    for (const auto& [key, count] : seen) {
      FUZZ_CHECK(count == 1, "\"%s\" in \"%s\" stored %d times",
                 key.second.c_str(), key.first.c_str(), count);
    }
    FUZZ_CHECK(records == pending_.size(), "%zu stored, %zu published", records,
               pending_.size());
  }

  testing::FaultyStore store_;
  testing::FakeClock clock_{absl::FromUnixMillis(kStartMs)};
  std::unique_ptr<broker::Engine> engine_;
  // What the model says is pending: every accepted new message.
  std::map<TopicId, Pending> pending_;
};

void TestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  PublishFuzzer fuzzer;
  fuzzer.Run(in);
}

}  // namespace
}  // namespace hourglass::api

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  // Parsing the input as a request logs every string that is not UTF-8;
  // such requests are simply skipped.
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  hourglass::api::TestOneInput(data, size);
  return 0;
}
