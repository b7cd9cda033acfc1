// ThreadSanitizer support for Debian's uninstrumented abseil; linked into the
// test binaries only when they are built with -fsanitize=thread.
//
// Debian's abseil libraries are compiled without ThreadSanitizer, so the
// annotations abseil carries for it (ABSL_TSAN_MUTEX_*) are compiled out and
// ThreadSanitizer never learns that absl::Mutex orders memory: every field
// guarded by one would look like a race. Likewise for absl::Status, whose
// last reference, dropped by the library, frees what other threads used.
// This file defines, in the executable, the out-of-line absl::Mutex,
// absl::CondVar and absl::Notification member functions that take, release
// or wait, and absl::Status's release of a reference. A PIE executable's
// definitions interpose the shared library's, both for our code and for the
// library's own calls through its PLT (Notification calls Mutex::Lock, Unlock
// and LockWhen that way). Each definition tells ThreadSanitizer what the
// function does, through <sanitizer/tsan_interface.h>, the way abseil's own
// annotations do when abseil is built with ThreadSanitizer, and calls the
// library's definition, found with dlsym(RTLD_NEXT).
//
// The model:
// - Lock, ReaderLock, TryLock, ReaderTryLock, LockWhen* and ReaderLockWhen*
//   acquire the mutex; Unlock, ReaderUnlock and ReleasableMutexLock::Release
//   release it.
// - Await*, and CondVar::Wait* on the mutex, release it and acquire it again
//   (the library may drop it while it waits).
// - While the library runs, ThreadSanitizer ignores the thread's memory
//   accesses (__tsan_mutex_pre_* begin the ignore, __tsan_mutex_post_* end
//   it). That matters because abseil evaluates a waiter's Condition, which is
//   our instrumented code, on whichever thread holds or releases the mutex.
// - Notification::Notify releases the flag that HasBeenNotified reads: that
//   read is inline in our instrumented code, an acquire load of the flag, and
//   ThreadSanitizer keys atomics and __tsan_release by the same address.
//   WaitForNotification* acquires it when it returns notified, since the
//   library returns early, without taking its mutex, once the flag is set.
// - ~Mutex forgets the mutex, so that a later object at the same address
//   starts afresh.
// - Status::UnrefNonInlined is the library's own three lines, compiled here
//   so that ThreadSanitizer sees its atomic decrement (acquire and release)
//   before the last reference frees the shared representation.
// BlockingCounter and Barrier are modelled only through the Mutex functions
// they call (BlockingCounter's count is an atomic the library updates unseen);
// none of our code uses them.
//
// Thread safety: every function may be called from any thread, as abseil's.

#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/base/options.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

#if defined(__has_feature)
#if !__has_feature(thread_sanitizer)
#error "tsan_absl.cc is only for builds with -fsanitize=thread"
#endif
#elif !defined(__SANITIZE_THREAD__)
#error "tsan_absl.cc is only for builds with -fsanitize=thread"
#endif

// The mangled names below are built as "_ZN4absl" + inline namespace + the
// rest; the rest's substitutions (NS0_) assume that one inline namespace.
static_assert(ABSL_OPTION_USE_INLINE_NAMESPACE == 1,
              "tsan_absl.cc expects abseil's inline namespace");

