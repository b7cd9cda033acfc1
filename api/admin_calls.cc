#include "api/admin_calls.h"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "api/proto_time.h"
#include "storage/keys.h"

namespace hourglass::api {
namespace {

namespace v1 = hourglass::v1;

constexpr uint32_t kDefaultPageSize = 100;
constexpr uint32_t kMaxPageSize = 1000;
constexpr uint32_t kDefaultPreviewBytes = 256;
constexpr uint32_t kMaxPreviewBytes = 1 << 20;

absl::Status ValidateTopicAndGroup(const std::string& topic,
                                   const std::string& group) {
  if (absl::Status s = ValidateName("topic", topic); !s.ok()) return s;
  return ValidateName("group", group);
}

void PercentilesToProto(const broker::Percentiles& in, v1::Percentiles* out) {
  ToProto(in.p50, out->mutable_p50());
  ToProto(in.p90, out->mutable_p90());
  ToProto(in.p99, out->mutable_p99());
  ToProto(in.max, out->mutable_max());
}

void StatsToProto(const std::vector<broker::TopicStats>& stats,
                  absl::Time started_at, v1::GetStatsResponse* response) {
  for (const broker::TopicStats& t : stats) {
    v1::TopicStats* out = response->add_topics();
    out->set_topic(t.topic);
    out->set_scheduled(t.scheduled);
    out->set_ready(t.ready);
    out->set_in_flight(t.in_flight);
    out->set_dead_lettered(t.dead_lettered);
    out->set_publish_rate(t.activity.publish_rate);
    out->set_delivery_rate(t.activity.delivery_rate);
    PercentilesToProto(t.activity.lateness, out->mutable_lateness());
    for (const broker::GroupStats& g : t.groups) {
      v1::GroupStats* group = out->add_groups();
      group->set_group(g.group);
      group->set_ready(g.ready);
      group->set_in_flight(g.in_flight);
      group->set_consumers(g.consumers);
      group->set_ack_rate(g.ack_rate);
    }
  }
  ToProto(started_at, response->mutable_started_at());
}

void MessageToProto(const broker::MessageView& in, v1::MessageInfo* out) {
  out->set_id(in.id);
  out->set_topic(in.topic);
  out->set_state(static_cast<v1::MessageState>(in.state));
  ToProto(in.deliver_at, out->mutable_deliver_at());
  ToProto(in.published_at, out->mutable_published_at());
  if (in.expire_at != absl::InfiniteFuture()) {
    v1::Deadline* deadline = out->mutable_deadline();
    ToProto(in.expire_at, deadline->mutable_expire_at());
    deadline->set_on_expire(in.dead_letter_on_expire ? v1::ON_EXPIRE_DEAD_LETTER
                                                     : v1::ON_EXPIRE_DROP);
  }
  out->set_payload_size(static_cast<uint32_t>(in.payload_size));
  for (const auto& [key, value] : in.headers) {
    (*out->mutable_headers())[key] = value;
  }
  out->set_payload_preview(in.payload_preview);
  for (const broker::GroupView& g : in.groups) {
    v1::GroupDelivery* group = out->add_groups();
    group->set_group(g.group);
    group->set_state(static_cast<v1::MessageState>(g.state));
    group->set_attempt(g.attempt);
    if (g.state == broker::MessageState::kInFlight) {
      ToProto(g.redeliver_at, group->mutable_redeliver_at());
    }
  }
  out->set_attempt(in.attempt);
}

// A stable (not per-process) hash of the fields a page token is bound to.
uint64_t Fingerprint(const v1::ListMessagesRequest& request) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a.
  auto mix = [&](std::string_view bytes) {
    for (char c : bytes) {
      h ^= static_cast<uint8_t>(c);
      h *= 1099511628211ull;
    }
    h ^= 0xff;  // Field separator.
    h *= 1099511628211ull;
  };
  mix(request.topic());
  mix(absl::StrCat(static_cast<int>(request.state())));
  mix(request.group());
  mix(request.has_due_from() ? request.due_from().SerializeAsString() : "-");
  mix(request.has_due_to() ? request.due_to().SerializeAsString() : "-");
  return h;
}

}  // namespace

std::string EncodePageToken(const v1::ListMessagesRequest& request,
                            const broker::ListPosition& position) {
  std::string raw = "\x01";
  storage::AppendU64(raw, Fingerprint(request));
  storage::AppendU64(raw, static_cast<uint64_t>(position.key.deliver_at_ms));
  storage::AppendU64(raw, position.key.sequence);
  raw.append(position.group);
  return absl::WebSafeBase64Escape(raw);
}

