// Rule::NextAfter against a brute-force reference, for random cron rules in
// random zones.
//
// The reference knows nothing of the parser or of NextMatch: each random
// rule is built as sets of allowed values per field, from which both its
// text and the reference's predicate come. The reference visits every local
// civil minute (every second, for 6-field rules) of a span, one at a time,
// and maps each matching one to instants with absl::TimeZone::At: UNIQUE
// -> pre; SKIPPED -> trans (nothing under on_gap=skip); REPEATED -> pre,
// and post when the overlap rule says both. The sorted set of those
// instants must equal the sequence of repeated NextAfter calls, and
// NextAfter from random points must give the next element of the set.
//
// Spans: HOURGLASS_RECURRENCE_YEARS (default 2) years for sparse rules,
// fewer days for dense ones and 6-field ones, centred on a DST transition;
// HOURGLASS_RECURRENCE_RULES rules (default 100). HOURGLASS_SEED replays.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "recurrence/rule.h"
#include "tests/testing/seed.h"

namespace hourglass::recurrence {
namespace {

int64_t EnvOr(const char* name, int64_t fallback) {
  const char* s = std::getenv(name);
  return s != nullptr && *s ? std::strtoll(s, nullptr, 10) : fallback;
}

constexpr const char* kZones[] = {"UTC",
                                  "America/New_York",
                                  "Europe/London",
                                  "Australia/Lord_Howe",
                                  "Asia/Kolkata",
                                  "America/Santiago",
                                  "Pacific/Chatham",
                                  "America/St_Johns",
                                  "Europe/Berlin",
                                  "America/Havana",
                                  "Africa/Casablanca",
                                  "Pacific/Apia",
                                  "Asia/Tehran",
                                  "Antarctica/Troll"};

// A random cron field: its text and the values it allows.
struct Field {
  std::string text;
  std::vector<bool> allowed;  // Indexed by value.
  bool starts_with_star = false;
  bool interval = false;  // Holds '*' or a step.
};

struct FieldRange {
  int min;
  int max;       // Largest value written.
  int star_max;  // What '*' and "a/n" run to.
  bool weekday;  // 7 is Sunday.
};

class RandomRules {
 public:
  explicit RandomRules(uint64_t seed) : rng_(seed) {}

  int64_t Uniform(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }
  bool OneIn(int n) { return Uniform(1, n) == 1; }

  // `favoured` values are picked for single values more often than others.
  Field MakeField(const FieldRange& r, int star_weight,
                  const std::vector<int>& favoured,
                  const std::vector<std::string>& names = {}) {
    Field f;
    f.allowed.assign(r.max + 1, false);
    const int items = OneIn(4) ? static_cast<int>(Uniform(2, 3)) : 1;
    std::vector<std::string> texts;
    for (int i = 0; i < items; ++i) {
      texts.push_back(
          MakeItem(r, i == 0 ? star_weight : 0, favoured, names, f));
    }
    f.text = absl::StrJoin(texts, ",");
    f.starts_with_star = f.text.front() == '*';
    if (r.weekday && f.allowed[7]) f.allowed[0] = true;
    return f;
  }

  std::mt19937_64& rng() { return rng_; }

 private:
  int Value(const FieldRange& r, const std::vector<int>& favoured) {
    if (!favoured.empty() && !OneIn(3)) {
      return favoured[Uniform(0, favoured.size() - 1)];
    }
    return static_cast<int>(Uniform(r.min, r.max));
  }

  std::string Name(int v, const std::vector<std::string>& names,
                   const FieldRange& r) {
    if (names.empty() || !OneIn(3) || v > r.star_max) return std::to_string(v);
    std::string name = names[v - r.min];
    if (OneIn(2)) name[1] = static_cast<char>(name[1] - 'A' + 'a');
    return name;
  }

  std::string MakeItem(const FieldRange& r, int star_weight,
                       const std::vector<int>& favoured,
                       const std::vector<std::string>& names, Field& f) {
    const int kind = static_cast<int>(Uniform(0, 9 + star_weight));
    int lo, hi, step = 1;
    std::string text;
    if (kind >= 10) {  // "*"
      lo = r.min, hi = r.star_max;
      text = "*";
      f.interval = true;
    } else if (kind <= 3) {  // "v"
      lo = hi = Value(r, favoured);
      text = Name(lo, names, r);
    } else if (kind <= 5) {  // "a-b"
      lo = Value(r, favoured);
      hi = Value(r, favoured);
      if (lo > hi) std::swap(lo, hi);
      text = absl::StrCat(Name(lo, names, r), "-", Name(hi, names, r));
    } else if (kind <= 7) {  // "*/n"
      lo = r.min, hi = r.star_max;
      step = static_cast<int>(Uniform(1, std::min(r.max, 20)));
      text = absl::StrCat("*/", step);
      f.interval = true;
    } else if (kind == 8) {  // "a-b/n"
      lo = Value(r, favoured);
      hi = Value(r, favoured);
      if (lo > hi) std::swap(lo, hi);
      step = static_cast<int>(Uniform(1, r.max));
      text = absl::StrCat(lo, "-", hi, "/", step);
      f.interval = true;
    } else {  // "a/n"
      lo = Value(r, favoured);
      hi = std::max(lo, r.star_max);
      step = static_cast<int>(Uniform(1, r.max));
      text = absl::StrCat(lo, "/", step);
      f.interval = true;
    }
    for (int v = lo; v <= hi; v += step) f.allowed[v] = true;
    return text;
  }

