#include "cmd/hourglass/message_format.h"

#include <map>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "cmd/hourglass/duration.h"
#include "cmd/hourglass/output.h"

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

std::string MessagesTable(const hourglass::v1::ListMessagesResponse& page) {
  Table table({"ID", "TOPIC", "DUE", "STATE", "ATTEMPTS", "SIZE"});
  table.AlignRight(4);
  table.AlignRight(5);
  for (const auto& m : page.messages()) {
    table.AddRow({m.id(), m.topic(), Rfc3339(FromProto(m.deliver_at())),
                  StateName(m.state()), absl::StrCat(m.attempt()),
                  absl::StrCat(m.payload_size())});
  }
  return table.Render();
}

std::string MessageDetails(const hourglass::v1::MessageInfo& m) {
  Table fields({"id:", m.id()});
  fields.AddRow({"topic:", m.topic()});
  fields.AddRow({"state:", StateName(m.state())});
  fields.AddRow({"deliver_at:", Rfc3339(FromProto(m.deliver_at()))});
  fields.AddRow({"published_at:", Rfc3339(FromProto(m.published_at()))});
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
          {g.group(), StateName(g.state()), absl::StrCat(g.attempt()),
           g.has_redeliver_at() ? Rfc3339(FromProto(g.redeliver_at())) : "-"});
    }
    absl::StrAppend(&out, "\n", groups.Render());
  }
  return out;
}

}  // namespace hourglass::cli
