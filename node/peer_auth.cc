#include "node/peer_auth.h"

#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "api/peer_certificates.h"
#include "api/peer_secrets.h"
#include "broker/metric_catalog.h"
#include "broker/metrics.h"
#include "broker/store_errors.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/client_interceptor.h"
#include "spdlog/spdlog.h"

namespace hourglass::node {
namespace {

namespace exp = grpc::experimental;

// Puts the node's current peer secret into every call's metadata.
class SecretInterceptor final : public exp::Interceptor {
 public:
  explicit SecretInterceptor(const api::PeerSecrets* secrets)
      : secrets_(secrets) {}
  void Intercept(exp::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            exp::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->insert(
          {api::kPeerSecretMetadata, secrets_->current()});
    }
    methods->Proceed();
  }

 private:
  const api::PeerSecrets* const secrets_;
};

class SecretInterceptorFactory final
    : public exp::ClientInterceptorFactoryInterface {
 public:
  explicit SecretInterceptorFactory(
      std::shared_ptr<const api::PeerSecrets> secrets)
      : secrets_(std::move(secrets)) {}
  exp::Interceptor* CreateClientInterceptor(exp::ClientRpcInfo*) override {
    return new SecretInterceptor(secrets_.get());
  }

 private:
  // Shared: a channel may outlive the node's PeerAuth.
  const std::shared_ptr<const api::PeerSecrets> secrets_;
};

}  // namespace

PeerAuth::PeerAuth(PeerAuthOptions options)
    : options_(std::move(options)),
      refusals_(std::make_unique<broker::RateLimitedLog>(absl::Seconds(10),
                                                         options_.clock)) {}

PeerAuth::~PeerAuth() = default;

absl::StatusOr<std::unique_ptr<PeerAuth>> PeerAuth::Create(
    PeerAuthOptions options) {
  if (options.clock == nullptr) {
    return absl::InvalidArgumentError("peer auth: no clock");
  }
  if (options.peer_ca_file.empty() && options.peer_token_file.empty() &&
      !options.insecure) {
    return absl::InvalidArgumentError(
        "cluster mode needs its nodes to prove who they are to one another, "
        "or anyone who reaches a node's port could replicate into and out "
        "of it: give --tls_cert, --tls_key and --tls_peer_ca (mutual TLS "
        "with the nodes' own CA), or --peer_token_file (a secret the nodes "
        "share); --insecure_peers starts without either");
  }
  std::unique_ptr<PeerAuth> auth(new PeerAuth(std::move(options)));
  if (!auth->options_.peer_ca_file.empty()) {
    absl::StatusOr<std::unique_ptr<api::PeerCertificates>> certificates =
        api::PeerCertificates::FromFile("--tls_peer_ca",
                                        auth->options_.peer_ca_file);
    if (!certificates.ok()) return certificates.status();
    auth->certificates_ = *std::move(certificates);
  }
  if (!auth->options_.peer_token_file.empty()) {
    absl::StatusOr<std::unique_ptr<api::PeerSecrets>> secrets =
        api::PeerSecrets::FromFile(auth->options_.peer_token_file);
    if (!secrets.ok()) return secrets.status();
    auth->secrets_ = *std::move(secrets);
  }
  return auth;
}

absl::Status PeerAuth::Check(const grpc::ServerContextBase& context) {
  absl::Status verdict;
  if (certificates_ != nullptr) verdict = certificates_->Check(context);
  if (verdict.ok() && secrets_ != nullptr) verdict = secrets_->Check(context);
  if (verdict.ok()) return verdict;
  if (options_.metrics != nullptr) {
    options_.metrics->Counters(metrics::Metric::kReplicationRefusedTotal)
        .Add({})
        .Increment();
  }
  // A refused primary tries again every 200 ms: a line per caller and
  // reason every 10 s.
  const std::string peer = context.peer();
  if (std::optional<uint64_t> unlogged =
          refusals_->Allow(absl::StrCat(peer, " ", verdict.message()))) {
    spdlog::warn(
        "cluster: node {} refused a call to its Replication service from {} "
        "({} more refused since the last such line): {}",
        options_.node_id, peer, *unlogged, std::string(verdict.message()));
  }
  return verdict;
}

std::shared_ptr<grpc::Channel> PeerAuth::Channel(
    const std::string& target,
    const std::shared_ptr<grpc::ChannelCredentials>& credentials,
    const grpc::ChannelArguments& arguments) const {
  if (secrets_ == nullptr) {
    return grpc::CreateCustomChannel(target, credentials, arguments);
  }
  std::vector<std::unique_ptr<exp::ClientInterceptorFactoryInterface>>
      interceptors;
  interceptors.push_back(std::make_unique<SecretInterceptorFactory>(secrets_));
  return exp::CreateCustomChannelWithInterceptors(
      target, credentials, arguments, std::move(interceptors));
}

absl::StatusOr<size_t> PeerAuth::Reload() {
  if (secrets_ == nullptr) {
    return absl::NotFoundError("no --peer_token_file to reload");
  }
  return secrets_->Reload();
}

std::string PeerAuth::Describe() const {
  if (certificates_ != nullptr && secrets_ != nullptr) {
    return "mutual TLS and a shared secret";
  }
  if (certificates_ != nullptr) return "mutual TLS";
  if (secrets_ != nullptr) return "a shared secret";
  return "nothing (--insecure_peers)";
}

}  // namespace hourglass::node
