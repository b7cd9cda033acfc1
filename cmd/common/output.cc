#include "cmd/common/output.h"

#include <algorithm>
#include <iostream>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "google/protobuf/util/json_util.h"

namespace hourglass::cli {

void Table::AlignRight(size_t column) {
  if (right_.size() <= column) right_.resize(column + 1, false);
  right_[column] = true;
}

void Table::AddRow(std::vector<std::string> row) {
  row.resize(header_.size());
  rows_.push_back(std::move(row));
}

std::string Table::Render() const {
  std::vector<size_t> width(header_.size(), 0);
  auto measure = [&](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size(); ++i) {
      width[i] = std::max(width[i], row[i].size());
    }
  };
  measure(header_);
  for (const auto& row : rows_) measure(row);

  std::string out;
  auto render = [&](const std::vector<std::string>& row) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      if (i > 0) line += "  ";
      const std::string padding(width[i] - row[i].size(), ' ');
      const bool right = i < right_.size() && right_[i];
      if (right) line += padding;
      line += row[i];
      if (!right) line += padding;
    }
    // The last column's padding would be trailing space.
    line.erase(line.find_last_not_of(' ') + 1);
    out += line;
    out += '\n';
  };
  render(header_);
  for (const auto& row : rows_) render(row);
  return out;
}

std::string JsonQuote(absl::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          absl::StrAppendFormat(&out, "\\u%04x", c);
        } else {
          out += c;
        }
    }
  }
  out += '"';
  return out;
}

absl::StatusOr<std::string> ToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  std::string json;
  const auto status =
      google::protobuf::util::MessageToJsonString(message, &json, options);
  if (!status.ok()) {
    return absl::InternalError(
        absl::StrCat("cannot print ", message.GetTypeName(),
                     " as JSON: ", status.message().ToString()));
  }
  return json;
}

absl::Status PrintJson(const google::protobuf::Message& message) {
  absl::StatusOr<std::string> json = ToJson(message);
  if (!json.ok()) return json.status();
  std::cout << *json << '\n' << std::flush;
  return absl::OkStatus();
}

std::string LogfmtValue(absl::string_view text) {
  const bool plain =
      !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
        return absl::ascii_isgraph(c) && c != '"' && c != '\\' && c != '=';
      });
  if (plain) return std::string(text);
  return absl::StrCat("\"", absl::CHexEscape(text), "\"");
}

std::string Printable(absl::string_view bytes) {
  std::string out;
  for (const char c : bytes) {
    if (absl::ascii_isprint(c) && c != '\\') {
      out += c;
    } else {
      out += absl::CHexEscape(absl::string_view(&c, 1));
    }
  }
  return out;
}

std::string ShellQuote(absl::string_view word) {
  const bool plain =
      !word.empty() && std::all_of(word.begin(), word.end(), [](char c) {
        return absl::ascii_isalnum(c) ||
               absl::string_view("@%+=:,./_-").find(c) !=
                   absl::string_view::npos;
      });
  if (plain) return std::string(word);
  return absl::StrCat("'", absl::StrReplaceAll(word, {{"'", "'\\''"}}), "'");
}

}  // namespace hourglass::cli