namespace {

#define HOURGLASS_TSAN_STR2(x) #x
#define HOURGLASS_TSAN_STR(x) HOURGLASS_TSAN_STR2(x)

// Returns the shared library's definition of the abseil function whose
// mangled name is "_ZN4absl<namespace>" + `rest` ("_ZNK" when `is_const`).
// Aborts if there is none (a different abseil build): the caller could not
// do its job.
void* RealFunction(const char* rest, bool is_const = false) {
  const char* ns = HOURGLASS_TSAN_STR(ABSL_OPTION_INLINE_NAMESPACE_NAME);
  std::string name = is_const ? "_ZNK4absl" : "_ZN4absl";
  name += std::to_string(std::strlen(ns)) + ns + rest;
  void* fn = dlsym(RTLD_NEXT, name.c_str());
  if (fn == nullptr) {
    std::fprintf(stderr, "tsan_absl: no %s after the executable: %s\n",
                 name.c_str(), dlerror());
    std::abort();
  }
  return fn;
}

// The library's definition of a member function, as a function taking the
// object first (the Itanium C++ ABI passes `this` as the first argument).
template <typename Fn>
Fn Real(const char* rest, bool is_const = false) {
  return reinterpret_cast<Fn>(RealFunction(rest, is_const));
}

// Whether `mu`, held by the caller, is held in reader (shared) mode. Reads
// the mutex word: abseil sets kMuWriter (0x8) while a writer holds it.
static_assert(sizeof(absl::Mutex) == sizeof(std::intptr_t),
              "absl::Mutex is expected to be one word");
constexpr std::intptr_t kMuWriter = 0x0008;
bool HeldAsReader(const absl::Mutex* mu) {
  const auto* word = reinterpret_cast<const std::atomic<std::intptr_t>*>(mu);
  return (word->load(std::memory_order_relaxed) & kMuWriter) == 0;
}

// Tells ThreadSanitizer that the caller, holding `mu` in the mode given by
// `read_flag`, releases it; used before a wait that may drop the mutex.
void ModelReleaseForWait(absl::Mutex* mu, unsigned read_flag) {
  __tsan_mutex_pre_unlock(mu, read_flag);
  __tsan_mutex_post_unlock(mu, read_flag);
}

// absl::Notification's layout, to find the flag HasBeenNotified reads.
struct NotificationLayout {
  absl::Mutex mutex;
  std::atomic<bool> notified_yet;
};
static_assert(sizeof(NotificationLayout) == sizeof(absl::Notification),
              "absl::Notification's layout changed");

void* NotifiedFlag(const absl::Notification* n) {
  return const_cast<char*>(reinterpret_cast<const char*>(n)) +
         offsetof(NotificationLayout, notified_yet);
}

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

// The definitions implement the lock annotations of their declarations by
// calling the library through a pointer, which the analysis cannot follow.
//
// Each function is modelled once: the library's *WithTimeout functions call
// their *WithDeadline siblings through the PLT, which would land in this
// file's definitions and model the lock twice, so this file's *WithTimeout
// definitions call the *WithDeadline ones below instead (the library's
// deadline is the current time plus the timeout, too).

ABSL_NO_THREAD_SAFETY_ANALYSIS Mutex::~Mutex() {
  static const auto real = Real<void (*)(Mutex*)>("5MutexD1Ev");
  __tsan_mutex_destroy(this, 0);
  real(this);
}

ABSL_NO_THREAD_SAFETY_ANALYSIS void Mutex::Lock() {
  static const auto real = Real<void (*)(Mutex*)>("5Mutex4LockEv");
  __tsan_mutex_pre_lock(this, 0);
  real(this);
  __tsan_mutex_post_lock(this, 0, 0);
}

ABSL_NO_THREAD_SAFETY_ANALYSIS void Mutex::ReaderLock() {
  static const auto real = Real<void (*)(Mutex*)>("5Mutex10ReaderLockEv");
  __tsan_mutex_pre_lock(this, __tsan_mutex_read_lock);
  real(this);
  __tsan_mutex_post_lock(this, __tsan_mutex_read_lock, 0);
}

ABSL_NO_THREAD_SAFETY_ANALYSIS bool Mutex::TryLock() {
  static const auto real = Real<bool (*)(Mutex*)>("5Mutex7TryLockEv");
  __tsan_mutex_pre_lock(this, __tsan_mutex_try_lock);
  const bool locked = real(this);
  __tsan_mutex_post_lock(
      this, locked ? __tsan_mutex_try_lock : __tsan_mutex_try_lock_failed, 0);
  return locked;
}

ABSL_NO_THREAD_SAFETY_ANALYSIS bool Mutex::ReaderTryLock() {
  static const auto real = Real<bool (*)(Mutex*)>("5Mutex13ReaderTryLockEv");
  __tsan_mutex_pre_lock(this, __tsan_mutex_try_read_lock);
  const bool locked = real(this);
  __tsan_mutex_post_lock(
      this,
      locked ? __tsan_mutex_try_read_lock : __tsan_mutex_try_read_lock_failed,
      0);
  return locked;
}

ABSL_NO_THREAD_SAFETY_ANALYSIS void Mutex::Unlock() {
  static const auto real = Real<void (*)(Mutex*)>("5Mutex6UnlockEv");
  __tsan_mutex_pre_unlock(this, 0);
  real(this);
  __tsan_mutex_post_unlock(this, 0);
}

ABSL_NO_THREAD_SAFETY_ANALYSIS void Mutex::ReaderUnlock() {
  static const auto real = Real<void (*)(Mutex*)>("5Mutex12ReaderUnlockEv");
  __tsan_mutex_pre_unlock(this, __tsan_mutex_read_lock);
  real(this);
  __tsan_mutex_post_unlock(this, __tsan_mutex_read_lock);
}

ABSL_NO_THREAD_SAFETY_ANALYSIS void ReleasableMutexLock::Release() {
  // What the library's Release does (unlock, then forget the mutex), here so
  // that the release goes through Unlock above whatever the library binds.
  Mutex* mu = mu_;
  mu_ = nullptr;
  mu->Unlock();
}

// LockWhen* and ReaderLockWhen* acquire the mutex whatever they return.

ABSL_NO_THREAD_SAFETY_ANALYSIS void Mutex::LockWhen(const Condition& cond) {
  static const auto real = Real<void (*)(Mutex*, const Condition&)>(
      "5Mutex8LockWhenERKNS0_9ConditionE");
  __tsan_mutex_pre_lock(this, 0);
  real(this, cond);
  __tsan_mutex_post_lock(this, 0, 0);
}

ABSL_NO_THREAD_SAFETY_ANALYSIS bool Mutex::LockWhenWithTimeout(
    const Condition& cond, Duration timeout) {
  return LockWhenWithDeadline(cond, Now() + timeout);
}

ABSL_NO_THREAD_SAFETY_ANALYSIS bool Mutex::LockWhenWithDeadline(
    const Condition& cond, Time deadline) {
  static const auto real = Real<bool (*)(Mutex*, const Condition&, Time)>(
      "5Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  __tsan_mutex_pre_lock(this, 0);
  const bool met = real(this, cond, deadline);
  __tsan_mutex_post_lock(this, 0, 0);
  return met;
}

ABSL_NO_THREAD_SAFETY_ANALYSIS void Mutex::ReaderLockWhen(
    const Condition& cond) {
  static const auto real = Real<void (*)(Mutex*, const Condition&)>(
      "5Mutex14ReaderLockWhenERKNS0_9ConditionE");
  __tsan_mutex_pre_lock(this, __tsan_mutex_read_lock);
  real(this, cond);
  __tsan_mutex_post_lock(this, __tsan_mutex_read_lock, 0);
}

ABSL_NO_THREAD_SAFETY_ANALYSIS bool Mutex::ReaderLockWhenWithTimeout(
    const Condition& cond, Duration timeout) {
  return ReaderLockWhenWithDeadline(cond, Now() + timeout);
}

ABSL_NO_THREAD_SAFETY_ANALYSIS bool Mutex::ReaderLockWhenWithDeadline(
    const Condition& cond, Time deadline) {
  static const auto real = Real<bool (*)(Mutex*, const Condition&, Time)>(
      "5Mutex26ReaderLockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  __tsan_mutex_pre_lock(this, __tsan_mutex_read_lock);
  const bool met = real(this, cond, deadline);
  __tsan_mutex_post_lock(this, __tsan_mutex_read_lock, 0);
  return met;
}

// Await* may drop the mutex while the condition is false: modelled as a
// release, then an acquire that brackets the library's call.

ABSL_NO_THREAD_SAFETY_ANALYSIS void Mutex::Await(const Condition& cond) {
  static const auto real = Real<void (*)(Mutex*, const Condition&)>(
      "5Mutex5AwaitERKNS0_9ConditionE");
  const unsigned read_flag = HeldAsReader(this) ? __tsan_mutex_read_lock : 0;
  ModelReleaseForWait(this, read_flag);
  __tsan_mutex_pre_lock(this, read_flag);
  real(this, cond);
  __tsan_mutex_post_lock(this, read_flag, 0);
}

ABSL_NO_THREAD_SAFETY_ANALYSIS bool Mutex::AwaitWithTimeout(
    const Condition& cond, Duration timeout) {
  return AwaitWithDeadline(cond, Now() + timeout);
}

ABSL_NO_THREAD_SAFETY_ANALYSIS bool Mutex::AwaitWithDeadline(
    const Condition& cond, Time deadline) {
  static const auto real = Real<bool (*)(Mutex*, const Condition&, Time)>(
      "5Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  const unsigned read_flag = HeldAsReader(this) ? __tsan_mutex_read_lock : 0;
  ModelReleaseForWait(this, read_flag);
  __tsan_mutex_pre_lock(this, read_flag);
  const bool met = real(this, cond, deadline);
  __tsan_mutex_post_lock(this, read_flag, 0);
  return met;
}

// CondVar waits release the mutex and acquire it again, as Await does.

ABSL_NO_THREAD_SAFETY_ANALYSIS void CondVar::Wait(Mutex* mu) {
  static const auto real =
      Real<void (*)(CondVar*, Mutex*)>("7CondVar4WaitEPNS0_5MutexE");
  const unsigned read_flag = HeldAsReader(mu) ? __tsan_mutex_read_lock : 0;
  ModelReleaseForWait(mu, read_flag);
  __tsan_mutex_pre_lock(mu, read_flag);
  real(this, mu);
  __tsan_mutex_post_lock(mu, read_flag, 0);
}

ABSL_NO_THREAD_SAFETY_ANALYSIS bool CondVar::WaitWithTimeout(Mutex* mu,
                                                             Duration timeout) {
  return WaitWithDeadline(mu, Now() + timeout);
}

ABSL_NO_THREAD_SAFETY_ANALYSIS bool CondVar::WaitWithDeadline(Mutex* mu,
                                                              Time deadline) {
  static const auto real = Real<bool (*)(CondVar*, Mutex*, Time)>(
      "7CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  const unsigned read_flag = HeldAsReader(mu) ? __tsan_mutex_read_lock : 0;
  ModelReleaseForWait(mu, read_flag);
  __tsan_mutex_pre_lock(mu, read_flag);
  const bool timed_out = real(this, mu, deadline);
  __tsan_mutex_post_lock(mu, read_flag, 0);
  return timed_out;
}

void Notification::Notify() {
  static const auto real =
      Real<void (*)(Notification*)>("12Notification6NotifyEv");
  __tsan_release(NotifiedFlag(this));
  real(this);
}

void Notification::WaitForNotification() const {
  static const auto real = Real<void (*)(const Notification*)>(
      "12Notification19WaitForNotificationEv", /*is_const=*/true);
  real(this);
  __tsan_acquire(NotifiedFlag(this));
}

bool Notification::WaitForNotificationWithTimeout(Duration timeout) const {
  static const auto real = Real<bool (*)(const Notification*, Duration)>(
      "12Notification30WaitForNotificationWithTimeoutENS0_8DurationE",
      /*is_const=*/true);
  const bool notified = real(this, timeout);
  if (notified) __tsan_acquire(NotifiedFlag(this));
  return notified;
}

bool Notification::WaitForNotificationWithDeadline(Time deadline) const {
  static const auto real = Real<bool (*)(const Notification*, Time)>(
      "12Notification31WaitForNotificationWithDeadlineENS0_4TimeE",
      /*is_const=*/true);
  const bool notified = real(this, deadline);
  if (notified) __tsan_acquire(NotifiedFlag(this));
  return notified;
}

// What Debian's libabsl_status does (its disassembly shows the same load,
// decrement and delete), but instrumented: the decrement that is not the
// last releases this thread's uses of the representation, and the thread
// that frees it acquires them all. The library's own calls bind here too.
void Status::UnrefNonInlined(uintptr_t rep) {
  status_internal::StatusRep* r = RepToPointer(rep);
  // The last reference needs no decrement: no other thread can hold one.
  if (r->ref.load(std::memory_order_acquire) == 1 ||
      r->ref.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    delete r;
  }
}

ABSL_NAMESPACE_END
}  // namespace absl

// Debian's RocksDB is uninstrumented too, and its own synchronization (the
// atomic reference counts of its Versions and SuperVersions, its port::Mutex
// as its background threads take it) is invisible to ThreadSanitizer: a
// read that a background flush or compaction frees the Version of looks
// like a race (seen: a scan of schedule_counts against Version::Unref on
// rocksdb:low). Races whose stacks pass through RocksDB's own functions are
// not reported. The pattern is anchored: our functions that merely take
// RocksDB's types (the memtables' of storage/memtables.cc) stay checked.
extern "C" const char* __tsan_default_suppressions() {
  return "race:^rocksdb::\n";
}
