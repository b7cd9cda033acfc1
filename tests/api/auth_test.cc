#include "api/auth.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

namespace hourglass::api {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kProducer[] = "producer-token-0123456789";
constexpr char kConsumer[] = "consumer-token-0123456789";
constexpr char kAdmin[] = "admin-token-0123456789abc";
constexpr char kEverything[] = "everything-token-01234567";

constexpr char kTokens[] = R"(# Hourglass tokens
producer-token-0123456789  produce          orders,orders.*

consumer-token-0123456789	consume          billing   # a tab, then a comment
admin-token-0123456789abc  admin
everything-token-01234567  produce,consume,admin *
)";

std::unique_ptr<Authorizer> Tokens(absl::string_view text = kTokens) {
  absl::StatusOr<std::unique_ptr<Authorizer>> authorizer =
      Authorizer::FromText(text, "tokens.txt");
  EXPECT_TRUE(authorizer.ok()) << authorizer.status();
  return authorizer.ok() ? *std::move(authorizer) : nullptr;
}

absl::StatusOr<Grant> Present(const Authorizer& authorizer,
                              const std::string& header) {
  const absl::string_view value = header;
  return authorizer.AuthenticateHeader(&value);
}

// The status of `token` asking for `role` on `topic`.
absl::Status Ask(const Authorizer& authorizer, const std::string& token,
                 Role role, absl::string_view topic) {
  absl::StatusOr<Grant> grant = Present(authorizer, "Bearer " + token);
  if (!grant.ok()) return grant.status();
  return grant->Check(role, topic);
}

absl::Status ParseError(absl::string_view text) {
  absl::StatusOr<std::unique_ptr<Authorizer>> authorizer =
      Authorizer::FromText(text, "tokens.txt");
  return authorizer.ok() ? absl::OkStatus() : authorizer.status();
}

// Writes a token file as it should be: readable by its owner only.
void WriteFile(const std::string& path, absl::string_view text) {
  std::ofstream(path, std::ios::trunc) << text;
  ASSERT_EQ(chmod(path.c_str(), 0600), 0);
}

// The status of a call with `header` (none if nullptr) and a client
// certificate with `names` asking for `role` on `topic`.
absl::Status AskWith(const Authorizer& authorizer, const char* header,
                     const std::vector<std::string>& names, Role role,
                     absl::string_view topic) {
  const absl::string_view value = header == nullptr ? "" : header;
  absl::StatusOr<Grant> grant = authorizer.AuthenticateCredentials(
      header == nullptr ? nullptr : &value, names);
  if (!grant.ok()) return grant.status();
  return grant->Check(role, topic);
}

TEST(TopicMatchesTest, GlobsWithStar) {
  EXPECT_TRUE(TopicMatches("orders", "orders"));
  EXPECT_FALSE(TopicMatches("orders", "orders2"));
  EXPECT_FALSE(TopicMatches("orders", "order"));
  EXPECT_TRUE(TopicMatches("orders.*", "orders.eu"));
  EXPECT_TRUE(TopicMatches("orders.*", "orders.eu.dlq"));
  EXPECT_FALSE(TopicMatches("orders.*", "orders"));
  EXPECT_FALSE(TopicMatches("orders.*", "ordersX"));
  EXPECT_TRUE(TopicMatches("*", "anything"));
  EXPECT_TRUE(TopicMatches("*.dlq", "orders.dlq"));
  EXPECT_FALSE(TopicMatches("*.dlq", "orders.dlq2"));
  EXPECT_TRUE(TopicMatches("a*b*c", "a-x-b-y-b-c"));
  EXPECT_FALSE(TopicMatches("a*b*c", "a-x-c-b"));
  EXPECT_TRUE(TopicMatches("a**", "a"));
}

