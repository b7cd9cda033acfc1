#include "broker/ready_window.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hourglass::broker {
namespace {

using storage::DueKey;

ReadyItem Item(int64_t due, uint64_t seq) { return {DueKey{due, seq}}; }

std::vector<DueKey> Drain(ReadyWindow& window) {
  std::vector<DueKey> keys;
  while (std::optional<ReadyItem> front = window.Front()) {
    keys.push_back(front->key);
    window.PopFront();
  }
  return keys;
}

TEST(ReadyWindowTest, ACompleteWindowKeepsEverythingInOrderUpToCapacity) {
  ReadyWindow window(4, /*complete=*/true);
  EXPECT_FALSE(window.frontier().has_value());
  window.Add(Item(30, 3));
  window.Add(Item(10, 1));
  window.Add(Item(20, 2));
  EXPECT_FALSE(window.WantsRefill() && window.frontier().has_value());
  EXPECT_THAT(Drain(window), ::testing::ElementsAre(
                                 DueKey{10, 1}, DueKey{20, 2}, DueKey{30, 3}));
}

TEST(ReadyWindowTest, OverflowDropsTheGreatestAndSetsTheFrontier) {
  ReadyWindow window(2, /*complete=*/true);
  window.Add(Item(10, 1));
  window.Add(Item(30, 3));
  window.Add(Item(20, 2));  // Over capacity: 30/3 goes back to disk only.
  EXPECT_EQ(window.frontier(), (DueKey{30, 3}));
  EXPECT_TRUE(window.MayBeOnDiskOnly(DueKey{30, 3}));
  EXPECT_FALSE(window.MayBeOnDiskOnly(DueKey{20, 2}));
  window.Add(Item(40, 4));  // After the frontier: left for a refill.
  EXPECT_EQ(window.size(), 2u);
  window.Add(Item(5, 5));  // Before it: joins, and 20/2 is dropped.
  EXPECT_EQ(window.frontier(), (DueKey{20, 2}));
  EXPECT_THAT(Drain(window),
              ::testing::ElementsAre(DueKey{5, 5}, DueKey{10, 1}));
  EXPECT_TRUE(window.WantsRefill());
  EXPECT_EQ(window.RefillSize(), 2u);
}

TEST(ReadyWindowTest, ARefillMovesTheFrontierOrCompletesTheWindow) {
  ReadyWindow window(8, /*complete=*/false);
  EXPECT_EQ(window.frontier(), (DueKey{0, 0}));
  EXPECT_TRUE(window.WantsRefill());
  window.ApplyRefill({Item(10, 1), Item(20, 2)}, DueKey{20, 3});
  EXPECT_EQ(window.frontier(), (DueKey{20, 3}));
  window.Add(Item(15, 9));  // Before the frontier: durable now, so it joins.
  window.ApplyRefill({Item(25, 4)}, std::nullopt);
  EXPECT_FALSE(window.frontier().has_value());
  window.Add(Item(99, 7));
  EXPECT_THAT(Drain(window), ::testing::ElementsAre(
                                 DueKey{10, 1}, DueKey{15, 9}, DueKey{20, 2},
                                 DueKey{25, 4}, DueKey{99, 7}));
}

}  // namespace
}  // namespace hourglass::broker
