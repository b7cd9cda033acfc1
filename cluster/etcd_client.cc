#include "cluster/etcd_client.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "cluster/internal/connection.h"
#include "etcdserverpb/rpc.grpc.pb.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"

namespace hourglass::cluster {
namespace {

using internal::Endpoint;

KeyValue FromProto(const mvccpb::KeyValue& kv) {
  KeyValue out;
  out.key = kv.key();
  out.value = kv.value();
  out.create_revision = kv.create_revision();
  out.mod_revision = kv.mod_revision();
  out.version = kv.version();
  out.lease = kv.lease();
  return out;
}

absl::Status CheckKey(std::string_view key, std::string_view what) {
  if (key.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(internal::AsAbsl(what), ": the key is empty"));
  }
  return absl::OkStatus();
}

// A key that does not exist has mod_revision 0 in etcd's comparisons, so
// comparing with 0 would hold for an absent key: CreateIfAbsent's job, not
// what a compare-and-set on a revision promises.
absl::Status CheckRevision(int64_t mod_revision, std::string_view what) {
  if (mod_revision <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(internal::AsAbsl(what),
                     ": a key that exists has a mod_revision of at least 1"));
  }
  return absl::OkStatus();
}

// How long a call waits for an endpoint whose last connection attempt
// failed to connect again: long enough for a connection on a local network,
// short enough that an endpoint that is down costs little.
constexpr absl::Duration kReconnectWait = absl::Milliseconds(250);

// Waits until `endpoint` is connected, at most until `deadline`; false if
// it is not by then, or if an attempt to connect fails first. A channel
// whose last attempt failed waits out a backoff before it tries again, and
// says TRANSIENT_FAILURE throughout the next attempt: resetting the backoff
// makes it try at once (so that an etcd that came back is found by the
// first call after it did), and the call gives that attempt
// kReconnectWait.
bool Connect(Endpoint& endpoint, absl::Time deadline) {
  grpc_connectivity_state state =
      endpoint.channel->GetState(/*try_to_connect=*/true);
  if (state == GRPC_CHANNEL_READY) return true;
  if (state == GRPC_CHANNEL_TRANSIENT_FAILURE) {
    grpc::experimental::ChannelResetConnectionBackoff(endpoint.channel.get());
    return endpoint.channel->WaitForConnected(
        absl::ToChronoTime(std::min(deadline, absl::Now() + kReconnectWait)));
  }
  // Idle or connecting: an attempt is under way; wait for its outcome.
  while (state != GRPC_CHANNEL_READY) {
    if (state == GRPC_CHANNEL_TRANSIENT_FAILURE ||
        state == GRPC_CHANNEL_SHUTDOWN) {
      return false;
    }
    if (!endpoint.channel->WaitForStateChange(state,
                                              absl::ToChronoTime(deadline))) {
      return false;
    }
    state = endpoint.channel->GetState(/*try_to_connect=*/true);
  }
  return true;
}

// Adds to `request` the condition that `key`'s revision of kind `target`
// (MOD or CREATE) is `revision`.
void AddRevisionCompare(etcdserverpb::TxnRequest& request, std::string_view key,
                        etcdserverpb::Compare::CompareTarget target,
                        int64_t revision) {
  etcdserverpb::Compare& compare = *request.add_compare();
  compare.set_key(std::string(key));
  compare.set_target(target);
  compare.set_result(etcdserverpb::Compare::EQUAL);
  if (target == etcdserverpb::Compare::MOD) {
    compare.set_mod_revision(revision);
  } else {
    compare.set_create_revision(revision);
  }
}

// Adds to `request`'s success branch a put of `value` at `key` under `lease`.
void AddPut(etcdserverpb::TxnRequest& request, std::string_view key,
            std::string_view value, int64_t lease) {
  etcdserverpb::PutRequest& put = *request.add_success()->mutable_request_put();
  put.set_key(std::string(key));
  put.set_value(std::string(value));
  put.set_lease(lease);
}

// A transaction on `key` whose failure branch reads the key, so that a
// compare-and-set that does not succeed says what is there instead. With a
// fence, it also compares the fence key's create_revision, and the failure
// branch reads that key second.
etcdserverpb::TxnRequest GuardedTxn(std::string_view key,
                                    const std::optional<Fence>& fence) {
  etcdserverpb::TxnRequest request;
  request.add_failure()->mutable_request_range()->set_key(std::string(key));
  if (fence.has_value()) {
    AddRevisionCompare(request, fence->key, etcdserverpb::Compare::CREATE,
                       fence->create_revision);
    request.add_failure()->mutable_request_range()->set_key(fence->key);
  }
  return request;
}

