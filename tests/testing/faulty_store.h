#ifndef HOURGLASS_TESTS_TESTING_FAULTY_STORE_H_
#define HOURGLASS_TESTS_TESTING_FAULTY_STORE_H_

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "storage/memory_store.h"
#include "storage/message_store.h"

namespace hourglass::testing {

// A MessageStore in memory whose writes fail on demand, as a full disk or
// a failing device would: a failed Write applies nothing. Thread-safe.
class FaultyStore final : public storage::MessageStore {
 public:
  // Every Write from now on returns `status` (OK clears the fault).
  void FailWrites(absl::Status status) {
    absl::MutexLock lock(&mu_);
    failure_ = std::move(status);
  }

  absl::Status Write(const storage::WriteBatch& batch) override {
    {
      absl::MutexLock lock(&mu_);
      if (!failure_.ok()) return failure_;
    }
    return inner_->Write(batch);
  }
  absl::StatusOr<std::optional<std::string>> Get(
      storage::Table table, std::string_view key) override {
    return inner_->Get(table, key);
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
  storage::StoreStats Stats() override { return inner_->Stats(); }

 private:
  const std::unique_ptr<storage::MessageStore> inner_ =
      storage::MemoryStore::Open();
  absl::Mutex mu_;
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hourglass::testing

#endif  // HOURGLASS_TESTS_TESTING_FAULTY_STORE_H_
