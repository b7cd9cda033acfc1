#include "tests/soak/context.h"

#include <algorithm>
#include <fstream>
#include <iostream>
#include <string>
#include <utility>

#include "absl/random/distributions.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace hourglass::soak {
namespace {

// The broker's address as the soak script last wrote it; "" if there is
// none yet. The script writes a new file and renames it over the old one,
// so a read never sees half an address.
std::string ReadAddress(const std::string& path) {
  std::ifstream in(path);
  std::string address;
  std::getline(in, address);
  return std::string(absl::StripAsciiWhitespace(address));
}

}  // namespace

std::mt19937_64 WorkerRng(uint64_t seed, int role, int index) {
  std::seed_seq sequence{
      static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32),
      static_cast<uint32_t>(role), static_cast<uint32_t>(index)};
  return std::mt19937_64(sequence);
}

bool Backoff::Wait(const absl::Notification& stop) {
  const absl::Duration delay =
      next_ * absl::Uniform(*rng_, 0.5, 1.0);  // Jitter: clients spread out.
  next_ = std::min(next_ * 2, kMax);
  return !stop.WaitForNotificationWithTimeout(delay);
}

std::unique_ptr<Connection> Connect(Shared& shared,
                                    const absl::Notification& stop,
                                    Backoff& backoff, absl::Time deadline) {
  while (!stop.HasBeenNotified() && absl::Now() < deadline) {
    client::ChannelOptions options;
    options.address = ReadAddress(shared.addr_file);
    options.call_timeout = shared.config.call_timeout;
    options.own_connection = true;
    if (!options.address.empty()) {
      absl::StatusOr<std::shared_ptr<client::Channel>> channel =
          client::Channel::Create(options);
      if (channel.ok() &&
          (*channel)->Connect(shared.config.call_timeout).ok()) {
        ++shared.counters.connects;
        backoff.Reset();
        auto connection = std::make_unique<Connection>();
        connection->channel = *std::move(channel);
        client::PublisherOptions publisher;
        publisher.retry.max_attempts = 1;
        connection->publisher =
            std::make_unique<client::Publisher>(connection->channel, publisher);
        connection->admin =
            std::make_unique<client::Admin>(connection->channel);
        return connection;
      }
    }
    if (!backoff.Wait(stop)) break;
  }
  return nullptr;
}

bool OutcomeUnknown(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kCancelled:
    case absl::StatusCode::kUnknown:
    case absl::StatusCode::kInternal:
      return true;
    default:
      return false;
  }
}

void ReportUnexpected(Shared& shared, const std::string& call,
                      const absl::Status& status) {
  ++shared.counters.unexpected_codes;
  std::cerr << absl::StrCat("soak: ", call, " answered ",
                            static_cast<int>(status.code()), ": ",
                            status.message(), "\n");
}

}  // namespace hourglass::soak
