#include "storage/message_store.h"

#include <utility>

namespace hourglass::storage {

std::string_view TableName(Table table) {
  switch (table) {
    case Table::kMessages:
      return "messages";
    case Table::kIds:
      return "ids";
    case Table::kSchedule:
      return "schedule";
    case Table::kReady:
      return "ready";
    case Table::kInFlight:
      return "inflight";
    case Table::kMeta:
      return "meta";
  }
  return "unknown";
}

void WriteBatch::Put(Table table, std::string key, std::string value) {
  byte_size_ += key.size() + value.size();
  operations_.push_back({table, false, std::move(key), std::move(value)});
}

void WriteBatch::Delete(Table table, std::string key) {
  byte_size_ += key.size();
  operations_.push_back({table, true, std::move(key), std::string()});
}

void WriteBatch::Append(WriteBatch&& other) {
  if (operations_.empty()) {
    operations_ = std::move(other.operations_);
  } else {
    operations_.reserve(operations_.size() + other.operations_.size());
    for (Operation& op : other.operations_)
      operations_.push_back(std::move(op));
  }
  byte_size_ += other.byte_size_;
  other.operations_.clear();
  other.byte_size_ = 0;
}

}  // namespace hourglass::storage
