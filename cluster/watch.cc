#include "cluster/watch.h"

#include <algorithm>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "cluster/internal/connection.h"
#include "etcdserverpb/rpc.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/client_callback.h"

namespace hourglass::cluster {
namespace {

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

}  // namespace

// The stream of one Watch. Its only write is the create request, started
// with the call; reads run one at a time, each OnReadDone starting the next,
// so events reach on_event in the order etcd sent them. Nothing is started
// from outside the reactions but the cancel, so no hold is needed. The
// destructor cancels the call and waits for OnDone.
class Watch::Reactor final
    : public grpc::ClientBidiReactor<etcdserverpb::WatchRequest,
                                     etcdserverpb::WatchResponse> {
 public:
  Reactor(internal::Connection& connection, WatchOptions options,
          Callbacks callbacks)
      : connection_(connection),
        index_(connection.current()),
        options_(std::move(options)),
        callbacks_(std::move(callbacks)),
        next_revision_(options_.from_revision) {}

  ~Reactor() override {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    context_.TryCancel();
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&done_));
  }

  void Begin() {
    internal::Endpoint& endpoint = connection_.endpoint(index_);
    // As for calls (EtcdClient::Call): after a failure, try to connect now
    // rather than after the channel's backoff.
    if (endpoint.channel->GetState(/*try_to_connect=*/true) ==
        GRPC_CHANNEL_TRANSIENT_FAILURE) {
      grpc::experimental::ChannelResetConnectionBackoff(endpoint.channel.get());
    }
    context_.set_wait_for_ready(false);
    etcdserverpb::WatchCreateRequest& create =
        *request_.mutable_create_request();
    create.set_key(options_.key);
    if (options_.prefix) create.set_range_end(PrefixRangeEnd(options_.key));
    create.set_start_revision(options_.from_revision);
    create.set_prev_kv(options_.prev_kv);
    endpoint.watch->async()->Watch(&context_, this);
    StartWrite(&request_);
    StartRead(&response_);
    StartCall();
  }

  bool WaitCreated(absl::Time deadline) {
    absl::MutexLock lock(&mu_);
    auto settled = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return created_ || ended_;
    };
    mu_.AwaitWithDeadline(absl::Condition(&settled), deadline);
    return created_;
  }

  std::optional<absl::Status> WaitEnded(absl::Time deadline) {
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithDeadline(absl::Condition(&ended_), deadline);
    if (!ended_) return std::nullopt;
    return end_status_;
  }

  int64_t next_revision() const {
    absl::MutexLock lock(&mu_);
    return next_revision_;
  }

  void OnWriteDone(bool /*ok*/) override {
    // A failed write means the stream broke; the reads end too and OnDone
    // reports it.
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // The stream ended: OnDone follows.
    if (Handle(response_)) {
      response_.Clear();
      StartRead(&response_);
    } else {
      // Ended by etcd (compaction, or a cancel with a reason): end the call;
      // OnDone reports the status Handle recorded.
      context_.TryCancel();
    }
  }

  void OnDone(const grpc::Status& status) override {
    absl::Status end;
    bool report;
    {
      absl::MutexLock lock(&mu_);
      if (!etcd_ended_.ok()) {
        end = etcd_ended_;
      } else if (status.ok()) {
        end = absl::UnavailableError(
            absl::StrCat("etcd ", connection_.endpoint(index_).address, ": ",
                         Describe(), ": the stream ended"));
      } else if (status.error_code() == grpc::StatusCode::CANCELLED &&
                 !stopping_) {
        // Nothing here cancels but the destructor and Handle (which set
        // etcd_ended_): gRPC cancelled it, as it does when a connection
        // goes away.
        end = absl::UnavailableError(
            absl::StrCat("etcd ", connection_.endpoint(index_).address, ": ",
                         Describe(), ": ", status.error_message()));
      } else {
        end = internal::ToStatus(status, connection_.endpoint(index_).address,
                                 Describe());
      }
      report = !stopping_;
    }
    if (end.code() == absl::StatusCode::kUnavailable) {
      connection_.Failed(index_);
    } else if (end.code() == absl::StatusCode::kOutOfRange) {
      connection_.Answered(index_);
    }
    if (report && callbacks_.on_end) callbacks_.on_end(end);
    absl::MutexLock lock(&mu_);
    end_status_ = end;
    ended_ = true;
    done_ = true;
  }

 private:
  std::string Describe() const {
    return absl::StrCat("watch ", options_.key, options_.prefix ? "*" : "",
                        " from revision ", options_.from_revision);
  }

  // Handles one response: confirmations, events, the end. Returns false if
  // etcd ended the watch (and records why in etcd_ended_).
  bool Handle(const etcdserverpb::WatchResponse& response) {
    {
      absl::MutexLock lock(&mu_);
      if (response.created()) {
        created_ = true;
        if (next_revision_ == 0) {
          next_revision_ = response.header().revision() + 1;
        }
      }
      if (response.canceled()) {
        if (response.compact_revision() > 0) {
          etcd_ended_ = absl::OutOfRangeError(
              absl::StrCat("etcd ", connection_.endpoint(index_).address, ": ",
                           Describe(), ": revision ", next_revision_,
                           " has been compacted; the oldest revision kept is ",
                           response.compact_revision()));
        } else {
          etcd_ended_ = absl::UnavailableError(absl::StrCat(
              "etcd ", connection_.endpoint(index_).address, ": ", Describe(),
              ": etcd cancelled the watch: ",
              response.cancel_reason().empty() ? "no reason given"
                                               : response.cancel_reason()));
        }
        return false;
      }
      // A confirmation's header revision is the store's, not the watch's:
      // a watch from a past revision has its events still to come. So
      // only events move next_revision_ (no progress notifications are
      // asked for).
      if (response.events_size() == 0) return true;
    }
    connection_.Answered(index_);
    for (const mvccpb::Event& event : response.events()) {
      {
        absl::MutexLock lock(&mu_);
        if (stopping_) return true;
        next_revision_ =
            std::max(next_revision_, event.kv().mod_revision() + 1);
      }
      WatchEvent out;
      out.type = event.type() == mvccpb::Event::DELETE
                     ? WatchEvent::Type::kDelete
                     : WatchEvent::Type::kPut;
      out.kv = FromProto(event.kv());
      if (event.has_prev_kv()) out.prev = FromProto(event.prev_kv());
      callbacks_.on_event(out);
    }
    return true;
  }

  internal::Connection& connection_;
  const size_t index_;
  const WatchOptions options_;
  // Called by the read chain and OnDone only, never concurrently.
  Callbacks callbacks_;
  grpc::ClientContext context_;
  // The read chain's and Begin's.
  etcdserverpb::WatchRequest request_;
  etcdserverpb::WatchResponse response_;

  mutable absl::Mutex mu_;
  int64_t next_revision_ ABSL_GUARDED_BY(mu_);
  bool created_ ABSL_GUARDED_BY(mu_) = false;
  // Why etcd ended the watch, if it did (OK otherwise).
  absl::Status etcd_ended_ ABSL_GUARDED_BY(mu_);
  // The destructor runs: no more callbacks.
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status end_status_ ABSL_GUARDED_BY(mu_);
  // OnDone has returned its last callback; the reactor may go.
  bool done_ ABSL_GUARDED_BY(mu_) = false;
};