// The first kv of a failure branch's `index`th read, if any.
std::optional<KeyValue> ReadInFailure(const etcdserverpb::TxnResponse& response,
                                      int index) {
  if (response.responses_size() <= index ||
      !response.responses(index).has_response_range() ||
      response.responses(index).response_range().kvs_size() == 0) {
    return std::nullopt;
  }
  return FromProto(response.responses(index).response_range().kvs(0));
}

TxnResult FromTxn(const etcdserverpb::TxnResponse& response,
                  const std::optional<Fence>& fence) {
  TxnResult result;
  result.succeeded = response.succeeded();
  result.revision = response.header().revision();
  if (result.succeeded) return result;
  result.current = ReadInFailure(response, 0);
  if (fence.has_value()) {
    const std::optional<KeyValue> fence_kv = ReadInFailure(response, 1);
    const int64_t created =
        fence_kv.has_value() ? fence_kv->create_revision : 0;
    result.fenced_out = created != fence->create_revision;
  }
  return result;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ParseEtcdEndpoints(
    std::string_view flag) {
  std::vector<std::string> endpoints;
  for (absl::string_view part : absl::StrSplit(internal::AsAbsl(flag), ',')) {
    part = absl::StripAsciiWhitespace(part);
    const size_t colon = part.rfind(':');
    int port = 0;
    if (colon == std::string_view::npos || colon == 0 ||
        !absl::SimpleAtoi(part.substr(colon + 1), &port) || port < 1 ||
        port > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat("--etcd: \"", part,
                       "\" is not host:port (with a port from 1 to 65535); "
                       "expected host:port[,host:port...]"));
    }
    endpoints.emplace_back(part.data(), part.size());
  }
  return endpoints;
}

std::string PrefixRangeEnd(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    unsigned char& last = reinterpret_cast<unsigned char&>(end.back());
    if (last < 0xff) {
      ++last;
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');
}

absl::StatusOr<std::unique_ptr<EtcdClient>> EtcdClient::Create(
    EtcdOptions options) {
  if (options.endpoints.empty()) {
    return absl::InvalidArgumentError("etcd client: no endpoint given");
  }
  if (options.call_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("etcd client: call_timeout must be more than 0, not ",
                     absl::FormatDuration(options.call_timeout)));
  }
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      client::TlsCredentials(options.tls);
  if (!credentials.ok()) return credentials.status();
  return std::unique_ptr<EtcdClient>(
      new EtcdClient(std::move(options), *std::move(credentials)));
}

EtcdClient::EtcdClient(EtcdOptions options,
                       std::shared_ptr<grpc::ChannelCredentials> credentials)
    : options_(std::move(options)),
      connection_(std::make_unique<internal::Connection>(
          options_.endpoints, std::move(credentials), options_.tls)) {}

EtcdClient::~EtcdClient() = default;

template <typename Invoke>
absl::Status EtcdClient::Call(std::string_view what, bool is_write,
                              Invoke invoke) {
  const absl::Time deadline = absl::Now() + options_.call_timeout;
  const size_t count = connection_->size();
  const size_t first = connection_->current();
  std::vector<std::string> failures;
  for (size_t i = 0; i < count; ++i) {
    const size_t index = (first + i) % count;
    Endpoint& endpoint = connection_->endpoint(index);
    // Each endpoint left gets an equal share of the time left to connect,
    // so that one that hangs does not use up the others' chance.
    const absl::Time now = absl::Now();
    const absl::Time connect_by =
        now + (deadline - now) / static_cast<int64_t>(count - i);
    if (!Connect(endpoint, connect_by)) {
      connection_->Failed(index);
      failures.push_back(absl::StrCat(endpoint.address, ": not connected"));
      continue;
    }
    grpc::ClientContext context;
    internal::PrepareUnary(context, deadline);
    const grpc::Status status = invoke(endpoint, context);
    if (status.ok()) {
      connection_->Answered(index);
      return absl::OkStatus();
    }
    if (status.error_code() != grpc::StatusCode::UNAVAILABLE) {
      return internal::ToStatus(status, endpoint.address, what);
    }
    connection_->Failed(index);
    // Sent, maybe applied: another endpoint could apply it a second time.
    if (is_write) return internal::ToStatus(status, endpoint.address, what);
    failures.push_back(
        absl::StrCat(endpoint.address, ": ", status.error_message()));
  }
  return absl::UnavailableError(
      absl::StrCat("etcd: ", internal::AsAbsl(what), ": no endpoint answered (",
                   absl::StrJoin(failures, "; "), ")"));
}

