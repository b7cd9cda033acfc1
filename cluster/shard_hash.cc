#include "cluster/shard_hash.h"

namespace hourglass::cluster {

uint64_t TopicHash(std::string_view topic) {
  constexpr std::string_view kDeadLetterSuffix = ".dlq";
  if (topic.size() >= kDeadLetterSuffix.size() &&
      topic.substr(topic.size() - kDeadLetterSuffix.size()) ==
          kDeadLetterSuffix) {
    topic.remove_suffix(kDeadLetterSuffix.size());
  }
  uint64_t hash = 0xcbf29ce484222325;
  for (const char c : topic) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3;
  }
  return hash;
}

int ShardOf(std::string_view topic, int shard_count) {
  return static_cast<int>(TopicHash(topic) %
                          static_cast<uint64_t>(shard_count));
}

}  // namespace hourglass::cluster
