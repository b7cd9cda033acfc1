#include "api/auth.h"

#include <fnmatch.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "api/validation.h"
#include "grpc/grpc_security_constants.h"
#include "grpcpp/security/auth_context.h"
#include "grpcpp/server_context.h"

namespace hourglass::api {
namespace {

constexpr size_t kMinTokenBytes = 16;
constexpr size_t kMaxTokenBytes = kMaxSecretBytes;
constexpr size_t kMaxCertificateNameBytes = 512;
// The first field of a line that grants to a client certificate; shorter
// than any token.
constexpr absl::string_view kCertKeyword = "cert";
static_assert(kCertKeyword.size() < kMinTokenBytes);
// How many of a certificate's names an error message lists.
constexpr size_t kNamesInErrors = 4;
constexpr unsigned kAllRoles = (1u << static_cast<int>(Role::kProduce)) |
                               (1u << static_cast<int>(Role::kConsume)) |
                               (1u << static_cast<int>(Role::kAdmin));

unsigned Bit(Role role) { return 1u << static_cast<int>(role); }

// Also the characters of a certificate name.
bool ValidTokenChar(char c) {
  return c > ' ' && c <= '~' && c != '#' && c != ',';
}

// Whether `pattern` is a glob over topic-name characters and '*'.
bool ValidPattern(absl::string_view pattern) {
  if (pattern.empty() || pattern.size() > kMaxNameBytes) return false;
  for (char c : pattern) {
    if (c != '*' && c != '.' && c != '_' && c != '-' &&
        !absl::ascii_isalnum(static_cast<unsigned char>(c))) {
      return false;
    }
  }
  return true;
}

}  // namespace

absl::string_view RoleName(Role role) {
  switch (role) {
    case Role::kProduce:
      return "produce";
    case Role::kConsume:
      return "consume";
    case Role::kAdmin:
      return "admin";
  }
  return "unknown";
}

bool TopicMatches(absl::string_view pattern, absl::string_view topic) {
  // fnmatch(3) without flags: '*' matches any run of characters, '.' and
  // '/' included. Its other special characters ('?', '[', '\\') are
  // escaped, so that they match themselves as documented (token files
  // allow none of them in patterns). It reads C strings, hence no NUL.
  if (pattern.find('\0') != absl::string_view::npos ||
      topic.find('\0') != absl::string_view::npos) {
    return false;
  }
  std::string glob;
  glob.reserve(pattern.size());
  for (const char c : pattern) {
    if (c == '?' || c == '[' || c == '\\') glob += '\\';
    glob += c;
  }
  return fnmatch(glob.c_str(), std::string(topic).c_str(), 0) == 0;
}

Grant Grant::Everything() { return Grant(kAllRoles, nullptr, Holder::kToken); }

absl::string_view Grant::holder() const {
  return holder_ == Holder::kToken ? "token" : "client certificate";
}

absl::Status Grant::Check(Role role, absl::string_view topic) const {
  const absl::string_view holder = this->holder();
  if ((roles_ & Bit(role)) == 0) {
    if (topic.empty()) {
      return absl::PermissionDeniedError(
          absl::StrCat(holder, " lacks role ", RoleName(role)));
    }
    return absl::PermissionDeniedError(absl::StrCat(
        holder, " lacks role ", RoleName(role), " for topic \"", topic, "\""));
  }
  if (topics_ == nullptr) return absl::OkStatus();
  if (topic.empty()) {
    return absl::PermissionDeniedError(absl::StrCat(
        holder, "'s ", RoleName(role), " role covers only topics ",
        absl::StrJoin(*topics_, ","), "; this call is about every topic"));
  }
  for (const std::string& pattern : *topics_) {
    if (TopicMatches(pattern, topic)) return absl::OkStatus();
  }
  return absl::PermissionDeniedError(
      absl::StrCat(holder, "'s ", RoleName(role),
                   " role does not cover topic \"", topic, "\""));
}

struct Authorizer::Token {
  PaddedSecret padded;
  unsigned roles;
  std::shared_ptr<const std::vector<std::string>> topics;
};

struct Authorizer::Certificate {
  unsigned roles;
  std::shared_ptr<const std::vector<std::string>> topics;
  int line;  // In the file, to name duplicates.
};

struct Authorizer::TokenSet {
  std::vector<Token> tokens;
  // In file order: the first that names a certificate grants to it.
  std::vector<Certificate> certificates;
  // Index in `certificates` of each name.
  std::map<std::string, size_t, std::less<>> certificate_index;
};

namespace {

// The roles of a comma-separated list, or INVALID_ARGUMENT saying why not
// (without the file and line).
absl::StatusOr<unsigned> ParseRoles(absl::string_view field) {
  unsigned roles = 0;
  for (absl::string_view role : absl::StrSplit(field, ',')) {
    if (role == "produce") {
      roles |= Bit(Role::kProduce);
    } else if (role == "consume") {
      roles |= Bit(Role::kConsume);
    } else if (role == "admin") {
      roles |= Bit(Role::kAdmin);
    } else if (role.size() >= kMinTokenBytes) {
      // Two tokens on one line (a lost newline) put one where the roles
      // go: never echo what could be a token.
      return absl::InvalidArgumentError(
          absl::StrCat("unknown role of ", role.size(),
                       " bytes, not shown: it may be a token (roles are "
                       "produce, consume, admin)"));
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown role \"", role, "\" (roles are produce, consume, admin)"));
    }
  }
  return roles;
}

