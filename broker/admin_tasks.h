#ifndef HOURGLASS_BROKER_ADMIN_TASKS_H_
#define HOURGLASS_BROKER_ADMIN_TASKS_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "broker/delivery_state.h"
#include "broker/group_registry.h"
#include "broker/lifecycle.h"
#include "broker/publisher.h"
#include "broker/step_inbox.h"
#include "storage/commit_queue.h"
#include "storage/keys.h"
#include "storage/message_store.h"

namespace hourglass::broker {

// The dispatcher's admin work: purging a topic's ready messages, deleting
// a group, redriving dead letters. Each task runs a chunk (one store write)
// per dispatcher step, between deliveries, on the step's thread, so it
// never races deliveries, refills or ack decisions; a chunk changes the
// delivery state, writes one batch, and is undone if the write fails.
// Tasks run one at a time, in the order they were added.
//
// Thread-compatible: the step's thread.
class AdminTasks {
 public:
  // How many messages a task moved or deleted, or why it failed.
  using CountCallback = absl::AnyInvocable<void(absl::StatusOr<uint64_t>) &&>;

  // REQUIRES: the pointers outlive the tasks.
  AdminTasks(DeliveryState* state, storage::MessageStore* store,
             storage::CommitQueue* commits, Publisher* publisher,
             GroupRegistry* registry, StepInbox* inbox);
  ~AdminTasks();

  AdminTasks(const AdminTasks&) = delete;
  AdminTasks& operator=(const AdminTasks&) = delete;

  // Deletes the ready entries of every group of `topic` and of its waiting
  // area, and the messages that no group holds any more. `done` gets how
  // many messages were deleted.
  void PurgeReady(std::string topic, CountCallback done);

  // Deletes group `id` of `topic`, whose deletion the registry began: its
  // streams end with NOT_FOUND, its ready and in-flight entries go, and so
  // do messages no other group holds; the registry forgets it at the end.
  // `done` gets how many ready and in-flight entries were removed.
  void DeleteGroup(GroupRegistry::GroupId id, CountCallback done);

  // Moves the dead letters of `<topic>.dlq` named by `chosen` (due key and
  // id; all of them if empty) back to `topic`, due now, with their ids,
  // payloads and headers, removing them from the dead-letter topic in the
  // same write. A message of `<topic>.dlq` still scheduled for later (a
  // producer published it there) is no dead letter yet, and stays; so does
  // a letter whose id is pending in `topic` again. `done` gets how many
  // moved, or UNAVAILABLE if letters stayed
  // busy (coming due, or with an ack being written) for many chunks, after
  // the others moved.
  void Redrive(std::string topic,
               std::vector<std::pair<storage::DueKey, std::string>> chosen,
               CountCallback done);

  // Runs one chunk of the first task: true if it did something, or the
  // store's error (the chunk is undone; the task stays, to be retried).
  // REQUIRES: every ack the step took is written (tasks decide what to
  // delete from what the store holds).
  absl::StatusOr<bool> RunChunk();

  // Ends every task waiting with `status` (the broker stops).
  void Abandon(const absl::Status& status);

 private:
  struct Task;
  struct Chunk;

  absl::Status BuildChunk(Task& task, Chunk& chunk);
  absl::Status PurgeChunk(Task& task, Chunk& chunk);
  absl::Status DeleteGroupChunk(Task& task, Chunk& chunk);
  absl::Status RedriveChunk(Task& task, Chunk& chunk);
  // Reads up to `limit` ready keys of (task.topic, stored_under) from the
  // task's position and removes them: from the store (in the chunk) and
  // from the window holding them. Returns how many were read.
  absl::StatusOr<size_t> RemoveReady(Task& task, Chunk& chunk,
                                     const std::string& stored_under,
                                     GroupState* holder, size_t limit);
  // Deletes the message due at `key` of `topic` in the chunk unless a group
  // still holds it or it is gone. True if it was deleted.
  absl::StatusOr<bool> DeleteIfUnheld(const std::string& topic,
                                      const storage::DueKey& key,
                                      const GroupState* except, Chunk& chunk);
  void Undo(Chunk& chunk);

  // Constant after construction.
  DeliveryState* const state_;
  storage::MessageStore* const store_;
  storage::CommitQueue* const commits_;
  Publisher* const publisher_;
  GroupRegistry* const registry_;
  StepInbox* const inbox_;

  // In arrival order; the first runs.
  std::deque<std::unique_ptr<Task>> tasks_;
};

}  // namespace hourglass::broker

#endif  // HOURGLASS_BROKER_ADMIN_TASKS_H_
