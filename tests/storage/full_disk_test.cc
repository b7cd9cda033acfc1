// RocksDbStore on a disk that fills up and frees again: a real tmpfs of a
// few MiB, mounted in a mount namespace of this test's own (so the test
// needs root, as CI runs it). Disk-full handling above the store is tested
// with a faulty store (tests/api/fault_test.cc); this is the part only the
// real RocksDB can show: that it fails cleanly, and comes back.

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/message_store.h"
#include "storage/rocksdb_store.h"
#include "tests/testing/eventually.h"
#include "tests/testing/temp_dir.h"

namespace hourglass::storage {
namespace {

using ::testing::HasSubstr;

constexpr size_t kValueBytes = 64 << 10;

std::string Key(int i) { return absl::StrCat("key-", 100000 + i); }

class FullDiskTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Once per process, before any thread: a mount namespace whose mounts
    // nobody else sees and which ends with the process.
    static const int unshared = [] {
      if (unshare(CLONE_NEWNS) != 0) return errno;
      if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
        return errno;
      }
      return 0;
    }();
    ASSERT_EQ(unshared, 0) << "a mount namespace needs root: "
                           << std::strerror(unshared);
    // RocksDB clears a full disk's error only with 64 MiB free (its
    // SstFileManager's disk buffer): the disk must hold that beside what
    // three rounds of filling it leave (about 100 MiB).
    ASSERT_EQ(
        mount("hourglass-test", dir_.path().c_str(), "tmpfs", 0, "size=256m"),
        0)
        << std::strerror(errno);
    mounted_ = true;
  }

  void TearDown() override {
    store_.reset();
    if (mounted_) umount2(dir_.path().c_str(), MNT_DETACH);
  }

  absl::Status Open() {
    RocksDbStoreOptions options;
    options.path = dir_.path() + "/data";
    absl::StatusOr<std::unique_ptr<MessageStore>> store =
        RocksDbStore::Open(options);
    if (!store.ok()) return store.status();
    store_ = *std::move(store);
    return absl::OkStatus();
  }

  // Takes every free byte of the disk but `leave`.
  void Fill(size_t leave = 0) {
    const std::string filler = dir_.path() + "/filler";
    const int fd = open(filler.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    ASSERT_GE(fd, 0);
    const std::filesystem::space_info space =
        std::filesystem::space(dir_.path());
    off_t size = 0;
    for (off_t chunk = static_cast<off_t>(space.available - leave);
         chunk >= 4096;) {
      if (posix_fallocate(fd, size, chunk) == 0) {
        size += chunk;
      } else {
        chunk /= 2;
      }
    }
    close(fd);
  }

  void Free() { std::filesystem::remove(dir_.path() + "/filler"); }

  absl::Status WriteValue(int i) {
    WriteBatch batch;
    batch.Put(Table::kMessages, Key(i), std::string(kValueBytes, 'v'));
    if (absl::Status s = store_->Write(batch); !s.ok()) return s;
    return store_->SyncLog();
  }

  // Writes values from next_ on until one fails (at most 2,000: 128 MiB,
  // more than the disk holds once filled); returns that failure.
  absl::Status WriteUntilFailure() {
    for (int i = 0; i < 2000; ++i) {
      const int key = next_++;
      if (absl::Status s = WriteValue(key); !s.ok()) return s;
      acknowledged_.push_back(key);
    }
    return absl::OkStatus();
  }

  // Once space returns, RocksDB recovers (by itself, or when a write
  // resumes it): waits until a write succeeds, then `more` must too.
  void ExpectWritesResume(int more) {
    absl::Status resumed;
    ASSERT_TRUE(testing::Eventually(
        [&] {
          resumed = WriteValue(next_);
          return resumed.ok();
        },
        absl::Seconds(30)))
        << resumed;
    acknowledged_.push_back(next_++);
    for (int i = 0; i < more; ++i, ++next_) {
      ASSERT_TRUE(WriteValue(next_).ok()) << next_;
      acknowledged_.push_back(next_);
    }
  }

  // Every acknowledged value is there, whole.
  void ExpectAcknowledgedStored() {
    for (int i : acknowledged_) {
      absl::StatusOr<std::optional<std::string>> got =
          store_->Get(Table::kMessages, Key(i));
      ASSERT_TRUE(got.ok()) << got.status();
      ASSERT_TRUE(got->has_value()) << Key(i);
      EXPECT_EQ((*got)->size(), kValueBytes);
    }
  }

  testing::TempDir dir_;
  bool mounted_ = false;
  std::unique_ptr<MessageStore> store_;
  int next_ = 0;
  std::vector<int> acknowledged_;
};

