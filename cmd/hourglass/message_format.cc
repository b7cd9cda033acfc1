#include "cmd/hourglass/message_format.h"

#include <map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "cmd/common/duration.h"
#include "cmd/common/output.h"

namespace hourglass::cli {

using hourglass::v1::MessageState;

std::string StateName(MessageState state) {
  switch (state) {
    case hourglass::v1::MESSAGE_STATE_SCHEDULED:
      return "scheduled";
    case hourglass::v1::MESSAGE_STATE_READY:
      return "ready";
    case hourglass::v1::MESSAGE_STATE_IN_FLIGHT:
      return "in-flight";
    case hourglass::v1::MESSAGE_STATE_DEAD:
      return "dead";
    default:
      return "-";
  }
}

absl::StatusOr<MessageState> ParseState(absl::string_view name) {
  const std::string lower = absl::AsciiStrToLower(name);
  if (lower == "scheduled") return hourglass::v1::MESSAGE_STATE_SCHEDULED;
  if (lower == "ready") return hourglass::v1::MESSAGE_STATE_READY;
  if (lower == "in-flight" || lower == "in_flight") {
    return hourglass::v1::MESSAGE_STATE_IN_FLIGHT;
  }
  if (lower == "dead") return hourglass::v1::MESSAGE_STATE_DEAD;
  return absl::InvalidArgumentError(
      absl::StrCat("\"", name,
                   "\" is not a state (use scheduled, ready, in-flight or "
                   "dead)"));
}

std::string GroupName(const std::string& group) {
  return group.empty() ? "-" : group;
}

std::string MessagesTable(const hourglass::v1::ListMessagesResponse& page,
                          bool per_group) {
  std::vector<std::string> header = {"ID", "TOPIC"};
  if (per_group) header.push_back("GROUP");
  for (const char* column : {"DUE", "STATE", "ATTEMPTS", "SIZE"}) {
    header.push_back(column);
  }
  Table table(header);
  table.AlignRight(header.size() - 2);
  table.AlignRight(header.size() - 1);
  for (const auto& m : page.messages()) {
    std::vector<std::string> row = {m.id(), m.topic()};
    // A READY or IN_FLIGHT listing gives each message the one group the row
    // is about.
    if (per_group) {
      row.push_back(m.groups_size() > 0 ? GroupName(m.groups(0).group()) : "-");
    }
    row.push_back(Rfc3339(FromProto(m.deliver_at())));
    row.push_back(StateName(m.state()));
    row.push_back(absl::StrCat(m.attempt()));
    row.push_back(absl::StrCat(m.payload_size()));
    table.AddRow(std::move(row));
  }
  return table.Render();
}

std::string MessageDetails(const hourglass::v1::MessageInfo& m) {
  Table fields({"id:", m.id()});
  fields.AddRow({"topic:", m.topic()});
  fields.AddRow({"state:", StateName(m.state())});
  fields.AddRow({"deliver_at:", Rfc3339(FromProto(m.deliver_at()))});
  fields.AddRow({"published_at:", Rfc3339(FromProto(m.published_at()))});
  if (m.has_deadline()) {
    const bool dead_letter =
        m.deadline().on_expire() == hourglass::v1::ON_EXPIRE_DEAD_LETTER;
    fields.AddRow({"expire_at:",
                   absl::StrCat(Rfc3339(FromProto(m.deadline().expire_at())),
                                dead_letter ? " (then dead-lettered)"
                                            : " (then dropped)")});
  }
  fields.AddRow({"attempt:", absl::StrCat(m.attempt())});
  fields.AddRow({"size:", absl::StrCat(m.payload_size(), " bytes")});
  const std::map<std::string, std::string> headers(m.headers().begin(),
                                                   m.headers().end());
  for (const auto& [key, value] : headers) {
    fields.AddRow(
        {"header:", absl::StrCat(Printable(key), "=", Printable(value))});
  }
  std::string payload = Printable(m.payload_preview());
  if (m.payload_preview().size() < m.payload_size()) {
    absl::StrAppend(&payload, "... (",
                    m.payload_size() - m.payload_preview().size(),
                    " more bytes)");
  }
  fields.AddRow({"payload:", payload});
  std::string out = fields.Render();
  if (m.groups_size() > 0) {
    Table groups({"GROUP", "STATE", "ATTEMPT", "REDELIVER_AT"});
    groups.AlignRight(2);
    for (const auto& g : m.groups()) {
      groups.AddRow(
          {GroupName(g.group()), StateName(g.state()),
           absl::StrCat(g.attempt()),
           g.has_redeliver_at() ? Rfc3339(FromProto(g.redeliver_at())) : "-"});
    }
    absl::StrAppend(&out, "\n", groups.Render());
  }
  return out;
}

}  // namespace hourglass::cli
