// The peer secret of a cluster without mutual TLS (api/peer_secrets.h):
// the file's format and mode, which calls it lets in, and rolling a new
// secret in.

#include "api/peer_secrets.h"

#include <sys/stat.h>

#include <fstream>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

namespace hourglass::api {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const std::string kOld(40, 'o');
const std::string kNew(64, 'n');

void WriteFile(const std::string& path, absl::string_view text,
               mode_t mode = 0600) {
  std::ofstream(path, std::ios::trunc) << text;
  ASSERT_EQ(chmod(path.c_str(), mode), 0);
}

absl::Status Call(const PeerSecrets& secrets, const std::string* secret,
                  bool has_authorization = false) {
  if (secret == nullptr) return secrets.CheckValues(nullptr, has_authorization);
  const absl::string_view value(*secret);
  return secrets.CheckValues(&value, has_authorization);
}

TEST(PeerSecretsTest, LetsInOnlyCallsCarryingASecretOfTheFile) {
  std::unique_ptr<PeerSecrets> secrets =
      PeerSecrets::FromText("# the cluster's\n" + kOld + "\n").value();
  EXPECT_EQ(secrets->current(), kOld);
  EXPECT_TRUE(Call(*secrets, &kOld).ok());

  const absl::Status none = Call(*secrets, nullptr);
  EXPECT_EQ(none.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(none.message(),
            "only the cluster's nodes may call this: the call carries no "
            "peer secret (hourglass-peer-secret)");
  const std::string wrong = kOld.substr(0, 39) + "x";
  const absl::Status other = Call(*secrets, &wrong);
  EXPECT_EQ(other.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(other.message(),
            "only the cluster's nodes may call this: its peer secret is not "
            "this cluster's");
  const std::string longer = kOld + "o";
  EXPECT_EQ(Call(*secrets, &longer).code(), absl::StatusCode::kUnauthenticated);
  const std::string empty;
  EXPECT_EQ(Call(*secrets, &empty).code(), absl::StatusCode::kUnauthenticated);
  // A client's token, whatever it grants, is no peer secret.
  const absl::Status client = Call(*secrets, nullptr, /*authorization=*/true);
  EXPECT_EQ(client.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(client.message(),
            "only the cluster's nodes may call this: a client's token does "
            "not open it");
}

TEST(PeerSecretsTest, ANewSecretIsRolledInWithoutRefusingAnyone) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/peers.txt";
  WriteFile(path, kOld + "\n");
  std::unique_ptr<PeerSecrets> secrets = PeerSecrets::FromFile(path).value();
  // Step 1, on every node: the new one accepted, the old one still sent.
  WriteFile(path, kOld + "\n" + kNew + "\n");
  EXPECT_EQ(secrets->Reload().value(), 2u);
  EXPECT_EQ(secrets->current(), kOld);
  EXPECT_TRUE(Call(*secrets, &kOld).ok());
  EXPECT_TRUE(Call(*secrets, &kNew).ok());
  // Step 2: the new one sent.
  WriteFile(path, kNew + "\n" + kOld + "\n");
  EXPECT_EQ(secrets->Reload().value(), 2u);
  EXPECT_EQ(secrets->current(), kNew);
  // Step 3: the old one gone.
  WriteFile(path, kNew + "\n");
  EXPECT_EQ(secrets->Reload().value(), 1u);
  EXPECT_TRUE(Call(*secrets, &kNew).ok());
  EXPECT_EQ(Call(*secrets, &kOld).code(), absl::StatusCode::kUnauthenticated);
  // A bad file changes nothing.
  WriteFile(path, "short\n");
  EXPECT_EQ(secrets->Reload().status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Call(*secrets, &kNew).ok());
}

TEST(PeerSecretsTest, BadFilesAreRefusedWithoutQuotingTheSecret) {
  const std::string spaced = std::string(20, 'a') + " " + std::string(20, 'b');
  for (const auto& [text, message] :
       {std::pair{std::string("# nothing\n\n"),
                  std::string("peers.txt holds no peer secret")},
        std::pair{std::string(31, 's'),
                  std::string("peers.txt:1: a peer secret is 32 to 512 "
                              "printable characters without spaces")},
        std::pair{"# ok\n" + spaced,
                  std::string("peers.txt:2: a peer secret is 32 to 512")},
        std::pair{
            kOld + "\n" + kNew + "\n" + kOld + "x\n",
            std::string("peers.txt holds 3 peer secrets; at most two")}}) {
    absl::StatusOr<std::unique_ptr<PeerSecrets>> secrets =
        PeerSecrets::FromText(text, "peers.txt");
    ASSERT_FALSE(secrets.ok()) << text;
    EXPECT_EQ(secrets.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(secrets.status().message(), HasSubstr(message));
    EXPECT_THAT(secrets.status().message(), Not(HasSubstr("sss")));
    EXPECT_THAT(secrets.status().message(), Not(HasSubstr("aaa")));
  }
}

TEST(PeerSecretsTest, AFileOthersMayReadIsRefused) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/peers.txt";
  WriteFile(path, kOld + "\n", 0644);
  const absl::Status status = PeerSecrets::FromFile(path).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(),
              HasSubstr("peers.txt is readable by group and others (mode "
                        "0644); chmod 600 it"));
  EXPECT_EQ(PeerSecrets::FromFile(dir.path() + "/none").status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace hourglass::api
