#ifndef HOURGLASS_CONSOLE_ASSETS_H_
#define HOURGLASS_CONSOLE_ASSETS_H_

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace hourglass::console {

// A file of the web console, embedded in the binary at build time
// (cmake/EmbedFiles.cmake): console/*.{html,css,js} and Debian's Chart.js.
struct Asset {
  // Served at "/" + name.
  absl::string_view name;
  absl::string_view bytes;
};

// Every asset, in console/CMakeLists.txt's order.
absl::Span<const Asset> Assets();

}  // namespace hourglass::console

#endif  // HOURGLASS_CONSOLE_ASSETS_H_
