#include "tests/testing/etcd_server.h"

#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "etcdserverpb/rpc.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace hourglass::testing {
namespace {

constexpr char kMemberName[] = "hourglass-test";

std::string EtcdPath() {
  const char* path = getenv("HOURGLASS_ETCD");
  return path != nullptr && *path ? path : "/usr/bin/etcd";
}

std::string Url(int port, bool tls = false) {
  return absl::StrCat(tls ? "https" : "http", "://127.0.0.1:", port);
}

// A stub on a channel of its own (no connection shared with the clients
// under test, whose reconnection the tests watch).
std::unique_ptr<etcdserverpb::KV::Stub> Stub(
    const std::string& endpoint,
    std::shared_ptr<grpc::ChannelCredentials> credentials) {
  grpc::ChannelArguments arguments;
  arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  arguments.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 50);
  arguments.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 200);
  return etcdserverpb::KV::NewStub(grpc::CreateCustomChannel(
      endpoint,
      credentials != nullptr ? std::move(credentials)
                             : grpc::InsecureChannelCredentials(),
      arguments));
}

}  // namespace

int FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof(address);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    port = ntohs(address.sin_port);
  }
  close(fd);
  return port;
}

absl::StatusOr<std::unique_ptr<EtcdServer>> EtcdServer::Start(
    Tls tls, absl::Duration timeout) {
  std::unique_ptr<EtcdServer> server(new EtcdServer());
  server->tls_ = std::move(tls);
  return StartServer(std::move(server), timeout);
}

absl::StatusOr<std::unique_ptr<EtcdServer>> EtcdServer::Start(
    absl::Duration timeout) {
  return StartServer(std::unique_ptr<EtcdServer>(new EtcdServer()), timeout);
}

absl::StatusOr<std::unique_ptr<EtcdServer>> EtcdServer::StartServer(
    std::unique_ptr<EtcdServer> server, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::Status status;
  // A port found free may be taken before etcd binds it: then etcd exits,
  // and new ports are tried.
  for (int attempt = 0; attempt < 3; ++attempt) {
    server->client_port_ = FreeLoopbackPort();
    server->peer_port_ = FreeLoopbackPort();
    if (server->client_port_ == 0 || server->peer_port_ == 0 ||
        server->client_port_ == server->peer_port_) {
      status = absl::InternalError("no free loopback ports");
      continue;
    }
    status = server->Launch();
    if (status.ok()) status = server->AwaitReady(deadline);
    if (status.ok()) return server;
    if (server->process_ != nullptr && !server->process_->Exited()) break;
    server->process_.reset();
  }
  return status;
}

EtcdServer::~EtcdServer() { process_.reset(); }

std::string EtcdServer::endpoint() const {
  return absl::StrCat("127.0.0.1:", client_port_);
}

std::string EtcdServer::log_path() const {
  return absl::StrCat(dir_.path(), "/etcd.log");
}

absl::Status EtcdServer::Launch() {
  std::vector<std::string> argv = {
      EtcdPath(),
      absl::StrCat("--name=", kMemberName),
      absl::StrCat("--data-dir=", dir_.path(), "/data"),
      absl::StrCat("--listen-client-urls=",
                   Url(client_port_, tls_.has_value())),
      absl::StrCat("--advertise-client-urls=",
                   Url(client_port_, tls_.has_value())),
      absl::StrCat("--listen-peer-urls=", Url(peer_port_)),
      absl::StrCat("--initial-advertise-peer-urls=", Url(peer_port_)),
      absl::StrCat("--initial-cluster=", kMemberName, "=", Url(peer_port_)),
      "--initial-cluster-state=new",
      "--heartbeat-interval=50",
      "--election-timeout=500",
      "--logger=zap",
      absl::StrCat("--log-outputs=", log_path()),
  };
  if (tls_.has_value()) {
    argv.push_back("--cert-file=" + tls_->cert_file);
    argv.push_back("--key-file=" + tls_->key_file);
    if (!tls_->client_ca_file.empty()) {
      argv.push_back("--trusted-ca-file=" + tls_->client_ca_file);
      argv.push_back("--client-cert-auth");
    }
  }
  absl::StatusOr<std::unique_ptr<Subprocess>> process = Subprocess::Start(argv);
  if (!process.ok()) return process.status();
  process_ = *std::move(process);
  return absl::OkStatus();
}

