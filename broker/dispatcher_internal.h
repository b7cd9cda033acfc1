#ifndef HOURGLASS_BROKER_DISPATCHER_INTERNAL_H_
#define HOURGLASS_BROKER_DISPATCHER_INTERNAL_H_

// The dispatcher's private state, shared by its source files
// (dispatcher.cc, dispatcher_tasks.cc). Not for other users: everything
// here is guarded by Dispatcher::mu_ and documented in dispatcher.h.

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/time/time.h"
#include "broker/dispatcher.h"
#include "broker/ready_window.h"
#include "google/protobuf/arena.h"
#include "storage/keys.h"
#include "storage/records.pb.h"

namespace hourglass::broker {

using storage::DueKey;

// A connected consumer stream.
struct Dispatcher::ConsumerState {
  ConsumerId id = 0;
  Group* group = nullptr;
  uint32_t max_in_flight = 0;
  absl::Duration ack_timeout;
  std::shared_ptr<Consumer> sink;
  // Sequences of the deliveries assigned to it (its credit in use).
  absl::flat_hash_set<uint64_t> owned;
  // The written ones, by message id, for acks and nacks.
  absl::flat_hash_map<std::string, uint64_t> by_id;
  // When it last acked or nacked (or subscribed); and whether it has been
  // reported stuck at zero credit since.
  absl::Time last_progress;
  bool reported_stuck = false;
  // Its outbox: deliveries sent to the stream and not yet reported
  // written, and their DeliveryBytes.
  size_t unsent = 0;
  size_t unsent_bytes = 0;
  // While unsent > 0: when it counts as stalled unless it reports a write
  // (its key in stall_deadlines_).
  std::optional<absl::Time> stall_deadline;
};

// A message of a group that has left the ready queue: with a consumer, or
// due again (redeliverable), or waiting out a nack's delay.
struct Dispatcher::InFlight {
  DueKey key;
  std::string id;        // The message id, once a delivery read it.
  uint32_t attempt = 0;  // Deliveries made to the group so far.
  ConsumerState* owner = nullptr;
  uint64_t token = 0;  // Names the current assignment.
  std::optional<TimerHandle> timer;
  uint64_t timer_token = 0;  // The timer's key in timer_targets_.
  bool waiting = false;      // Waiting out a nack's delay.
};

struct Dispatcher::Group {
  Group(std::string t, std::string n, absl::Time created, bool owns,
        size_t window_capacity, bool queue_empty)
      : topic(std::move(t)),
        name(std::move(n)),
        created_at(created),
        owns_waiting_area(owns),
        window(window_capacity, queue_empty) {}

  const std::string topic;
  const std::string name;
  const absl::Time created_at;
  const bool owns_waiting_area;
  ReadyWindow window;
  absl::flat_hash_map<uint64_t, InFlight> in_flight;
  // Keys of in_flight entries due again now, in due order.
  absl::btree_set<DueKey> redeliverable;
  // Sequences with acks taken but not yet written, and how many.
  absl::flat_hash_map<uint64_t, int> finishing;
  std::vector<ConsumerState*> consumers;
  size_t next_consumer = 0;  // Round robin among consumers.
  // Being deleted (DeleteGroup): no consumers, no longer a holder of any
  // message; still receives dispatches until its task removes it.
  bool deleting = false;
};

// An ack or nack taken from a consumer, to be written.
struct Dispatcher::Finished {
  enum class Kind { kAck, kNack };
  Kind kind;
  Group* group;
  InFlight entry;               // A copy for nacks; the entry for acks.
  int64_t redeliver_at_ms = 0;  // Nacks.
  bool delete_message = false;  // Acks: no other group holds it.
};

// A delivery being made in this step.
struct Dispatcher::Assignment {
  Group* group;
  uint64_t sequence;
  uint64_t token;
  ConsumerId consumer;
  absl::Duration ack_timeout;
  std::optional<ReadyItem> from_window;  // Else it was redeliverable.
  uint32_t previous_attempt;
  uint32_t attempt;
  // Read by BuildBatch, on the step's arena; null if the message is gone.
  storage::MessageRecord* record = nullptr;
  // BuildBatch left it out: the stream's outbox had no room for its bytes
  // (Options::max_unsent_bytes). The step puts it back.
  bool deferred = false;
  // The stream it goes to, once written: an index into the step's sends.
  std::optional<size_t> send_to;
};

struct Dispatcher::StepWork {
  // A step reads up to Options::step_limit records of a few hundred bytes.
  static google::protobuf::ArenaOptions ArenaOptions() {
    google::protobuf::ArenaOptions options;
    options.start_block_size = 4096;
    options.max_block_size = 256 << 10;
    return options;
  }

