#include "cluster/election.h"

#include <pthread.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cluster/watch.h"

namespace hourglass::cluster {

absl::StatusOr<std::unique_ptr<Election>> Election::Start(
    EtcdClient& client, ElectionOptions options, ChangeCallback on_change) {
  if (options.key.empty()) {
    return absl::InvalidArgumentError("election: the key is empty");
  }
  if (options.candidate.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("election ", options.key, ": the candidate is empty"));
  }
  if (options.lease == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("election ", options.key, ": no lease given"));
  }
  std::unique_ptr<Election> election(
      new Election(client, std::move(options), std::move(on_change)));
  election->thread_ = std::thread([e = election.get()] {
    pthread_setname_np(pthread_self(), "hg-election");
    e->Run();
  });
  return election;
}

Election::Election(EtcdClient& client, ElectionOptions options,
                   ChangeCallback on_change)
    : client_(client),
      options_(std::move(options)),
      on_change_(std::move(on_change)) {}

Election::~Election() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
  int64_t resign_at = 0;
  {
    absl::MutexLock lock(&mu_);
    if (!abandoned_ && leader_.has_value() && leader_->lease == options_.lease &&
        leader_->value == options_.candidate) {
      resign_at = mod_revision_;
    }
  }
  if (resign_at > 0) {
    client_.DeleteIfModRevision(options_.key, resign_at).IgnoreError();
  }
}

void Election::Abandon() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    abandoned_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

bool Election::leading() const {
  absl::MutexLock lock(&mu_);
  return leader_.has_value() && leader_->lease == options_.lease &&
         leader_->value == options_.candidate;
}

std::optional<Leader> Election::leader() const {
  absl::MutexLock lock(&mu_);
  return leader_;
}

absl::Status Election::last_error() const {
  absl::MutexLock lock(&mu_);
  return last_error_;
}

bool Election::AwaitLeading(bool leading, absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto holds = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const bool now = leader_.has_value() && leader_->lease == options_.lease &&
                     leader_->value == options_.candidate;
    return now == leading;
  };
  return mu_.AwaitWithDeadline(absl::Condition(&holds), deadline);
}

bool Election::AwaitLeader(const std::string& value, absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto holds = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return leader_.has_value() && leader_->value == value;
  };
  return mu_.AwaitWithDeadline(absl::Condition(&holds), deadline);
}

void Election::Update(std::optional<Leader> leader) {
  bool changed;
  bool leading;
  {
    absl::MutexLock lock(&mu_);
    changed = leader_ != leader;
    leader_ = leader;
    leading = leader_.has_value() && leader_->lease == options_.lease &&
              leader_->value == options_.candidate;
  }
  if (changed && on_change_) on_change_(leading, leader);
}

void Election::WaitUntil(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithDeadline(absl::Condition(&stopping_), deadline);
}

absl::StatusOr<int64_t> Election::Campaign() {
  absl::StatusOr<TxnResult> result =
      client_.CreateIfAbsent(options_.key, options_.candidate, options_.lease);
  if (!result.ok()) return result.status();
  if (result->succeeded) {
    {
      absl::MutexLock lock(&mu_);
      mod_revision_ = result->revision;
    }
    Update(Leader{options_.candidate, result->revision, options_.lease});
    return result->revision + 1;
  }
  if (!result->current.has_value()) {
    // The transaction is atomic: a key absent when read was absent when
    // compared. Only a misbehaving etcd gets here.
    return absl::InternalError(
        absl::StrCat("election ", options_.key,
                     ": etcd found the key and then did not return it"));
  }
  const KeyValue& kv = *result->current;
  if (kv.lease == options_.lease) {
    // An earlier campaign of this candidate, under the same lease, created
    // it (its answer lost, say): the term is this candidate's.
    absl::MutexLock lock(&mu_);
    mod_revision_ = kv.mod_revision;
  }
  Update(Leader{kv.value, kv.create_revision, kv.lease});
  return result->revision + 1;
}

void Election::Run() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      key_deleted_ = false;
      watch_ended_ = false;
    }
    absl::StatusOr<int64_t> from = Campaign();
    if (!from.ok()) {
      {
        absl::MutexLock lock(&mu_);
        last_error_ = from.status();
      }
      if (from.status().code() == absl::StatusCode::kNotFound) {
        // The key is absent and this candidate's lease is gone: it cannot
        // lead, and nobody leads yet.
        Update(std::nullopt);
      }
      WaitUntil(absl::Now() + options_.retry_delay);
      continue;
    }
    absl::Status watch_end;
    Watch::Callbacks callbacks;
    callbacks.on_event = [this](const WatchEvent& event) {
      if (event.type != WatchEvent::Type::kDelete) return;
      absl::MutexLock lock(&mu_);
      key_deleted_ = true;
    };
    callbacks.on_end = [this, &watch_end](absl::Status status) {
      absl::MutexLock lock(&mu_);
      watch_end = std::move(status);
      watch_ended_ = true;
    };
    absl::StatusOr<std::unique_ptr<Watch>> watch = Watch::Start(
        client_, WatchOptions{.key = options_.key, .from_revision = *from},
        std::move(callbacks));
    if (!watch.ok()) {
      {
        absl::MutexLock lock(&mu_);
        last_error_ = watch.status();
      }
      WaitUntil(absl::Now() + options_.retry_delay);
      continue;
    }
    bool deleted;
    {
      absl::MutexLock lock(&mu_);
      last_error_ = absl::OkStatus();
      auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || key_deleted_ || watch_ended_;
      };
      mu_.Await(absl::Condition(&woken));
      deleted = key_deleted_;
    }
    watch->reset();  // No callback runs after this.
    if (deleted) {
      Update(std::nullopt);
      continue;  // Campaign at once.
    }
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      last_error_ = watch_end;
    }
    // The watch ended (etcd gone, say): keep what was seen, and look again
    // after a while.
    WaitUntil(absl::Now() + options_.retry_delay);
  }
}

}  // namespace hourglass::cluster