absl::Status EtcdServer::AwaitReady(absl::Time deadline) {
  std::unique_ptr<etcdserverpb::KV::Stub> stub =
      Stub(endpoint(), Credentials());
  etcdserverpb::RangeRequest request;
  request.set_key("/hourglass-test/ready");
  grpc::Status last;
  // Each attempt waits for a connection and an answer (a read needs a
  // leader), a short while at a time so that an etcd that exited is seen.
  while (absl::Now() < deadline) {
    if (process_->Exited()) {
      return absl::InternalError(absl::StrCat(
          "etcd exited with ", process_->Wait(absl::ZeroDuration()), ": ",
          process_->output(), LogTail()));
    }
    grpc::ClientContext context;
    context.set_wait_for_ready(true);
    context.set_deadline(absl::ToChronoTime(
        std::min(deadline, absl::Now() + absl::Milliseconds(250))));
    etcdserverpb::RangeResponse response;
    last = stub->Range(&context, request, &response);
    if (last.ok()) return absl::OkStatus();
  }
  return absl::DeadlineExceededError(
      absl::StrCat("etcd on ", endpoint(), " did not answer in time (",
                   last.error_message(), "): ", LogTail()));
}

std::shared_ptr<grpc::ChannelCredentials> EtcdServer::Credentials() const {
  return tls_.has_value() ? tls_->credentials : nullptr;
}

void EtcdServer::Stop(absl::Duration timeout) {
  process_->Signal(SIGTERM);
  process_->Wait(timeout);
  process_.reset();
}

void EtcdServer::Kill() {
  process_->Signal(SIGKILL);
  process_->Wait(absl::Seconds(10));
  process_.reset();
}

void EtcdServer::Pause() { process_->Signal(SIGSTOP); }

void EtcdServer::Resume() { process_->Signal(SIGCONT); }

absl::Status EtcdServer::Restart(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  if (absl::Status status = Launch(); !status.ok()) return status;
  return AwaitReady(deadline);
}

absl::Status EtcdServer::Compact(int64_t revision) {
  std::unique_ptr<etcdserverpb::KV::Stub> stub =
      Stub(endpoint(), Credentials());
  grpc::ClientContext context;
  context.set_wait_for_ready(true);
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  etcdserverpb::CompactionRequest request;
  request.set_revision(revision);
  request.set_physical(true);
  etcdserverpb::CompactionResponse response;
  const grpc::Status status = stub->Compact(&context, request, &response);
  if (!status.ok()) {
    return absl::InternalError(
        absl::StrCat("compact to ", revision, ": ", status.error_message()));
  }
  return absl::OkStatus();
}

absl::Status EtcdServer::Probe(absl::Duration timeout) const {
  std::unique_ptr<etcdserverpb::KV::Stub> stub =
      Stub(endpoint(), Credentials());
  grpc::ClientContext context;
  context.set_wait_for_ready(true);
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  etcdserverpb::RangeRequest request;
  request.set_key("/hourglass-test/probe");
  etcdserverpb::RangeResponse response;
  const grpc::Status status = stub->Range(&context, request, &response);
  if (status.ok()) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat(
      "etcd on ", endpoint(), " did not answer a read within ",
      absl::FormatDuration(timeout), ": ", status.error_message()));
}

std::string EtcdServer::LogTail() const {
  std::ifstream in(log_path());
  std::stringstream text;
  text << in.rdbuf();
  std::vector<std::string> lines = absl::StrSplit(text.str(), '\n');
  const size_t keep = 20;
  std::string tail;
  for (size_t i = lines.size() > keep ? lines.size() - keep : 0;
       i < lines.size(); ++i) {
    absl::StrAppend(&tail, "\n  ", lines[i]);
  }
  return tail;
}

}  // namespace hourglass::testing
