#include "storage/schedule_counts.h"

#include <array>
#include <optional>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace hourglass::storage {
namespace {

constexpr std::array<Granularity, 3> kGranularities = {
    Granularity::kMinute, Granularity::kHour, Granularity::kDay};

int64_t RoundDown(int64_t ms, int64_t length) { return ms - ms % length; }
int64_t RoundUp(int64_t ms, int64_t length) {
  return RoundDown(ms + length - 1, length);
}

// DATA_LOSS naming `key` of `table`, which does not decode.
absl::Status Malformed(Table table, std::string_view key) {
  return absl::DataLossError(
      absl::StrCat("malformed key \"", absl::CHexEscape(std::string(key)),
                   "\" in table ", std::string(TableName(table))));
}

// Calls `piece(granularity, from, to)` for the runs of whole buckets that
// make up [start, end), in time order: minutes up to the first whole hour,
// hours up to the first whole day, whole days, then hours and minutes up
// to `end`. REQUIRES: 0 <= start <= end, both whole minutes.
template <typename Piece>
void Decompose(int64_t start, int64_t end, Piece piece) {
  int64_t at = start;
  // Up: each granularity until the next one's boundary, if `end` is past it.
  for (size_t i = 0; i + 1 < kGranularities.size(); ++i) {
    const int64_t next = RoundUp(at, GranularityMillis(kGranularities[i + 1]));
    if (next > end) break;
    if (next > at) piece(kGranularities[i], at, next);
    at = next;
  }
  // Down: the coarsest first, each as far towards `end` as it reaches.
  for (size_t i = kGranularities.size(); i-- > 0;) {
    const int64_t until = RoundDown(end, GranularityMillis(kGranularities[i]));
    if (until > at) {
      piece(kGranularities[i], at, until);
      at = until;
    }
  }
}

// Calls `piece` for the pieces of every bucket of `query`, in time order.
template <typename Piece>
void ForEachPiece(const ScheduleCountQuery& query, Piece piece) {
  for (size_t i = 0; i < query.count; ++i) {
    const int64_t start =
        query.first_ms + static_cast<int64_t>(i) * query.bucket_ms;
    Decompose(start, start + query.bucket_ms, piece);
  }
}

}  // namespace

void ScheduleCountDeltas::Add(std::string_view topic, int64_t deliver_at_ms,
                              int64_t delta) {
  auto it = minutes_.find(topic);
  if (it == minutes_.end()) it = minutes_.try_emplace(std::string(topic)).first;
  it->second[RoundDown(deliver_at_ms, kScheduleCountResolutionMs)] += delta;
}

void ScheduleCountDeltas::Append(const ScheduleCountDeltas& other) {
  for (const auto& [topic, minutes] : other.minutes_) {
    auto it = minutes_.find(topic);
    if (it == minutes_.end())
      it = minutes_.try_emplace(std::string(topic)).first;
    for (const auto& [minute, delta] : minutes) it->second[minute] += delta;
  }
}

void ScheduleCountDeltas::AppendTo(WriteBatch& batch) const {
  for (const auto& [topic, minutes] : minutes_) {
    // By granularity, then bucket start: the sum of its minutes' changes.
    std::array<std::map<int64_t, int64_t>, kGranularities.size()> sums;
    for (const auto& [minute, delta] : minutes) {
      if (delta == 0) continue;
      for (size_t i = 0; i < kGranularities.size(); ++i) {
        sums[i][RoundDown(minute, GranularityMillis(kGranularities[i]))] +=
            delta;
      }
    }
    for (size_t i = 0; i < kGranularities.size(); ++i) {
      for (const auto& [start, delta] : sums[i]) {
        if (delta == 0) continue;
        batch.Add(Table::kScheduleCounts,
                  ScheduleCountKey(topic, kGranularities[i], start), delta);
      }
    }
  }
}

uint64_t ScheduleCountReads(const ScheduleCountQuery& query) {
  uint64_t reads = 0;
  ForEachPiece(query, [&](Granularity g, int64_t from, int64_t to) {
    reads += static_cast<uint64_t>((to - from) / GranularityMillis(g));
  });
  return reads;
}

absl::StatusOr<std::vector<int64_t>> ReadScheduleCounts(
    MessageStore& store, std::string_view topic,
    const ScheduleCountQuery& query) {
  // Adjacent pieces of one granularity (a bucket's last hours and the
  // next one's first) are read in one scan.
  std::array<std::vector<std::pair<int64_t, int64_t>>, kGranularities.size()>
      runs;
  ForEachPiece(query, [&](Granularity g, int64_t from, int64_t to) {
    auto& of = runs[static_cast<size_t>(g)];
    if (!of.empty() && of.back().second == from) {
      of.back().second = to;
    } else {
      of.emplace_back(from, to);
    }
  });
  std::vector<int64_t> counts(query.count, 0);
  for (Granularity g : kGranularities) {
    const std::string prefix = ScheduleCountPrefix(topic, g);
    for (const auto& [from, to] : runs[static_cast<size_t>(g)]) {
      std::optional<std::string> malformed;
      absl::Status scanned =
          store.Scan(Table::kScheduleCounts, ScheduleCountKey(topic, g, from),
                     ScheduleCountKey(topic, g, to),
                     [&](std::string_view key, std::string_view value) {
                       const std::optional<int64_t> start =
                           DecodeScheduleCountSuffix(key, prefix);
                       if (!start.has_value() || *start < query.first_ms) {
                         malformed = std::string(key);
                         return false;
                       }
                       counts[static_cast<size_t>((*start - query.first_ms) /
                                                  query.bucket_ms)] +=
                           DecodeCounter(value);
                       return true;
                     });
      if (!scanned.ok()) return scanned;
      if (malformed.has_value()) {
        return Malformed(Table::kScheduleCounts, *malformed);
      }
    }
  }
  return counts;
}

absl::Status CountSchedule(MessageStore& store, ScheduleCountDeltas& counts,
                           uint64_t progress_every,
                           absl::FunctionRef<void(uint64_t)> progress) {
  uint64_t read = 0;
  std::optional<std::string> malformed;
  absl::Status scanned =
      store.Scan(Table::kSchedule, "", "",
                 [&](std::string_view key, std::string_view topic) {
                   const std::optional<DueKey> due = DecodeScheduleKey(key);
                   if (!due.has_value()) {
                     malformed = std::string(key);
                     return false;
                   }
                   counts.Add(topic, due->deliver_at_ms, 1);
                   ++read;
                   if (progress_every != 0 && read % progress_every == 0)
                     progress(read);
                   return true;
                 });
  if (!scanned.ok()) return scanned;
  if (malformed.has_value()) return Malformed(Table::kSchedule, *malformed);
  return absl::OkStatus();
}

}  // namespace hourglass::storage
