#ifndef HOURGLASS_CLUSTER_INTERNAL_STRINGS_H_
#define HOURGLASS_CLUSTER_INTERNAL_STRINGS_H_

#include <string_view>

#include "absl/strings/string_view.h"

namespace hourglass::cluster::internal {

// Debian's abseil has a string_view of its own, which absl::StrCat and its
// kin take; std::string_view does not convert to it by itself.
inline absl::string_view AsAbsl(std::string_view s) {
  return absl::string_view(s.data(), s.size());
}

}  // namespace hourglass::cluster::internal

#endif  // HOURGLASS_CLUSTER_INTERNAL_STRINGS_H_
