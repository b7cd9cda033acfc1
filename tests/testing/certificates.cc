#include "tests/testing/certificates.h"

#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/testing/subprocess.h"

namespace hourglass::testing {

std::string ReadTextFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void Certificates::OpenSsl(std::vector<std::string> args) {
  args.insert(args.begin(), openssl_);
  const RunResult result = Run(args, absl::Seconds(30));
  if (result.exit_code != 0) ADD_FAILURE() << "openssl: " << result.output;
}

void Certificates::MakeCa(const std::string& name,
                          const std::string& common_name) {
  OpenSsl({"req", "-x509", "-newkey", "ec", "-pkeyopt",
           "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", Key(name),
           "-out", Pem(name), "-days", "2", "-subj", "/CN=" + common_name});
}

void Certificates::MakeCert(const std::string& name, const std::string& ca,
                            const std::string& common_name,
                            const std::string& extensions) {
  const std::string csr = absl::StrCat(dir_.path(), "/", name, ".csr");
  const std::string ext = absl::StrCat(dir_.path(), "/", name, ".ext");
  std::ofstream(ext) << extensions;
  OpenSsl({"req", "-new", "-newkey", "ec", "-pkeyopt",
           "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", Key(name),
           "-out", csr, "-subj", "/CN=" + common_name});
  OpenSsl({"x509", "-req", "-in", csr, "-CA", Pem(ca), "-CAkey", Key(ca),
           "-set_serial", absl::StrCat(++serial_), "-days", "2", "-out",
           Pem(name), "-extfile", ext});
}

std::string Certificates::Pem(const std::string& name) const {
  return absl::StrCat(dir_.path(), "/", name, ".pem");
}

std::string Certificates::Key(const std::string& name) const {
  return absl::StrCat(dir_.path(), "/", name, ".key");
}

std::shared_ptr<grpc::ChannelCredentials> Certificates::Credentials(
    const std::string& ca, const std::string& client) const {
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = ReadTextFile(Pem(ca));
  if (!client.empty()) {
    ssl.pem_cert_chain = ReadTextFile(Pem(client));
    ssl.pem_private_key = ReadTextFile(Key(client));
  }
  return grpc::SslCredentials(ssl);
}

}  // namespace hourglass::testing