TEST(AuthorizerTest, EveryRoleOnItsTopics) {
  std::unique_ptr<Authorizer> auth = Tokens();
  ASSERT_NE(auth, nullptr);
  EXPECT_TRUE(auth->enabled());
  EXPECT_EQ(auth->origin(), "tokens.txt");

  EXPECT_TRUE(Ask(*auth, kProducer, Role::kProduce, "orders").ok());
  EXPECT_TRUE(Ask(*auth, kProducer, Role::kProduce, "orders.eu").ok());
  EXPECT_EQ(Ask(*auth, kProducer, Role::kProduce, "payments"),
            absl::PermissionDeniedError(
                "token's produce role does not cover topic \"payments\""));
  EXPECT_EQ(Ask(*auth, kProducer, Role::kConsume, "orders"),
            absl::PermissionDeniedError(
                "token lacks role consume for topic \"orders\""));
  EXPECT_EQ(Ask(*auth, kProducer, Role::kAdmin, ""),
            absl::PermissionDeniedError("token lacks role admin"));

  EXPECT_TRUE(Ask(*auth, kConsumer, Role::kConsume, "billing").ok());
  EXPECT_EQ(Ask(*auth, kConsumer, Role::kProduce, "billing"),
            absl::PermissionDeniedError(
                "token lacks role produce for topic \"billing\""));

  // No pattern: every topic, and calls about all topics.
  EXPECT_TRUE(Ask(*auth, kAdmin, Role::kAdmin, "").ok());
  EXPECT_TRUE(Ask(*auth, kAdmin, Role::kAdmin, "orders").ok());
  EXPECT_EQ(Ask(*auth, kAdmin, Role::kProduce, "orders"),
            absl::PermissionDeniedError(
                "token lacks role produce for topic \"orders\""));

  for (Role role : {Role::kProduce, Role::kConsume, Role::kAdmin}) {
    EXPECT_TRUE(Ask(*auth, kEverything, role, "").ok()) << RoleName(role);
    EXPECT_TRUE(Ask(*auth, kEverything, role, "x.y").ok()) << RoleName(role);
  }
}

TEST(AuthorizerTest, ATokenLimitedToTopicsCannotMakeCallsAboutAllTopics) {
  std::unique_ptr<Authorizer> auth =
      Tokens("abcdefghijklmnop admin orders,orders.*\n");
  ASSERT_NE(auth, nullptr);
  EXPECT_TRUE(Ask(*auth, "abcdefghijklmnop", Role::kAdmin, "orders").ok());
  EXPECT_EQ(Ask(*auth, "abcdefghijklmnop", Role::kAdmin, ""),
            absl::PermissionDeniedError(
                "token's admin role covers only topics orders,orders.*; this "
                "call is about every topic"));
}

TEST(AuthorizerTest, MissingOrUnknownTokensAreUnauthenticated) {
  std::unique_ptr<Authorizer> auth = Tokens();
  ASSERT_NE(auth, nullptr);
  const absl::Status missing = absl::UnauthenticatedError(
      "missing \"authorization: Bearer <token>\" metadata");
  const absl::Status unknown = absl::UnauthenticatedError("unknown token");

  EXPECT_EQ(auth->AuthenticateHeader(nullptr).status(), missing);
  EXPECT_EQ(Present(*auth, "").status(), missing);
  EXPECT_EQ(Present(*auth, "Bearer").status(), missing);
  EXPECT_EQ(Present(*auth, "Bearer    ").status(), missing);
  EXPECT_EQ(Present(*auth, absl::StrCat("Basic ", kProducer)).status(),
            missing);
  EXPECT_EQ(Present(*auth, kProducer).status(), missing);

  const std::string producer = kProducer;
  EXPECT_EQ(Present(*auth, "Bearer nope-nope-nope-nope").status(), unknown);
  // A prefix, an extension and a one-byte change of a real token.
  EXPECT_EQ(Present(*auth, "Bearer " + producer.substr(0, 20)).status(),
            unknown);
  EXPECT_EQ(Present(*auth, "Bearer " + producer + "0").status(), unknown);
  std::string changed = producer;
  changed.back() = 'X';
  EXPECT_EQ(Present(*auth, "Bearer " + changed).status(), unknown);
  // Longer than any token may be.
  EXPECT_EQ(
      Present(*auth, "Bearer " + producer + std::string(600, 'x')).status(),
      unknown);

  // The scheme is case-insensitive; spaces around the token do not count.
  EXPECT_TRUE(Present(*auth, "bearer " + producer).ok());
  EXPECT_TRUE(Present(*auth, "BEARER   " + producer + " ").ok());
}

TEST(AuthorizerTest, DisabledGrantsEverything) {
  const Authorizer& auth = Authorizer::Disabled();
  EXPECT_FALSE(auth.enabled());
  absl::StatusOr<Grant> grant = auth.AuthenticateHeader(nullptr);
  ASSERT_TRUE(grant.ok()) << grant.status();
  for (Role role : {Role::kProduce, Role::kConsume, Role::kAdmin}) {
    EXPECT_TRUE(grant->Check(role, "").ok());
    EXPECT_TRUE(grant->Check(role, "orders").ok());
  }
  EXPECT_TRUE(Grant::Everything().Check(Role::kAdmin, "").ok());
}

