#ifndef HOURGLASS_TESTS_TESTING_TEXT_LINES_H_
#define HOURGLASS_TESTS_TESTING_TEXT_LINES_H_

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace hourglass::testing {

// The lines of `text` (a /metrics scrape, a log) that start with `prefix`,
// in order, without their newlines.
inline std::vector<std::string> LinesStartingWith(absl::string_view text,
                                                  absl::string_view prefix) {
  std::vector<std::string> lines;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StartsWith(line, prefix)) lines.emplace_back(line);
  }
  return lines;
}

}  // namespace hourglass::testing

#endif  // HOURGLASS_TESTS_TESTING_TEXT_LINES_H_
