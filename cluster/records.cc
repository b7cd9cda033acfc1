#include "cluster/records.h"

#include <algorithm>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "cluster/records.pb.h"
#include "google/protobuf/util/json_util.h"

namespace hourglass::cluster {
namespace {

namespace pb = ::hourglass::cluster;

template <typename Message>
std::string ToJson(const Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  std::string json;
  // Fails only on messages that cannot be JSON (none here).
  (void)google::protobuf::util::MessageToJsonString(message, &json, options);
  return json;
}

template <typename Message>
absl::Status FromJson(std::string_view what, std::string_view json,
                      Message& message) {
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;  // Written by a newer version.
  const auto status = google::protobuf::util::JsonStringToMessage(
      std::string(json), &message, options);
  if (!status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "not a ", std::string(what), ": ", std::string(status.message())));
  }
  return absl::OkStatus();
}

}  // namespace

bool ShardRecord::InIsr(std::string_view node) const {
  return std::find(isr.begin(), isr.end(), node) != isr.end();
}

bool ShardRecord::IsReplica(std::string_view node) const {
  return std::find(replicas.begin(), replicas.end(), node) != replicas.end();
}

bool ShardRecord::IsEligible(std::string_view node) const {
  return std::find(eligible.begin(), eligible.end(), node) != eligible.end();
}

std::string EncodeShardRecord(const ShardRecord& record) {
  pb::ShardRecordProto proto;
  proto.set_epoch(record.epoch);
  proto.set_primary(record.primary);
  for (const std::string& r : record.replicas) proto.add_replicas(r);
  for (const std::string& r : record.isr) proto.add_isr(r);
  proto.set_transfer_to(record.transfer_to);
  for (const std::string& r : record.eligible) proto.add_eligible(r);
  if (record.acknowledged != LogEnd{}) {
    proto.mutable_acknowledged()->set_epoch(record.acknowledged.epoch);
    proto.mutable_acknowledged()->set_index(record.acknowledged.index);
  }
  return ToJson(proto);
}

absl::StatusOr<ShardRecord> DecodeShardRecord(std::string_view json) {
  pb::ShardRecordProto proto;
  if (absl::Status s = FromJson("shard record", json, proto); !s.ok()) return s;
  ShardRecord record;
  record.epoch = proto.epoch();
  record.primary = proto.primary();
  record.replicas.assign(proto.replicas().begin(), proto.replicas().end());
  record.isr.assign(proto.isr().begin(), proto.isr().end());
  record.transfer_to = proto.transfer_to();
  record.eligible.assign(proto.eligible().begin(), proto.eligible().end());
  record.acknowledged = {proto.acknowledged().epoch(),
                         proto.acknowledged().index()};
  return record;
}

std::string EncodeNodeRecord(const NodeRecord& record) {
  pb::NodeRecordProto proto;
  proto.set_address(record.address);
  proto.set_zone(record.zone);
  for (const auto& [shard, position] : record.positions) {
    pb::PositionProto& p = (*proto.mutable_positions())[shard];
    p.set_epoch(position.epoch);
    p.set_index(position.index);
    p.set_last_epoch(position.last_epoch);
  }
  return ToJson(proto);
}

absl::StatusOr<NodeRecord> DecodeNodeRecord(std::string_view json) {
  pb::NodeRecordProto proto;
  if (absl::Status s = FromJson("node record", json, proto); !s.ok()) return s;
  NodeRecord record;
  record.address = proto.address();
  record.zone = proto.zone();
  for (const auto& [shard, p] : proto.positions()) {
    record.positions[shard] = Position{p.epoch(), p.index(), p.last_epoch()};
  }
  return record;
}

}  // namespace hourglass::cluster