absl::StatusOr<broker::ListPosition> DecodePageToken(
    const v1::ListMessagesRequest& request) {
  std::string raw;
  if (!absl::WebSafeBase64Unescape(request.page_token(), &raw) ||
      raw.size() < 25 || raw[0] != '\x01') {
    return absl::InvalidArgumentError(
        "page_token is not a token this broker made");
  }
  const std::string_view view = raw;
  if (storage::ReadU64(view.substr(1)) != Fingerprint(request)) {
    return absl::InvalidArgumentError(
        "page_token belongs to a listing with other topic, state, group or "
        "due range");
  }
  return broker::ListPosition{
      std::string(view.substr(25)),
      storage::DueKey{static_cast<int64_t>(storage::ReadU64(view.substr(9))),
                      storage::ReadU64(view.substr(17))}};
}

AdminCalls::AdminCalls(broker::Broker* broker, broker::Clock* clock,
                       Limits limits, absl::Time started_at)
    : broker_(broker),
      clock_(clock),
      limits_(limits),
      started_at_(started_at) {}

void AdminCalls::GetStats(const Grant& grant,
                          const v1::GetStatsRequest& request,
                          v1::GetStatsResponse* response, Done done) {
  if (absl::Status s = grant.Check(Role::kAdmin, request.topic()); !s.ok()) {
    return std::move(done)(s);
  }
  std::optional<std::string> only;
  if (!request.topic().empty()) {
    if (absl::Status s = ValidateName("topic", request.topic()); !s.ok()) {
      return std::move(done)(s);
    }
    only = request.topic();
  }
  broker_->Stats(
      std::move(only),
      [this, done = std::move(done), response](
          absl::StatusOr<std::vector<broker::TopicStats>> stats) mutable {
        if (stats.ok()) {
          StatsToProto(*stats, started_at_, response);
          const broker::BrokerInfo info = broker_->Info();
          response->set_version(HOURGLASS_VERSION);
          response->set_format_version(info.format_version);
          response->set_store_id(info.store_id);
          response->set_serving(info.store_health.ok());
          if (!info.store_health.ok()) {
            response->set_not_serving_reason(info.store_health.ToString());
          }
        }
        std::move(done)(stats.status());
      });
}

void AdminCalls::ListTopics(const Grant& grant,
                            const v1::ListTopicsRequest& request,
                            v1::ListTopicsResponse* response, Done done) {
  if (absl::Status s = grant.Check(Role::kAdmin, ""); !s.ok()) {
    return std::move(done)(s);
  }
  broker_->Stats(
      std::nullopt,
      [done = std::move(done), response](
          absl::StatusOr<std::vector<broker::TopicStats>> stats) mutable {
        if (stats.ok()) {
          for (const broker::TopicStats& t : *stats) {
            v1::Topic* topic = response->add_topics();
            topic->set_name(t.topic);
            topic->set_scheduled(t.scheduled);
            topic->set_groups(static_cast<uint32_t>(t.groups.size()));
            topic->set_ready(t.ready);
            topic->set_in_flight(t.in_flight);
            topic->set_dead_lettered(t.dead_lettered);
          }
        }
        std::move(done)(stats.status());
      });
}

void AdminCalls::ListGroups(const Grant& grant,
                            const v1::ListGroupsRequest& request,
                            v1::ListGroupsResponse* response, Done done) {
  if (absl::Status s = grant.Check(Role::kAdmin, request.topic()); !s.ok()) {
    return std::move(done)(s);
  }
  if (absl::Status s = ValidateName("topic", request.topic()); !s.ok()) {
    return std::move(done)(s);
  }
  broker_->Stats(
      request.topic(),
      [done = std::move(done), &request, response](
          absl::StatusOr<std::vector<broker::TopicStats>> stats) mutable {
        if (stats.ok()) {
          for (const broker::GroupStats& g : stats->front().groups) {
            v1::Group* group = response->add_groups();
            group->set_topic(request.topic());
            group->set_name(g.group);
            ToProto(g.created_at, group->mutable_created_at());
            group->set_ready(g.ready);
            group->set_in_flight(g.in_flight);
            group->set_consumers(g.consumers);
          }
        }
        std::move(done)(stats.status());
      });
}