TEST(AuthorizerTest, BadFilesNameTheLineButNeverTheToken) {
  struct Case {
    std::string text;
    std::string message;
  };
  const Case cases[] = {
      {"# nothing\n\n",
       "tokens.txt: no tokens and no cert lines (every call would be "
       "refused)"},
      {"short produce\n",
       "tokens.txt:1: token is 5 bytes; it must be 16 to 512"},
      {"\n" + std::string(513, 'a') + " produce\n",
       "tokens.txt:2: token is 513 bytes; it must be 16 to 512"},
      {"abcdefghijklmnop\n", "tokens.txt:1: token has no roles"},
      {"abcdefghijklmnop prodce\n",
       "tokens.txt:1: unknown role \"prodce\" (roles are produce, consume, "
       "admin)"},
      {"abcdefghijklmnop produce,\n",
       "tokens.txt:1: unknown role \"\" (roles are produce, consume, admin)"},
      {"abcdefghijklmnop produce orders consume\n",
       "tokens.txt:1: expected \"<token> <roles> [<topic-patterns>]\", found 4 "
       "fields (separate roles and patterns with commas)"},
      {"abcdefghijklmnop produce ord/ers\n",
       "tokens.txt:1: bad topic pattern \"ord/ers\" (1 to 200 characters of "
       "[A-Za-z0-9._-] and *)"},
      {"abcdefghijklmnop produce a,,b\n",
       "tokens.txt:1: bad topic pattern \"\" (1 to 200 characters of "
       "[A-Za-z0-9._-] and *)"},
      {"abcdefghijklmnop produce\n# again:\nabcdefghijklmnop consume\n",
       "tokens.txt:3: the same token as line 1"},
      {"abcdefghij\x01klmnop produce\n",
       "tokens.txt:1: token has a character other than printable ASCII, '#' "
       "or ','"},
      // The keyword is lower case; anything else is a (short) token.
      {"Cert worker-1 produce\n",
       "tokens.txt:1: token is 4 bytes; it must be 16 to 512"},
  };
  for (const Case& c : cases) {
    const absl::Status status = ParseError(c.text);
    EXPECT_EQ(status, absl::InvalidArgumentError(c.message)) << c.text;
    EXPECT_THAT(status.message(), Not(HasSubstr("abcdefghij"))) << c.text;
  }
}

TEST(AuthorizerTest, ATokenWhereRolesGoIsNotShown) {
  // Two tokens on one line, as when a newline is lost; and one after the
  // roles of a cert line.
  for (const char* text :
       {"abcdefghijklmnop qrstuvwxyz0123456789\n",
        "abcdefghijklmnop produce,qrstuvwxyz0123456789 orders\n",
        "cert worker-1 qrstuvwxyz0123456789\n"}) {
    const absl::Status status = ParseError(text);
    EXPECT_EQ(status, absl::InvalidArgumentError(
                          "tokens.txt:1: unknown role of 20 bytes, not shown: "
                          "it may be a token (roles are produce, consume, "
                          "admin)"))
        << text;
    EXPECT_THAT(status.message(), Not(HasSubstr("qrstuvwxyz"))) << text;
  }
  // 15 bytes cannot be a token: shown.
  EXPECT_EQ(ParseError("abcdefghijklmnop produce-and-all\n"),
            absl::InvalidArgumentError(
                "tokens.txt:1: unknown role \"produce-and-all\" (roles are "
                "produce, consume, admin)"));
}