absl::StatusOr<RangeResult> EtcdClient::Range(const std::string& what,
                                              std::string_view key,
                                              std::string range_end) {
  if (absl::Status s = CheckKey(key, what); !s.ok()) return s;
  etcdserverpb::RangeRequest request;
  request.set_key(std::string(key));
  request.set_range_end(std::move(range_end));
  etcdserverpb::RangeResponse response;
  absl::Status status =
      Call(what, /*is_write=*/false,
           [&](Endpoint& endpoint, grpc::ClientContext& context) {
             return endpoint.kv->Range(&context, request, &response);
           });
  if (!status.ok()) return status;
  RangeResult result;
  result.revision = response.header().revision();
  result.kvs.reserve(response.kvs_size());
  for (const mvccpb::KeyValue& kv : response.kvs()) {
    result.kvs.push_back(FromProto(kv));
  }
  return result;
}

absl::StatusOr<GetResult> EtcdClient::Get(std::string_view key) {
  absl::StatusOr<RangeResult> range =
      Range(absl::StrCat("get ", internal::AsAbsl(key)), key, "");
  if (!range.ok()) return range.status();
  GetResult result;
  result.revision = range->revision;
  if (!range->kvs.empty()) result.kv = std::move(range->kvs.front());
  return result;
}

absl::StatusOr<RangeResult> EtcdClient::GetPrefix(std::string_view prefix) {
  return Range(absl::StrCat("get prefix ", internal::AsAbsl(prefix)), prefix,
               PrefixRangeEnd(prefix));
}

absl::StatusOr<int64_t> EtcdClient::Put(std::string_view key,
                                        std::string_view value, int64_t lease) {
  const std::string what = absl::StrCat("put ", internal::AsAbsl(key));
  if (absl::Status s = CheckKey(key, what); !s.ok()) return s;
  etcdserverpb::PutRequest request;
  request.set_key(std::string(key));
  request.set_value(std::string(value));
  request.set_lease(lease);
  etcdserverpb::PutResponse response;
  absl::Status status =
      Call(what, /*is_write=*/true,
           [&](Endpoint& endpoint, grpc::ClientContext& context) {
             return endpoint.kv->Put(&context, request, &response);
           });
  if (!status.ok()) return status;
  return response.header().revision();
}

absl::StatusOr<DeleteResult> EtcdClient::Delete(std::string_view key) {
  const std::string what = absl::StrCat("delete ", internal::AsAbsl(key));
  if (absl::Status s = CheckKey(key, what); !s.ok()) return s;
  etcdserverpb::DeleteRangeRequest request;
  request.set_key(std::string(key));
  etcdserverpb::DeleteRangeResponse response;
  absl::Status status =
      Call(what, /*is_write=*/true,
           [&](Endpoint& endpoint, grpc::ClientContext& context) {
             return endpoint.kv->DeleteRange(&context, request, &response);
           });
  if (!status.ok()) return status;
  return DeleteResult{response.deleted() > 0, response.header().revision()};
}

absl::StatusOr<TxnResult> EtcdClient::PutIfModRevision(
    std::string_view key, std::string_view value, int64_t mod_revision,
    int64_t lease, const std::optional<Fence>& fence) {
  const std::string what = absl::StrCat(
      "put ", internal::AsAbsl(key), " if its mod_revision is ", mod_revision);
  if (absl::Status s = CheckKey(key, what); !s.ok()) return s;
  if (absl::Status s = CheckRevision(mod_revision, what); !s.ok()) return s;
  etcdserverpb::TxnRequest request = GuardedTxn(key, fence);
  AddRevisionCompare(request, key, etcdserverpb::Compare::MOD, mod_revision);
  AddPut(request, key, value, lease);
  return Txn(what, request, fence);
}

absl::StatusOr<TxnResult> EtcdClient::CreateIfAbsent(
    std::string_view key, std::string_view value, int64_t lease,
    const std::optional<Fence>& fence) {
  const std::string what =
      absl::StrCat("create ", internal::AsAbsl(key), " if absent");
  if (absl::Status s = CheckKey(key, what); !s.ok()) return s;
  etcdserverpb::TxnRequest request = GuardedTxn(key, fence);
  AddRevisionCompare(request, key, etcdserverpb::Compare::CREATE, 0);
  AddPut(request, key, value, lease);
  return Txn(what, request, fence);
}

