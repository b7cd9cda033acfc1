#include "broker/store_errors.h"

#include <optional>
#include <string>
#include <string_view>

#include "absl/time/clock.h"
#include "spdlog/spdlog.h"

namespace hourglass::broker {

std::optional<uint64_t> RateLimitedLog::Allow(std::string_view key) {
  const absl::Time now = clock_ != nullptr ? clock_->Now() : absl::Now();
  absl::MutexLock lock(&mu_);
  auto [it, added] = keys_.try_emplace(std::string(key));
  Key& k = it->second;
  if (!added && now - k.last_logged < interval_) {
    ++k.suppressed;
    return std::nullopt;
  }
  k.last_logged = now;
  const uint64_t suppressed = k.suppressed;
  k.suppressed = 0;
  return suppressed;
}

StoreErrors::StoreErrors(metrics::Registry* registry, Options options)
    : metrics_on_(registry != nullptr), log_(options.log_every, options.clock) {
  if (registry == nullptr) return;
  family_ = registry->Counters(metrics::Metric::kStoreErrorsTotal);
  for (const std::string& op : options.known_ops) family_.Add({op});
}

void StoreErrors::Count(std::string_view op, const absl::Status& error) {
  if (metrics_on_) family_.Add({op}).Increment();
  const std::optional<uint64_t> suppressed = log_.Allow(op);
  if (!suppressed.has_value()) return;
  if (*suppressed == 0) {
    spdlog::error("store {} failed: {}", op, error.ToString());
  } else {
    spdlog::error("store {} failed: {} (and {} more since the last report)", op,
                  error.ToString(), *suppressed);
  }
}

}  // namespace hourglass::broker
