// The hourglass CLI's tables, JSON and escaping.

#include "cmd/common/output.h"

#include "gtest/gtest.h"
#include "hourglass/v1/admin.pb.h"
#include "hourglass/v1/broker.pb.h"

namespace hourglass::cli {
namespace {

TEST(TableTest, PadsColumnsToTheWidestCellWithoutTrailingSpace) {
  Table table({"ID", "DELIVER_AT", "DUPLICATE"});
  table.AddRow({"m1", "2026-01-02T15:04:05.000Z", "no"});
  table.AddRow({"a-longer-id", "2026-01-02T15:04:05.250Z", "yes"});
  EXPECT_EQ(table.Render(),
            "ID           DELIVER_AT                DUPLICATE\n"
            "m1           2026-01-02T15:04:05.000Z  no\n"
            "a-longer-id  2026-01-02T15:04:05.250Z  yes\n");
}

TEST(TableTest, RightAlignsNumericColumns) {
  Table table({"TOPIC", "SCHEDULED", "GROUPS"});
  table.AlignRight(1);
  table.AlignRight(2);
  table.AddRow({"orders", "12345", "2"});
  table.AddRow({"t", "7", "10"});
  EXPECT_EQ(table.Render(),
            "TOPIC   SCHEDULED  GROUPS\n"
            "orders      12345       2\n"
            "t               7      10\n");
}

TEST(TableTest, EmptyTableIsItsHeader) {
  Table table({"A", "B"});
  EXPECT_TRUE(table.empty());
  EXPECT_EQ(table.Render(), "A  B\n");
}

TEST(JsonQuoteTest, EscapesWhatJsonRequires) {
  EXPECT_EQ(JsonQuote("plain"), "\"plain\"");
  EXPECT_EQ(JsonQuote("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(JsonQuote("l1\nl2\t\r"), "\"l1\\nl2\\t\\r\"");
  EXPECT_EQ(JsonQuote(std::string("\x01", 1)), "\"\\u0001\"");
  EXPECT_EQ(JsonQuote("h\xc3\xa9"), "\"h\xc3\xa9\"");
}

TEST(ToJsonTest, UsesProtoFieldNamesAndPrintsDefaults) {
  hourglass::v1::PublishResponse response;
  hourglass::v1::Receipt* receipt = response.add_receipts();
  receipt->set_id("m1");
  receipt->mutable_deliver_at()->set_seconds(1893456000);  // 2030-01-01.
  EXPECT_EQ(*ToJson(response),
            "{\"receipts\":[{\"id\":\"m1\",\"duplicate\":false,"
            "\"deliver_at\":\"2030-01-01T00:00:00Z\"}]}");

  hourglass::v1::MessageInfo info;
  info.set_state(hourglass::v1::MESSAGE_STATE_IN_FLIGHT);
  info.set_payload_preview("hi");
  const std::string json = *ToJson(info);
  EXPECT_NE(json.find("\"state\":\"MESSAGE_STATE_IN_FLIGHT\""),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"payload_preview\":\"aGk=\""), std::string::npos)
      << json;
}

TEST(LogfmtValueTest, QuotesOnlyWhatNeedsIt) {
  EXPECT_EQ(LogfmtValue("order-42"), "order-42");
  EXPECT_EQ(LogfmtValue("{\"a\":1}"), "\"{\\\"a\\\":1}\"");
  EXPECT_EQ(LogfmtValue("hello world"), "\"hello world\"");
  EXPECT_EQ(LogfmtValue("a=b"), "\"a=b\"");
  EXPECT_EQ(LogfmtValue(""), "\"\"");
  EXPECT_EQ(LogfmtValue("l1\nl2"), "\"l1\\nl2\"");
  EXPECT_EQ(LogfmtValue(std::string("\0\xff", 2)), "\"\\x00\\xff\"");
}

TEST(PrintableTest, EscapesUnprintableBytesOnly) {
  EXPECT_EQ(Printable("hello world"), "hello world");
  EXPECT_EQ(Printable("a\nb\\"), "a\\nb\\\\");
  EXPECT_EQ(Printable(std::string("\x01\x7f", 2)), "\\x01\\x7f");
}

TEST(ShellQuoteTest, QuotesForAPosixShell) {
  EXPECT_EQ(ShellQuote("orders"), "orders");
  EXPECT_EQ(ShellQuote("127.0.0.1:7070"), "127.0.0.1:7070");
  EXPECT_EQ(ShellQuote("abc+/="), "abc+/=");
  EXPECT_EQ(ShellQuote("a b"), "'a b'");
  EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'");
  EXPECT_EQ(ShellQuote(""), "''");
}

}  // namespace
}  // namespace hourglass::cli
