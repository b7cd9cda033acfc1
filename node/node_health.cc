#include "node/node_health.h"

namespace hourglass::node {

NodeHealth OverShards(const std::vector<ShardHealth>& shards) {
  bool named = false, member = true;
  bool named_primary = false, primary = true;
  for (const ShardHealth& s : shards) {
    if (s.named) {
      named = true;
      member = member && s.node.member;
    }
    if (s.named_primary) {
      named_primary = true;
      primary = primary && s.node.primary;
    }
  }
  return NodeHealth{.member = named && member,
                    .primary = named_primary && primary};
}

}  // namespace hourglass::node
