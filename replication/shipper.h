#ifndef HOURGLASS_REPLICATION_SHIPPER_H_
#define HOURGLASS_REPLICATION_SHIPPER_H_

#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "replication/replicated_store.h"

namespace grpc {
class Channel;
class ClientContext;
template <class W, class R>
class ClientReaderWriterInterface;
}  // namespace grpc

namespace hourglass::replication::v1 {
class ReplicateRequest;
class ReplicateResponse;
}  // namespace hourglass::replication::v1

namespace hourglass::replication {

struct ShipperOptions {
  int shard = 0;
  // The primary's node id, for the backup's logs.
  std::string primary;
  // The backup's node id and the address of its Replication service.
  std::string backup;
  std::string address;
  // Most bytes of entries in one request. A larger entry goes in pieces of
  // this size, one a request (ReplicateRequest.entry_part): no request
  // comes near the backup's receive limit, whatever a write holds.
  // Default: 4 MiB.
  size_t max_request_bytes = 4 << 20;
  // Most entries sent and not yet applied by the backup: requests go out
  // while earlier ones are applied and synced. Default: 1024.
  int64_t max_in_flight = 1024;
  // How long to wait before connecting again after a stream ended.
  // Default: 200 ms.
  absl::Duration retry_delay = absl::Milliseconds(200);
};

// Ships a primary's log (ReplicatedStore) to one backup over the
// Replication service, on a thread of its own: it says hello at the
// primary's epoch, learns where the backup's copy ends, and sends the
// entries that follow in order, without waiting for answers (up to
// max_in_flight entries ahead); a second thread of the stream reports each
// answer's position to the store (which is what lets writes and syncs
// waiting for that backup return). A stream that ends is opened again after
// retry_delay. A copy that diverged from the log, or is behind the entries
// the store keeps, cannot be caught up by shipping: the shipper says so
// (needs_rebuild) and waits for it to be rebuilt from a checkpoint.
//
// Thread-safe.
class Shipper {
 public:
  // Starts shipping from `store` (which must outlive the shipper) over
  // `channel` to the backup.
  Shipper(ReplicatedStore* store, std::shared_ptr<grpc::Channel> channel,
          ShipperOptions options);
  // Ends the stream and the thread.
  ~Shipper();
  Shipper(const Shipper&) = delete;
  Shipper& operator=(const Shipper&) = delete;

  // Why the backup cannot follow by shipping, if it cannot (empty if it
  // can): its copy diverged, or lacks entries no longer kept.
  std::string needs_rebuild() const;
  // The last error of a stream (OK while it streams).
  absl::Status last_error() const;

 private:
  void Run();
  // One stream, until it ends; its status.
  absl::Status Stream();
  // Tells the backup on `stream` to rebuild its copy, and half-closes the
  // stream (the backup ends it; the caller finishes it).
  // Sends `entry` in pieces of max_request_bytes; false if a write failed
  // (the backup ended the stream).
  bool SendInParts(grpc::ClientReaderWriterInterface<
                       v1::ReplicateRequest, v1::ReplicateResponse>& stream,
                   const std::string& entry);
  void AskToRebuild(grpc::ClientReaderWriterInterface<
                        v1::ReplicateRequest, v1::ReplicateResponse>& stream,
                    const std::string& why);

  ReplicatedStore* const store_;
  const std::shared_ptr<grpc::Channel> channel_;
  const ShipperOptions options_;

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ClientContext* context_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::string needs_rebuild_ ABSL_GUARDED_BY(mu_);
  // The stream's: the last entry the backup said it applied, and whether
  // its answers ended (the backup ended the stream, or it broke).
  int64_t answered_ ABSL_GUARDED_BY(mu_) = 0;
  bool reader_done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status last_error_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace hourglass::replication

#endif  // HOURGLASS_REPLICATION_SHIPPER_H_