  struct DeadLetter {
    Group* group;
    InFlight entry;
    bool delete_message = false;
    std::optional<PreparedPublish> prepared;
  };

  // Holds the step's message records (Assignment::record): parsed into a
  // few large blocks rather than an allocation per string, freed at once.
  google::protobuf::Arena arena{ArenaOptions()};
  // Room left in the outbox of each stream given deliveries, in bytes, as
  // the step began (Options::max_unsent_bytes minus its unsent bytes).
  absl::flat_hash_map<ConsumerId, size_t> outbox_room;
  // Acks and nacks taken, in arrival order; once BuildAckBatch ran, only
  // the nacks, and the acks are in `acked`.
  std::vector<Finished> finished;
  size_t finished_taken = 0;  // How many acks updated `finishing`.
  std::vector<Finished> acked;
  std::vector<Assignment> deliveries;
  std::vector<DeadLetter> dead_letters;

  bool empty() const {
    return finished.empty() && acked.empty() && deliveries.empty() &&
           dead_letters.empty();
  }
};

struct Dispatcher::PendingDispatch {
  Group* group;       // Null for the waiting area.
  std::string topic;  // The waiting area's topic; empty for a group.
  DueKey key;
};

// Admin work done a chunk per step (dispatcher_tasks.cc).
struct Dispatcher::Task {
  enum class Kind { kPurgeReady, kDeleteGroup, kRedrive };
  Kind kind;
  std::string topic;       // The topic purged or redriven from its .dlq.
  Group* group = nullptr;  // kDeleteGroup.
  // Where each ready queue read has got to, by the name keys are stored
  // under ("" is the waiting area); absent: the start.
  std::map<std::string, DueKey> positions;
  // kRedrive: the dead letters still to move (all of `<topic>.dlq` when
  // `all`, read from topic_due as the task goes).
  bool all = false;
  std::vector<std::pair<DueKey, std::string>> chosen;
  int deferrals = 0;  // Chunks that found every remaining letter busy.
  uint64_t count = 0;
  CountCallback done;
};

// What one chunk of a task changed in memory, to undo if its write fails.
struct Dispatcher::TaskChunk {
  Changes changes;
  // Due keys of the ready entries removed, in the order removed.
  std::vector<DueKey> removed_ready;
  // Window entries taken out, by the group whose window held them.
  std::vector<std::pair<Group*, ReadyItem>> from_windows;
  // In-flight entries taken out (kDeleteGroup).
  std::vector<std::pair<Group*, InFlight>> from_in_flight;
  // Messages deleted in this chunk (by sequence), so that no later entry
  // of the chunk deletes one twice.
  absl::flat_hash_set<uint64_t> deleted;
  // Ready entries removed in this chunk: (stored-under name, sequence).
  absl::flat_hash_set<std::pair<std::string, uint64_t>> removing;
  std::vector<PreparedPublish> publishes;  // kRedrive.
  uint64_t count = 0;
  bool finished = false;
};

}  // namespace hourglass::broker

#endif  // HOURGLASS_BROKER_DISPATCHER_INTERNAL_H_