// The topic patterns of a comma-separated list: null if one is `*` (every
// topic), or INVALID_ARGUMENT saying why not (without the file and line).
absl::StatusOr<std::shared_ptr<const std::vector<std::string>>> ParsePatterns(
    absl::string_view field) {
  auto patterns = std::make_shared<std::vector<std::string>>();
  bool every_topic = false;
  for (absl::string_view pattern : absl::StrSplit(field, ',')) {
    if (!ValidPattern(pattern)) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad topic pattern \"", pattern,
                       "\" (1 to 200 characters of [A-Za-z0-9._-] and *)"));
    }
    if (pattern == "*") every_topic = true;
    patterns->emplace_back(pattern);
  }
  if (every_topic) return nullptr;
  return patterns;
}

absl::Status MissingBearerToken() {
  return absl::UnauthenticatedError(
      "missing \"authorization: Bearer <token>\" metadata");
}

}  // namespace

Authorizer::Authorizer(bool enabled, std::string origin, bool from_file,
                       std::shared_ptr<const TokenSet> tokens)
    : enabled_(enabled),
      origin_(std::move(origin)),
      from_file_(from_file),
      tokens_(std::move(tokens)) {}

const Authorizer& Authorizer::Disabled() {
  static const Authorizer* const kDisabled =
      new Authorizer(false, "", false, std::make_shared<TokenSet>());
  return *kDisabled;
}

absl::StatusOr<std::shared_ptr<const Authorizer::TokenSet>> Authorizer::Parse(
    absl::string_view text, absl::string_view origin) {
  auto set = std::make_shared<TokenSet>();
  // Line of each token, to name duplicates; keyed by the token itself, so
  // never printed.
  std::map<std::string, int, std::less<>> token_lines;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    const auto fail = [&](absl::string_view why) {
      return absl::InvalidArgumentError(
          absl::StrCat(origin, ":", line_number, ": ", why));
    };
    if (const size_t hash = line.find('#'); hash != absl::string_view::npos) {
      line = line.substr(0, hash);
    }
    const std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
    if (fields.empty()) continue;
    const bool certificate = fields[0] == kCertKeyword;
    // Where the roles are: after the token, or after `cert <name>`.
    const size_t roles_field = certificate ? 2 : 1;
    if (fields.size() > roles_field + 2) {
      return fail(
          absl::StrCat("expected \"", certificate ? "cert <name>" : "<token>",
                       " <roles> [<topic-patterns>]\", found ", fields.size(),
                       " fields (separate roles and patterns with commas)"));
    }
    if (certificate) {
      if (fields.size() < 2) return fail("cert line has no certificate name");
      const absl::string_view name = fields[1];
      if (name.size() > kMaxCertificateNameBytes) {
        return fail(absl::StrCat("certificate name is ", name.size(),
                                 " bytes; it must be 1 to ",
                                 kMaxCertificateNameBytes));
      }
      for (char c : name) {
        if (!ValidTokenChar(c)) {
          return fail(
              "certificate name has a character other than printable ASCII, "
              "'#' or ','");
        }
      }
      if (fields.size() < 3) {
        return fail(absl::StrCat("cert line for \"", name, "\" has no roles"));
      }
    } else {
      const absl::string_view token = fields[0];
      if (token.size() < kMinTokenBytes || token.size() > kMaxTokenBytes) {
        return fail(absl::StrCat("token is ", token.size(),
                                 " bytes; it must be ", kMinTokenBytes, " to ",
                                 kMaxTokenBytes));
      }
      for (char c : token) {
        if (!ValidTokenChar(c)) {
          return fail(
              "token has a character other than printable ASCII, '#' or ','");
        }
      }
      if (fields.size() < 2) return fail("token has no roles");
    }
    absl::StatusOr<unsigned> roles = ParseRoles(fields[roles_field]);
    if (!roles.ok()) return fail(roles.status().message());
    std::shared_ptr<const std::vector<std::string>> topics;
    if (fields.size() > roles_field + 1) {
      absl::StatusOr<std::shared_ptr<const std::vector<std::string>>> parsed =
          ParsePatterns(fields[roles_field + 1]);
      if (!parsed.ok()) return fail(parsed.status().message());
      topics = *std::move(parsed);
    }
    if (certificate) {
      // Names are not secret: errors may print them.
      const absl::string_view name = fields[1];
      if (auto [at, inserted] = set->certificate_index.emplace(
              std::string(name), set->certificates.size());
          !inserted) {
        return fail(absl::StrCat("the same certificate name \"", name,
                                 "\" as line ",
                                 set->certificates[at->second].line));
      }
      set->certificates.push_back(
          Certificate{*roles, std::move(topics), line_number});
      continue;
    }
    const absl::string_view token = fields[0];
    if (auto [at, inserted] =
            token_lines.emplace(std::string(token), line_number);
        !inserted) {
      return fail(absl::StrCat("the same token as line ", at->second));
    }
    set->tokens.push_back(Token{PadSecret(token), *roles, std::move(topics)});
  }
  if (set->tokens.empty() && set->certificates.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        origin, ": no tokens and no cert lines (every call would be refused)"));
  }
  return set;
}

