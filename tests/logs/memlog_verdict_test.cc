#include "rtb/logs/memlog_verdict.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "rtb/base/error.h"
#include "test_util.h"

namespace rtb::logs {
namespace {

TEST(MemLogSummary, HbmBudgetSources) {
  MemLog log = read_memlog(testdata("memlog_engine_compile_a.log"));
  EXPECT_EQ(hbm_budget(log, {})->source, "compile_topology tpu7x-256");
  EXPECT_DOUBLE_EQ(hbm_budget(log, {})->gib, 94.74);
  EXPECT_EQ(hbm_budget(log, {std::nullopt, "v5p"})->source, "chip v5p");
  EXPECT_DOUBLE_EQ(hbm_budget(log, {80.0, "v5p"})->gib, 80.0);
  EXPECT_THROW(hbm_budget(log, {std::nullopt, "tpu9"}), Error);
  MemLog usage = read_memlog(testdata("memlog_live_tpu_usage.log"));
  EXPECT_EQ(hbm_budget(usage, {})->source, "log");
  EXPECT_FALSE(hbm_budget(read_memlog(testdata("memlog_train_compile.log")), {}) ==
               std::nullopt);  // v6e-4
  MemLog docs = read_memlog(testdata("memlog_maxtext_docs_excerpts_5f0dabb4.log"));
  EXPECT_FALSE(hbm_budget(docs, {}).has_value());
}

// Issue 16, on the real log: libtpu measured 75.87G of 94.74G and the run trained, while
// MaxText's compile-time estimate said 105.5 GB. The measurement decides.
TEST(MemLogSummary, MeasuredUsageOutranksTheEstimate) {
  std::vector<MemLog> logs;
  logs.push_back(read_memlog(
      testdata("memlog_maxtext_gemma4_baseline_L4440-4729_measured_fits_estimate_not.log")));
  Summary summary = summarize(std::move(logs), {});
  EXPECT_EQ(summary.outcome(), Outcome::kPass) << (summary.error ? summary.error->what() : "");
  const MemLog& log = summary.logs[0];
  const LogVerdict& verdict = summary.verdicts[0];
  ASSERT_EQ(log.programs.size(), 2u);
  EXPECT_EQ(log.programs[0].source, ProgramSource::kTpuProgramUsage);
  EXPECT_EQ(log.programs[1].source, ProgramSource::kEstimatedTotal);
  EXPECT_EQ(verdict.fits, true);
  EXPECT_EQ(verdict.programs[0].fits, true);
  EXPECT_TRUE(verdict.programs[0].decides);
  EXPECT_EQ(verdict.programs[1].fits, false) << "the estimate is still judged and shown";
  EXPECT_FALSE(verdict.programs[1].decides);
  ASSERT_TRUE(verdict.disagreement.has_value());
  EXPECT_EQ(verdict.disagreement->estimate, 1u);
  EXPECT_EQ(verdict.disagreement->measured, 0u);
  EXPECT_TRUE(verdict.disagreement->measured_fits);

  // The other way round: the measurement does not fit although the estimate does.
  std::vector<MemLog> reverse;
  reverse.push_back(parse_memlog(
      "Total estimated memory size: 20.0 GB, estimated output size: 1.0 GB, estimated temp size: "
      "18.0 GB, estimated argument size: 1.0 GB, Estimated host temp size: 0.0 GB.\n"
      "XLA::TPU program HBM usage: 33.10G / 31.25G\n",
      "reverse.log"));
  Summary worse = summarize(std::move(reverse), {});
  EXPECT_EQ(worse.outcome(), Outcome::kFail);
  ASSERT_TRUE(worse.verdicts[0].disagreement.has_value());
  EXPECT_FALSE(worse.verdicts[0].disagreement->measured_fits);

  // An estimate alone still decides.
  std::vector<MemLog> alone;
  alone.push_back(read_memlog(testdata("memlog_maxtext_docs_excerpts_5f0dabb4.log")));
  Summary estimate_only = summarize(std::move(alone), {std::nullopt, "v5p"});
  EXPECT_EQ(estimate_only.outcome(), Outcome::kFail);
  EXPECT_TRUE(estimate_only.verdicts[0].programs[0].decides);
  EXPECT_FALSE(estimate_only.verdicts[0].disagreement.has_value());
}

TEST(MemLogSummary, FreeMemoryIsNoHbmBudget) {
  MemLog log = read_memlog(testdata("memlog_oom_runtime_allocate_mib.log"));
  EXPECT_FALSE(hbm_budget(log, {}).has_value()) << "44.87M free is not the HBM per device";
}

TEST(MemLogSummary, ExitCodes) {
  auto run = [](std::vector<std::string> files, HbmOptions options = {}) {
    std::vector<MemLog> logs;
    for (const std::string& f : files) logs.push_back(read_memlog(testdata(f)));
    return summarize(std::move(logs), options);
  };
  Summary fits = run({"memlog_engine_compile_a.log"});
  EXPECT_EQ(fits.outcome(), Outcome::kPass) << (fits.error ? fits.error->what() : "");
  EXPECT_NEAR(*fits.verdicts[0].programs[0].headroom_gib, 94.74 - 92.75, 1e-9);
  EXPECT_EQ(fits.verdicts[0].programs[0].fits, true);

  Summary ab = run({"memlog_engine_compile_a.log", "memlog_engine_compile_b.log"});
  EXPECT_EQ(ab.outcome(), Outcome::kFail);
  EXPECT_EQ(ab.verdicts[1].programs[0].fits, false);
  EXPECT_EQ(ab.verdicts[1].programs[1].fits, true);

  EXPECT_EQ(run({"memlog_engine_compile_a.log"}, {90.0, std::nullopt}).outcome(), Outcome::kFail);
  EXPECT_EQ(run({"memlog_oom_engine_hlo_temporaries.log"}).outcome(), Outcome::kFail);
  EXPECT_EQ(run({"memlog_oom_with_truncated_dict.log"}).outcome(), Outcome::kFail);
  EXPECT_EQ(run({"memlog_oom_runtime_allocate.log"}).outcome(), Outcome::kFail);

  Summary empty = run({"memlog_bad_empty.log"});
  EXPECT_EQ(empty.outcome(), Outcome::kError);
  EXPECT_THAT(empty.error->what(), HasSubstr("memlog_bad_empty.log: holds no memory analysis"));
  // A note is no problem: the log with the staging note fits (above); a problem refuses the log,
  // its text the error.
  Summary truncated = run({"memlog_engine_compile_a.log", "memlog_bad_truncated_dict.log"});
  ASSERT_TRUE(truncated.error.has_value());
  EXPECT_EQ(truncated.error->what(), truncated.logs[1].problems().front());
  EXPECT_EQ(truncated.outcome(), Outcome::kError);
  EXPECT_THAT(truncated.error->what(), HasSubstr("memlog_bad_truncated_dict.log:2:"));
  Summary unknown_hbm = run({"memlog_maxtext_docs_excerpts_5f0dabb4.log"});
  EXPECT_EQ(unknown_hbm.outcome(), Outcome::kError);
  EXPECT_THAT(unknown_hbm.error->what(), HasSubstr("--hbm-gib or --chip"));
  EXPECT_EQ(run({"memlog_maxtext_docs_excerpts_5f0dabb4.log"}, {std::nullopt, "v5p"}).outcome(),
            Outcome::kFail)
      << "100.4 GiB does not fit in v5p's 95";
  EXPECT_EQ(run({"memlog_maxtext_docs_excerpts_5f0dabb4.log"}, {101.0, std::nullopt}).outcome(),
            Outcome::kPass);
}

}  // namespace
}  // namespace rtb::logs
