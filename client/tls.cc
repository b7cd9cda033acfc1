#include "client/tls.h"

#include <cerrno>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "client/internal/reachability.h"

namespace hourglass::client {
namespace {

// The contents of `path`, named by `option` in errors.
absl::StatusOr<std::string> ReadFile(absl::string_view option,
                                     const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(absl::StrCat(
        option, ": cannot read \"", path, "\": ", internal::ErrnoText(errno)));
  }
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

bool UsesTls(const TlsOptions& tls) {
  return tls.enabled || !tls.ca_file.empty() || !tls.cert_file.empty() ||
         !tls.key_file.empty();
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> TlsCredentials(
    const TlsOptions& tls) {
  if (!UsesTls(tls)) return grpc::InsecureChannelCredentials();
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    return absl::InvalidArgumentError(
        "tls.cert_file and tls.key_file go together");
  }
  grpc::SslCredentialsOptions ssl;
  if (!tls.ca_file.empty()) {
    absl::StatusOr<std::string> ca = ReadFile("tls.ca_file", tls.ca_file);
    if (!ca.ok()) return ca.status();
    ssl.pem_root_certs = *std::move(ca);
  }
  if (!tls.cert_file.empty()) {
    absl::StatusOr<std::string> cert = ReadFile("tls.cert_file", tls.cert_file);
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = ReadFile("tls.key_file", tls.key_file);
    if (!key.ok()) return key.status();
    ssl.pem_cert_chain = *std::move(cert);
    ssl.pem_private_key = *std::move(key);
  }
  return grpc::SslCredentials(ssl);
}

void SetTlsArguments(const TlsOptions& tls, grpc::ChannelArguments& arguments) {
  if (!tls.server_name.empty()) {
    arguments.SetSslTargetNameOverride(tls.server_name);
  }
}

}  // namespace hourglass::client