absl::StatusOr<std::shared_ptr<const Authorizer::TokenSet>>
Authorizer::ReadFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadSecretFile(path, "token file");
  if (!text.ok()) return text.status();
  return Parse(*text, path);
}

Authorizer::Counts Authorizer::CountsOf(const TokenSet& set) {
  return Counts{set.tokens.size(), set.certificates.size()};
}

absl::StatusOr<std::unique_ptr<Authorizer>> Authorizer::FromFile(
    std::string path) {
  absl::StatusOr<std::shared_ptr<const TokenSet>> tokens = ReadFile(path);
  if (!tokens.ok()) return tokens.status();
  return std::unique_ptr<Authorizer>(
      new Authorizer(true, std::move(path), true, *std::move(tokens)));
}

absl::StatusOr<std::unique_ptr<Authorizer>> Authorizer::FromText(
    absl::string_view text, std::string origin) {
  absl::StatusOr<std::shared_ptr<const TokenSet>> tokens = Parse(text, origin);
  if (!tokens.ok()) return tokens.status();
  return std::unique_ptr<Authorizer>(
      new Authorizer(true, std::move(origin), false, *std::move(tokens)));
}

Authorizer::Counts Authorizer::counts() const {
  absl::MutexLock lock(&mu_);
  return CountsOf(*tokens_);
}

absl::StatusOr<Authorizer::Counts> Authorizer::Reload() {
  if (!from_file_) return counts();
  absl::StatusOr<std::shared_ptr<const TokenSet>> tokens = ReadFile(origin_);
  if (!tokens.ok()) return tokens.status();
  const Counts counts = CountsOf(**tokens);
  {
    absl::MutexLock lock(&mu_);
    tokens_ = *std::move(tokens);
  }
  generation_.fetch_add(1, std::memory_order_release);
  return counts;
}

CallGrant::CallGrant(const Authorizer& authorizer,
                     const grpc::ServerContextBase& context, Grant grant)
    : authorizer_(authorizer),
      context_(context),
      grant_(std::move(grant)),
      generation_(authorizer.generation()) {}

absl::StatusOr<Grant> CallGrant::Current() const {
  // Read before authenticating: a reload meanwhile makes the next call
  // authenticate again.
  const uint64_t generation = authorizer_.generation();
  absl::MutexLock lock(&mu_);
  if (generation != generation_) {
    grant_ = authorizer_.Authenticate(context_);
    generation_ = generation;
  }
  return grant_;
}

