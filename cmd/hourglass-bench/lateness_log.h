#ifndef HOURGLASS_CMD_HOURGLASS_BENCH_LATENESS_LOG_H_
#define HOURGLASS_CMD_HOURGLASS_BENCH_LATENESS_LOG_H_

#include <cstdio>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace hourglass::bench {

// --lateness-log: one line per message's first delivery,
//   <deliver_at> <arrival>
// both in microseconds since the Unix epoch, in the order consumers counted
// them. Scripts cut a run into windows with it (tests/bench/cluster.sh:
// lateness before, during and after a failover), which the summary's one
// histogram cannot.
//
// Thread-safe: consumers record from gRPC's threads.
class LatenessLog {
 public:
  // Creates or truncates `path`. Errors: UNAVAILABLE naming the path and
  // the reason.
  static absl::StatusOr<std::unique_ptr<LatenessLog>> Create(
      const std::string& path);
  ~LatenessLog();

  LatenessLog(const LatenessLog&) = delete;
  LatenessLog& operator=(const LatenessLog&) = delete;

  void Record(absl::Time deliver_at, absl::Time arrival);

  // Writes out what is buffered. Errors: UNAVAILABLE naming the path, if
  // any write failed since Create.
  absl::Status Close();

 private:
  LatenessLog(std::string path, std::FILE* file)
      : path_(std::move(path)), file_(file) {}

  const std::string path_;
  absl::Mutex mu_;
  std::FILE* file_ ABSL_GUARDED_BY(mu_);
  bool failed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace hourglass::bench

#endif  // HOURGLASS_CMD_HOURGLASS_BENCH_LATENESS_LOG_H_
