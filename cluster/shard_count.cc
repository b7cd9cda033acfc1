#include "cluster/shard_count.h"

#include <charconv>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "cluster/keys.h"

namespace hourglass::cluster {

absl::StatusOr<ShardCount> AgreeOnShardCount(EtcdClient& client,
                                             const std::string& cluster,
                                             std::optional<int> given) {
  if (absl::Status name = ValidateName("--cluster", cluster); !name.ok()) {
    return name;
  }
  if (given.has_value() && *given < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--shards must be at least 1, not ", *given));
  }
  const std::string key = ShardCountKey(cluster);
  const int wanted = given.value_or(kDefaultShardCount);
  absl::StatusOr<TxnResult> created =
      client.CreateIfAbsent(key, absl::StrCat(wanted));
  if (!created.ok()) return created.status();
  if (created->succeeded) return ShardCount{.count = wanted, .created = true};
  const std::string value =
      created->current.has_value() ? created->current->value : "";
  int count = 0;
  const auto [end, error] =
      std::from_chars(value.data(), value.data() + value.size(), count);
  if (error != std::errc() || end != value.data() + value.size() || count < 1) {
    return absl::DataLossError(
        absl::StrCat(key, " holds \"", value, "\", not a shard count"));
  }
  if (given.has_value() && *given != count) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cluster ", cluster, " has ", count,
        " shards, fixed when it was created; this node was started with "
        "--shards=",
        *given, ": give it --shards=", count,
        ", or no --shards to take the cluster's"));
  }
  return ShardCount{.count = count, .created = false};
}

}  // namespace hourglass::cluster
