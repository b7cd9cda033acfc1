#include "cmd/hourglass-bench/lateness_log.h"

#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace hourglass::bench {

absl::StatusOr<std::unique_ptr<LatenessLog>> LatenessLog::Create(
    const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "w");
  if (file == nullptr) {
    return absl::UnavailableError(absl::StrCat(
        "cannot create lateness log ", path, ": ", std::strerror(errno)));
  }
  return std::unique_ptr<LatenessLog>(new LatenessLog(path, file));
}

LatenessLog::~LatenessLog() { Close().IgnoreError(); }

void LatenessLog::Record(absl::Time deliver_at, absl::Time arrival) {
  absl::MutexLock lock(&mu_);
  if (file_ == nullptr) return;
  if (std::fprintf(file_, "%" PRId64 " %" PRId64 "\n",
                   absl::ToUnixMicros(deliver_at),
                   absl::ToUnixMicros(arrival)) < 0) {
    failed_ = true;
  }
}

absl::Status LatenessLog::Close() {
  absl::MutexLock lock(&mu_);
  if (file_ != nullptr) {
    if (std::fclose(file_) != 0) failed_ = true;
    file_ = nullptr;
  }
  if (failed_) {
    return absl::UnavailableError(
        absl::StrCat("could not write lateness log ", path_));
  }
  return absl::OkStatus();
}

}  // namespace hourglass::bench
