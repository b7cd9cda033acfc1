// The snapshot subcommand: an online backup of the broker's store.

#include <iostream>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "cmd/common/connection.h"
#include "cmd/common/duration.h"
#include "cmd/common/errors.h"
#include "cmd/common/output.h"
#include "cmd/hourglass/command.h"
#include "hourglass/v1/admin.pb.h"

namespace hourglass::cli {
namespace {

struct SnapshotOptions {
  std::string out;
};

absl::Status Snapshot(const GlobalOptions& globals,
                      const SnapshotOptions& options) {
  absl::StatusOr<std::unique_ptr<Connection>> connection =
      Connection::Open(globals);
  if (!connection.ok()) return connection.status();
  hourglass::v1::CreateSnapshotRequest request;
  request.set_dir(options.out);
  absl::StatusOr<hourglass::v1::Snapshot> snapshot =
      (*connection)->admin().CreateSnapshot(request);
  if (!snapshot.ok()) return (*connection)->Check(snapshot.status());
  if (globals.json) return PrintJson(*snapshot);
  if (snapshot->shards() > 0) {
    std::cout << "snapshot of the cluster's " << snapshot->shards()
              << " shards (format " << snapshot->format_version() << ") in "
              << snapshot->dir() << ": " << snapshot->files() << " files, "
              << snapshot->bytes() << " bytes, every write before "
              << Rfc3339(FromProto(snapshot->started_at())) << ", took "
              << HumanDuration(FromProto(snapshot->took())) << std::endl;
    return absl::OkStatus();
  }
  std::cout << "snapshot of store " << snapshot->store_id() << " (format "
            << snapshot->format_version() << ") in " << snapshot->dir() << ": "
            << snapshot->files() << " files, " << snapshot->bytes()
            << " bytes, every write before "
            << Rfc3339(FromProto(snapshot->started_at())) << ", took "
            << HumanDuration(FromProto(snapshot->took())) << std::endl;
  return absl::OkStatus();
}

}  // namespace

void AddSnapshotCommand(Registry& registry) {
  auto options = std::make_shared<SnapshotOptions>();
  CLI::App* snapshot = registry.app().add_subcommand(
      "snapshot", "Write an online backup of the broker's store");
  snapshot
      ->add_option("--out", options->out,
                   "Name of the new snapshot: a directory of that name in the "
                   "broker's --snapshot_dir")
      ->required();
  snapshot->footer(R"(
The broker writes a consistent copy of its store (a RocksDB checkpoint:
every write that completed before the command, nothing half-written) into
a new directory named --out in its --snapshot_dir (by default snapshots
under its --data_dir), and prints where; publishes and deliveries go on
meanwhile. --out is a name (letters, digits, '.', '_', '-'), never a path:
the broker decides where it writes.

To restore: start hourglassd with --data_dir=DIR on the snapshot, or with
--restore_from=DIR to copy it into a new, empty --data_dir first.

In a cluster of several shards the node asked writes every shard, each
copied from its primary, into DIR/shards/<n>, and DIR/CLUSTER_SNAPSHOT
last. Each shard holds every write that completed before the command (the
shards are not one cut in time). To restore, start the first node of a new
cluster with --restore_from=DIR: it creates the cluster with the snapshot's
shards, as their primary; the nodes that join copy them from it.

Examples:
  hourglass snapshot --out=2026-11-26
  hourglass --json snapshot --out=before-upgrade)");
  registry.SetAction(snapshot, [&globals = registry.globals(), options] {
    return Snapshot(globals, *options);
  });
}

}  // namespace hourglass::cli
