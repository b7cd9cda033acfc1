// Fuzzes the token file parser, Authorizer::FromText (api/auth.h): token
// lines, `cert` lines, and what a parsed file grants.
//
// An input is either a token file's text as it comes (its raw bytes), or a
// file built line by line from the input's bytes: good token and cert
// lines, comments, duplicates, lines with something wrong, and soups of
// fields. Checked against a model written independently of the code under
// test (its own line splitter, field rules and glob matcher):
//   - a file parses exactly when every line is good and it has a token or
//     a cert line;
//   - a refused file is INVALID_ARGUMENT naming its first bad line
//     ("tokens:N: ...", or "tokens: no tokens and no cert lines ..." for
//     a file without grants), in one line of text;
//   - an error message never contains a token of the file (the first field
//     of a token line) unless one of the things it may show from the bad
//     line (a role shorter than a token, a topic pattern, a certificate
//     name) contains it; in built files, whose tokens alone hold '~', no
//     message holds a '~';
//   - a parsed file grants exactly what its lines say: each token
//     authenticates with its line's roles on the topics its patterns
//     match (checked on probe topics), other tokens are "unknown token";
//     a certificate gets the grant of the first cert line that names one
//     of its names, one that no line names is UNAUTHENTICATED; a token
//     decides whatever the certificate; counts() and Reload() agree.

#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "api/auth.h"
#include "tests/fuzz/fuzz_check.h"

