#ifndef HOURGLASS_CLIENT_TLS_H_
#define HOURGLASS_CLIENT_TLS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace hourglass::client {

// TLS settings of a gRPC channel: a Channel's (channel.h), and every other
// channel of ours that speaks TLS (hourglassd's channels to its peers and
// to etcd in cluster mode), so that one piece of code reads the files and
// names the server.
struct TlsOptions {
  // Speak TLS. Any of the files below turns it on too. Default: false
  // (plaintext, as hourglassd serves on loopback by default).
  bool enabled = false;
  // PEM file of the CAs that sign the server's certificate. Default: "",
  // gRPC's default roots (GRPC_DEFAULT_SSL_ROOTS_FILE_PATH overrides them).
  std::string ca_file;
  // PEM certificate chain and private key of the client, for a server that
  // wants mutual TLS (hourglassd's --tls_client_ca); both or neither.
  // Default: none.
  std::string cert_file;
  std::string key_file;
  // The name the server's certificate must have, when the address does not
  // say it (an IP address, a load balancer). Default: the host of the
  // address.
  std::string server_name;
};

// Whether `tls` asks for TLS: enabled, or any of its files set.
bool UsesTls(const TlsOptions& tls);

// The channel credentials `tls` asks for: plaintext unless UsesTls(tls);
// else TLS trusting tls.ca_file (or gRPC's default roots), presenting
// tls.cert_file and tls.key_file as client certificate if they are set.
// Reads the files now.
//
// Errors: INVALID_ARGUMENT naming the option, e.g. `tls.ca_file: cannot
// read "ca.pem": no such file or directory`, `tls.cert_file and
// tls.key_file go together`.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> TlsCredentials(
    const TlsOptions& tls);

// Sets on `arguments` what `tls` asks of a channel besides its
// credentials: the name the server's certificate must have, if
// tls.server_name is set.
void SetTlsArguments(const TlsOptions& tls, grpc::ChannelArguments& arguments);

}  // namespace hourglass::client

#endif  // HOURGLASS_CLIENT_TLS_H_
