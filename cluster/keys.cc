#include "cluster/keys.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "cluster/internal/strings.h"

namespace hourglass::cluster {

absl::Status ValidateName(std::string_view what, std::string_view name) {
  constexpr size_t kMaxLength = 200;
  if (name.empty() || name.size() > kMaxLength) {
    return absl::InvalidArgumentError(
        absl::StrCat(internal::AsAbsl(what), ": \"", internal::AsAbsl(name),
                     "\" must have 1 to ", kMaxLength, " characters"));
  }
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' &&
        c != '_' && c != '-') {
      return absl::InvalidArgumentError(absl::StrCat(
          internal::AsAbsl(what), ": \"", internal::AsAbsl(name),
          "\" may hold only letters, digits, ", "'.', '_' and '-'"));
    }
  }
  return absl::OkStatus();
}

std::string ClusterPrefix(std::string_view cluster) {
  return absl::StrCat("/hourglass/", internal::AsAbsl(cluster), "/");
}

std::string ControllerKey(std::string_view cluster) {
  return absl::StrCat(ClusterPrefix(cluster), "controller");
}

std::string NodesPrefix(std::string_view cluster) {
  return absl::StrCat(ClusterPrefix(cluster), "nodes/");
}

std::string NodeKey(std::string_view cluster, std::string_view node_id) {
  return absl::StrCat(NodesPrefix(cluster), internal::AsAbsl(node_id));
}

std::string ShardKey(std::string_view cluster, int shard) {
  return absl::StrCat(ClusterPrefix(cluster), "shards/", shard);
}

std::string ShardCountKey(std::string_view cluster) {
  return absl::StrCat(ClusterPrefix(cluster), "shard_count");
}

std::string DrainKey(std::string_view cluster, std::string_view node_id) {
  return absl::StrCat(ClusterPrefix(cluster), "drains/",
                      internal::AsAbsl(node_id));
}

std::string PinsPrefix(std::string_view cluster) {
  return absl::StrCat(ClusterPrefix(cluster), "pins/");
}

std::string PinKey(std::string_view cluster, int shard) {
  return absl::StrCat(PinsPrefix(cluster), shard);
}

}  // namespace hourglass::cluster