absl::StatusOr<std::unique_ptr<Watch>> Watch::Start(EtcdClient& client,
                                                    WatchOptions options,
                                                    Callbacks callbacks) {
  if (options.key.empty()) {
    return absl::InvalidArgumentError("watch: the key is empty");
  }
  if (options.from_revision < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("watch ", options.key, ": from_revision ",
                     options.from_revision, " is negative"));
  }
  if (!callbacks.on_event) {
    return absl::InvalidArgumentError(
        absl::StrCat("watch ", options.key, ": on_event is empty"));
  }
  auto reactor = std::make_unique<Reactor>(
      *client.connection_, std::move(options), std::move(callbacks));
  Reactor* started = reactor.get();
  std::unique_ptr<Watch> watch(new Watch(std::move(reactor)));
  started->Begin();
  return watch;
}

Watch::Watch(std::unique_ptr<Reactor> reactor) : reactor_(std::move(reactor)) {}

Watch::~Watch() = default;

bool Watch::WaitCreated(absl::Time deadline) {
  return reactor_->WaitCreated(deadline);
}

std::optional<absl::Status> Watch::WaitEnded(absl::Time deadline) {
  return reactor_->WaitEnded(deadline);
}

int64_t Watch::next_revision() const { return reactor_->next_revision(); }

}  // namespace hourglass::cluster
