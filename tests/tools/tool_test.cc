// tools/common/tool: what every tool shares.
#include "common/tool.h"

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <regex>
#include <string>
#include <vector>

#include "rtb/base/error.h"
#include "rtb/base/io.h"
#include "test_util.h"

namespace rtb::tool {
namespace {

TEST(ParseByteCount, PlainNumbersAndBinaryUnits) {
  test::expect_cases<std::int64_t>([](const char* text) { return parse_byte_count(text, "--x"); },
                                   {{"1048576", 1048576},
                                    {"512B", 512},
                                    {"2K", 2048},
                                    {"64MiB", 64 << 20},
                                    {"1.5GiB", 3LL << 29},
                                    {"1TiB", 1LL << 40}});
}

TEST(ParseByteCount, ErrorsNameTheOption) {
  auto message = [](const std::string& text) {
    return std::string(test::error_of([&] { parse_byte_count(text, "--budget"); }).what());
  };
  test::expect_cases(message,
                     {{"lots", "--budget lots: expected a byte count such as 1048576 or 64MiB"},
                      {"-1", "--budget -1: expected a byte count such as 1048576 or 64MiB"},
                      {"3MB", "--budget 3MB: unknown unit 'MB' (B, KiB, MiB, GiB, TiB)"},
                      {"9000000TiB", "--budget 9000000TiB: too large"}});
}

// A tool whose body logs, writes a report and an artifact, then fails, each quoting a credential.
struct SecretsRun {
  int code = 0;
  std::string stderr_text, report, artifact;
};
SecretsRun run_quoting_secrets(std::vector<std::string> args) {
  test::TempDir dir("rtb_tool_secrets");
  std::string report = (dir / "report.txt").string(), artifact = (dir / "job.yaml").string();
  Tool tool({"demo-tool", "A tool.", "  demo-tool\n"});
  args.insert(args.begin(), "demo-tool");
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  SecretsRun out;
  ::testing::internal::CaptureStderr();
  out.code = tool.run(static_cast<int>(argv.size()), argv.data(), [&] {
    spdlog::warn("startup line: export HF_TOKEN=abc123 && python3 run.py");
    tool.write_report(report, "- name: GITHUB_TOKEN\n  value: tok-456\n");
    tool.print_to_stderr("explain: --wandb_api_key=k3y-789\n");
    write_output(artifact, "env HF_TOKEN=abc123\n");
    throw Error("in.txt", 3, "bad value DB_PASSWORD='hunter2 x'");
    return Outcome::kPass;
  });
  std::fflush(stderr);
  out.stderr_text = ::testing::internal::GetCapturedStderr();
  out.report = read_file(report);
  out.artifact = read_file(artifact);
  return out;
}

TEST(ToolSecrets, LogsReportsExplanationsAndErrorsAreMaskedButArtifactsAreNot) {
  SecretsRun run = run_quoting_secrets({});
  EXPECT_EQ(run.code, 2);
  for (const char* secret : {"abc123", "tok-456", "k3y-789", "hunter2"}) {
    EXPECT_EQ(run.stderr_text.find(secret), std::string::npos) << secret << "\n" << run.stderr_text;
    EXPECT_EQ(run.report.find(secret), std::string::npos) << secret;
  }
  const std::regex masked(R"(\*\*\*#[0-9a-f]{8})");
  EXPECT_TRUE(std::regex_search(run.report, masked)) << run.report;
  EXPECT_NE(run.stderr_text.find("demo-tool: warning: startup line: export HF_TOKEN=***#"),
            std::string::npos)
      << run.stderr_text;
  EXPECT_NE(run.stderr_text.find("explain: --wandb_api_key=***#"), std::string::npos);
  EXPECT_NE(run.stderr_text.find("demo-tool: in.txt:3: bad value DB_PASSWORD='***#"),
            std::string::npos);
  EXPECT_EQ(run.artifact, "env HF_TOKEN=abc123\n");
}

TEST(ToolSecrets, ShowSecretsPrintsEverythingInClear) {
  SecretsRun run = run_quoting_secrets({"--show-secrets"});
  EXPECT_EQ(run.code, 2);
  EXPECT_NE(run.stderr_text.find("export HF_TOKEN=abc123 &&"), std::string::npos);
  EXPECT_NE(run.stderr_text.find("--wandb_api_key=k3y-789"), std::string::npos);
  EXPECT_NE(run.stderr_text.find("DB_PASSWORD='hunter2 x'"), std::string::npos);
  EXPECT_NE(run.report.find("value: tok-456"), std::string::npos);
  EXPECT_EQ(run.stderr_text.find("***#"), std::string::npos);
}

TEST(ToolSecrets, EachRunDrawsItsOwnKey) {
  auto fingerprint = [](const SecretsRun& run) {
    std::smatch match;
    std::regex_search(run.report, match, std::regex(R"(\*\*\*#[0-9a-f]{8})"));
    return match.str();
  };
  std::string first = fingerprint(run_quoting_secrets({})),
              second = fingerprint(run_quoting_secrets({}));
  ASSERT_FALSE(first.empty());
  EXPECT_NE(first, second);
}

// A tool whose body reports one note and one warning (the warning quoting a credential).
std::string stderr_of_diagnostics(std::vector<std::string> args) {
  Tool tool({"demo-tool", "A tool.", "  demo-tool\n"});
  args.insert(args.begin(), "demo-tool");
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  ::testing::internal::CaptureStderr();
  int code = tool.run(static_cast<int>(argv.size()), argv.data(), [&] {
    tool.report_diagnostics({{Severity::kNote, "", "left out: the profiler"},
                             {Severity::kWarning, "a.log:3", "export HF_TOKEN=abc123 repeated"}});
    return Outcome::kPass;
  });
  std::fflush(stderr);
  std::string text = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(code, 0);
  return text;
}

TEST(ToolDiagnostics, WarningsByDefaultNotesWithVerboseNothingWithQuiet) {
  const std::string note = "demo-tool: info: left out: the profiler\n";
  const std::string warning = "demo-tool: warning: a.log:3: export HF_TOKEN=***#";
  std::string plain = stderr_of_diagnostics({});
  EXPECT_EQ(plain.find(note), std::string::npos) << plain;
  EXPECT_EQ(plain.rfind(warning, 0), 0u) << plain;
  EXPECT_EQ(plain.find("abc123"), std::string::npos) << plain;
  std::string verbose = stderr_of_diagnostics({"-v"});
  EXPECT_EQ(verbose.rfind(note + warning, 0), 0u) << verbose;  // once each, in order
  EXPECT_EQ(verbose.find(note, 1), std::string::npos) << verbose;
  EXPECT_EQ(stderr_of_diagnostics({"-q"}), "");
}

TEST(ToolSecrets, HelpStatesTheRuleFromTheTable) {
  Tool tool({"demo-tool", "A tool.", "  demo-tool\n"});
  std::string help = tool.app().help();
  EXPECT_NE(help.find("--show-secrets"), std::string::npos);
  EXPECT_NE(help.find("Secrets: "), std::string::npos);
  EXPECT_NE(help.find("..._API_KEY"), std::string::npos);
  EXPECT_NE(help.find("github_pat_..."), std::string::npos);
}

}  // namespace
}  // namespace rtb::tool
