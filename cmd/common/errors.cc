#include "cmd/common/errors.h"

#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"

namespace hourglass::cli {
namespace {

// Marks a status as a usage error (a status payload, so that the code stays
// INVALID_ARGUMENT as absl/status/status.h advises).
constexpr absl::string_view kUsagePayload = "hourglass.cli/usage";

}  // namespace

absl::Status UsageError(absl::string_view flag, absl::string_view reason) {
  return UsageError(absl::StrCat(flag, ": ", reason));
}

absl::Status UsageError(absl::string_view reason) {
  absl::Status status = absl::InvalidArgumentError(reason);
  status.SetPayload(kUsagePayload, absl::Cord());
  return status;
}

int ExitCode(const absl::Status& status) {
  if (status.ok()) return 0;
  if (status.GetPayload(kUsagePayload).has_value()) return kExitUsage;
  return kExitFailure;
}

std::string ErrnoText(int error) {
  std::string text = std::strerror(error);
  if (!text.empty()) text[0] = absl::ascii_tolower(text[0]);
  return text;
}

}  // namespace hourglass::cli