void AdminCalls::CreateGroup(const Grant& grant,
                             const v1::CreateGroupRequest& request,
                             v1::Group* response, Done done) {
  if (absl::Status s = grant.Check(Role::kAdmin, request.topic()); !s.ok()) {
    return std::move(done)(s);
  }
  if (absl::Status s = ValidateTopicAndGroup(request.topic(), request.group());
      !s.ok()) {
    return std::move(done)(s);
  }
  broker_->CreateGroup(request.topic(), request.group(),
                       [done = std::move(done), &request, response](
                           absl::StatusOr<absl::Time> created_at) mutable {
                         if (created_at.ok()) {
                           response->set_topic(request.topic());
                           response->set_name(request.group());
                           ToProto(*created_at, response->mutable_created_at());
                         }
                         std::move(done)(created_at.status());
                       });
}

void AdminCalls::DeleteGroup(const Grant& grant,
                             const v1::DeleteGroupRequest& request,
                             v1::DeleteGroupResponse* response, Done done) {
  if (absl::Status s = grant.Check(Role::kAdmin, request.topic()); !s.ok()) {
    return std::move(done)(s);
  }
  if (absl::Status s = ValidateTopicAndGroup(request.topic(), request.group());
      !s.ok()) {
    return std::move(done)(s);
  }
  broker_->DeleteGroup(request.topic(), request.group(),
                       [done = std::move(done),
                        response](absl::StatusOr<uint64_t> removed) mutable {
                         if (removed.ok()) response->set_removed(*removed);
                         std::move(done)(removed.status());
                       });
}

void AdminCalls::ListMessages(const Grant& grant,
                              const v1::ListMessagesRequest& request,
                              v1::ListMessagesResponse* response, Done done) {
  if (absl::Status s = grant.Check(Role::kAdmin, request.topic()); !s.ok()) {
    return std::move(done)(s);
  }
  if (absl::Status s = ValidateName("topic", request.topic()); !s.ok()) {
    return std::move(done)(s);
  }
  broker::ListQuery query;
  query.topic = request.topic();
  switch (request.state()) {
    case v1::MESSAGE_STATE_SCHEDULED:
    case v1::MESSAGE_STATE_READY:
    case v1::MESSAGE_STATE_IN_FLIGHT:
    case v1::MESSAGE_STATE_DEAD:
      query.state = static_cast<broker::MessageState>(request.state());
      break;
    default:
      return std::move(done)(absl::InvalidArgumentError(
          absl::StrCat("state ", static_cast<int>(request.state()),
                       " is not SCHEDULED, READY, IN_FLIGHT or DEAD")));
  }
  if (!request.group().empty()) {
    if (absl::Status s = ValidateName("group", request.group()); !s.ok()) {
      return std::move(done)(s);
    }
    if (query.state != broker::MessageState::kReady &&
        query.state != broker::MessageState::kInFlight) {
      return std::move(done)(absl::InvalidArgumentError(
          "group narrows READY and IN_FLIGHT listings "
          "only"));
    }
    query.group = request.group();
  }
  if (request.has_due_from()) {
    if (absl::Status s = ValidateTimestamp("due_from", request.due_from());
        !s.ok()) {
      return std::move(done)(s);
    }
    query.from = FromProto(request.due_from());
  }
  if (request.has_due_to()) {
    if (absl::Status s = ValidateTimestamp("due_to", request.due_to());
        !s.ok()) {
      return std::move(done)(s);
    }
    query.to = FromProto(request.due_to());
  }
  if (request.page_size() > kMaxPageSize) {
    return std::move(done)(absl::InvalidArgumentError(
        absl::StrCat("page_size ", request.page_size(),
                     " is over the limit of ", kMaxPageSize)));
  }
  query.limit =
      request.page_size() == 0 ? kDefaultPageSize : request.page_size();
  if (!request.page_token().empty()) {
    absl::StatusOr<broker::ListPosition> after = DecodePageToken(request);
    if (!after.ok()) return std::move(done)(after.status());
    query.after = *after;
  }
  broker_->ListMessages(
      std::move(query), [done = std::move(done), &request, response](
                            absl::StatusOr<broker::ListPage> page) mutable {
        if (page.ok()) {
          for (const broker::MessageView& m : page->messages) {
            MessageToProto(m, response->add_messages());
          }
          if (page->next.has_value()) {
            response->set_next_page_token(
                EncodePageToken(request, *page->next));
          }
        }
        std::move(done)(page.status());
      });
}

