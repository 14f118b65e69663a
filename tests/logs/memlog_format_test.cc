#include "rtb/logs/memlog_format.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test_util.h"

namespace rtb::logs {
namespace {

using test::testdata;
using ::testing::HasSubstr;

MemLog read_fixture(const std::string& name) { return read_memlog(testdata(name)); }

TEST(MemLogSummary, TableHasAColumnPerLogAndDeltas) {
  std::vector<MemLog> logs;
  logs.push_back(read_fixture("memlog_engine_compile_a.log"));
  logs.push_back(read_fixture("memlog_engine_compile_b.log"));
  Summary summary = summarize(std::move(logs), {});
  std::string table = format_summary_table(summary);
  std::vector<std::string> lines = test::lines_of(table);
  ASSERT_GE(lines.size(), 5u);
  EXPECT_THAT(lines[0], HasSubstr("memlog_engine_compile_a.log"));
  EXPECT_THAT(lines[0], HasSubstr("delta " + testdata("memlog_engine_compile_b.log")));
  auto row = [&](const std::string& label, std::size_t after = 0) {
    for (std::size_t i = after; i < lines.size(); ++i) {
      if (lines[i].rfind(label, 0) == 0) return lines[i];
    }
    return std::string("missing " + label);
  };
  EXPECT_THAT(row("  temp"), testing::MatchesRegex("  temp +55\\.00 +58\\.50 +\\+3\\.50"));
  EXPECT_THAT(row("  need"), testing::MatchesRegex("  need +92\\.75 +96\\.25 +\\+3\\.50"));
  EXPECT_THAT(row("  headroom"), testing::MatchesRegex("  headroom +1\\.99 +-1\\.51 +-3\\.50"));
  EXPECT_THAT(row("  fits"), testing::MatchesRegex("  fits +yes +NO"));
  EXPECT_THAT(row("  flops"), testing::MatchesRegex("  flops +2\\.125e\\+16 +2\\.125e\\+16 +\\+0"));
  EXPECT_THAT(row("verdict"), testing::MatchesRegex("verdict +fits +DOES NOT FIT \\(fwd_bwd\\)"));
  EXPECT_THAT(row("HBM per device GiB"), HasSubstr("94.74 (compile_topology tpu7x-256)"));
  EXPECT_THAT(table, HasSubstr("WEIGHT-SYNC STAGING"));
  std::string json = format_summary_json(summary);
  EXPECT_THAT(json, HasSubstr("\"schema\": \"rtb.aot-summarize/1\""));
  EXPECT_THAT(json, HasSubstr("\"exit_code\": 1"));
  EXPECT_THAT(json, HasSubstr("\"temp\": 3758096384"));  // the delta of fwd_bwd's temp
}

}  // namespace
}  // namespace rtb::logs
