// Fuzzes the key encodings of storage/keys.h.
//
// For two fuzzed values of every key kind: decoding an encoding gives the
// value back, and comparing two encodings bytewise compares the values
// (order preservation, which the loader's and the dispatcher's scans rely
// on). For fuzzed bytes: every decoder either rejects them or returns the
// one value whose encoding is exactly those bytes, so two different keys
// never decode to the same value.

#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>

#include "storage/keys.h"
#include "tests/fuzz/fuzz_check.h"

namespace hourglass::storage {
namespace {

// Names (topics, groups) may hold any byte but 0, which ends them in keys.
// Bytes at both ends of the range test unsigned ordering.
std::string ConsumeName(FuzzedDataProvider& in) {
  std::string name = in.ConsumeRandomLengthString(12);
  std::replace(name.begin(), name.end(), '\0', '\x01');
  return name;
}

DueKey ConsumeDueKey(FuzzedDataProvider& in) {
  DueKey key;
  key.deliver_at_ms = in.ConsumeIntegralInRange<int64_t>(
      0, std::numeric_limits<int64_t>::max());
  key.sequence = in.ConsumeIntegral<uint64_t>();
  return key;
}

// One fuzzed value of every key's fields.
struct Fields {
  std::string topic;
  std::string group;
  std::string id;  // Idempotency keys may hold any byte, 0 included.
  DueKey due;
};

Fields ConsumeFields(FuzzedDataProvider& in) {
  Fields f;
  f.topic = ConsumeName(in);
  f.group = ConsumeName(in);
  f.id = in.ConsumeRandomLengthString(12);
  f.due = ConsumeDueKey(in);
  return f;
}

// A second value, often sharing fields with the first, so that the
// comparisons reach the later fields of each key.
Fields ConsumeNeighbour(FuzzedDataProvider& in, const Fields& a) {
  Fields b = ConsumeFields(in);
  const uint8_t share = in.ConsumeIntegral<uint8_t>();
  if (share & 1) b.topic = a.topic;
  if (share & 2) b.group = a.group;
  if (share & 4) b.id = a.id;
  if (share & 8) b.due.deliver_at_ms = a.due.deliver_at_ms;
  if (share & 16) b.due.sequence = a.due.sequence;
  if (share & 32) {
    // A neighbour in due order: one millisecond or one sequence apart.
    if (b.due.deliver_at_ms > 0 && (share & 64)) --b.due.deliver_at_ms;
    if (b.due.sequence < std::numeric_limits<uint64_t>::max()) {
      ++b.due.sequence;
    }
  }
  if (share & 128) b.topic += b.topic.empty() ? "a" : b.topic.substr(0, 1);
  return b;
}

// The sign of a three-way comparison, as -1, 0 or 1.
template <typename T>
int Sign(const T& a, const T& b) {
  const auto c = a <=> b;
  return c < 0 ? -1 : (c > 0 ? 1 : 0);
}

int Bytewise(std::string_view a, std::string_view b) {
  const int c = a.compare(b);
  return c < 0 ? -1 : (c > 0 ? 1 : 0);
}

// Encodings of `a` and `b` compare as the tuples do.
template <typename Tuple>
void CheckOrder(const char* kind, const Tuple& a, const Tuple& b,
                std::string_view ka, std::string_view kb) {
  FUZZ_CHECK(Sign(a, b) == Bytewise(ka, kb), "%s keys out of order", kind);
}

void CheckEncodings(const Fields& a, const Fields& b) {
  // messages: sequence.
  {
    const std::string ka = MessageKey(a.due.sequence);
    const std::string kb = MessageKey(b.due.sequence);
    FUZZ_CHECK(DecodeMessageKey(ka) == a.due.sequence, "message key");
    CheckOrder("message", a.due.sequence, b.due.sequence, ka, kb);
  }
  // schedule: (deliver_at, sequence).
  {
    const std::string ka = ScheduleKey(a.due);
    const std::string kb = ScheduleKey(b.due);
    FUZZ_CHECK(DecodeScheduleKey(ka) == a.due, "schedule key");
    CheckOrder("schedule", a.due, b.due, ka, kb);
  }
  // ready: topic, group, (deliver_at, sequence).
  {
    const std::string prefix = ReadyPrefix(a.topic, a.group);
    const std::string ka = ReadyKey(a.topic, a.group, a.due);
    const std::string kb = ReadyKey(b.topic, b.group, b.due);
    FUZZ_CHECK(ka.starts_with(prefix), "ready key lacks its prefix");
    FUZZ_CHECK(ka < PrefixEnd(prefix), "ready key past its prefix's end");
    FUZZ_CHECK(DecodeReadySuffix(ka, prefix) == a.due, "ready key");
    const bool same_prefix = a.topic == b.topic && a.group == b.group;
    FUZZ_CHECK(DecodeReadySuffix(kb, prefix).has_value() == same_prefix,
               "ready key decoded under another group's prefix");
    FUZZ_CHECK(!DecodeInFlightKey(ka).has_value(),
               "a ready key decodes as an inflight key");
    CheckOrder("ready", std::tie(a.topic, a.group, a.due),
               std::tie(b.topic, b.group, b.due), ka, kb);
  }
  // inflight: topic, group, sequence.
  {
    const std::string ka = InFlightKey(a.topic, a.group, a.due.sequence);
    const std::string kb = InFlightKey(b.topic, b.group, b.due.sequence);
    FUZZ_CHECK(ka.starts_with(InFlightPrefix(a.topic, a.group)),
               "inflight key lacks its prefix");
    const std::optional<InFlightKeyParts> parts = DecodeInFlightKey(ka);
    FUZZ_CHECK(parts.has_value() && parts->topic == a.topic &&
                   parts->group == a.group && parts->sequence == a.due.sequence,
               "inflight key");
    FUZZ_CHECK(!DecodeReadySuffix(ka, ReadyPrefix(a.topic, a.group)),
               "an inflight key decodes as a ready key");
    CheckOrder("inflight", std::tie(a.topic, a.group, a.due.sequence),
               std::tie(b.topic, b.group, b.due.sequence), ka, kb);
  }
  // topic_due: topic, (deliver_at, sequence).
  {
    const std::string prefix = TopicDuePrefix(a.topic);
    const std::string ka = TopicDueKey(a.topic, a.due);
    const std::string kb = TopicDueKey(b.topic, b.due);
    FUZZ_CHECK(ka.starts_with(prefix) && ka < PrefixEnd(prefix),
               "topic_due key outside its prefix");
    FUZZ_CHECK(DecodeReadySuffix(ka, prefix) == a.due, "topic_due key");
    CheckOrder("topic_due", std::tie(a.topic, a.due), std::tie(b.topic, b.due),
               ka, kb);
  }
  // ids: topic, id. The id is last and may hold 0 bytes.
  {
    const std::string ka = IdKey(a.topic, a.id);
    const std::string kb = IdKey(b.topic, b.id);
    FUZZ_CHECK(ka.starts_with(TopicDuePrefix(a.topic)), "id key prefix");
    CheckOrder("id", std::tie(a.topic, a.id), std::tie(b.topic, b.id), ka, kb);
  }
  // meta: group registrations.
  {
    const std::string ka = GroupKey(a.topic, a.group);
    const std::string kb = GroupKey(b.topic, b.group);
    FUZZ_CHECK(ka.starts_with(kGroupKeyPrefix), "group key prefix");
    const auto names = DecodeGroupKey(ka);
    FUZZ_CHECK(names.has_value() && names->first == a.topic &&
                   names->second == a.group,
               "group key");
    CheckOrder("group", std::tie(a.topic, a.group), std::tie(b.topic, b.group),
               ka, kb);
  }
  // counters: three kinds that must never collide.
  {
    const std::string scheduled = ScheduledCounter(a.topic);
    const std::string messages = MessagesCounter(a.topic);
    const std::string ready = ReadyCounter(a.topic, a.group);
    FUZZ_CHECK(DecodeMessagesCounter(messages) == a.topic, "messages counter");
    FUZZ_CHECK(!DecodeMessagesCounter(scheduled).has_value() &&
                   !DecodeMessagesCounter(ready).has_value(),
               "another counter decodes as a messages counter");
    FUZZ_CHECK(scheduled != ready && scheduled != messages && ready != messages,
               "counters collide");
    CheckOrder("messages counter", a.topic, b.topic, messages,
               MessagesCounter(b.topic));
    CheckOrder("scheduled counter", a.topic, b.topic, scheduled,
               ScheduledCounter(b.topic));
    CheckOrder("ready counter", std::tie(a.topic, a.group),
               std::tie(b.topic, b.group), ready,
               ReadyCounter(b.topic, b.group));
  }
  // Fixed-width integers.
  {
    std::string u64, u32;
    AppendU64(u64, a.due.sequence);
    AppendU32(u32, static_cast<uint32_t>(a.due.sequence));
    FUZZ_CHECK(u64.size() == 8 && ReadU64(u64) == a.due.sequence, "u64");
    FUZZ_CHECK(u32.size() == 4 &&
                   ReadU32(u32) == static_cast<uint32_t>(a.due.sequence),
               "u32");
  }
}

// `decoded` (if any) must encode back to exactly `raw`.
void CheckDecoders(std::string_view raw, size_t split) {
  if (auto v = DecodeMessageKey(raw)) {
    FUZZ_CHECK(MessageKey(*v) == raw, "message key not canonical");
  }
  if (auto v = DecodeScheduleKey(raw)) {
    FUZZ_CHECK(ScheduleKey(*v) == raw, "schedule key not canonical");
  }
  // Any prefix of the bytes as the expected ready prefix, and one that is
  // not a prefix of them.
  const std::string_view prefix = raw.substr(0, std::min(split, raw.size()));
  if (auto v = DecodeReadySuffix(raw, prefix)) {
    FUZZ_CHECK(std::string(prefix) + ScheduleKey(*v) == raw,
               "ready suffix not canonical");
  }
  if (!raw.empty()) {
    std::string other(prefix);
    other.push_back(static_cast<char>(~raw[prefix.size() % raw.size()]));
    if (!raw.starts_with(other)) {
      FUZZ_CHECK(!DecodeReadySuffix(raw, other).has_value(),
                 "ready suffix decoded under a prefix the key lacks");
    }
  }
  if (auto v = DecodeInFlightKey(raw)) {
    FUZZ_CHECK(InFlightKey(v->topic, v->group, v->sequence) == raw,
               "inflight key not canonical");
  }
  if (auto v = DecodeGroupKey(raw)) {
    FUZZ_CHECK(GroupKey(v->first, v->second) == raw, "group key not canonical");
  }
  if (auto v = DecodeMessagesCounter(raw)) {
    FUZZ_CHECK(MessagesCounter(*v) == raw, "messages counter not canonical");
  }
  // PrefixEnd: the least string above every extension of the prefix, or ""
  // (no bound) for a prefix of 0xff bytes only.
  const std::string end = PrefixEnd(prefix);
  if (std::all_of(prefix.begin(), prefix.end(),
                  [](char c) { return static_cast<uint8_t>(c) == 0xff; })) {
    FUZZ_CHECK(end.empty(), "PrefixEnd of 0xff bytes is not empty");
  } else {
    FUZZ_CHECK(end > prefix && !std::string_view(end).starts_with(prefix),
               "PrefixEnd is inside its prefix's range");
    FUZZ_CHECK(end > raw || !raw.starts_with(prefix),
               "an extension of the prefix sorts after PrefixEnd");
    // Least: it is the prefix cut after some byte, that byte plus one.
    const std::string_view head =
        std::string_view(end).substr(0, end.size() - 1);
    FUZZ_CHECK(
        prefix.starts_with(head) &&
            static_cast<uint8_t>(end.back()) ==
                static_cast<uint8_t>(prefix[head.size()]) + 1 &&
            std::all_of(prefix.begin() + end.size(), prefix.end(),
                        [](char c) { return static_cast<uint8_t>(c) == 0xff; }),
        "PrefixEnd is not the least bound");
  }
}

void TestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const size_t split = in.ConsumeIntegralInRange<size_t>(0, 40);
  const std::string raw = in.ConsumeRandomLengthString(64);
  CheckDecoders(raw, split);
  const Fields a = ConsumeFields(in);
  const Fields b = ConsumeNeighbour(in, a);
  CheckEncodings(a, b);
  CheckEncodings(b, a);
}

}  // namespace
}  // namespace hourglass::storage

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  hourglass::storage::TestOneInput(data, size);
  return 0;
}