TEST(AuthorizerTest, BadCertLinesNameTheLine) {
  struct Case {
    std::string text;
    std::string message;
  };
  const Case cases[] = {
      {"cert\n", "tokens.txt:1: cert line has no certificate name"},
      {"cert   # worker-1 produce\n",
       "tokens.txt:1: cert line has no certificate name"},
      {"abcdefghijklmnop produce\ncert worker-1\n",
       "tokens.txt:2: cert line for \"worker-1\" has no roles"},
      {"cert worker-1 produce orders consume\n",
       "tokens.txt:1: expected \"cert <name> <roles> [<topic-patterns>]\", "
       "found 5 fields (separate roles and patterns with commas)"},
      {"cert " + std::string(513, 'w') + " produce\n",
       "tokens.txt:1: certificate name is 513 bytes; it must be 1 to 512"},
      {"cert wor\x01ker produce\n",
       "tokens.txt:1: certificate name has a character other than printable "
       "ASCII, '#' or ','"},
      {"cert worker-1,worker-2 produce\n",
       "tokens.txt:1: certificate name has a character other than printable "
       "ASCII, '#' or ','"},
      {"cert worker-1 prodce\n",
       "tokens.txt:1: unknown role \"prodce\" (roles are produce, consume, "
       "admin)"},
      {"cert worker-1 produce ord/ers\n",
       "tokens.txt:1: bad topic pattern \"ord/ers\" (1 to 200 characters of "
       "[A-Za-z0-9._-] and *)"},
      {"cert worker-1 produce\n\ncert worker-1 consume orders\n",
       "tokens.txt:3: the same certificate name \"worker-1\" as line 1"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(ParseError(c.text), absl::InvalidArgumentError(c.message))
        << c.text;
  }
  // A certificate name 512 bytes long is fine.
  EXPECT_TRUE(ParseError("cert " + std::string(512, 'w') + " produce\n").ok());
}

constexpr char kCertificates[] = R"(# Tokens and certificates.
cert worker-1                      produce  orders,orders.*
cert spiffe://example.org/billing  consume  billing
cert 10.0.0.7                      admin    orders
certificate-token-0123             consume  # a token, not a cert line
)";

TEST(AuthorizerTest, CertLinesGrantToCertificatesThatTheyName) {
  std::unique_ptr<Authorizer> auth = Tokens(kCertificates);
  ASSERT_NE(auth, nullptr);
  EXPECT_EQ(auth->counts(), (Authorizer::Counts{1, 3}));

  // Named by the common name (listed first) or by any other name.
  const std::vector<std::string> worker = {"worker-1", "worker-1.example.org"};
  EXPECT_TRUE(AskWith(*auth, nullptr, worker, Role::kProduce, "orders").ok());
  EXPECT_TRUE(
      AskWith(*auth, nullptr, worker, Role::kProduce, "orders.eu").ok());
  EXPECT_EQ(AskWith(*auth, nullptr, worker, Role::kProduce, "payments"),
            absl::PermissionDeniedError("client certificate's produce role "
                                        "does not cover topic \"payments\""));
  EXPECT_EQ(AskWith(*auth, nullptr, worker, Role::kConsume, "orders"),
            absl::PermissionDeniedError(
                "client certificate lacks role consume for topic \"orders\""));
  EXPECT_EQ(AskWith(*auth, nullptr, worker, Role::kAdmin, ""),
            absl::PermissionDeniedError("client certificate lacks role admin"));

  const std::vector<std::string> billing = {"billing-7",
                                            "spiffe://example.org/billing"};
  EXPECT_TRUE(AskWith(*auth, nullptr, billing, Role::kConsume, "billing").ok());
  EXPECT_EQ(AskWith(*auth, nullptr, billing, Role::kProduce, "billing"),
            absl::PermissionDeniedError("client certificate lacks role "
                                        "produce for topic \"billing\""));

  const std::vector<std::string> ip = {"10.0.0.7"};
  EXPECT_TRUE(AskWith(*auth, nullptr, ip, Role::kAdmin, "orders").ok());
  EXPECT_EQ(AskWith(*auth, nullptr, ip, Role::kAdmin, ""),
            absl::PermissionDeniedError(
                "client certificate's admin role covers only topics orders; "
                "this call is about every topic"));

  // Names of two lines: the first line of the file wins, whatever the
  // order of the names.
  const std::vector<std::string> both = {"spiffe://example.org/billing",
                                         "worker-1"};
  EXPECT_TRUE(AskWith(*auth, nullptr, both, Role::kProduce, "orders").ok());
  EXPECT_EQ(AskWith(*auth, nullptr, both, Role::kConsume, "billing"),
            absl::PermissionDeniedError("client certificate lacks role "
                                        "consume for topic \"billing\""));
}

TEST(AuthorizerTest, ACertificateWithoutACertLineGetsNothing) {
  std::unique_ptr<Authorizer> auth = Tokens(kCertificates);
  ASSERT_NE(auth, nullptr);
  // Names are compared byte for byte.
  EXPECT_EQ(AskWith(*auth, nullptr, {"Worker-1", "worker-1."}, Role::kProduce,
                    "orders"),
            absl::UnauthenticatedError(
                "no cert line names the client certificate (\"Worker-1\", "
                "\"worker-1.\") and the call has no \"authorization: Bearer "
                "<token>\" metadata"));
  // Each name once, escaped, four at most.
  EXPECT_EQ(
      AskWith(*auth, nullptr, {"a", "a", "b\nc", "d", "e", "f", "g"},
              Role::kProduce, "orders"),
      absl::UnauthenticatedError(
          "no cert line names the client certificate (\"a\", \"b\\nc\", "
          "\"d\", \"e\", and 2 more) and the call has no \"authorization: "
          "Bearer <token>\" metadata"));
  // Neither a token nor a certificate.
  EXPECT_EQ(AskWith(*auth, nullptr, {}, Role::kProduce, "orders"),
            absl::UnauthenticatedError(
                "missing \"authorization: Bearer <token>\" metadata"));
}

