#ifndef HOURGLASS_CMD_HOURGLASSD_STARTUP_WARNINGS_H_
#define HOURGLASS_CMD_HOURGLASSD_STARTUP_WARNINGS_H_

#include <cstddef>
#include <string>

namespace hourglass::api {
class Authorizer;
}  // namespace hourglass::api

namespace hourglass::hourglassd {

// The loud WARNING lines hourglassd logs at start for a set-up that works
// but exposes something. Each logs nothing when all is well.

// The token file's cert lines can grant nothing: without --tls_client_ca
// no client presents a certificate.
void WarnIfCertLinesUnused(const api::Authorizer& authorizer, size_t cert_lines,
                           bool mutual_tls);

// A data dir that group or others may enter: it holds every message.
// hourglassd creates a missing one with mode 0700 but leaves the mode of an
// existing one alone (a mounted volume's root may belong to root and its
// group, as a Kubernetes fsGroup makes it).
void WarnIfDataDirOpen(const std::string& data_dir);

// A gRPC API reachable from other machines without TLS or without
// authentication, and metrics and the web console off loopback.
void WarnIfExposed(const std::string& listen, bool tls, bool mutual_tls,
                   bool tokens, const std::string& metrics_listen,
                   bool console);

}  // namespace hourglass::hourglassd

#endif  // HOURGLASS_CMD_HOURGLASSD_STARTUP_WARNINGS_H_
