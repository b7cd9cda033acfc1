#ifndef HOURGLASS_API_PEM_H_
#define HOURGLASS_API_PEM_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace hourglass::api {

// The contents of the PEM file `path`, given as `flag` (e.g.
// "--tls_cert"), which must hold a block whose "-----BEGIN ..." line ends
// in `kind` ("CERTIFICATE", "PRIVATE KEY").
//
// Errors: NOT_FOUND `cannot read --tls_cert "x.pem": No such file or
// directory`; INVALID_ARGUMENT `--tls_cert "x.pem" is not a PEM file with a
// CERTIFICATE`.
absl::StatusOr<std::string> ReadPem(absl::string_view flag,
                                    const std::string& path,
                                    absl::string_view kind);

}  // namespace hourglass::api

#endif  // HOURGLASS_API_PEM_H_