TEST(AuthorizerTest, ATokenDecidesWhateverTheCertificate) {
  std::unique_ptr<Authorizer> auth = Tokens(kCertificates);
  ASSERT_NE(auth, nullptr);
  const std::vector<std::string> worker = {"worker-1"};
  // The token's grant, not the certificate's.
  EXPECT_TRUE(AskWith(*auth, "Bearer certificate-token-0123", worker,
                      Role::kConsume, "payments")
                  .ok());
  EXPECT_EQ(AskWith(*auth, "Bearer certificate-token-0123", worker,
                    Role::kProduce, "orders"),
            absl::PermissionDeniedError(
                "token lacks role produce for topic \"orders\""));
  // A bad or unknown token does not fall back on the certificate.
  EXPECT_EQ(AskWith(*auth, "Bearer nope-nope-nope-nope", worker, Role::kProduce,
                    "orders"),
            absl::UnauthenticatedError("unknown token"));
  EXPECT_EQ(
      AskWith(*auth, "Basic d29ya2VyLTE6", worker, Role::kProduce, "orders"),
      absl::UnauthenticatedError(
          "missing \"authorization: Bearer <token>\" metadata"));
  // AuthenticateHeader has no certificate.
  EXPECT_EQ(auth->AuthenticateHeader(nullptr).status(),
            absl::UnauthenticatedError(
                "missing \"authorization: Bearer <token>\" metadata"));
}

TEST(AuthorizerTest, AFileOfCertLinesAloneIsValid) {
  std::unique_ptr<Authorizer> auth = Tokens("cert worker-1 produce\n");
  ASSERT_NE(auth, nullptr);
  EXPECT_EQ(auth->counts(), (Authorizer::Counts{0, 1}));
  EXPECT_TRUE(
      AskWith(*auth, nullptr, {"worker-1"}, Role::kProduce, "anything").ok());
  EXPECT_EQ(AskWith(*auth, "Bearer abcdefghijklmnop", {"worker-1"},
                    Role::kProduce, "anything"),
            absl::UnauthenticatedError("unknown token"));
}

TEST(CheckTokenFileModeTest, OnlyTheOwnerOrRootsGroupMayUseTheFile) {
  constexpr uid_t kRoot = 0;
  constexpr uid_t kUser = 1000;
  struct Case {
    mode_t mode;
    uid_t owner;
    uid_t euid;
    std::string message;  // Empty: OK.
  };
  const Case cases[] = {
      {S_IFREG | 0600, kUser, kUser, ""},
      {S_IFREG | 0400, kUser, kUser, ""},
      {S_IFREG | 0700, kUser, kUser, ""},
      {S_IFREG | 0644, kUser, kUser,
       "t.txt is readable by group and others (mode 0644); chmod 600 it"},
      {S_IFREG | 0640, kUser, kUser,
       "t.txt is readable by group (mode 0640); chmod 600 it"},
      {S_IFREG | 0604, kUser, kUser,
       "t.txt is readable by others (mode 0604); chmod 600 it"},
      {S_IFREG | 0620, kUser, kUser,
       "t.txt is writable by group (mode 0620); chmod 600 it"},
      {S_IFREG | 0610, kUser, kUser,
       "t.txt is executable by group (mode 0610); chmod 600 it"},
      {S_IFREG | 0666, kUser, kUser,
       "t.txt is readable and writable by group and others (mode 0666); "
       "chmod 600 it"},
      {S_IFREG | 0777, kUser, kUser,
       "t.txt is readable, writable and executable by group and others "
       "(mode 0777); chmod 600 it"},
      // Root may share a file it owns with its group, read-only.
      {S_IFREG | 0640, kRoot, kUser, ""},
      {S_IFREG | 0440, kRoot, kUser, ""},
      {S_IFREG | 0644, kRoot, kUser,
       "t.txt is readable by others (mode 0644); chmod 640 it"},
      {S_IFREG | 0660, kRoot, kUser,
       "t.txt is writable by group (mode 0660); chmod 640 it"},
      // Not when hourglassd itself runs as root.
      {S_IFREG | 0640, kRoot, kRoot,
       "t.txt is readable by group (mode 0640); chmod 600 it"},
      // Nor for a file of another user.
      {S_IFREG | 0640, kUser + 1, kUser,
       "t.txt is readable by group (mode 0640); chmod 600 it"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(CheckTokenFileMode("t.txt", c.mode, c.owner, c.euid),
              c.message.empty() ? absl::OkStatus()
                                : absl::FailedPreconditionError(c.message))
        << std::oct << c.mode << " owner " << std::dec << c.owner << " euid "
        << c.euid;
  }
}

TEST(AuthorizerTest, FromFileRefusesAFileOthersMayRead) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/tokens.txt";
  WriteFile(path, "first-token-0123456789 produce\n");
  ASSERT_EQ(chmod(path.c_str(), 0644), 0);
  // Whoever runs the test owns the file, so the strict rule applies.
  EXPECT_EQ(Authorizer::FromFile(path).status(),
            absl::FailedPreconditionError(
                absl::StrCat(path,
                             " is readable by group and others (mode "
                             "0644); chmod 600 it")));
  ASSERT_EQ(chmod(path.c_str(), 0600), 0);
  EXPECT_TRUE(Authorizer::FromFile(path).ok());
}