  std::mt19937_64 rng_;
};

// A random rule, as its text and the predicate the reference uses.
struct Model {
  std::string text;
  bool has_seconds = false;
  Field second, minute, hour, dom, month, dow;
  GapPolicy gap = GapPolicy::kFire;
  OverlapPolicy overlap = OverlapPolicy::kAuto;
  std::string zone;

  bool DayMatches(absl::CivilDay day) const {
    const int weekday = (static_cast<int>(absl::GetWeekday(day)) + 1) % 7;
    const bool d = dom.allowed[day.day()];
    const bool w = dow.allowed[weekday];
    return dom.starts_with_star || dow.starts_with_star ? d && w : d || w;
  }
  bool BothOccurrences() const {
    return overlap == OverlapPolicy::kBoth || hour.interval;
  }
  // Matching (minute, hour, second) combinations per day, at most.
  int64_t PerDay() const {
    auto count = [](const Field& f) {
      return std::count(f.allowed.begin(), f.allowed.end(), true);
    };
    return count(second) * count(minute) * count(hour);
  }
};

Model MakeModel(RandomRules& r) {
  static const std::vector<std::string> kMonths = {"JAN", "FEB", "MAR", "APR",
                                                   "MAY", "JUN", "JUL", "AUG",
                                                   "SEP", "OCT", "NOV", "DEC"};
  static const std::vector<std::string> kDays = {"SUN", "MON", "TUE", "WED",
                                                 "THU", "FRI", "SAT"};
  Model m;
  m.has_seconds = r.OneIn(5);
  if (m.has_seconds) {
    m.second = r.MakeField({0, 59, 59, false}, 1, {0, 30, 59});
  } else {
    m.second.allowed.assign(60, false);
    m.second.allowed[0] = true;
  }
  m.minute = r.MakeField({0, 59, 59, false}, 2, {0, 15, 29, 30, 45, 59});
  m.hour = r.MakeField({0, 23, 23, false}, 6, {0, 1, 2, 3, 23});
  m.dom = r.MakeField({1, 31, 31, false}, 16, {1, 13, 28, 29, 30, 31});
  m.month = r.MakeField({1, 12, 12, false}, 12, {2, 3, 4, 10, 11}, kMonths);
  m.dow = r.MakeField({0, 7, 6, true}, 16, {0, 6, 7}, kDays);
  m.text = absl::StrJoin(
      {m.minute.text, m.hour.text, m.dom.text, m.month.text, m.dow.text}, " ");
  if (m.has_seconds) m.text = absl::StrCat(m.second.text, " ", m.text);
  m.gap = r.OneIn(3) ? GapPolicy::kSkip : GapPolicy::kFire;
  m.overlap = r.OneIn(3) ? OverlapPolicy::kBoth : OverlapPolicy::kAuto;
  m.zone = kZones[r.Uniform(0, std::size(kZones) - 1)];
  return m;
}

// Every fire time of `m` from the local times of [first_day, end_day).
// How many local times of the reference runs fell in gaps and overlaps.
struct DstCounts {
  int64_t skipped = 0;
  int64_t repeated = 0;
};

std::set<absl::Time> Reference(const Model& m, const absl::TimeZone& zone,
                               absl::CivilDay first_day, absl::CivilDay end_day,
                               DstCounts& counts) {
  std::set<absl::Time> fires;
  const int seconds = m.has_seconds ? 60 : 1;
  for (absl::CivilDay day = first_day; day < end_day; ++day) {
    for (absl::CivilSecond t(day), end(day + 1); t < end; t += 60 / seconds) {
      // One civil minute (or second) at a time.
      const bool match =
          m.month.allowed[t.month()] && m.DayMatches(absl::CivilDay(t)) &&
          m.hour.allowed[t.hour()] && m.minute.allowed[t.minute()] &&
          m.second.allowed[t.second()];
      if (!match) continue;
      const absl::TimeZone::TimeInfo info = zone.At(t);
      switch (info.kind) {
        case absl::TimeZone::TimeInfo::UNIQUE:
          fires.insert(info.pre);
          break;
        case absl::TimeZone::TimeInfo::SKIPPED:
          ++counts.skipped;
          if (m.gap == GapPolicy::kFire) fires.insert(info.trans);
          break;
        case absl::TimeZone::TimeInfo::REPEATED:
          ++counts.repeated;
          fires.insert(info.pre);
          if (m.BothOccurrences()) fires.insert(info.post);
          break;
      }
    }
  }
  return fires;
}

std::string Format(std::optional<absl::Time> t) {
  return t ? absl::FormatTime("%Y-%m-%dT%H:%M:%E*SZ", *t, absl::UTCTimeZone())
           : "none";
}

// A day near a transition of `zone` between the two years, or a random day.
absl::CivilDay PickCentre(RandomRules& r, const absl::TimeZone& zone,
                          int64_t first_year, int64_t years) {
  const absl::CivilDay start(first_year, 1, 1);
  const absl::CivilDay random_day = start + r.Uniform(0, years * 365 - 1);
  absl::TimeZone::CivilTransition tr;
  if (r.OneIn(5) ||
      !zone.NextTransition(absl::FromCivil(random_day, zone), &tr)) {
    return random_day;
  }
  return absl::CivilDay(tr.from);
}

TEST(RuleReferenceTest, NextAfterMatchesABruteForceWalkOfLocalTime) {
  const uint64_t seed = testing::SeedFromEnvironment();
  std::printf("HOURGLASS_SEED=%llu\n", static_cast<unsigned long long>(seed));
  RecordProperty("seed", std::to_string(seed));
  const int64_t years = EnvOr("HOURGLASS_RECURRENCE_YEARS", 2);
  const int64_t rules = EnvOr("HOURGLASS_RECURRENCE_RULES", 100);
  RandomRules random(seed);
  int64_t compared = 0;
  DstCounts dst;
  for (int64_t i = 0; i < rules; ++i) {
    const Model m = MakeModel(random);
    RuleSpec spec;
    spec.cron = m.text;
    spec.time_zone = m.zone;
    spec.on_gap = m.gap;
    spec.on_overlap = m.overlap;
    absl::StatusOr<Rule> rule = Rule::Create(spec);
    ASSERT_TRUE(rule.ok()) << m.text << ": " << rule.status();
    const absl::TimeZone& zone = rule->zone();

    // Half the rules, and all dense and 6-field ones, get a span of days
    // from a DST transition on; the others whole years.
    const int64_t first_year = random.Uniform(2005, 2035);
    int64_t days = years * 366;
    const int64_t per_day = m.PerDay();
    if (m.has_seconds || random.OneIn(2)) days = std::min<int64_t>(days, 8);
    days = std::min<int64_t>(days, std::max<int64_t>(5, 20000 / per_day));
    absl::CivilDay first_day(first_year, 1, 1);
    if (days < years * 366) {
      // The compared days (all but two at each end) start at the centre.
      first_day = PickCentre(random, zone, first_year, years) - 2;
    }
    const absl::CivilDay end_day = first_day + days;
    // Compare only instants that no local time outside the span can take.
    const absl::Time lo = zone.At(absl::CivilSecond(first_day + 2)).pre;
    const absl::Time hi = zone.At(absl::CivilSecond(end_day - 2)).pre;
    const std::set<absl::Time> all =
        Reference(m, zone, first_day, end_day, dst);
    const std::vector<absl::Time> want(all.lower_bound(lo),
                                       all.upper_bound(hi));

    SCOPED_TRACE(absl::StrCat(
        "rule \"", m.text, "\" in ", m.zone,
        m.gap == GapPolicy::kSkip ? " on_gap=skip" : "",
        m.overlap == OverlapPolicy::kBoth ? " on_overlap=both" : "", ", from ",
        Format(lo), " to ", Format(hi)));
    std::vector<absl::Time> got;
    for (std::optional<absl::Time> t = rule->NextAfter(lo - absl::Seconds(1));
         t && *t <= hi; t = rule->NextAfter(*t)) {
      got.push_back(*t);
      ASSERT_LE(got.size(), want.size() + 1) << "more fires than the reference";
    }
    const auto [g, w] =
        std::mismatch(got.begin(), got.end(), want.begin(), want.end());
    ASSERT_TRUE(g == got.end() && w == want.end())
        << "first difference: got "
        << Format(g == got.end() ? std::nullopt : std::optional(*g))
        << ", want "
        << Format(w == want.end() ? std::nullopt : std::optional(*w)) << " ("
        << got.size() << " fires, want " << want.size() << ")";
    compared += static_cast<int64_t>(want.size());

    // From arbitrary points, sub-second ones included.
    for (int probe = 0; probe < 50 && hi - lo > absl::Hours(25); ++probe) {
      const absl::Time t =
          lo + absl::Nanoseconds(random.Uniform(
                   0, absl::ToInt64Nanoseconds(hi - lo - absl::Hours(25))));
      const auto next = all.upper_bound(t);
      if (next == all.end() || *next > hi) continue;
      ASSERT_EQ(Format(rule->NextAfter(t)), Format(*next))
          << "NextAfter(" << Format(t) << ")";
    }
  }
  std::printf(
      "compared %lld fire times of %lld rules; matching local times in gaps "
      "%lld, in overlaps %lld\n",
      static_cast<long long>(compared), static_cast<long long>(rules),
      static_cast<long long>(dst.skipped),
      static_cast<long long>(dst.repeated));
}

}  // namespace
}  // namespace hourglass::recurrence