namespace hourglass::api {
namespace {

// ---- The model: what a file means, read without the code under test.

constexpr unsigned kProduce = 1;
constexpr unsigned kConsume = 2;
constexpr unsigned kAdmin = 4;

struct ModelGrant {
  unsigned roles = 0;
  bool every_topic = true;
  std::vector<std::string> patterns;
};

struct Model {
  bool ok = false;
  // The first bad line (1-based); 0 for a file without grants.
  int error_line = -1;
  // What an error message may show from the bad line.
  std::vector<std::string> showable;
  // In file order.
  std::vector<std::pair<std::string, ModelGrant>> tokens;
  std::vector<std::pair<std::string, ModelGrant>> certs;
  // First fields of the token lines read, good or bad: secrets.
  std::vector<std::string> secrets;
};

bool Separator(char c) { return c == ' ' || c == '\t' || c == '\r'; }

// A character of a token or a certificate name.
bool Visible(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u >= 0x21 && u <= 0x7e && c != '#' && c != ',';
}

bool TopicChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-' || c == '*';
}

// The fields of a line, up to its first '#'.
std::vector<std::string> Fields(const std::string& line) {
  std::vector<std::string> fields;
  std::string field;
  for (char c : line) {
    if (c == '#') break;
    if (!Separator(c)) {
      field += c;
    } else if (!field.empty()) {
      fields.push_back(field);
      field.clear();
    }
  }
  if (!field.empty()) fields.push_back(field);
  return fields;
}

// Comma-separated items, empty ones included.
std::vector<std::string> Items(const std::string& field) {
  std::vector<std::string> items(1);
  for (char c : field) {
    if (c == ',') {
      items.emplace_back();
    } else {
      items.back() += c;
    }
  }
  return items;
}

Model Read(const std::string& text) {
  Model m;
  std::set<std::string> tokens_seen;
  std::set<std::string> names_seen;
  size_t start = 0;
  for (int number = 1;; ++number) {
    const size_t end = text.find('\n', start);
    const std::string line = text.substr(
        start, end == std::string::npos ? std::string::npos : end - start);
    const std::vector<std::string> f = Fields(line);
    if (!f.empty()) {
      const bool cert = f[0] == "cert";
      const size_t roles_at = cert ? 2 : 1;
      if (!cert) m.secrets.push_back(f[0]);
      // What this line's error may show, whichever it is.
      if (cert && f.size() >= 2) m.showable.push_back(f[1]);
      for (size_t i = roles_at; i < f.size(); ++i) {
        for (const std::string& item : Items(f[i])) {
          if (i > roles_at || item.size() < 16) m.showable.push_back(item);
        }
      }
      bool good = f.size() <= roles_at + 2 && f.size() > roles_at;
      const std::string& key = cert ? (f.size() >= 2 ? f[1] : f[0]) : f[0];
      if (good && cert) {
        good =
            key.size() <= 512 && std::all_of(key.begin(), key.end(), Visible);
      } else if (good) {
        good = key.size() >= 16 && key.size() <= 512 &&
               std::all_of(key.begin(), key.end(), Visible);
      }
      ModelGrant grant;
      if (good) {
        for (const std::string& role : Items(f[roles_at])) {
          if (role == "produce") {
            grant.roles |= kProduce;
          } else if (role == "consume") {
            grant.roles |= kConsume;
          } else if (role == "admin") {
            grant.roles |= kAdmin;
          } else {
            good = false;
          }
        }
      }
      if (good && f.size() == roles_at + 2) {
        grant.every_topic = false;
        for (const std::string& pattern : Items(f[roles_at + 1])) {
          if (pattern.empty() || pattern.size() > 200 ||
              !std::all_of(pattern.begin(), pattern.end(), TopicChar)) {
            good = false;
          }
          if (pattern == "*") grant.every_topic = true;
          grant.patterns.push_back(pattern);
        }
      }
      if (good) {
        good = (cert ? names_seen : tokens_seen).insert(key).second;
      }
      if (!good) {
        m.error_line = number;
        return m;
      }
      (cert ? m.certs : m.tokens).emplace_back(key, std::move(grant));
    }
    m.showable.clear();
    if (end == std::string::npos) break;
    start = end + 1;
  }
  if (m.tokens.empty() && m.certs.empty()) {
    m.error_line = 0;
    return m;
  }
  m.ok = true;
  return m;
}

// Whether glob `pattern` ('*' any run of characters) matches all of
// `topic`: dynamic programming over suffixes, unlike TopicMatches.
bool Glob(const std::string& pattern, const std::string& topic) {
  // matches[j]: pattern[i..] matches topic[j..], for the current i.
  std::vector<char> matches(topic.size() + 1, 0);
  matches[topic.size()] = 1;
  for (size_t i = pattern.size(); i-- > 0;) {
    std::vector<char> next(topic.size() + 1, 0);
    for (size_t j = topic.size() + 1; j-- > 0;) {
      if (pattern[i] == '*') {
        next[j] = matches[j] || (j < topic.size() && next[j + 1]);
      } else {
        next[j] = j < topic.size() && pattern[i] == topic[j] && matches[j + 1];
      }
    }
    matches = std::move(next);
  }
  return matches[0];
}

bool Allows(const ModelGrant& grant, unsigned role, const std::string& topic) {
  if ((grant.roles & role) == 0) return false;
  if (grant.every_topic) return true;
  if (topic.empty()) return false;
  return std::any_of(
      grant.patterns.begin(), grant.patterns.end(),
      [&](const std::string& pattern) { return Glob(pattern, topic); });
}

// ---- Checks.

constexpr size_t kMaxProbed = 6;  // Grants of each kind checked in full.

// Fixed text of the parser's messages, where a "token" may coincide.
constexpr const char* kFixedTexts[] = {
    "expected \"<token> <roles> [<topic-patterns>]\", found",
    "expected \"cert <name> <roles> [<topic-patterns>]\", found",
    "(separate roles and patterns with commas)",
    "(roles are produce, consume, admin)",
    "(1 to 200 characters of [A-Za-z0-9._-] and *)",
    "token has a character other than printable ASCII, '#' or ','",
    "certificate name has a character other than printable ASCII, '#' or ','",
    "no tokens and no cert lines (every call would be refused)",
};

void CheckRefusal(const Model& model, const absl::Status& status, bool built) {
  FUZZ_CHECK(status.code() == absl::StatusCode::kInvalidArgument, "%s",
             status.ToString().c_str());
  const std::string message(status.message());
  const std::string prefix =
      model.error_line == 0 ? "tokens: "
                            : absl::StrCat("tokens:", model.error_line, ": ");
  FUZZ_CHECK(absl::StartsWith(message, prefix), "expected line %d: %s",
             model.error_line, message.c_str());
  if (model.error_line == 0) {
    FUZZ_CHECK(message == std::string("tokens: ") + kFixedTexts[7], "%s",
               message.c_str());
  }
  FUZZ_CHECK(message.find('\n') == std::string::npos, "two lines: %s",
             message.c_str());
  for (const std::string& secret : model.secrets) {
    if (secret.size() < 16 || !absl::StrContains(message, secret)) continue;
    const auto contains = [&](absl::string_view text) {
      return absl::StrContains(text, secret);
    };
    const bool shown =
        std::any_of(model.showable.begin(), model.showable.end(), contains) ||
        std::any_of(std::begin(kFixedTexts), std::end(kFixedTexts), contains);
    FUZZ_CHECK(shown, "message shows a token: %s", message.c_str());
  }
  if (built) {
    FUZZ_CHECK(message.find('~') == std::string::npos,
               "message shows part of a token: %s", message.c_str());
  }
}

// The probe topics of a grant: fixed ones, and its first patterns filled
// in two ways.
std::vector<std::string> Probes(const ModelGrant& grant) {
  std::vector<std::string> probes = {"orders", "orders.eu", "payments", "a",
                                     "x.dlq"};
  for (size_t i = 0; i < grant.patterns.size() && i < 4; ++i) {
    for (const char* fill : {"", "q.q"}) {
      std::string topic;
      for (char c : grant.patterns[i]) {
        if (c == '*') {
          topic += fill;
        } else {
          topic += c;
        }
      }
      if (topic.size() > 64) topic.resize(64);
      if (!topic.empty()) probes.push_back(topic);
    }
  }
  return probes;
}

// `grant` allows exactly what `expected` does, and its refusals name
// `holder` ("token" or "client certificate").
void CheckGrant(const Grant& grant, const ModelGrant& expected,
                absl::string_view holder) {
  const std::vector<std::string> probes = Probes(expected);
  for (const std::pair<Role, unsigned>& role_bit :
       {std::pair(Role::kProduce, kProduce),
        std::pair(Role::kConsume, kConsume), std::pair(Role::kAdmin, kAdmin)}) {
    const Role role = role_bit.first;
    const unsigned bit = role_bit.second;
    const auto check = [&](const std::string& topic) {
      const absl::Status status = grant.Check(role, topic);
      FUZZ_CHECK(status.ok() == Allows(expected, bit, topic),
                 "role %d topic \"%s\": %s", static_cast<int>(role),
                 topic.c_str(), status.ToString().c_str());
      if (!status.ok()) {
        FUZZ_CHECK(status.code() == absl::StatusCode::kPermissionDenied &&
                       absl::StartsWith(status.message(), holder),
                   "%s", status.ToString().c_str());
      }
    };
    check("");
    for (const std::string& topic : probes) check(topic);
  }
}

absl::StatusOr<Grant> WithToken(const Authorizer& auth,
                                const std::string& token,
                                const std::vector<std::string>& names = {}) {
  const std::string header = "Bearer " + token;
  const absl::string_view value = header;
  return auth.AuthenticateCredentials(&value, names);
}

void CheckGrants(const Model& model, Authorizer& auth, FuzzedDataProvider& in) {
  const Authorizer::Counts counts{model.tokens.size(), model.certs.size()};
  FUZZ_CHECK(auth.counts() == counts, "counts");
  absl::StatusOr<Authorizer::Counts> reloaded = auth.Reload();
  FUZZ_CHECK(reloaded.ok() && *reloaded == counts, "Reload");

  std::set<std::string> tokens;
  for (const auto& [token, grant] : model.tokens) tokens.insert(token);
  for (size_t i = 0; i < model.tokens.size() && i < kMaxProbed; ++i) {
    const auto& [token, expected] = model.tokens[i];
    absl::StatusOr<Grant> grant = WithToken(auth, token);
    FUZZ_CHECK(grant.ok(), "token of line grant: %s",
               grant.status().ToString().c_str());
    CheckGrant(*grant, expected, "token");
    // Near misses are unknown.
    std::string changed = token;
    changed.back() = changed.back() == 'A' ? 'B' : 'A';
    for (const std::string& other : {token + "x", changed, token.substr(1)}) {
      if (tokens.count(other) > 0) continue;
      FUZZ_CHECK(WithToken(auth, other).status() ==
                     absl::UnauthenticatedError("unknown token"),
                 "a near miss of a token");
    }
    // A token decides whatever the certificate.
    if (!model.certs.empty()) {
      grant = WithToken(auth, token, {model.certs[0].first});
      FUZZ_CHECK(grant.ok(), "token with a certificate");
      CheckGrant(*grant, expected, "token");
    }
  }
  // Any other token, without blanks around it (which do not count).
  const std::string stranger = in.ConsumeRandomLengthString(64);
  if (tokens.count(stranger) == 0 &&
      std::none_of(stranger.begin(), stranger.end(),
                   [](char c) { return c <= ' ' || c == 0x7f; })) {
    const absl::Status status = WithToken(auth, stranger).status();
    FUZZ_CHECK(status.code() == absl::StatusCode::kUnauthenticated, "%s",
               status.ToString().c_str());
  }

  std::set<std::string> names;
  for (const auto& [name, grant] : model.certs) names.insert(name);
  for (size_t i = 0; i < model.certs.size() && i < kMaxProbed; ++i) {
    // Its own name; then with a later line's name before it and after it,
    // and with a name no line has: the first line in the file wins.
    std::vector<std::vector<std::string>> presented = {{model.certs[i].first}};
    if (i + 1 < model.certs.size()) {
      const std::string& later = model.certs[i + 1].first;
      presented.push_back({later, model.certs[i].first});
      presented.push_back({model.certs[i].first, later});
    }
    const std::string stranger = model.certs[i].first + "\x01";
    if (names.count(stranger) == 0) {
      presented.push_back({stranger, model.certs[i].first});
    }
    for (const std::vector<std::string>& certificate : presented) {
      absl::StatusOr<Grant> grant =
          auth.AuthenticateCredentials(nullptr, certificate);
      FUZZ_CHECK(grant.ok(), "certificate: %s",
                 grant.status().ToString().c_str());
      CheckGrant(*grant, model.certs[i].second, "client certificate");
    }
  }
  std::vector<std::string> unknown;
  while (unknown.size() < 6 && in.remaining_bytes() > 0) {
    std::string name = in.ConsumeRandomLengthString(24);
    if (names.count(name) == 0) unknown.push_back(std::move(name));
  }
  if (!unknown.empty()) {
    const absl::Status status =
        auth.AuthenticateCredentials(nullptr, unknown).status();
    FUZZ_CHECK(status.code() == absl::StatusCode::kUnauthenticated &&
                   absl::StartsWith(status.message(),
                                    "no cert line names the client "
                                    "certificate (\""),
               "%s", status.ToString().c_str());
  }
  FUZZ_CHECK(auth.AuthenticateCredentials(nullptr, {}).status() ==
                 absl::UnauthenticatedError(
                     "missing \"authorization: Bearer <token>\" metadata"),
             "neither token nor certificate");
}

// ---- Built files.

// A token: every fourth character is '~', which nothing else in a built
// file holds, so that any piece of one in a message shows.
std::string NewToken(FuzzedDataProvider& in) {
  static constexpr char kChars[] =
      "ABCabcxyz0189-_+/=!@$%^&*()[]{}<>?.:;\"'`|\\";
  const size_t size = in.ConsumeIntegralInRange<size_t>(16, 40);
  std::string token;
  for (size_t i = 0; i < size; ++i) {
    token +=
        i % 4 == 0
            ? '~'
            : kChars[in.ConsumeIntegralInRange<size_t>(0, sizeof(kChars) - 2)];
  }
  return token;
}

std::string Pick(FuzzedDataProvider& in,
                 std::initializer_list<const char*> choices) {
  return *(choices.begin() +
           in.ConsumeIntegralInRange<size_t>(0, choices.size() - 1));
}

std::string NewName(FuzzedDataProvider& in) {
  if (in.ConsumeBool()) {
    return Pick(in, {"worker-1", "spiffe://hourglass.test/billing", "10.0.0.7",
                     "billing.example", "a", "cert"});
  }
  std::string name = in.ConsumeRandomLengthString(20);
  name.erase(std::remove_if(name.begin(), name.end(),
                            [](char c) { return !Visible(c) || c == '~'; }),
             name.end());
  return name.empty() ? "n" : name;
}

std::string List(FuzzedDataProvider& in,
                 std::initializer_list<const char*> good,
                 std::initializer_list<const char*> bad) {
  std::string list;
  const int items = in.ConsumeIntegralInRange(1, 3);
  for (int i = 0; i < items; ++i) {
    if (i > 0) list += ',';
    list +=
        in.ConsumeIntegralInRange(0, 15) == 0 ? Pick(in, bad) : Pick(in, good);
  }
  return list;
}

std::string Roles(FuzzedDataProvider& in) {
  return List(in, {"produce", "consume", "admin"}, {"prodce", "", "root"});
}

std::string Patterns(FuzzedDataProvider& in) {
  return List(in, {"orders", "orders.*", "*", "*.dlq", "a*b", "billing", "a"},
              {"ord/ers", "", "a b"});
}

std::string Space(FuzzedDataProvider& in) {
  return Pick(in, {" ", "\t", "  ", " \r "});
}

std::string BuildFile(FuzzedDataProvider& in) {
  std::vector<std::string> tokens;
  std::vector<std::string> names;
  std::string text;
  const int lines = in.ConsumeIntegralInRange(1, 12);
  for (int i = 0; i < lines; ++i) {
    std::string line;
    switch (in.ConsumeIntegralInRange(0, 7)) {
      case 0:
      case 1:
        tokens.push_back(NewToken(in));
        line = tokens.back() + Space(in) + Roles(in);
        if (in.ConsumeBool()) line += Space(in) + Patterns(in);
        break;
      case 2:
        names.push_back(NewName(in));
        line = "cert" + Space(in) + names.back() + Space(in) + Roles(in);
        if (in.ConsumeBool()) line += Space(in) + Patterns(in);
        break;
      case 3:
        line = in.ConsumeBool() ? "" : "# a comment, " + NewToken(in);
        break;
      case 4:  // A token again.
        line = (tokens.empty() ? NewToken(in) : tokens.front()) + Space(in) +
               Roles(in);
        break;
      case 5:  // A name again.
        line = "cert" + Space(in) +
               (names.empty() ? NewName(in) : names.back()) + Space(in) +
               Roles(in);
        break;
      case 6: {  // A soup of fields; tokens only where a token or roles go.
        const int fields = in.ConsumeIntegralInRange(1, 5);
        bool cert = false;  // Whether the line starts with `cert`.
        for (int f = 0; f < fields; ++f) {
          std::string field;
          switch (in.ConsumeIntegralInRange(0, 5)) {
            case 0:
              field = f == 0 || (f == 1 && !cert) ? NewToken(in) : "orders";
              break;
            case 1:
              field = "cert";
              break;
            case 2:
              field = Roles(in);
              break;
            case 3:
              field = Patterns(in);
              break;
            case 4:
              field = NewName(in);
              break;
            case 5:
              field = Pick(in, {"short", "a#b", "x,y", "\x01\x02zzzzzzzzzzzzzz",
                                std::string(513, 'L').c_str()});
              break;
          }
          if (f == 0) cert = field == "cert";
          line += (f > 0 ? Space(in) : "") + field;
        }
        break;
      }
      case 7: {  // Bytes, without '~' or newlines.
        line = in.ConsumeRandomLengthString(40);
        line.erase(std::remove_if(line.begin(), line.end(),
                                  [](char c) { return c == '~' || c == '\n'; }),
                   line.end());
        break;
      }
    }
    if (in.ConsumeIntegralInRange(0, 7) == 0) line += " # note";
    text += line + (in.ConsumeIntegralInRange(0, 9) == 0 ? "\r\n" : "\n");
  }
  return text;
}

void TestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const bool built = in.ConsumeBool();
  std::string text;
  if (built) {
    text = BuildFile(in);
  } else {
    // The file's raw bytes: all but a tail kept for the checks.
    const size_t tail = in.ConsumeIntegralInRange<size_t>(0, 64);
    text = in.ConsumeBytesAsString(
        in.remaining_bytes() > tail ? in.remaining_bytes() - tail : 0);
  }
  const Model model = Read(text);
  absl::StatusOr<std::unique_ptr<Authorizer>> auth =
      Authorizer::FromText(text, "tokens");
  FUZZ_CHECK(auth.ok() == model.ok, "model says %s (line %d), parser says %s",
             model.ok ? "ok" : "bad", model.error_line,
             auth.status().ToString().c_str());
  if (!auth.ok()) {
    CheckRefusal(model, auth.status(), built);
    return;
  }
  CheckGrants(model, **auth, in);
}

}  // namespace
}  // namespace hourglass::api

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  hourglass::api::TestOneInput(data, size);
  return 0;
}
