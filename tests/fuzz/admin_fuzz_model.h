// The model of tests/fuzz/admin_fuzz.cc, written from admin.proto and
// broker.proto rather than from the code: what a message, a group and a
// consumer are to it, what makes a request well-formed, and which codes
// each Admin call may answer.

#ifndef HOURGLASS_TESTS_FUZZ_ADMIN_FUZZ_MODEL_H_
#define HOURGLASS_TESTS_FUZZ_ADMIN_FUZZ_MODEL_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "broker/dispatcher.h"
#include "google/protobuf/duration.pb.h"
#include "google/protobuf/message.h"
#include "google/protobuf/timestamp.pb.h"
#include "grpcpp/support/status.h"
#include "hourglass/v1/admin.pb.h"
#include "storage/keys.h"
#include "tests/fuzz/admin_fuzz_rig.h"
#include "tests/fuzz/fuzz_check.h"

namespace hourglass::api::admin_fuzz {

using ConsumerId = broker::Dispatcher::ConsumerId;
using google::protobuf::Duration;
using google::protobuf::Timestamp;
using storage::DueKey;

constexpr int64_t kNanosPerMilli = 1'000'000;
constexpr int64_t kNanosPerSecond = 1'000'000'000;
// Bounds of google.protobuf.Duration and Timestamp.
constexpr int64_t kMaxDurationSeconds = 315'576'000'000;
constexpr int64_t kMinTimestampSeconds = -62'135'596'800;
constexpr int64_t kMaxTimestampSeconds = 253'402'300'799;
constexpr int32_t kMaxNanos = 999'999'999;

// What admin.proto promises.
constexpr uint32_t kDefaultPageSize = 100;
constexpr uint32_t kMaxPageSize = 1000;
constexpr uint32_t kDefaultPreviewBytes = 256;
constexpr uint32_t kMaxPreviewBytes = 1 << 20;
constexpr size_t kMaxIdBytes = 128;

// ---- The model.

inline bool ValidName(const std::string& name) {
  if (name.empty() || name.size() > 200) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                    (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

inline bool ValidId(const std::string& id) {
  return !id.empty() && id.size() <= kMaxIdBytes;
}

inline bool ValidTimestamp(const Timestamp& t) {
  return t.seconds() >= kMinTimestampSeconds &&
         t.seconds() <= kMaxTimestampSeconds && t.nanos() >= 0 &&
         t.nanos() <= kMaxNanos;
}

inline bool ValidDuration(const Duration& d) {
  return d.seconds() >= -kMaxDurationSeconds &&
         d.seconds() <= kMaxDurationSeconds && d.nanos() >= -kMaxNanos &&
         d.nanos() <= kMaxNanos && !(d.seconds() > 0 && d.nanos() < 0) &&
         !(d.seconds() < 0 && d.nanos() > 0);
}

inline __int128 Nanos(const Timestamp& t) {
  return static_cast<__int128>(t.seconds()) * kNanosPerSecond + t.nanos();
}
inline __int128 Nanos(const Duration& d) {
  return static_cast<__int128>(d.seconds()) * kNanosPerSecond + d.nanos();
}

// Whole milliseconds at or before `ns`.
inline int64_t FloorMillis(__int128 ns) {
  __int128 ms = ns / kNanosPerMilli;
  if (ns % kNanosPerMilli < 0) --ms;
  return static_cast<int64_t>(ms);
}

inline Timestamp MillisToProto(int64_t ms) {
  Timestamp t;
  int64_t seconds = ms / 1000;
  int64_t rest = ms % 1000;
  if (rest < 0) {
    rest += 1000;
    --seconds;
  }
  t.set_seconds(seconds);
  t.set_nanos(static_cast<int32_t>(rest * kNanosPerMilli));
  return t;
}

inline std::string DeadLetterTopic(const std::string& topic) {
  return absl::StrCat(topic, ".dlq");
}

using Headers = std::map<std::string, std::string>;
using TopicId = std::pair<std::string, std::string>;

// A message's entry in one group.
struct Copy {
  bool in_flight = false;
  // Deliveries to this group so far.
  uint32_t attempts = 0;
  // In flight: the consumer that holds it, or 0 for none (handed back).
  ConsumerId owner = 0;
  // In flight: held, when its ack timeout runs out; handed back, when it
  // may be delivered again (a nack's delay).
  int64_t due_again_ms = 0;
};

struct Msg {
  std::string topic;
  std::string id;
  std::string payload;
  Headers headers;
  int64_t deliver_at_ms = 0;
  int64_t published_at_ms = 0;
  uint32_t dead_letter_attempts = 0;
  // Its publish sequence, read from the store: ties of deliver_at are in
  // publish order.
  std::optional<uint64_t> sequence;
  bool scheduled = true;
  // Due, and ready in the topic's waiting area (it came due while the
  // topic had no group).
  bool in_area = false;
  std::map<std::string, Copy> copies;  // By group.

  bool held() const { return scheduled || in_area || !copies.empty(); }
  DueKey key() const {
    FUZZ_CHECK(sequence.has_value(), "\"%s\" in \"%s\" has no sequence yet",
               id.c_str(), topic.c_str());
    return DueKey{deliver_at_ms, *sequence};
  }
};

struct GroupModel {
  int64_t created_at_ms = 0;
  // The topic's first group takes its waiting area.
  bool owns_area = false;
};

struct ConsumerModel {
  ConsumerId id = 0;
  std::shared_ptr<Inbox> inbox;
  std::string topic;
  std::string group;
  uint32_t credit = 0;
  int64_t ack_timeout_ms = 0;
  bool connected = true;
};

// A position in a listing: after this group (READY, IN_FLIGHT) and key.
struct Position {
  std::string group;
  DueKey key;
};

// The fields a page token is bound to.
struct ListingKey {
  std::string topic;
  int state = 0;
  std::string group;
  std::optional<std::pair<int64_t, int32_t>> from;
  std::optional<std::pair<int64_t, int32_t>> to;

  friend bool operator==(const ListingKey&, const ListingKey&) = default;
};

inline ListingKey KeyOf(const v1::ListMessagesRequest& r) {
  ListingKey k{r.topic(), static_cast<int>(r.state()), r.group()};
  if (r.has_due_from()) k.from = {r.due_from().seconds(), r.due_from().nanos()};
  if (r.has_due_to()) k.to = {r.due_to().seconds(), r.due_to().nanos()};
  return k;
}

// A token the broker gave, with what the model knows of it.
struct StashedToken {
  ListingKey listing;
  std::string token;
  Position after;
};

// One line of a listing: a message, and the group it is listed under
// (READY, IN_FLIGHT).
struct Item {
  const Msg* m;
  std::string group;
};

// ---- What the model expects of a call.

enum class Rpc {
  kGetStats,
  kListTopics,
  kListGroups,
  kCreateGroup,
  kDeleteGroup,
  kListMessages,
  kGetMessage,
  kCancelMessage,
  kReschedule,
  kRedriveDeadLetters,
  kPurgeTopic,
};
constexpr int kNumRpcs = 11;

inline const char* RpcName(Rpc rpc) {
  static const char* const kNames[kNumRpcs] = {
      "GetStats",    "ListTopics",         "ListGroups", "CreateGroup",
      "DeleteGroup", "ListMessages",       "GetMessage", "CancelMessage",
      "Reschedule",  "RedriveDeadLetters", "PurgeTopic"};
  return kNames[static_cast<int>(rpc)];
}

// The codes admin.proto documents for each call: INVALID_ARGUMENT for all
// (its header), and what each call's comment names.
inline bool Documented(Rpc rpc, grpc::StatusCode code) {
  using C = grpc::StatusCode;
  if (code == C::OK || code == C::INVALID_ARGUMENT) return true;
  switch (rpc) {
    case Rpc::kGetStats:
      return code == C::NOT_FOUND;
    case Rpc::kListTopics:
    case Rpc::kListMessages:
    case Rpc::kPurgeTopic:
      return false;
    case Rpc::kListGroups:
    case Rpc::kDeleteGroup:
    case Rpc::kGetMessage:
    case Rpc::kCancelMessage:
    case Rpc::kReschedule:
      return code == C::NOT_FOUND;
    case Rpc::kRedriveDeadLetters:
      return code == C::NOT_FOUND || code == C::UNAVAILABLE;
    case Rpc::kCreateGroup:
      return code == C::ALREADY_EXISTS || code == C::RESOURCE_EXHAUSTED;
  }
  return false;
}

inline bool ReadOnly(Rpc rpc) {
  return rpc == Rpc::kGetStats || rpc == Rpc::kListTopics ||
         rpc == Rpc::kListGroups || rpc == Rpc::kListMessages ||
         rpc == Rpc::kGetMessage;
}

struct Expect {
  // Fields the model finds bad: the answer is INVALID_ARGUMENT naming one.
  std::vector<std::string> bad;
  // A page token the model cannot judge (not one the broker gave): besides
  // the answer below, INVALID_ARGUMENT naming page_token is right.
  bool foreign_token = false;
  // The answer to a well-formed request.
  grpc::StatusCode code = grpc::StatusCode::OK;
};

// Every table, key by key.
using Snapshot = std::map<std::pair<int, std::string>, std::string>;

using ::hourglass::fuzz::Utf8;

inline std::string Show(const google::protobuf::Message& m) {
  std::string s = m.ShortDebugString();
  if (s.size() > 400) s = absl::StrCat(s.substr(0, 400), "...");
  return s;
}

}  // namespace hourglass::api::admin_fuzz

#endif  // HOURGLASS_TESTS_FUZZ_ADMIN_FUZZ_MODEL_H_
