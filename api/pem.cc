#include "api/pem.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace hourglass::api {

absl::StatusOr<std::string> ReadPem(absl::string_view flag,
                                    const std::string& path,
                                    absl::string_view kind) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("cannot read ", flag, " \"", path,
                                            "\": ", std::strerror(errno)));
  }
  std::stringstream text;
  text << in.rdbuf();
  const std::string pem = text.str();
  // "-----BEGIN CERTIFICATE-----", "-----BEGIN EC PRIVATE KEY-----", ...
  bool found = false;
  for (size_t at = pem.find("-----BEGIN "); at != std::string::npos;
       at = pem.find("-----BEGIN ", at + 1)) {
    const size_t end = pem.find("-----", at + 11);
    if (end != std::string::npos &&
        absl::EndsWith(absl::string_view(pem).substr(at, end - at), kind)) {
      found = true;
      break;
    }
  }
  if (!found) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " \"", path, "\" is not a PEM file with a ", kind));
  }
  return pem;
}

}  // namespace hourglass::api
