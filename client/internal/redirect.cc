#include "client/internal/redirect.h"

#include "absl/strings/numbers.h"
#include "absl/strings/string_view.h"

namespace hourglass::client::internal {

Redirect RedirectOf(const grpc::ClientContext& context,
                    const grpc::Status& status) {
  Redirect redirect;
  const auto& trailers = context.GetServerTrailingMetadata();
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
    auto primary = trailers.find("hourglass-primary");
    if (primary != trailers.end()) {
      redirect.primary.assign(primary->second.data(), primary->second.size());
    }
  }
  auto shards = trailers.find("hourglass-shards");
  if (shards != trailers.end() &&
      !absl::SimpleAtoi(
          absl::string_view(shards->second.data(), shards->second.size()),
          &redirect.shard_count)) {
    redirect.shard_count = 0;
  }
  return redirect;
}

}  // namespace hourglass::client::internal
