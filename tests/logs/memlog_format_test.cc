#include "rtb/logs/memlog_format.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test_util.h"

namespace rtb::logs {
namespace {

TEST(MemLogSummary, TableHasAColumnPerLogAndDeltas) {
  std::vector<MemLog> logs;
  logs.push_back(read_memlog(testdata("memlog_engine_compile_a.log")));
  logs.push_back(read_memlog(testdata("memlog_engine_compile_b.log")));
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
  // The staging note: in `notes` (its message) and in `diagnostics` (with its place).
  EXPECT_THAT(json, HasSubstr("\"notes\": [\"WEIGHT-SYNC STAGING"));
  EXPECT_THAT(json, HasSubstr("\"diagnostics\": [\n        {\"severity\": \"note\", \"where\": \"" +
                              testdata("memlog_engine_compile_a.log") + ":"));
}

std::string row_of(const std::string& table, const std::string& label) {
  for (const std::string& line : test::lines_of(table)) {
    if (line.rfind(label, 0) == 0) return line;
  }
  return "missing " + label;
}

Summary summary_of(const std::string& name) {
  std::vector<MemLog> logs;
  logs.push_back(read_memlog(testdata(name)));
  return summarize(std::move(logs), {});
}

TEST(MemLogSummary, MeasuredAndEstimatedBothShownAndTheDisagreementNamed) {
  Summary summary =
      summary_of("memlog_maxtext_gemma4_baseline_L4440-4729_measured_fits_estimate_not.log");
  std::string table = format_summary_table(summary);
  EXPECT_THAT(row_of(table, "  resident"), testing::MatchesRegex("  resident +75\\.87"));
  EXPECT_THAT(table, testing::ContainsRegex("\n  resident +105\\.50\n"));
  EXPECT_THAT(table, HasSubstr("NO (estimate; the measured usage decides)"));
  EXPECT_THAT(
      row_of(table, "verdict"),
      testing::MatchesRegex("verdict +fits \\(measured usage; the estimate says it does not\\)"));
  EXPECT_THAT(table, HasSubstr("estimate for train_step (line 51) is 105.50 GiB, more than the "
                               "94.74 GiB HBM per device, but libtpu measured 75.87 GiB"));
  std::string json = format_summary_json(summary);
  EXPECT_THAT(json, HasSubstr("\"estimate_disagreement\": {\"decided_by\": \"measured\""));
  EXPECT_THAT(json, HasSubstr("\"estimate_fits\": false"));
  EXPECT_THAT(json, HasSubstr("\"measured_fits\": true"));
  EXPECT_THAT(json, HasSubstr("\"fits\": false, \"decides\": false"));
}

TEST(MemLogSummary, OutOfMemorySizesKeepTheLogsUnits) {
  EXPECT_THAT(row_of(format_summary_table(summary_of("memlog_oom_runtime_allocate_mib.log")),
                     "out of memory"),
              testing::EndsWith("line 4: hbm: allocating 125.25 MiB failed, 44.87 MiB free"));
  EXPECT_THAT(row_of(format_summary_table(summary_of("memlog_oom_runtime_allocate_mib.log")),
                     "HBM per device GiB"),
              testing::EndsWith(" -"));
  EXPECT_THAT(
      row_of(format_summary_table(summary_of("memlog_oom_runtime_reserve_e0101_wrapped.log")),
             "out of memory"),
      testing::EndsWith("line 2: reserving 29.49 GiB for a program failed, 147.64 MiB free, 0 B "
                        "reserved, 147.64 MiB reservable"));
  EXPECT_THAT(row_of(format_summary_table(
                         summary_of("memlog_maxtext_gemma4_compile_oom_vmem_L1776-1790.log")),
                     "out of memory"),
              testing::EndsWith("line 7: vmem 66.93 MiB needed, 63.94 available"));
  std::string json = format_summary_json(summary_of("memlog_oom_runtime_allocate_mib.log"));
  EXPECT_THAT(json, HasSubstr("\"kind\": \"allocate\""));
  EXPECT_THAT(json, HasSubstr("\"required_bytes\": 131334144, \"available_bytes\": null, "
                              "\"free_bytes\": 47049605"));
}

}  // namespace
}  // namespace rtb::logs
