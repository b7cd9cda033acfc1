#include "cmd/hourglassd/cluster_join.h"

#include <time.h>

#include <algorithm>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "spdlog/spdlog.h"

namespace hourglass::hourglassd {

absl::StatusOr<std::optional<int>> JoinCluster(
    node::ClusterNode& node, const std::string& advertise,
    const sigset_t& signals, const std::function<void()>& on_lost) {
  absl::Duration wait = absl::Milliseconds(500);
  while (true) {
    const absl::Status joined = node.Join(advertise, on_lost);
    if (joined.ok()) return std::nullopt;
    if (joined.code() != absl::StatusCode::kUnavailable &&
        joined.code() != absl::StatusCode::kDeadlineExceeded) {
      return joined;
    }
    spdlog::warn(
        "hourglassd cannot join cluster {} yet: {}; trying again in {}",
        node.cluster(), std::string(joined.message()),
        absl::FormatDuration(wait));
    const absl::Time until = absl::Now() + wait;
    for (absl::Duration left = wait; left > absl::ZeroDuration();
         left = until - absl::Now()) {
      const timespec timeout = absl::ToTimespec(left);
      const int signal = sigtimedwait(&signals, nullptr, &timeout);
      if (signal == SIGTERM || signal == SIGINT) return signal;
      // SIGHUP (tokens reload once joined), EINTR or EAGAIN (the wait's end).
    }
    wait = std::min(wait * 2, absl::Seconds(5));
  }
}

}  // namespace hourglass::hourglassd
