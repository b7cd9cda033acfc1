#ifndef HOURGLASS_CMD_HOURGLASSD_ALLOCATOR_H_
#define HOURGLASS_CMD_HOURGLASSD_ALLOCATOR_H_

#include <string>

namespace hourglass::hourglassd {

// The memory allocator hourglassd was linked with, for --version: "jemalloc"
// and its version (the default build, HOURGLASS_JEMALLOC), or "glibc malloc"
// (builds without it: the sanitizer presets, whose runtimes then put their
// own allocator in glibc's place).
//
// Why jemalloc: a broker's threads allocate and free many small protobuf
// and string pieces, with larger buffers among them; under glibc's malloc
// each larger request merges every freed small piece first
// (malloc_consolidate), which took over half of a request thread's time.
// BENCHMARKS.md has the before and after.
std::string AllocatorName();

}  // namespace hourglass::hourglassd

#endif  // HOURGLASS_CMD_HOURGLASSD_ALLOCATOR_H_
