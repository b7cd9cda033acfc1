#include "storage/keys.h"

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hourglass::storage {
namespace {

using ::testing::Optional;
using ::testing::Pair;

TEST(KeysTest, IntegersAreBigEndianFixedWidth) {
  std::string out;
  AppendU64(out, 0x0102030405060708);
  AppendU32(out, 0x0a0b0c0d);
  EXPECT_EQ(
      out, std::string("\x01\x02\x03\x04\x05\x06\x07\x08\x0a\x0b\x0c\x0d", 12));
  EXPECT_EQ(ReadU64(out), 0x0102030405060708u);
  EXPECT_EQ(ReadU32(std::string_view(out).substr(8)), 0x0a0b0c0du);
}

TEST(KeysTest, RoundTrips) {
  const DueKey due{1'795'000'000'123, 77};
  EXPECT_THAT(DecodeScheduleKey(ScheduleKey(due)), Optional(due));
  EXPECT_THAT(DecodeMessageKey(MessageKey(42)), Optional(42u));
  const std::string prefix = ReadyPrefix("orders", "billing");
  EXPECT_THAT(DecodeReadySuffix(ReadyKey("orders", "billing", due), prefix),
              Optional(due));
  EXPECT_THAT(DecodeGroupKey(GroupKey("orders", "billing")),
              Optional(Pair("orders", "billing")));
}

TEST(KeysTest, MalformedKeysDoNotDecode) {
  EXPECT_EQ(DecodeScheduleKey("short"), std::nullopt);
  EXPECT_EQ(DecodeMessageKey("123456789"), std::nullopt);
  EXPECT_EQ(DecodeReadySuffix(ReadyKey("a", "g", {}), ReadyPrefix("a", "h")),
            std::nullopt);
  EXPECT_EQ(DecodeGroupKey("meta/x"), std::nullopt);
  EXPECT_EQ(DecodeGroupKey("group/no-terminator"), std::nullopt);
}

TEST(KeysTest, NamesNeverPrefixOtherNamesKeys) {
  // "ab" must not sort inside the range of topic "a" with group "b...".
  const std::string a = ReadyPrefix("a", "b");
  const std::string ab = ReadyPrefix("ab", "");
  EXPECT_FALSE(ab.starts_with(a));
  EXPECT_FALSE(IdKey("ab", "c").starts_with(IdKey("a", "")));
  EXPECT_FALSE(InFlightKey("orders", "g1", 5)
                   .starts_with(InFlightPrefix("orders", "g")));
}

TEST(KeysTest, PrefixEndBoundsEveryKeyWithThePrefix) {
  EXPECT_EQ(PrefixEnd("abc"), "abd");
  EXPECT_EQ(PrefixEnd(std::string("a\xff\xff", 3)), "b");
  const std::string prefix = ReadyPrefix("t", "g");
  const std::string end = PrefixEnd(prefix);
  EXPECT_LT(ReadyKey("t", "g", {INT64_MAX, UINT64_MAX}), end);
  EXPECT_GE(ReadyPrefix("t", "h"), end);
}

// Encoded byte order equals tuple order, for random tuples (seed logged).
TEST(KeysTest, EncodingsPreserveOrder) {
  const uint64_t seed = std::random_device{}();
  std::printf("seed=%llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  auto pick = [&](std::vector<uint64_t> interesting) {
    if (rng() % 2) return interesting[rng() % interesting.size()];
    return static_cast<uint64_t>(rng());
  };
  const std::vector<std::string> names = {"",   "a", "a.b", "a-b",
                                          "ab", "b", "z_9"};
  using Tuple = std::tuple<std::string, std::string, int64_t, uint64_t>;
  std::vector<std::pair<Tuple, std::string>> keys;
  for (int i = 0; i < 20'000; ++i) {
    const int64_t due = static_cast<int64_t>(
        pick({0, 1, 255, 256, 65535, 65536, uint64_t{1} << 40}) >> 1);
    const uint64_t seq = pick({0, 1, 255, 256, UINT64_MAX});
    Tuple t{names[rng() % names.size()], names[rng() % names.size()], due, seq};
    keys.emplace_back(
        t, ReadyKey(std::get<0>(t), std::get<1>(t), DueKey{due, seq}));
  }
  auto by_tuple = keys;
  std::sort(by_tuple.begin(), by_tuple.end(),
            [](const auto& x, const auto& y) { return x.first < y.first; });
  auto by_bytes = keys;
  std::sort(by_bytes.begin(), by_bytes.end(),
            [](const auto& x, const auto& y) { return x.second < y.second; });
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_EQ(by_tuple[i].second, by_bytes[i].second) << "index " << i;
  }
}

}  // namespace
}  // namespace hourglass::storage
