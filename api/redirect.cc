#include "api/redirect.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace hourglass::api {
namespace {

using grpc::experimental::InterceptionHookPoints;
using grpc::experimental::InterceptorBatchMethods;

// The payload's type URL, and the details' prefix. Both hold
// "<epoch> <shard_count> <address>"; the address may be empty.
constexpr absl::string_view kPayloadUrl = "type.hourglass.dev/redirect";
constexpr absl::string_view kDetailsPrefix = "hourglass-redirect:";

std::string Encode(const Primary& primary) {
  return absl::StrCat(primary.epoch, " ", primary.shard_count, " ",
                      primary.address);
}

std::optional<Primary> Parse(absl::string_view encoded) {
  const std::vector<absl::string_view> fields =
      absl::StrSplit(encoded, absl::MaxSplits(' ', 2));
  Primary primary;
  if (fields.size() != 3 || !absl::SimpleAtoi(fields[0], &primary.epoch) ||
      !absl::SimpleAtoi(fields[1], &primary.shard_count) ||
      primary.shard_count < 0) {
    return std::nullopt;
  }
  primary.address = std::string(fields[2]);
  if (primary.address.empty() && primary.shard_count == 0) return std::nullopt;
  return primary;
}

class RedirectInterceptor final : public grpc::experimental::Interceptor {
 public:
  void Intercept(InterceptorBatchMethods* batch) override {
    if (batch->QueryInterceptionHookPoint(
            InterceptionHookPoints::PRE_SEND_STATUS)) {
      const grpc::Status status = batch->GetSendStatus();
      if (std::optional<Primary> primary =
              PrimaryOfDetails(status.error_details())) {
        std::multimap<std::string, std::string>* trailers =
            batch->GetSendTrailingMetadata();
        if (status.error_code() == grpc::StatusCode::UNAVAILABLE &&
            !primary->address.empty()) {
          trailers->emplace(kPrimaryTrailer, primary->address);
          trailers->emplace(kEpochTrailer, std::to_string(primary->epoch));
        }
        if (primary->shard_count > 0) {
          trailers->emplace(kShardsTrailer,
                            std::to_string(primary->shard_count));
        }
        batch->ModifySendStatus(
            grpc::Status(status.error_code(), status.error_message()));
      }
    }
    batch->Proceed();
  }
};

}  // namespace

absl::Status WithPrimary(absl::Status status, const Primary& primary) {
  status.SetPayload(kPayloadUrl, absl::Cord(Encode(primary)));
  return status;
}

std::optional<Primary> PrimaryOf(const absl::Status& status) {
  const auto payload = status.GetPayload(kPayloadUrl);
  if (!payload.has_value()) return std::nullopt;
  return Parse(std::string(*payload));
}

std::string RedirectDetails(const Primary& primary) {
  return absl::StrCat(kDetailsPrefix, Encode(primary));
}

std::optional<Primary> PrimaryOfDetails(const std::string& details) {
  absl::string_view rest = details;
  if (!absl::ConsumePrefix(&rest, kDetailsPrefix)) return std::nullopt;
  return Parse(rest);
}

grpc::experimental::Interceptor* RedirectFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* /*info*/) {
  return new RedirectInterceptor();
}

}  // namespace hourglass::api
