#include "api/redirect.h"

#include <string>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace hourglass::api {
namespace {

using grpc::experimental::InterceptionHookPoints;
using grpc::experimental::InterceptorBatchMethods;

// The payload's type URL, and the details' prefix: "<prefix><epoch> <address>".
constexpr absl::string_view kPayloadUrl = "type.hourglass.dev/redirect";
constexpr absl::string_view kDetailsPrefix = "hourglass-redirect:";

std::optional<Primary> Parse(absl::string_view encoded) {
  const size_t space = encoded.find(' ');
  if (space == absl::string_view::npos) return std::nullopt;
  Primary primary;
  if (!absl::SimpleAtoi(encoded.substr(0, space), &primary.epoch)) {
    return std::nullopt;
  }
  primary.address = std::string(encoded.substr(space + 1));
  if (primary.address.empty()) return std::nullopt;
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
        if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
          std::multimap<std::string, std::string>* trailers =
              batch->GetSendTrailingMetadata();
          trailers->emplace(kPrimaryTrailer, primary->address);
          trailers->emplace(kEpochTrailer, std::to_string(primary->epoch));
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
  status.SetPayload(kPayloadUrl, absl::Cord(absl::StrCat(primary.epoch, " ",
                                                         primary.address)));
  return status;
}

std::optional<Primary> PrimaryOf(const absl::Status& status) {
  const auto payload = status.GetPayload(kPayloadUrl);
  if (!payload.has_value()) return std::nullopt;
  return Parse(std::string(*payload));
}

std::string RedirectDetails(const Primary& primary) {
  return absl::StrCat(kDetailsPrefix, primary.epoch, " ", primary.address);
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
