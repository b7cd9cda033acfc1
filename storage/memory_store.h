#ifndef HOURGLASS_STORAGE_MEMORY_STORE_H_
#define HOURGLASS_STORAGE_MEMORY_STORE_H_

#include <memory>

#include "storage/message_store.h"

namespace hourglass::storage {

// A MessageStore in memory: sorted maps under one mutex. Nothing survives
// the object. For tests, and for running the broker without a disk.
class MemoryStore {
 public:
  static std::unique_ptr<MessageStore> Open();
};

}  // namespace hourglass::storage

#endif  // HOURGLASS_STORAGE_MEMORY_STORE_H_