TEST_F(FullDiskTest, WritesFailAsResourceExhaustedAndResumeOnceSpaceReturns) {
  ASSERT_TRUE(Open().ok());
  Fill(/*leave=*/4 << 20);
  // Writes go on while the log has room, then fail, each with the reason.
  const absl::Status failed = WriteUntilFailure();
  ASSERT_FALSE(failed.ok()) << "128 MiB of writes on a disk with 4 MiB free";
  EXPECT_EQ(failed.code(), absl::StatusCode::kResourceExhausted) << failed;
  EXPECT_THAT(failed.message(), HasSubstr("disk full"));
  // Again and again, the same answer, and no crash: not a write, not a sync.
  for (int i = 0; i < 3; ++i) {
    const absl::Status again = WriteValue(5000 + i);
    EXPECT_EQ(again.code(), absl::StatusCode::kResourceExhausted) << again;
    EXPECT_FALSE(store_->SyncLog().ok());
  }

  Free();
  ExpectWritesResume(/*more=*/0);
  // Everything acknowledged is there, now and after reopening.
  for (int reopen = 0; reopen < 2; ++reopen) {
    ExpectAcknowledgedStored();
    store_.reset();
    ASSERT_TRUE(Open().ok());
  }
}

// A store freshly opened on a full disk, as a node restarted onto one: its
// first log takes the writes its preallocated space holds, then fails them,
// and the store comes back once space returns.
TEST_F(FullDiskTest, AStoreOpenedOnAFullDiskRecoversOnceSpaceReturns) {
  ASSERT_TRUE(Open().ok());
  Fill(/*leave=*/0);
  const absl::Status failed = WriteUntilFailure();
  EXPECT_EQ(failed.code(), absl::StatusCode::kResourceExhausted) << failed;
  EXPECT_FALSE(store_->SyncLog().ok());

  Free();
  ExpectWritesResume(/*more=*/40);
  store_.reset();
  ASSERT_TRUE(Open().ok());
  ExpectAcknowledgedStored();
}

// A store whose write failed comes back from a sync alone once space
// returns, as a backup's copy does: it is synced when the backup follows a
// primary again, before anything is written to it.
TEST_F(FullDiskTest, ASyncAloneBringsTheStoreBackOnceSpaceReturns) {
  ASSERT_TRUE(Open().ok());
  Fill(/*leave=*/1 << 20);
  const absl::Status failed = WriteUntilFailure();
  EXPECT_EQ(failed.code(), absl::StatusCode::kResourceExhausted) << failed;
  EXPECT_EQ(store_->SyncLog().code(), absl::StatusCode::kResourceExhausted);

  Free();
  absl::Status synced;
  ASSERT_TRUE(testing::Eventually(
      [&] {
        synced = store_->SyncLog();
        return synced.ok();
      },
      absl::Seconds(30)))
      << synced;
  ExpectWritesResume(/*more=*/5);
  store_.reset();
  ASSERT_TRUE(Open().ok());
  ExpectAcknowledgedStored();
}

// The disk fills, frees, and fills again: each time the store fails the
// writes cleanly and comes back. (With RocksDB's own recovery alone, the
// third round's write after recovery appended to the log whose write had
// failed, and RocksDB aborted: RocksDbStoreImpl::Recover.)
TEST_F(FullDiskTest, RecoversFromAFullDiskTwiceInARow) {
  ASSERT_TRUE(Open().ok());
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    Fill(/*leave=*/round == 1 ? 0 : (1 << 20));
    const absl::Status failed = WriteUntilFailure();
    EXPECT_EQ(failed.code(), absl::StatusCode::kResourceExhausted) << failed;
    Free();
    ExpectWritesResume(/*more=*/5);
  }
  store_.reset();
  ASSERT_TRUE(Open().ok());
  ExpectAcknowledgedStored();
}

}  // namespace
}  // namespace hourglass::storage
