#ifndef HOURGLASS_TESTS_TESTING_FORWARDING_STORE_H_
#define HOURGLASS_TESTS_TESTING_FORWARDING_STORE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "storage/memory_store.h"
#include "storage/message_store.h"

namespace hourglass::testing {

// A MessageStore that forwards every call to a MemoryStore of its own. Test
// wrappers derive from it and override the calls they change.
class ForwardingStore : public storage::MessageStore {
 public:
  absl::Status Write(const storage::WriteBatch& batch) override {
    return inner_->Write(batch);
  }
  absl::Status SyncLog() override { return inner_->SyncLog(); }
  absl::StatusOr<std::optional<std::string>> Get(
      storage::Table table, std::string_view key) override {
    return inner_->Get(table, key);
  }
  absl::StatusOr<std::vector<std::optional<std::string>>> MultiGet(
      storage::Table table, const std::vector<std::string>& keys) override {
    return inner_->MultiGet(table, keys);
  }
  absl::Status Scan(storage::Table table, std::string_view from,
                    std::string_view to,
                    absl::FunctionRef<bool(std::string_view, std::string_view)>
                        visit) override {
    return inner_->Scan(table, from, to, visit);
  }
  absl::StatusOr<std::optional<std::string>> LastKey(
      storage::Table table) override {
    return inner_->LastKey(table);
  }
  std::vector<std::pair<std::string, int64_t>> NonZeroCounters() override {
    return inner_->NonZeroCounters();
  }
  storage::StoreStats Stats() override { return inner_->Stats(); }
  absl::StatusOr<storage::CheckpointInfo> Checkpoint(
      const std::string& dir) override {
    return inner_->Checkpoint(dir);
  }

 protected:
  storage::MessageStore& inner() { return *inner_; }
  // Swaps in another store, as a restart that finds other contents would.
  // REQUIRES: no call into this store runs meanwhile.
  void ReplaceInner(std::unique_ptr<storage::MessageStore> inner) {
    inner_ = std::move(inner);
  }

 private:
  std::unique_ptr<storage::MessageStore> inner_ = storage::MemoryStore::Open();
};

}  // namespace hourglass::testing

#endif  // HOURGLASS_TESTS_TESTING_FORWARDING_STORE_H_