void AdminCalls::GetMessage(const Grant& grant,
                            const v1::GetMessageRequest& request,
                            v1::MessageInfo* response, Done done) {
  if (absl::Status s = grant.Check(Role::kAdmin, request.topic()); !s.ok()) {
    return std::move(done)(s);
  }
  if (absl::Status s = ValidateName("topic", request.topic()); !s.ok()) {
    return std::move(done)(s);
  }
  if (absl::Status s = ValidateId("id", request.id(), limits_); !s.ok()) {
    return std::move(done)(s);
  }
  if (request.preview_bytes() > kMaxPreviewBytes) {
    return std::move(done)(absl::InvalidArgumentError(
        absl::StrCat("preview_bytes ", request.preview_bytes(),
                     " is over the limit of ", kMaxPreviewBytes)));
  }
  const uint32_t preview = request.preview_bytes() == 0
                               ? kDefaultPreviewBytes
                               : request.preview_bytes();
  broker_->GetMessage(request.topic(), request.id(), preview,
                      [done = std::move(done), response](
                          absl::StatusOr<broker::MessageView> view) mutable {
                        if (view.ok()) MessageToProto(*view, response);
                        std::move(done)(view.status());
                      });
}

void AdminCalls::GetSchedule(const Grant& grant,
                             const v1::GetScheduleRequest& request,
                             v1::GetScheduleResponse* response, Done done) {
  if (absl::Status s = grant.Check(Role::kAdmin, request.topic()); !s.ok()) {
    return std::move(done)(s);
  }
  absl::StatusOr<broker::ScheduleQuery> query = ValidateGetSchedule(request);
  if (!query.ok()) return std::move(done)(query.status());
  broker_->GetSchedule(
      *std::move(query),
      [done = std::move(done), response](
          absl::StatusOr<std::vector<broker::ScheduleBucket>> buckets) mutable {
        if (buckets.ok()) {
          uint64_t total = 0;
          response->mutable_buckets()->Reserve(
              static_cast<int>(buckets->size()));
          for (const broker::ScheduleBucket& b : *buckets) {
            v1::ScheduleBucket& out = *response->add_buckets();
            ToProto(b.start, out.mutable_start());
            out.set_count(b.count);
            total += b.count;
          }
          response->set_total(total);
        }
        std::move(done)(buckets.status());
      });
}

void AdminCalls::CancelMessage(const Grant& grant,
                               const v1::CancelRequest& request,
                               v1::CancelResponse* response, Done done) {
  if (absl::Status s = grant.Check(Role::kAdmin, request.topic()); !s.ok()) {
    return std::move(done)(s);
  }
  absl::Status valid = ValidateName("topic", request.topic());
  if (valid.ok()) valid = ValidateId("id", request.id(), limits_);
  if (!valid.ok()) return std::move(done)(valid);
  broker_->Cancel(request.topic(), request.id(),
                  [done = std::move(done)](absl::Status status) mutable {
                    std::move(done)(status);
                  });
}

void AdminCalls::Reschedule(const Grant& grant,
                            const v1::RescheduleRequest& request,
                            v1::Receipt* response, Done done) {
  if (absl::Status s = grant.Check(Role::kAdmin, request.topic()); !s.ok()) {
    return std::move(done)(s);
  }
  absl::Status valid = ValidateName("topic", request.topic());
  if (valid.ok()) valid = ValidateId("id", request.id(), limits_);
  const absl::Time now = clock_->Now();
  absl::Time deliver_at = now;
  if (valid.ok()) {
    if (request.has_delay()) {
      valid = ValidateDelay(request.delay(), limits_);
      if (valid.ok()) deliver_at = now + FromProto(request.delay());
    } else if (request.has_deliver_at()) {
      valid = ValidateDeliverAt(request.deliver_at(), limits_, now);
      if (valid.ok()) deliver_at = FromProto(request.deliver_at());
    } else {
      valid = absl::InvalidArgumentError(
          "the new due time is missing: set delay or deliver_at");
    }
  }
  if (!valid.ok()) return std::move(done)(valid);
  broker_->Reschedule(
      request.topic(), request.id(),
      absl::FromUnixMillis(absl::ToUnixMillis(deliver_at)),
      [done = std::move(done),
       response](absl::StatusOr<broker::PublishReceipt> receipt) mutable {
        if (receipt.ok()) {
          response->set_id(receipt->id);
          ToProto(receipt->deliver_at, response->mutable_deliver_at());
          response->set_duplicate(false);
        }
        std::move(done)(receipt.status());
      });
}

