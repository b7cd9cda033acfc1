#include "cluster/lease_keeper.h"

#include <pthread.h>

#include <algorithm>
#include <deque>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cluster/internal/connection.h"
#include "etcdserverpb/rpc.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/client_callback.h"

namespace hourglass::cluster {
namespace {

// How long after a keep-alive stream ended the next is opened: soon, for an
// etcd that restarts within a second, but not in a tight loop while it is
// down (a stream to an endpoint that is not connected fails at once).
absl::Duration ReopenDelay(absl::Duration interval) {
  return std::min(interval, absl::Milliseconds(250));
}

}  // namespace

// One keep-alive stream. Reads run one at a time, each OnReadDone starting
// the next; the keeper's thread starts the writes (Send), one at a time.
// A hold keeps OnDone away until the reads have ended and no Send is
// between deciding to write and StartWrite, so that a write never starts
// on a finished call. The destructor cancels the call and waits for OnDone.
class LeaseKeeper::Stream final
    : public grpc::ClientBidiReactor<etcdserverpb::LeaseKeepAliveRequest,
                                     etcdserverpb::LeaseKeepAliveResponse> {
 public:
  Stream(internal::Connection& connection, LeaseKeeper* keeper, int64_t id)
      : connection_(connection), index_(connection.current()), keeper_(keeper) {
    request_.set_id(id);
  }

  ~Stream() override {
    context_.TryCancel();
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&done_));
  }

  void Begin() {
    internal::Endpoint& endpoint = connection_.endpoint(index_);
    if (endpoint.channel->GetState(/*try_to_connect=*/true) ==
        GRPC_CHANNEL_TRANSIENT_FAILURE) {
      grpc::experimental::ChannelResetConnectionBackoff(endpoint.channel.get());
    }
    context_.set_wait_for_ready(false);
    endpoint.lease->async()->LeaseKeepAlive(&context_, this);
    StartRead(&response_);
    AddHold();  // Released once the reads ended and no Send is starting.
    StartCall();
  }

  // Starts a renewal unless one is being written or the stream ended;
  // whether it did.
  bool Send() {
    {
      absl::MutexLock lock(&mu_);
      if (reads_ended_ || writing_) return false;
      writing_ = true;
      ++starting_;
      sent_.push_back(absl::Now());
    }
    StartWrite(&request_);
    bool release = false;
    {
      absl::MutexLock lock(&mu_);
      --starting_;
      release = ReleaseLocked();
    }
    if (release) RemoveHold();
    return true;
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      bool release;
      {
        absl::MutexLock lock(&mu_);
        reads_ended_ = true;
        release = ReleaseLocked();
      }
      if (release) RemoveHold();
      return;
    }
    absl::Time sent;
    {
      absl::MutexLock lock(&mu_);
      // etcd answers a stream's renewals in order, one each.
      sent = sent_.empty() ? absl::InfinitePast() : sent_.front();
      if (!sent_.empty()) sent_.pop_front();
      answered_ = true;
    }
    connection_.Answered(index_);
    keeper_->OnRenewed(sent, response_.ttl());
    response_.Clear();
    StartRead(&response_);
  }

  void OnWriteDone(bool /*ok*/) override {
    absl::MutexLock lock(&mu_);
    writing_ = false;
  }

  void OnDone(const grpc::Status& status) override {
    bool answered;
    {
      absl::MutexLock lock(&mu_);
      answered = answered_;
    }
    const std::string& address = connection_.endpoint(index_).address;
    absl::Status end =
        status.ok() ? absl::UnavailableError(absl::StrCat(
                          "etcd ", address, ": the keep-alive stream ended"))
                    : internal::ToStatus(status, address, "keep-alive stream");
    if (!answered && end.code() == absl::StatusCode::kUnavailable) {
      connection_.Failed(index_);
    }
    keeper_->OnStreamDone(end);
    absl::MutexLock lock(&mu_);
    done_ = true;
  }

 private:
  bool ReleaseLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (reads_ended_ && starting_ == 0 && !released_) {
      released_ = true;
      return true;
    }
    return false;
  }

  internal::Connection& connection_;
  const size_t index_;
  LeaseKeeper* const keeper_;
  grpc::ClientContext context_;
  etcdserverpb::LeaseKeepAliveRequest request_;    // Constant once begun.
  etcdserverpb::LeaseKeepAliveResponse response_;  // The read chain's.

  absl::Mutex mu_;
  // When each renewal not yet answered was sent, oldest first.
  std::deque<absl::Time> sent_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool answered_ ABSL_GUARDED_BY(mu_) = false;
  bool reads_ended_ ABSL_GUARDED_BY(mu_) = false;
  int starting_ ABSL_GUARDED_BY(mu_) = 0;
  bool released_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
};

