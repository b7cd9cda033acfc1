#ifndef HOURGLASS_TESTS_TESTING_CERTIFICATES_H_
#define HOURGLASS_TESTS_TESTING_CERTIFICATES_H_

#include <memory>
#include <string>

#include "grpcpp/security/credentials.h"
#include "tests/testing/temp_dir.h"

namespace hourglass::testing {

// CAs and certificates made by the openssl command for one test (suite),
// in a temporary directory of their own: NAME.pem and NAME.key. Keys are
// P-256; certificates last two days. A failed openssl command fails the
// test (ADD_FAILURE) with its output.
//
// Not thread-safe: one test thread makes them.
class Certificates {
 public:
  // `openssl`: the command's path (the test's OPENSSL_PATH).
  explicit Certificates(std::string openssl) : openssl_(std::move(openssl)) {}

  // A self-signed CA named `name`, with subject CN=`common_name`.
  void MakeCa(const std::string& name, const std::string& common_name);
  // A certificate named `name` signed by the CA `ca`, with subject
  // CN=`common_name` and the extensions of `extensions` (openssl x509
  // -extfile lines, e.g. "subjectAltName=IP:127.0.0.1\n").
  void MakeCert(const std::string& name, const std::string& ca,
                const std::string& common_name, const std::string& extensions);

  std::string Pem(const std::string& name) const;
  std::string Key(const std::string& name) const;

  // TLS credentials trusting the CA `ca`, presenting `client`'s
  // certificate unless it is empty.
  std::shared_ptr<grpc::ChannelCredentials> Credentials(
      const std::string& ca, const std::string& client = "") const;

 private:
  void OpenSsl(std::vector<std::string> args);

  const std::string openssl_;
  TempDir dir_;
  int serial_ = 1;
};

// The contents of the file `path` ("" if it cannot be read).
std::string ReadTextFile(const std::string& path);

}  // namespace hourglass::testing

#endif  // HOURGLASS_TESTS_TESTING_CERTIFICATES_H_