TEST(AuthorizerTest, FromFileRefusesADirectory) {
  testing::TempDir dir;
  EXPECT_EQ(Authorizer::FromFile(dir.path()).status(),
            absl::FailedPreconditionError(absl::StrCat(
                "token file \"", dir.path(), "\" is not a regular file")));
}

TEST(AuthorizerTest, FromFileNamesAMissingFile) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/none.txt";
  absl::StatusOr<std::unique_ptr<Authorizer>> auth = Authorizer::FromFile(path);
  EXPECT_EQ(auth.status(),
            absl::NotFoundError(absl::StrCat("cannot read token file \"", path,
                                             "\": No such file or directory")));
}

TEST(AuthorizerTest, ReloadSwapsTheTokensAndKeepsThemOnABadFile) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/tokens.txt";
  WriteFile(path, "first-token-0123456789 produce\n");
  absl::StatusOr<std::unique_ptr<Authorizer>> loaded =
      Authorizer::FromFile(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  Authorizer& auth = **loaded;
  EXPECT_EQ(auth.origin(), path);
  absl::StatusOr<Grant> before = Present(auth, "Bearer first-token-0123456789");
  ASSERT_TRUE(before.ok());

  WriteFile(path,
            "second-token-0123456789 consume\nthird-token-0123456789 admin\n");
  EXPECT_EQ(auth.Reload(),
            absl::StatusOr<Authorizer::Counts>(Authorizer::Counts{2, 0}));
  EXPECT_EQ(Present(auth, "Bearer first-token-0123456789").status(),
            absl::UnauthenticatedError("unknown token"));
  EXPECT_TRUE(Present(auth, "Bearer second-token-0123456789").ok());
  // A grant taken before the reload keeps what it had.
  EXPECT_TRUE(before->Check(Role::kProduce, "t").ok());

  WriteFile(path, "second-token-0123456789 consume,reader\n");
  EXPECT_EQ(auth.Reload().status(),
            absl::InvalidArgumentError(absl::StrCat(
                path,
                ":1: unknown role \"reader\" (roles are produce, consume, "
                "admin)")));
  EXPECT_TRUE(Present(auth, "Bearer third-token-0123456789").ok());

  // A file others may read is refused, and changes nothing.
  WriteFile(path, "fourth-token-0123456789 consume\n");
  ASSERT_EQ(chmod(path.c_str(), 0640), 0);
  EXPECT_EQ(auth.Reload().status(),
            absl::FailedPreconditionError(absl::StrCat(
                path, " is readable by group (mode 0640); chmod 600 it")));
  EXPECT_TRUE(Present(auth, "Bearer third-token-0123456789").ok());
  EXPECT_EQ(Present(auth, "Bearer fourth-token-0123456789").status(),
            absl::UnauthenticatedError("unknown token"));

  std::remove(path.c_str());
  EXPECT_EQ(auth.Reload().status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(Present(auth, "Bearer second-token-0123456789").ok());
}

}  // namespace
}  // namespace hourglass::api
