#ifndef HOURGLASS_API_PEER_CERTIFICATES_H_
#define HOURGLASS_API_PEER_CERTIFICATES_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace grpc {
class ServerContextBase;
}  // namespace grpc

// OpenSSL's certificate store, kept out of our headers.
typedef struct x509_store_st X509_STORE;

namespace hourglass::api {

// Tells the calls of a cluster's nodes from the others: a call comes from a
// node if its client certificate (mutual TLS) chains to one of the CAs of
// hourglassd's --tls_peer_ca, as a TLS client certificate (its extended key
// usage, if any, allows clientAuth). The Replication service lets only such
// calls in, so that a client cannot write into a backup's copy or read a
// checkpoint, whatever its token.
//
// The TLS handshake has already verified the certificate against every CA
// the server trusts for clients (--tls_client_ca and --tls_peer_ca); this
// tells which of them signed it. When both flags name the same CAs (the
// default, --tls_peer_ca being --tls_client_ca) every client certificate
// passes: give nodes a CA of their own to keep clients out.
//
// Constant after construction; thread-safe.
class PeerCertificates {
 public:
  // Reads the CA certificates of `ca_file`, named `flag` in errors.
  // Errors: api::ReadPem's (NOT_FOUND, INVALID_ARGUMENT), and
  // INVALID_ARGUMENT `--tls_peer_ca "x.pem": no certificate could be read`.
  static absl::StatusOr<std::unique_ptr<PeerCertificates>> FromFile(
      const std::string& flag, const std::string& ca_file);
  ~PeerCertificates();
  PeerCertificates(const PeerCertificates&) = delete;
  PeerCertificates& operator=(const PeerCertificates&) = delete;

  // OK if the call's client presented a certificate that chains to the
  // CAs. Otherwise UNAUTHENTICATED `only the cluster's nodes may call this:
  // the caller presents no client certificate`, or PERMISSION_DENIED `only
  // the cluster's nodes may call this: the caller's certificate "/CN=x" is
  // not signed by --tls_peer_ca (unable to get local issuer certificate)`.
  absl::Status Check(const grpc::ServerContextBase& context) const;

 private:
  PeerCertificates(std::string flag, X509_STORE* store)
      : flag_(std::move(flag)), store_(store) {}

  const std::string flag_;
  // Owned. OpenSSL locks it inside; verifications may share it.
  X509_STORE* const store_;
};

}  // namespace hourglass::api

#endif  // HOURGLASS_API_PEER_CERTIFICATES_H_
