#include "cmd/hourglassd/allocator.h"

#if HOURGLASS_JEMALLOC
#include <jemalloc/jemalloc.h>
#endif

namespace hourglass::hourglassd {

std::string AllocatorName() {
#if HOURGLASS_JEMALLOC
  const char* version = nullptr;
  size_t size = sizeof(version);
  if (mallctl("version", &version, &size, nullptr, 0) != 0 ||
      version == nullptr) {
    return "jemalloc";
  }
  return std::string("jemalloc ") + version;
#else
  return "glibc malloc";
#endif
}

}  // namespace hourglass::hourglassd
