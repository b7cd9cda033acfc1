#ifndef HOURGLASS_TESTS_RECURRENCE_RULE_TESTING_H_
#define HOURGLASS_TESTS_RECURRENCE_RULE_TESTING_H_

// What the recurrence tests share: instants written as RFC 3339, and rules
// that must be valid.

#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "recurrence/rule.h"

namespace hourglass::testing {

// The instant of `text`, RFC 3339 ("2027-03-14T07:00:00Z"); a failure and
// the epoch if it is not.
inline absl::Time Utc(const std::string& text) {
  absl::Time t;
  std::string error;
  EXPECT_TRUE(absl::ParseTime(absl::RFC3339_full, text, &t, &error))
      << text << ": " << error;
  return t;
}

// `t` in RFC 3339 in UTC with "Z", a fraction of a second only when it has
// one.
inline std::string Format(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E*SZ", t, absl::UTCTimeZone());
}

// The rule of `spec`. REQUIRES: `spec` is valid (else a test failure, then
// an abort naming the error).
inline recurrence::Rule MakeRule(const recurrence::RuleSpec& spec) {
  absl::StatusOr<recurrence::Rule> rule = recurrence::Rule::Create(spec);
  EXPECT_TRUE(rule.ok()) << rule.status();
  return std::move(rule).value();
}

}  // namespace hourglass::testing

#endif  // HOURGLASS_TESTS_RECURRENCE_RULE_TESTING_H_
