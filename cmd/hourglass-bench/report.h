#ifndef HOURGLASS_CMD_HOURGLASS_BENCH_REPORT_H_
#define HOURGLASS_CMD_HOURGLASS_BENCH_REPORT_H_

#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "cmd/hourglass-bench/histogram.h"
#include "cmd/hourglass-bench/workload.h"

namespace hourglass::bench {

// What one run of hourglass-bench did and measured.
struct BenchResult {
  // The workload.
  std::string topic;
  std::string group;
  // As --durability said: "sync", "async" or "unknown".
  std::string durability;
  int producers = 0;
  // The producers' RPC: "Publish" or "PublishStream".
  std::string publish_rpc;
  int consumers = 0;
  // The consumers' RPC: "Subscribe" or "SubscribeBatches".
  std::string consumer_rpc;
  // Publish requests in flight, over all producers.
  int concurrency = 0;
  uint32_t batch = 0;
  size_t payload_bytes = 0;
  DelaySpec delay;
  // Messages per second asked for; 0 for as fast as possible.
  double rate = 0;

  // Publishing: messages stored, in so many calls, between the first call
  // sent and the last answered; latency of the calls that succeeded.
  uint64_t published = 0;
  uint64_t publish_calls = 0;
  absl::Duration publish_time = absl::ZeroDuration();
  LatencyHistogram call_latency;

  // Delivery: distinct messages delivered, between the first and the last
  // of them; arrival minus deliver_at of each.
  uint64_t delivered = 0;
  absl::Duration delivery_time = absl::ZeroDuration();
  LatencyHistogram lateness;

  // Deliveries before their deliver_at (must be 0); repeated deliveries of
  // a message; deliveries that were not the bench's; published messages
  // never delivered (with consumers).
  uint64_t early = 0;
  uint64_t duplicates = 0;
  uint64_t foreign = 0;
  uint64_t undelivered = 0;
  // Failed Publish calls and the messages in them; failed Subscribe
  // streams; the first failure's text (empty if none).
  uint64_t errors = 0;
  uint64_t failed_messages = 0;
  uint64_t stream_errors = 0;
  std::string first_error;
  // Whether Ctrl-C ended the run early.
  bool interrupted = false;
};

// The summary for people: one "name  value" line per figure, names padded
// to one width:
//   topic        bench-1764000000000
//   durability   sync
//   workload     ...
//   published    100000 msgs in 1000 calls in 512.3ms = 195187 msg/s; call
//   p50 3.1ms p99 7.2ms max 9.8ms delivered    100000 of 100000 in 10.231s =
//   9774 msg/s lateness     p50 1.2ms p90 1.9ms p99 3.1ms p99.9 4.9ms max 6.1ms
//   early        0
//   duplicates   0
//   undelivered  0
//   errors       0
// Without consumers, delivered and lateness say "-" and undelivered is 0.
std::string HumanReport(const BenchResult& result);

// The same as one line of JSON; durations in milliseconds, rates in
// messages per second.
std::string JsonReport(const BenchResult& result);

// Messages per second: `count` over `time`; 0 when time is 0.
double Rate(uint64_t count, absl::Duration time);

}  // namespace hourglass::bench

#endif  // HOURGLASS_CMD_HOURGLASS_BENCH_REPORT_H_