std::unique_ptr<LeaseKeeper> LeaseKeeper::Start(EtcdClient& client, Lease lease,
                                                LostCallback on_change) {
  std::unique_ptr<LeaseKeeper> keeper(
      new LeaseKeeper(client, lease, std::move(on_change)));
  keeper->thread_ = std::thread([k = keeper.get()] {
    pthread_setname_np(pthread_self(), "hg-etcd-lease");
    k->Run();
  });
  return keeper;
}

LeaseKeeper::LeaseKeeper(EtcdClient& client, Lease lease,
                         LostCallback on_change)
    : client_(client),
      lease_(lease),
      interval_(std::max(lease.ttl / 3, absl::Milliseconds(100))),
      on_change_(std::move(on_change)),
      alive_until_(lease.alive_until) {}

LeaseKeeper::~LeaseKeeper() {
  Stop();
  bool revoke;
  {
    absl::MutexLock lock(&mu_);
    revoke = !lost_ && !abandoned_;
  }
  if (revoke) client_.RevokeLease(lease_.id).IgnoreError();
}

void LeaseKeeper::Abandon() {
  {
    absl::MutexLock lock(&mu_);
    abandoned_ = true;
  }
  Stop();
}

bool LeaseKeeper::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return false;
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
  return true;
}

bool LeaseKeeper::lost() const {
  absl::MutexLock lock(&mu_);
  return lost_;
}

bool LeaseKeeper::overdue() const {
  absl::MutexLock lock(&mu_);
  return overdue_;
}

absl::Time LeaseKeeper::alive_until() const {
  absl::MutexLock lock(&mu_);
  return alive_until_;
}

int64_t LeaseKeeper::renewals() const {
  absl::MutexLock lock(&mu_);
  return renewals_;
}

bool LeaseKeeper::AwaitAliveUntil(absl::Time time, absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto settled = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return alive_until_ >= time || lost_ || gone_;
  };
  mu_.AwaitWithDeadline(absl::Condition(&settled), deadline);
  return alive_until_ >= time && !lost_ && !gone_;
}

void LeaseKeeper::OnRenewed(absl::Time sent, int64_t ttl_seconds) {
  absl::MutexLock lock(&mu_);
  if (ttl_seconds <= 0) {
    gone_ = true;
    return;
  }
  ++renewals_;
  // etcd renewed the lease when the request reached it, after `sent`: it
  // lives at least until sent + TTL.
  alive_until_ = std::max(alive_until_, sent + absl::Seconds(ttl_seconds));
}

void LeaseKeeper::OnStreamDone(const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  stream_ended_ = true;
  last_error_ = status;
}

void LeaseKeeper::Run() {
  std::unique_ptr<Stream> stream;
  absl::Time next_send = absl::InfinitePast();
  absl::Time reopen_at = absl::InfinitePast();
  absl::Status loss;
  mu_.Lock();
  while (!stopping_) {
    const absl::Time now = absl::Now();
    if (gone_) {
      loss = absl::NotFoundError(
          absl::StrCat("etcd: lease ", lease_.id,
                       " does not exist any more (expired or revoked)"));
      break;
    }
    // Overdue, or renewed again: said once each, without the lock.
    if ((now >= alive_until_) != overdue_) {
      overdue_ = !overdue_;
      const absl::Status change =
          overdue_ ? absl::UnavailableError(absl::StrCat(
                         "etcd: lease ", lease_.id,
                         " was not renewed within its TTL of ",
                         absl::FormatDuration(lease_.ttl),
                         " and may have expired; still trying; last error: ",
                         last_error_.ok() ? "none" : last_error_.ToString()))
                   : absl::OkStatus();
      mu_.Unlock();
      if (on_change_) on_change_(change);
      mu_.Lock();
      continue;
    }
    const bool stream_live = stream != nullptr && !stream_ended_;
    if (!stream_live && now >= reopen_at) {
      stream_ended_ = false;
      mu_.Unlock();
      stream.reset();  // Its OnDone has run: this returns at once.
      stream = std::make_unique<Stream>(*client_.connection_, this, lease_.id);
      stream->Begin();
      mu_.Lock();
      reopen_at = now + ReopenDelay(interval_);
      next_send = now;  // A new stream renews at once.
      continue;
    }
    if (stream_live && now >= next_send) {
      mu_.Unlock();
      stream->Send();
      mu_.Lock();
      next_send = now + interval_;
      continue;
    }
    const absl::Time wake_at =
        std::min(overdue_ ? absl::InfiniteFuture() : alive_until_,
                 stream_live ? next_send : reopen_at);
    const absl::Time overdue_until = alive_until_;
    auto wake = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stopping_ || gone_ || (stream_live && stream_ended_) ||
             (overdue_ && alive_until_ != overdue_until);
    };
    mu_.AwaitWithDeadline(absl::Condition(&wake), wake_at);
  }
  if (!loss.ok()) lost_ = true;
  mu_.Unlock();
  stream.reset();
  if (!loss.ok() && on_change_) on_change_(loss);
}

}  // namespace hourglass::cluster
