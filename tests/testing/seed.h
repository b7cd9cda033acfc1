#ifndef HOURGLASS_TESTS_TESTING_SEED_H_
#define HOURGLASS_TESTS_TESTING_SEED_H_

#include <cstdint>
#include <cstdlib>
#include <random>

namespace hourglass::testing {

// The seed of a randomised test: $HOURGLASS_SEED when set (to replay a
// run), else a fresh one. The test logs it (STYLE.md: randomised tests log
// their seed).
inline uint64_t SeedFromEnvironment() {
  if (const char* s = std::getenv("HOURGLASS_SEED"); s != nullptr && *s) {
    return std::strtoull(s, nullptr, 10);
  }
  return std::random_device{}();
}

}  // namespace hourglass::testing

#endif  // HOURGLASS_TESTS_TESTING_SEED_H_
