#include "api/peer_certificates.h"

#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "api/pem.h"
#include "grpc/grpc_security_constants.h"
#include "grpcpp/security/auth_context.h"
#include "grpcpp/server_context.h"

namespace hourglass::api {
namespace {

constexpr absl::string_view kOnlyNodes =
    "only the cluster's nodes may call this: ";

// The certificates of the PEM text `pem`, in order; empty if none parses.
std::vector<X509*> ParseCertificates(const std::string& pem) {
  std::vector<X509*> certificates;
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  if (bio == nullptr) return certificates;
  while (X509* certificate =
             PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) {
    certificates.push_back(certificate);
  }
  BIO_free(bio);
  return certificates;
}

void FreeAll(std::vector<X509*>& certificates) {
  for (X509* certificate : certificates) X509_free(certificate);
  certificates.clear();
}

// The first value of `property` of the call's peer, or "" if none.
std::string Property(const grpc::AuthContext& auth, const char* property) {
  const std::vector<grpc::string_ref> values =
      auth.FindPropertyValues(property);
  if (values.empty()) return "";
  return std::string(values.front().data(), values.front().size());
}

// "CN=node-a" as OpenSSL writes a certificate's subject.
std::string Subject(X509* certificate) {
  char text[256] = {};
  X509_NAME_oneline(X509_get_subject_name(certificate), text, sizeof(text) - 1);
  return text;
}

}  // namespace

absl::StatusOr<std::unique_ptr<PeerCertificates>> PeerCertificates::FromFile(
    const std::string& flag, const std::string& ca_file) {
  absl::StatusOr<std::string> pem = ReadPem(flag, ca_file, "CERTIFICATE");
  if (!pem.ok()) return pem.status();
  std::vector<X509*> cas = ParseCertificates(*pem);
  if (cas.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " \"", ca_file, "\": no certificate could be read"));
  }
  X509_STORE* store = X509_STORE_new();
  for (X509* ca : cas) X509_STORE_add_cert(store, ca);  // Takes a reference.
  FreeAll(cas);
  return std::unique_ptr<PeerCertificates>(new PeerCertificates(flag, store));
}

PeerCertificates::~PeerCertificates() { X509_STORE_free(store_); }

absl::Status PeerCertificates::Check(
    const grpc::ServerContextBase& context) const {
  const std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  // The client's own certificate, and what gRPC saw of its chain (which
  // may hold the CA the handshake verified it by): intermediates are taken
  // from there, self-signed certificates never (only the CAs are trusted).
  std::vector<X509*> leaf;
  std::vector<X509*> chain;
  if (auth != nullptr) {
    leaf = ParseCertificates(Property(*auth, GRPC_X509_PEM_CERT_PROPERTY_NAME));
    chain = ParseCertificates(
        Property(*auth, GRPC_X509_PEM_CERT_CHAIN_PROPERTY_NAME));
  }
  if (leaf.empty()) {
    FreeAll(chain);
    return absl::UnauthenticatedError(
        absl::StrCat(kOnlyNodes, "the caller presents no client certificate"));
  }
  STACK_OF(X509)* untrusted = sk_X509_new_null();
  for (X509* certificate : chain) {
    if (X509_check_issued(certificate, certificate) != X509_V_OK) {
      sk_X509_push(untrusted, certificate);
    }
  }
  X509_STORE_CTX* verify = X509_STORE_CTX_new();
  int error = X509_V_ERR_UNSPECIFIED;
  bool verified = false;
  if (verify != nullptr &&
      X509_STORE_CTX_init(verify, store_, leaf.front(), untrusted) == 1 &&
      X509_STORE_CTX_set_purpose(verify, X509_PURPOSE_SSL_CLIENT) == 1) {
    verified = X509_verify_cert(verify) == 1;
    if (!verified) error = X509_STORE_CTX_get_error(verify);
  }
  X509_STORE_CTX_free(verify);
  sk_X509_free(untrusted);  // The certificates are chain's.
  const std::string subject = Subject(leaf.front());
  FreeAll(leaf);
  FreeAll(chain);
  if (verified) return absl::OkStatus();
  return absl::PermissionDeniedError(
      absl::StrCat(kOnlyNodes, "the caller's certificate \"", subject,
                   "\" is not signed by ", flag_, " (",
                   X509_verify_cert_error_string(error), ")"));
}

}  // namespace hourglass::api
