#ifndef HOURGLASS_TESTS_FUZZ_FUZZ_CHECK_H_
#define HOURGLASS_TESTS_FUZZ_FUZZ_CHECK_H_

// What the fuzz targets share: invariant checks (a violated one prints
// where and what, then aborts, which libFuzzer reports as a crash and saves
// the input; unlike assert, they stay on whatever NDEBUG says), tracing, and
// turning raw bytes into the UTF-8 that gRPC's string fields carry.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

// Aborts unless `cond`, printing the condition and a printf-style detail.
#define FUZZ_CHECK(cond, ...)                                          \
  do {                                                                 \
    if (!(cond)) {                                                     \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK(%s) failed: ", __FILE__, \
                   __LINE__, #cond);                                   \
      std::fprintf(stderr, "" __VA_ARGS__);                            \
      std::fprintf(stderr, "\n");                                      \
      std::abort();                                                    \
    }                                                                  \
  } while (false)

namespace hourglass::fuzz {

// Whether HOURGLASS_FUZZ_TRACE is set: then targets print each operation
// (TRACE), to follow what a crashing input does.
inline bool Tracing() {
  static const bool tracing = std::getenv("HOURGLASS_FUZZ_TRACE") != nullptr;
  return tracing;
}

// `bytes` as valid UTF-8 (each byte read as Latin-1): string fields of a
// request that gRPC parses are valid UTF-8, or the call never arrives.
inline std::string Utf8(const std::string& bytes) {
  std::string out;
  for (char c : bytes) {
    const uint8_t b = static_cast<uint8_t>(c);
    if (b < 0x80) {
      out.push_back(c);
    } else {
      out.push_back(static_cast<char>(0xc0 | (b >> 6)));
      out.push_back(static_cast<char>(0x80 | (b & 0x3f)));
    }
  }
  return out;
}

}  // namespace hourglass::fuzz

// printf-style, to stderr, when Tracing().
#define TRACE(...)                                                       \
  do {                                                                   \
    if (::hourglass::fuzz::Tracing()) std::fprintf(stderr, __VA_ARGS__); \
  } while (false)

#endif  // HOURGLASS_TESTS_FUZZ_FUZZ_CHECK_H_
