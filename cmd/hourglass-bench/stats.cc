#include "cmd/hourglass-bench/stats.h"

namespace hourglass::bench {

SeenSet::~SeenSet() {
  for (auto& chunk : chunks_) delete[] chunk.load(std::memory_order_relaxed);
}

bool SeenSet::Insert(uint64_t sequence) {
  const uint64_t index = sequence >> kChunkBits;
  if (index >= kChunks) return true;
  std::atomic<uint64_t>* chunk = chunks_[index].load(std::memory_order_acquire);
  if (chunk == nullptr) {
    constexpr size_t kWords = (size_t{1} << kChunkBits) / 64;
    auto* fresh = new std::atomic<uint64_t>[kWords];
    for (size_t i = 0; i < kWords; ++i) {
      fresh[i].store(0, std::memory_order_relaxed);
    }
    if (chunks_[index].compare_exchange_strong(chunk, fresh,
                                               std::memory_order_acq_rel)) {
      chunk = fresh;
    } else {
      delete[] fresh;  // Another thread's chunk is in `chunk` now.
    }
  }
  const uint64_t bit = sequence & ((uint64_t{1} << kChunkBits) - 1);
  const uint64_t mask = uint64_t{1} << (bit % 64);
  return (chunk[bit / 64].fetch_or(mask, std::memory_order_relaxed) & mask) ==
         0;
}

void BenchControl::SetProducers(int producers) {
  absl::MutexLock lock(&mu_);
  producers_ = producers;
}

void BenchControl::ProducerDone() {
  absl::MutexLock lock(&mu_);
  --producers_;
}

bool BenchControl::WaitPublished(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto settled = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return producers_ == 0 || interrupted_;
  };
  mu_.AwaitWithDeadline(absl::Condition(&settled), deadline);
  return producers_ == 0;
}

void BenchControl::SetTarget(uint64_t target, uint64_t delivered) {
  target_.store(target, std::memory_order_release);
  if (delivered >= target) Reach();
}

bool BenchControl::WaitDelivered(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto settled = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return reached_ || interrupted_;
  };
  mu_.AwaitWithDeadline(absl::Condition(&settled), deadline);
  return reached_;
}

void BenchControl::Interrupt() {
  absl::MutexLock lock(&mu_);
  interrupted_ = true;
}

bool BenchControl::interrupted() {
  absl::MutexLock lock(&mu_);
  return interrupted_;
}

void BenchControl::Reach() {
  absl::MutexLock lock(&mu_);
  reached_ = true;
}

}  // namespace hourglass::bench
