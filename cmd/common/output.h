#ifndef HOURGLASS_CMD_COMMON_OUTPUT_H_
#define HOURGLASS_CMD_COMMON_OUTPUT_H_

#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"

namespace hourglass::cli {

// A table for people: a header row, then rows, each column padded to its
// widest cell and separated by two spaces. Numeric columns may be
// right-aligned. Not thread-safe.
class Table {
 public:
  explicit Table(std::vector<std::string> header)
      : header_(std::move(header)) {}

  // Right-aligns column `column` (0-based), header included.
  void AlignRight(size_t column);
  // REQUIRES: row has as many cells as the header.
  void AddRow(std::vector<std::string> row);
  bool empty() const { return rows_.empty(); }

  // The header and rows, one line each, no trailing spaces.
  std::string Render() const;

 private:
  std::vector<std::string> header_;
  std::vector<bool> right_;
  std::vector<std::vector<std::string>> rows_;
};

// `text` as a JSON string literal, quotes included. Control characters,
// quotes and backslashes are escaped; other bytes pass unchanged.
std::string JsonQuote(absl::string_view text);

// `message` as one line of JSON in protobuf's JSON mapping, with the field
// names of the .proto file (deliver_at, not deliverAt) and fields at their
// default values included. Bytes are base64, 64-bit integers are strings,
// times are RFC 3339 and durations "1.5s", as the mapping says.
absl::StatusOr<std::string> ToJson(const google::protobuf::Message& message);

// Prints `message` as ToJson does, and a newline, to stdout.
absl::Status PrintJson(const google::protobuf::Message& message);

// `text` as a value of a key=value line: unchanged when it is non-empty and
// holds only printable ASCII other than space, quote, backslash and '=';
// otherwise in double quotes with C escapes (\n, \", \x01).
std::string LogfmtValue(absl::string_view text);

// `bytes` for a terminal: printable ASCII unchanged, everything else as C
// escapes (\n, \t, \x01). No quotes.
std::string Printable(absl::string_view bytes);

// `word` quoted for a POSIX shell when it needs it, in single quotes.
std::string ShellQuote(absl::string_view word);

// "yes" or "no".
inline const char* YesNo(bool value) { return value ? "yes" : "no"; }

}  // namespace hourglass::cli

#endif  // HOURGLASS_CMD_COMMON_OUTPUT_H_