absl::Status CallGrant::Check(Role role, absl::string_view topic) const {
  absl::StatusOr<Grant> grant = Current();
  if (!grant.ok()) return grant.status();
  return grant->Check(role, topic);
}

absl::StatusOr<Grant> Authorizer::AuthenticateToken(
    const TokenSet& set, absl::string_view credentials) {
  // Compare with every token, all the way, whatever matches; tokens are
  // unique, so at most one does.
  // Longer than any token can be: compares unequal through its size.
  const PaddedSecret presented = PadSecret(credentials);
  size_t match = 0;  // 1 + index of the match, or 0.
  for (size_t i = 0; i < set.tokens.size(); ++i) {
    match |= MaskIfEqual(SecretDifference(presented, set.tokens[i].padded)) &
             (i + 1);
  }
  if (match == 0) return absl::UnauthenticatedError("unknown token");
  const Token& token = set.tokens[match - 1];
  return Grant(token.roles, token.topics, Grant::Holder::kToken);
}

absl::StatusOr<Grant> Authorizer::AuthenticateCredentials(
    const absl::string_view* authorization,
    absl::Span<const std::string> certificate_names) const {
  if (!enabled_) return Grant::Everything();
  absl::string_view credentials;
  if (authorization != nullptr) {
    constexpr absl::string_view kScheme = "bearer ";
    if (authorization->size() <= kScheme.size() ||
        !absl::EqualsIgnoreCase(authorization->substr(0, kScheme.size()),
                                kScheme) ||
        (credentials =
             absl::StripAsciiWhitespace(authorization->substr(kScheme.size())))
            .empty()) {
      return MissingBearerToken();
    }
  } else if (certificate_names.empty()) {
    return MissingBearerToken();
  }

  std::shared_ptr<const TokenSet> set;
  {
    absl::MutexLock lock(&mu_);
    set = tokens_;
  }
  if (authorization != nullptr) return AuthenticateToken(*set, credentials);

  size_t first = set->certificates.size();
  for (const std::string& name : certificate_names) {
    if (const auto found = set->certificate_index.find(name);
        found != set->certificate_index.end()) {
      first = std::min(first, found->second);
    }
  }
  if (first < set->certificates.size()) {
    const Certificate& certificate = set->certificates[first];
    return Grant(certificate.roles, certificate.topics,
                 Grant::Holder::kCertificate);
  }
  // Each name once, in order, escaped: they come from the certificate.
  std::vector<std::string> names;
  size_t more = 0;
  for (const std::string& name : certificate_names) {
    const std::string quoted = absl::StrCat("\"", absl::CHexEscape(name), "\"");
    if (std::find(names.begin(), names.end(), quoted) != names.end()) continue;
    if (names.size() < kNamesInErrors) {
      names.push_back(quoted);
    } else {
      ++more;
    }
  }
  if (more > 0) names.push_back(absl::StrCat("and ", more, " more"));
  return absl::UnauthenticatedError(absl::StrCat(
      "no cert line names the client certificate (", absl::StrJoin(names, ", "),
      ") and the call has no \"authorization: Bearer <token>\" metadata"));
}

absl::StatusOr<Grant> Authorizer::AuthenticateHeader(
    const absl::string_view* authorization) const {
  return AuthenticateCredentials(authorization, {});
}

absl::StatusOr<Grant> Authorizer::Authenticate(
    const grpc::ServerContextBase& context) const {
  if (!enabled_) return Grant::Everything();
  const auto& metadata = context.client_metadata();
  if (const auto found = metadata.find("authorization");
      found != metadata.end()) {
    const absl::string_view value(found->second.data(), found->second.size());
    return AuthenticateCredentials(&value, {});
  }
  std::vector<std::string> names;
  const std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth != nullptr && auth->IsPeerAuthenticated()) {
    for (const char* property :
         {GRPC_X509_CN_PROPERTY_NAME, GRPC_X509_SAN_PROPERTY_NAME}) {
      for (const grpc::string_ref& value : auth->FindPropertyValues(property)) {
        names.emplace_back(value.data(), value.size());
      }
    }
  }
  return AuthenticateCredentials(nullptr, names);
}

absl::Status Authorizer::Authorize(const grpc::ServerContextBase& context,
                                   Role role, absl::string_view topic) const {
  absl::StatusOr<Grant> grant = Authenticate(context);
  if (!grant.ok()) return grant.status();
  return grant->Check(role, topic);
}

}  // namespace hourglass::api
