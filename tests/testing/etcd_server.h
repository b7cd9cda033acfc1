#ifndef HOURGLASS_TESTS_TESTING_ETCD_SERVER_H_
#define HOURGLASS_TESTS_TESTING_ETCD_SERVER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/security/credentials.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/temp_dir.h"

namespace hourglass::testing {

// A real etcd (Debian's etcd-server, /usr/bin/etcd, or $HOURGLASS_ETCD) as a
// one-member cluster on 127.0.0.1, with client and peer ports that were free
// when it started and a temporary data dir of its own, removed at the end.
// It can be stopped and started again on the same ports and data, to test
// what clients do while it is away and when it comes back. Its log goes to
// etcd.log in the data dir (log_path()).
//
// Its heartbeat (50 ms) and election timeout (500 ms) are shorter than
// etcd's defaults, so that it starts fast and grants leases as short as 1 s.
//
// Not thread-safe: one test thread drives it.
class EtcdServer {
 public:
  // TLS on its client URL (https://127.0.0.1:PORT), as etcd's --cert-file,
  // --key-file, --trusted-ca-file and --client-cert-auth set it.
  struct Tls {
    // PEM files of etcd's certificate (which must name 127.0.0.1) and key.
    std::string cert_file;
    std::string key_file;
    // Set: clients must present a certificate these CAs sign.
    std::string client_ca_file;
    // What the test's own calls (readiness, Compact) connect with: trusting
    // etcd's CA, with a client certificate if etcd wants one.
    std::shared_ptr<grpc::ChannelCredentials> credentials;
  };

  // Starts etcd and waits until it answers a read, at most `timeout`.
  // Tries new ports if etcd exits at once (a port taken meanwhile). Fails
  // with the end of its log if it exits or does not answer in time.
  static absl::StatusOr<std::unique_ptr<EtcdServer>> Start(
      absl::Duration timeout = absl::Seconds(30));
  // The same, serving clients over TLS.
  static absl::StatusOr<std::unique_ptr<EtcdServer>> Start(
      Tls tls, absl::Duration timeout = absl::Seconds(30));

  // Kills etcd if it runs (SIGKILL) and removes its data.
  ~EtcdServer();
  EtcdServer(const EtcdServer&) = delete;
  EtcdServer& operator=(const EtcdServer&) = delete;

  // "127.0.0.1:<client port>", for EtcdOptions::endpoints.
  std::string endpoint() const;
  int client_port() const { return client_port_; }
  bool running() const { return process_ != nullptr; }
  std::string log_path() const;

  // SIGTERM, then waits for it to exit (SIGKILL after `timeout`).
  // REQUIRES: running().
  void Stop(absl::Duration timeout = absl::Seconds(10));
  // SIGKILL, as a crash. REQUIRES: running().
  void Kill();
  // SIGSTOP and SIGCONT: etcd neither answers nor closes its connections
  // (a long stall: a full disk, a GC pause, a hung VM). REQUIRES: running().
  void Pause();
  void Resume();
  // Starts it again on the same ports and data, and waits until it answers
  // a read, at most `timeout`. REQUIRES: !running().
  absl::Status Restart(absl::Duration timeout = absl::Seconds(30));

  // Compacts etcd's history before `revision` (and waits until it is done),
  // so that watches from an older revision are refused.
  absl::Status Compact(int64_t revision);

  // The last lines of its log, for failure messages.
  std::string LogTail() const;

  // Whether etcd answers a read on its own port (no proxy between) within
  // `timeout`: OK, or why not. For failure messages.
  absl::Status Probe(absl::Duration timeout) const;

 private:
  EtcdServer() = default;

  // Start's work for `server`, made with its TLS if any.
  static absl::StatusOr<std::unique_ptr<EtcdServer>> StartServer(
      std::unique_ptr<EtcdServer> server, absl::Duration timeout);
  // What the test's own calls connect with: null for plaintext.
  std::shared_ptr<grpc::ChannelCredentials> Credentials() const;

  // Starts the process with the current ports and data dir.
  absl::Status Launch();
  // Waits until etcd answers a read or exits, at most until `deadline`.
  absl::Status AwaitReady(absl::Time deadline);

  std::optional<Tls> tls_;
  TempDir dir_;
  int client_port_ = 0;
  int peer_port_ = 0;
  std::unique_ptr<Subprocess> process_;
};

// A TCP port on 127.0.0.1 that nothing listened on when asked (the OS
// chose it); 0 if none could be had.
int FreeLoopbackPort();

}  // namespace hourglass::testing

#endif  // HOURGLASS_TESTS_TESTING_ETCD_SERVER_H_
