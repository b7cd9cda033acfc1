#ifndef HOURGLASS_TESTS_FUZZ_FUZZ_CHECK_H_
#define HOURGLASS_TESTS_FUZZ_FUZZ_CHECK_H_

// Invariant checks for the fuzz targets: a violated one prints where and
// what, then aborts, which libFuzzer reports as a crash and saves the input.
// Unlike assert, they stay on whatever NDEBUG says.

#include <cstdio>
#include <cstdlib>

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

#endif  // HOURGLASS_TESTS_FUZZ_FUZZ_CHECK_H_
