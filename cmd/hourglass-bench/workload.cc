#include "cmd/hourglass-bench/workload.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/random/distributions.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "cmd/common/duration.h"

namespace hourglass::bench {

std::string DelaySpec::ToString() const {
  switch (kind) {
    case Kind::kFixed:
      return cli::HumanDuration(min);
    case Kind::kUniform:
      return absl::StrCat(cli::HumanDuration(min), "..",
                          cli::HumanDuration(max));
    case Kind::kHot:
      return absl::StrCat("hot:", cli::HumanDuration(min));
  }
  return "";
}

absl::StatusOr<DelaySpec> ParseDelaySpec(absl::string_view text) {
  const absl::Status bad = absl::InvalidArgumentError(
      absl::StrCat("\"", text,
                   "\" is not a delay (use a duration such as 5s, a range "
                   "such as 1s..10s, or hot:30s)"));
  DelaySpec spec;
  absl::string_view rest = text;
  if (absl::ConsumePrefix(&rest, "hot:")) {
    absl::StatusOr<absl::Duration> at = cli::ParseDuration(rest);
    if (!at.ok()) return bad;
    spec.kind = DelaySpec::Kind::kHot;
    spec.min = spec.max = *at;
    return spec;
  }
  const size_t dots = rest.find("..");
  if (dots == absl::string_view::npos) {
    absl::StatusOr<absl::Duration> delay = cli::ParseDuration(rest);
    if (!delay.ok()) return bad;
    spec.min = spec.max = *delay;
    return spec;
  }
  absl::StatusOr<absl::Duration> min = cli::ParseDuration(rest.substr(0, dots));
  absl::StatusOr<absl::Duration> max =
      cli::ParseDuration(rest.substr(dots + 2));
  if (!min.ok() || !max.ok()) return bad;
  if (*max < *min) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", text, "\": the range ends before it starts"));
  }
  spec.kind = DelaySpec::Kind::kUniform;
  spec.min = *min;
  spec.max = *max;
  return spec;
}

bool ReadSequence(absl::string_view payload, uint64_t& sequence) {
  if (payload.size() < kSequenceBytes) return false;
  uint64_t value = 0;
  for (size_t i = 0; i < kSequenceBytes; ++i) {
    value |= static_cast<uint64_t>(static_cast<unsigned char>(payload[i]))
             << (8 * i);
  }
  sequence = value;
  return true;
}

PublishPlan::PublishPlan(Options options, absl::Time start)
    : options_(std::move(options)),
      start_(start),
      end_(options_.duration == absl::InfiniteDuration()
               ? absl::InfiniteFuture()
               : start + options_.duration),
      // The broker keeps times to the millisecond.
      hot_instant_(options_.delay.kind == DelaySpec::Kind::kHot
                       ? absl::FromUnixMillis(
                             absl::ToUnixMillis(start + options_.delay.min))
                       : absl::InfiniteFuture()),
      filler_(options_.payload_bytes - kSequenceBytes, 'x') {}

PublishPlan::Claim PublishPlan::Next() {
  Claim claim;
  if (stopped_.load(std::memory_order_relaxed)) return claim;
  const uint64_t first =
      next_.fetch_add(options_.batch, std::memory_order_relaxed);
  if (options_.count != 0 && first >= options_.count) return claim;
  uint64_t size = options_.batch;
  if (options_.count != 0) size = std::min(size, options_.count - first);
  if (options_.rate > 0) {
    claim.send_at =
        start_ + absl::Seconds(static_cast<double>(first) / options_.rate);
  }
  // A paced batch is cut off by when it would be sent, an unpaced one by
  // the clock.
  const absl::Time at = options_.rate > 0 ? claim.send_at : absl::Now();
  if (at >= end_) return claim;
  claim.first = first;
  claim.size = static_cast<uint32_t>(size);
  return claim;
}

void PublishPlan::Fill(const Claim& claim, absl::BitGen& random,
                       std::vector<client::Message>& messages) const {
  messages.resize(claim.size);
  const std::string& topic =
      options_.topics[(claim.first / options_.batch) % options_.topics.size()];
  for (uint32_t i = 0; i < claim.size; ++i) {
    client::Message& message = messages[i];
    message.topic = topic;
    std::string& payload = message.payload;
    payload.resize(kSequenceBytes);
    const uint64_t sequence = claim.first + i;
    for (size_t b = 0; b < kSequenceBytes; ++b) {
      payload[b] = static_cast<char>((sequence >> (8 * b)) & 0xff);
    }
    payload += filler_;
    if (!options_.id_prefix.empty()) {
      message.id = absl::StrCat(options_.id_prefix, sequence);
    }
    switch (options_.delay.kind) {
      case DelaySpec::Kind::kFixed:
        message.delay = options_.delay.min;
        break;
      case DelaySpec::Kind::kUniform:
        message.delay = absl::Milliseconds(absl::Uniform<int64_t>(
            absl::IntervalClosed, random,
            absl::ToInt64Milliseconds(options_.delay.min),
            absl::ToInt64Milliseconds(options_.delay.max)));
        break;
      case DelaySpec::Kind::kHot:
        message.deliver_at = hot_instant_;
        break;
    }
  }
}

}  // namespace hourglass::bench