absl::StatusOr<TxnResult> EtcdClient::CreateIfAbsentWith(
    std::string_view key, std::string_view value,
    const std::vector<std::pair<std::string, std::string>>& more) {
  const std::string what =
      absl::StrCat("create ", internal::AsAbsl(key), " and ", more.size(),
                   " more keys if it is absent");
  if (absl::Status s = CheckKey(key, what); !s.ok()) return s;
  etcdserverpb::TxnRequest request = GuardedTxn(key, std::nullopt);
  AddRevisionCompare(request, key, etcdserverpb::Compare::CREATE, 0);
  AddPut(request, key, value, 0);
  for (const auto& [other, other_value] : more) {
    if (absl::Status s = CheckKey(other, what); !s.ok()) return s;
    AddPut(request, other, other_value, 0);
  }
  return Txn(what, request, std::nullopt);
}

absl::StatusOr<TxnResult> EtcdClient::DeleteIfModRevision(
    std::string_view key, int64_t mod_revision) {
  const std::string what =
      absl::StrCat("delete ", internal::AsAbsl(key), " if its mod_revision is ",
                   mod_revision);
  if (absl::Status s = CheckKey(key, what); !s.ok()) return s;
  if (absl::Status s = CheckRevision(mod_revision, what); !s.ok()) return s;
  etcdserverpb::TxnRequest request = GuardedTxn(key, std::nullopt);
  AddRevisionCompare(request, key, etcdserverpb::Compare::MOD, mod_revision);
  request.add_success()->mutable_request_delete_range()->set_key(
      std::string(key));
  return Txn(what, request, std::nullopt);
}

template <typename Request>
absl::StatusOr<TxnResult> EtcdClient::Txn(const std::string& what,
                                          const Request& request,
                                          const std::optional<Fence>& fence) {
  etcdserverpb::TxnResponse response;
  absl::Status status =
      Call(what, /*is_write=*/true,
           [&](Endpoint& endpoint, grpc::ClientContext& context) {
             return endpoint.kv->Txn(&context, request, &response);
           });
  if (!status.ok()) return status;
  return FromTxn(response, fence);
}

absl::StatusOr<Lease> EtcdClient::GrantLease(absl::Duration ttl) {
  if (ttl <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("grant lease: the TTL must be more than 0, not ",
                     absl::FormatDuration(ttl)));
  }
  const int64_t seconds =
      static_cast<int64_t>(std::ceil(absl::ToDoubleSeconds(ttl)));
  const std::string what = absl::StrCat("grant a lease of ", seconds, "s");
  etcdserverpb::LeaseGrantRequest request;
  request.set_ttl(seconds);
  etcdserverpb::LeaseGrantResponse response;
  const absl::Time sent = absl::Now();
  absl::Status status =
      Call(what, /*is_write=*/true,
           [&](Endpoint& endpoint, grpc::ClientContext& context) {
             return endpoint.lease->LeaseGrant(&context, request, &response);
           });
  if (!status.ok()) return status;
  if (!response.error().empty()) {
    return absl::InternalError(
        absl::StrCat("etcd: ", what, ": ", response.error()));
  }
  Lease lease;
  lease.id = response.id();
  lease.ttl = absl::Seconds(response.ttl());
  lease.alive_until = sent + lease.ttl;
  return lease;
}

absl::Status EtcdClient::RevokeLease(int64_t id) {
  etcdserverpb::LeaseRevokeRequest request;
  request.set_id(id);
  etcdserverpb::LeaseRevokeResponse response;
  return Call(absl::StrCat("revoke lease ", id), /*is_write=*/true,
              [&](Endpoint& endpoint, grpc::ClientContext& context) {
                return endpoint.lease->LeaseRevoke(&context, request,
                                                   &response);
              });
}

absl::StatusOr<absl::Duration> EtcdClient::LeaseTimeToLive(int64_t id) {
  const std::string what = absl::StrCat("time to live of lease ", id);
  etcdserverpb::LeaseTimeToLiveRequest request;
  request.set_id(id);
  etcdserverpb::LeaseTimeToLiveResponse response;
  absl::Status status = Call(
      what, /*is_write=*/false,
      [&](Endpoint& endpoint, grpc::ClientContext& context) {
        return endpoint.lease->LeaseTimeToLive(&context, request, &response);
      });
  if (!status.ok()) return status;
  if (response.ttl() < 0) {
    return absl::NotFoundError(
        absl::StrCat("etcd: ", what, ": no such lease (expired or revoked)"));
  }
  return absl::Seconds(response.ttl());
}

}  // namespace hourglass::cluster
