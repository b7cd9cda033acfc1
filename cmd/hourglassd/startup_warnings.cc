#include "cmd/hourglassd/startup_warnings.h"

#include <sys/stat.h>

#include "api/auth.h"
#include "api/server.h"
#include "spdlog/spdlog.h"

namespace hourglass::hourglassd {

void WarnIfCertLinesUnused(const api::Authorizer& authorizer, size_t cert_lines,
                           bool mutual_tls) {
  if (cert_lines == 0 || mutual_tls) return;
  spdlog::warn(
      "WARNING: the cert lines of {} grant nothing: without --tls_client_ca "
      "no client presents a certificate",
      authorizer.origin());
}

void WarnIfDataDirOpen(const std::string& data_dir) {
  struct stat st;
  if (stat(data_dir.c_str(), &st) != 0 || (st.st_mode & 077) == 0) return;
  spdlog::warn(
      "WARNING: data dir {} has mode {:04o}: group or others may read its "
      "messages; chmod 700 it",
      data_dir, st.st_mode & 07777);
}

void WarnIfExposed(const std::string& listen, bool tls, bool mutual_tls,
                   bool tokens, const std::string& metrics_listen,
                   bool console) {
  if (!api::IsLoopbackAddress(listen)) {
    if (!tls) {
      spdlog::warn(
          "WARNING: --listen={} is not loopback and TLS is off (--tls_cert, "
          "--tls_key): requests{} travel in plain text",
          listen, tokens ? " and tokens" : "");
    }
    if (!tokens && !mutual_tls) {
      spdlog::warn(
          "WARNING: --listen={} is not loopback and authentication is off "
          "(--auth_tokens, --tls_client_ca): anyone who can connect may "
          "publish, consume and cancel",
          listen);
    }
  }
  if (!api::IsLoopbackAddress(metrics_listen)) {
    spdlog::warn(
        "WARNING: --metrics_listen={} is not loopback: /metrics is plain "
        "HTTP without authentication",
        metrics_listen);
    if (console) {
      spdlog::warn(
          "WARNING: --metrics_listen={} is not loopback and serves the web "
          "console over plain HTTP: {}; --console=false turns it off",
          metrics_listen,
          tokens ? "its admin tokens travel in plain text"
                 : "without --auth_tokens anyone who can connect may cancel, "
                   "reschedule, redrive and purge");
    }
  }
}

}  // namespace hourglass::hourglassd
