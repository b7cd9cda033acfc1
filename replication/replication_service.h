#ifndef HOURGLASS_REPLICATION_REPLICATION_SERVICE_H_
#define HOURGLASS_REPLICATION_REPLICATION_SERVICE_H_

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"
#include "replication/replica.h"
#include "storage/message_store.h"

namespace grpc {
class Service;
}  // namespace grpc

namespace hourglass::replication {

// The backup's end of replication: the gRPC service Replication
// (replication.proto) applying what a primary ships to the Replica set
// with SetReplica. While there is none (this node holds no backup copy,
// or is the primary) a stream is refused with FAILED_PRECONDITION.
//
// Each stream runs on a gRPC thread of the synchronous API for its whole
// life (one per primary shipping here), reading, applying and answering
// in turn: the order of the log is the order of the stream.
//
// Thread-safe.
class ReplicationService {
 public:
  ReplicationService();
  ~ReplicationService();
  ReplicationService(const ReplicationService&) = delete;
  ReplicationService& operator=(const ReplicationService&) = delete;

  // The copy streams apply to; nullptr for none (streams open now end at
  // their next request). `replica` must outlive its use: call
  // SetReplica(nullptr) before destroying it, which waits until no stream
  // uses it.
  void SetReplica(Replica* replica);

  // The primary's store FetchCheckpoint copies (it checkpoints into a new
  // directory under `scratch_dir`, streams it, and removes it); nullptr
  // while this node is not the primary. As SetReplica, waits until no
  // call uses the old one.
  void SetSource(storage::MessageStore* store, const std::string& scratch_dir);

  // What runs when a primary says the copy must be rebuilt (a request with
  // `rebuild` set); on the stream's thread, so it must not block. May be
  // empty.
  void SetRebuildHandler(absl::AnyInvocable<void(std::string why)> handler);

  // Checkpoints FetchCheckpoint sent in full, since the start.
  uint64_t checkpoints_sent() const;

  // For api::ServerOptions::services.
  grpc::Service* service();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hourglass::replication

#endif  // HOURGLASS_REPLICATION_REPLICATION_SERVICE_H_