void AdminCalls::RedriveDeadLetters(
    const Grant& grant, const v1::RedriveDeadLettersRequest& request,
    v1::RedriveDeadLettersResponse* response, Done done) {
  if (absl::Status s = grant.Check(Role::kAdmin, request.topic()); !s.ok()) {
    return std::move(done)(s);
  }
  if (absl::Status s = ValidateName("topic", request.topic()); !s.ok()) {
    return std::move(done)(s);
  }
  if (static_cast<size_t>(request.ids_size()) > limits_.max_batch) {
    return std::move(done)(absl::InvalidArgumentError(absl::StrCat(
        "the request has ", request.ids_size(), " ids; the limit is ",
        limits_.max_batch, " (--max_batch)")));
  }
  std::vector<std::string> ids;
  for (const std::string& id : request.ids()) {
    if (absl::Status s =
            ValidateId(absl::StrCat("ids[", ids.size(), "]"), id, limits_);
        !s.ok()) {
      return std::move(done)(s);
    }
    ids.push_back(id);
  }
  broker_->Redrive(request.topic(), std::move(ids),
                   [done = std::move(done),
                    response](absl::StatusOr<uint64_t> moved) mutable {
                     if (moved.ok()) response->set_redriven(*moved);
                     std::move(done)(moved.status());
                   });
}

void AdminCalls::PurgeTopic(const Grant& grant,
                            const v1::PurgeTopicRequest& request,
                            v1::PurgeTopicResponse* response, Done done) {
  if (absl::Status s = grant.Check(Role::kAdmin, request.topic()); !s.ok()) {
    return std::move(done)(s);
  }
  if (absl::Status s = ValidateName("topic", request.topic()); !s.ok()) {
    return std::move(done)(s);
  }
  if (!request.scheduled() && !request.ready()) {
    return std::move(done)(absl::InvalidArgumentError(
        "nothing to purge: set scheduled, ready, or both"));
  }
  broker_->Purge(request.topic(), request.scheduled(), request.ready(),
                 [done = std::move(done),
                  response](absl::StatusOr<uint64_t> purged) mutable {
                   if (purged.ok()) response->set_purged(*purged);
                   std::move(done)(purged.status());
                 });
}

absl::StatusOr<std::string> SnapshotPath(const std::string& snapshot_dir,
                                         const std::string& name) {
  if (snapshot_dir.empty()) {
    return absl::FailedPreconditionError(
        "this broker takes no snapshots: it has no --snapshot_dir");
  }
  if (name.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dir is empty: name the new snapshot (letters, digits, '.', '_', "
        "'-'); it is written into the broker's --snapshot_dir, ",
        snapshot_dir));
  }
  const bool plain =
      name.size() <= 200 && name != "." && name != ".." &&
      std::all_of(name.begin(), name.end(), [](char c) {
        return absl::ascii_isalnum(c) || c == '.' || c == '_' || c == '-';
      });
  if (!plain) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dir \"", absl::CHexEscape(name),
        "\" is not a plain name: name the new snapshot with up to 200 "
        "letters, digits, '.', '_' and '-' (not . or ..); it is written "
        "into the broker's --snapshot_dir, ",
        snapshot_dir));
  }
  std::error_code error;
  std::filesystem::create_directories(snapshot_dir, error);
  if (error) {
    return absl::UnavailableError(absl::StrCat(
        "cannot make --snapshot_dir ", snapshot_dir, ": ", error.message()));
  }
  return absl::StrCat(snapshot_dir, "/", name);
}

void AdminCalls::CreateSnapshot(const Grant& grant,
                                const v1::CreateSnapshotRequest& request,
                                v1::Snapshot* response, Done done) {
  // A snapshot holds every topic: admin of all of them.
  if (absl::Status s = grant.Check(Role::kAdmin, ""); !s.ok()) {
    return std::move(done)(s);
  }
  absl::StatusOr<std::string> dir =
      SnapshotPath(limits_.snapshot_dir, request.dir());
  if (!dir.ok()) return std::move(done)(dir.status());
  broker_->CreateSnapshot(
      *std::move(dir),
      [done = std::move(done),
       response](absl::StatusOr<broker::SnapshotInfo> snapshot) mutable {
        if (snapshot.ok()) {
          response->set_dir(snapshot->dir);
          response->set_files(snapshot->files);
          response->set_bytes(snapshot->bytes);
          response->set_format_version(snapshot->format_version);
          response->set_store_id(snapshot->store_id);
          ToProto(snapshot->started_at, response->mutable_started_at());
          ToProto(snapshot->took, response->mutable_took());
          response->set_shards(static_cast<uint32_t>(snapshot->shards));
        }
        std::move(done)(snapshot.status());
      });
}

}  // namespace hourglass::api
