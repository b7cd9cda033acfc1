#include "api/secret_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "openssl/crypto.h"

namespace hourglass::api {
namespace {

// Closes a file descriptor when it goes out of scope.
class FileCloser {
 public:
  explicit FileCloser(int fd) : fd_(fd) {}
  ~FileCloser() { close(fd_); }
  FileCloser(const FileCloser&) = delete;
  FileCloser& operator=(const FileCloser&) = delete;

 private:
  const int fd_;
};

}  // namespace

absl::Status CheckTokenFileMode(absl::string_view path, mode_t mode,
                                uid_t owner, uid_t euid) {
  const bool root_shares = owner == 0 && euid != 0;
  const mode_t refused =
      root_shares ? (S_IWGRP | S_IXGRP | S_IRWXO) : (S_IRWXG | S_IRWXO);
  const mode_t open_to = mode & refused;
  if (open_to == 0) return absl::OkStatus();
  std::vector<absl::string_view> how;
  if ((open_to & (S_IRGRP | S_IROTH)) != 0) how.push_back("readable");
  if ((open_to & (S_IWGRP | S_IWOTH)) != 0) how.push_back("writable");
  if ((open_to & (S_IXGRP | S_IXOTH)) != 0) how.push_back("executable");
  std::string hows(how.back());
  if (how.size() > 1) {
    hows = absl::StrCat(absl::StrJoin(how.begin(), how.end() - 1, ", "),
                        " and ", hows);
  }
  const bool group = (open_to & S_IRWXG) != 0;
  const bool others = (open_to & S_IRWXO) != 0;
  return absl::FailedPreconditionError(absl::StrFormat(
      "%s is %s by %s (mode %04o); chmod %s it", path, hows,
      group && others ? "group and others" : (group ? "group" : "others"),
      mode & 07777, root_shares ? "640" : "600"));
}

absl::StatusOr<std::string> ReadSecretFile(const std::string& path,
                                           absl::string_view what) {
  auto cannot_read = [&](int error) {
    return absl::StrCat("cannot read ", what, " \"", path,
                        "\": ", std::strerror(error));
  };
  // O_NONBLOCK: opening a FIFO must not hang; it is refused below.
  const int fd =
      open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    const int error = errno;
    if (error == EACCES) return absl::PermissionDeniedError(cannot_read(error));
    return absl::NotFoundError(cannot_read(error));
  }
  FileCloser closer(fd);
  struct stat st;
  if (fstat(fd, &st) != 0) return absl::DataLossError(cannot_read(errno));
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, " \"", path, "\" is not a regular file"));
  }
  if (absl::Status mode =
          CheckTokenFileMode(path, st.st_mode, st.st_uid, geteuid());
      !mode.ok()) {
    return mode;
  }
  std::string text;
  char buffer[16 << 10];
  while (true) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::DataLossError(cannot_read(errno));
    }
    text.append(buffer, static_cast<size_t>(n));
  }
  return text;
}

PaddedSecret PadSecret(absl::string_view secret) {
  PaddedSecret padded;
  std::memcpy(padded.bytes.data(), secret.data(),
              std::min(secret.size(), kMaxSecretBytes));
  padded.size = secret.size();
  return padded;
}

unsigned SecretDifference(const PaddedSecret& a, const PaddedSecret& b) {
  unsigned diff = static_cast<unsigned>(
      CRYPTO_memcmp(a.bytes.data(), b.bytes.data(), kMaxSecretBytes));
  const uint64_t sizes = static_cast<uint64_t>(a.size ^ b.size);
  // Fold every bit of the size difference into the low bits.
  diff |= static_cast<unsigned>(sizes) | static_cast<unsigned>(sizes >> 32);
  return diff;
}

}  // namespace hourglass::api
