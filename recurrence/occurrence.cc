#include "recurrence/occurrence.h"

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/numeric/int128.h"
#include "absl/time/time.h"

namespace hourglass::recurrence {
namespace {

constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ULL;
constexpr uint64_t kFnvPrime = 0x100000001b3ULL;

void HashByte(uint64_t& h, uint8_t byte) {
  h ^= byte;
  h *= kFnvPrime;
}

// Little-endian, whatever the machine's order.
void HashU64(uint64_t& h, uint64_t value) {
  for (int i = 0; i < 8; ++i)
    HashByte(h, static_cast<uint8_t>(value >> (8 * i)));
}

// splitmix64's finalizer: spreads FNV's weak low bits over the word.
uint64_t Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

uint64_t StableHash(std::string_view recurrence_id, absl::Time fire_time) {
  uint64_t h = kFnvOffset;
  for (char c : recurrence_id) HashByte(h, static_cast<uint8_t>(c));
  const int64_t seconds = absl::ToUnixSeconds(fire_time);
  const int64_t nanos =
      absl::ToInt64Nanoseconds(fire_time - absl::FromUnixSeconds(seconds));
  HashU64(h, static_cast<uint64_t>(seconds));
  HashU64(h, static_cast<uint64_t>(nanos));
  return Mix(h);
}

absl::Duration Jitter(std::string_view recurrence_id, absl::Time fire_time,
                      absl::Duration max_jitter) {
  const int64_t max_ms = absl::ToInt64Milliseconds(max_jitter);
  if (max_ms <= 0) return absl::ZeroDuration();
  // The hash scaled into [0, max_ms]: the high word of hash * (max_ms + 1).
  const absl::uint128 scaled =
      absl::uint128(StableHash(recurrence_id, fire_time)) *
      absl::uint128(static_cast<uint64_t>(max_ms) + 1);
  return absl::Milliseconds(static_cast<int64_t>(absl::Uint128High64(scaled)));
}

std::string OccurrenceId(std::string_view recurrence_id, absl::Time fire_time) {
  std::string id(recurrence_id);
  id += '@';
  id +=
      absl::FormatTime("%Y-%m-%dT%H:%M:%E*SZ", fire_time, absl::UTCTimeZone());
  return id;
}

}  // namespace hourglass::recurrence
