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

std::unique_ptr<cli::Connection> Connect(Shared& shared,
                                         const absl::Notification& stop,
                                         Backoff& backoff,
                                         absl::Time deadline) {
  while (!stop.HasBeenNotified() && absl::Now() < deadline) {
    cli::GlobalOptions options;
    options.addr = ReadAddress(shared.addr_file);
    options.timeout = absl::StrCat(
        absl::ToInt64Milliseconds(shared.config.call_timeout), "ms");
    if (!options.addr.empty()) {
      absl::StatusOr<std::unique_ptr<cli::Connection>> connection =
          cli::Connection::Open(options, /*own_connection=*/true);
      if (connection.ok()) {
        ++shared.counters.connects;
        backoff.Reset();
        return *std::move(connection);
      }
    }
    if (!backoff.Wait(stop)) break;
  }
  return nullptr;
}

bool OutcomeUnknown(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::CANCELLED:
    case grpc::StatusCode::UNKNOWN:
    case grpc::StatusCode::INTERNAL:
      return true;
    default:
      return false;
  }
}

void ReportUnexpected(Shared& shared, const std::string& call,
                      const grpc::Status& status) {
  ++shared.counters.unexpected_codes;
  std::cerr << absl::StrCat("soak: ", call, " answered ",
                            static_cast<int>(status.error_code()), ": ",
                            status.error_message(), "\n");
}

}  // namespace hourglass::soak
