#include "api/peer_secrets.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "grpcpp/server_context.h"

namespace hourglass::api {
namespace {

constexpr size_t kMinPeerSecretBytes = 32;
constexpr size_t kMaxPeerSecrets = 2;

bool ValidSecret(absl::string_view secret) {
  if (secret.size() < kMinPeerSecretBytes || secret.size() > kMaxSecretBytes) {
    return false;
  }
  for (const char c : secret) {
    if (c <= ' ' || c > '~') return false;
  }
  return true;
}

absl::Status Refused(absl::string_view why) {
  return absl::UnauthenticatedError(
      absl::StrCat("only the cluster's nodes may call this: ", why));
}

}  // namespace

absl::StatusOr<PeerSecrets::Set> PeerSecrets::Parse(absl::string_view text,
                                                    absl::string_view origin) {
  Set set;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line.front() == '#') continue;
    if (!ValidSecret(line)) {
      return absl::InvalidArgumentError(absl::StrCat(
          origin, ":", line_number, ": a peer secret is ", kMinPeerSecretBytes,
          " to ", kMaxSecretBytes,
          " printable characters without spaces (openssl rand -hex 32 "
          "makes one)"));
    }
    set.secrets.emplace_back(line);
    set.padded.push_back(PadSecret(line));
  }
  if (set.secrets.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(origin, " holds no peer secret"));
  }
  if (set.secrets.size() > kMaxPeerSecrets) {
    return absl::InvalidArgumentError(absl::StrCat(
        origin, " holds ", set.secrets.size(),
        " peer secrets; at most two: the one sent, and one being rolled in "
        "or out"));
  }
  return set;
}

absl::StatusOr<std::unique_ptr<PeerSecrets>> PeerSecrets::FromFile(
    std::string path) {
  absl::StatusOr<std::string> text = ReadSecretFile(path, "peer token file");
  if (!text.ok()) return text.status();
  absl::StatusOr<Set> set = Parse(*text, path);
  if (!set.ok()) return set.status();
  return std::unique_ptr<PeerSecrets>(
      new PeerSecrets(std::move(path), /*from_file=*/true, *std::move(set)));
}

absl::StatusOr<std::unique_ptr<PeerSecrets>> PeerSecrets::FromText(
    absl::string_view text, std::string origin) {
  absl::StatusOr<Set> set = Parse(text, origin);
  if (!set.ok()) return set.status();
  return std::unique_ptr<PeerSecrets>(
      new PeerSecrets(std::move(origin), /*from_file=*/false, *std::move(set)));
}

absl::StatusOr<size_t> PeerSecrets::Reload() {
  if (!from_file_) {
    absl::MutexLock lock(&mu_);
    return set_.secrets.size();
  }
  absl::StatusOr<std::string> text = ReadSecretFile(origin_, "peer token file");
  if (!text.ok()) return text.status();
  absl::StatusOr<Set> set = Parse(*text, origin_);
  if (!set.ok()) return set.status();
  const size_t count = set->secrets.size();
  absl::MutexLock lock(&mu_);
  set_ = *std::move(set);
  return count;
}

std::string PeerSecrets::current() const {
  absl::MutexLock lock(&mu_);
  return set_.secrets.front();
}

absl::Status PeerSecrets::Check(const grpc::ServerContextBase& context) const {
  const auto& metadata = context.client_metadata();
  const auto secret = metadata.find(kPeerSecretMetadata);
  const bool has_authorization = metadata.contains("authorization");
  if (secret == metadata.end()) return CheckValues(nullptr, has_authorization);
  const absl::string_view value(secret->second.data(), secret->second.size());
  return CheckValues(&value, has_authorization);
}

absl::Status PeerSecrets::CheckValues(const absl::string_view* secret,
                                      bool has_authorization) const {
  if (secret == nullptr) {
    if (has_authorization) {
      return absl::PermissionDeniedError(
          "only the cluster's nodes may call this: a client's token does "
          "not open it");
    }
    return Refused(absl::StrCat("the call carries no peer secret (",
                                kPeerSecretMetadata, ")"));
  }
  const PaddedSecret presented = PadSecret(*secret);
  size_t matched = 0;
  {
    absl::MutexLock lock(&mu_);
    // Every secret compared in full, whichever matches.
    for (const PaddedSecret& known : set_.padded) {
      matched |= MaskIfEqual(SecretDifference(presented, known));
    }
  }
  if (matched == 0) return Refused("its peer secret is not this cluster's");
  return absl::OkStatus();
}

}  // namespace hourglass::api
