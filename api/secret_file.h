#ifndef HOURGLASS_API_SECRET_FILE_H_
#define HOURGLASS_API_SECRET_FILE_H_

#include <sys/types.h>

#include <array>
#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace hourglass::api {

// The files that hold secrets (hourglassd's --auth_tokens and
// --peer_token_file), and comparing secrets in time that does not depend
// on what they hold. Thread-safe: functions of their arguments only.

// OK if a secret file of mode `mode`, owned by `owner`, may be used by a
// process running as `euid`; otherwise FAILED_PRECONDITION naming `path`,
// what is wrong and the fix, e.g.
// `tokens.txt is readable by group and others (mode 0644); chmod 600 it`.
//
// A secret file may be open to its owner only, with one exception taken
// from PostgreSQL's rule for its TLS key: a file owned by root, used by
// another user, may also be readable (not writable) by its group, so that
// root can share it with the broker's group alone (root:hourglass, mode
// 0640; a Kubernetes Secret mounted with an fsGroup, mode 0440).
absl::Status CheckTokenFileMode(absl::string_view path, mode_t mode,
                                uid_t owner, uid_t euid);

// The contents of the secret file at `path` (following symbolic links);
// `what` names it in errors ("token file"). Errors: NOT_FOUND or
// PERMISSION_DENIED if it cannot be opened, DATA_LOSS if reading it fails,
// FAILED_PRECONDITION if it is not a regular file (a FIFO is refused
// without blocking) or its mode lets others in (CheckTokenFileMode).
absl::StatusOr<std::string> ReadSecretFile(const std::string& path,
                                           absl::string_view what);

// The longest secret compared: longer ones differ from every secret.
inline constexpr size_t kMaxSecretBytes = 512;

// A secret zero-padded to kMaxSecretBytes, the fixed width every
// comparison runs over, with its size.
struct PaddedSecret {
  std::array<unsigned char, kMaxSecretBytes> bytes{};
  size_t size = 0;
};
PaddedSecret PadSecret(absl::string_view secret);

// Zero if `a` and `b` are the same secret, else non-zero. Always reads
// every byte of both and both sizes, without a branch on what they hold
// (OpenSSL's CRYPTO_memcmp), so that the time taken tells nothing about how
// much of a secret matched.
unsigned SecretDifference(const PaddedSecret& a, const PaddedSecret& b);

// All ones (~size_t{0}) when `difference` is zero, else zero, without a
// branch: for picking a match among many secrets in constant time.
inline size_t MaskIfEqual(unsigned difference) {
  return static_cast<size_t>(0) -
         static_cast<size_t>(((difference | (0u - difference)) >> 31) ^ 1u);
}

}  // namespace hourglass::api

#endif  // HOURGLASS_API_SECRET_FILE_H_
