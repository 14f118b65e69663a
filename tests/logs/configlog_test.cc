// Tests of logs/configlog.h: `Config param` lines in every prefix, dumps (several per log,
// truncated ones, fed in blocks of any size) and value canonicalisation, on real MaxText logs
// (testdata/configlog_*, see SOURCES.md) and small texts.
#include "rtb/logs/configlog.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <string>

#include "rtb/base/error.h"
#include "rtb/base/io.h"
#include "test_util.h"

namespace rtb::logs {
namespace {

using test::error_of;

const char* kDpo = "configlog_maxtext_dpo_qwen3-0.6b_tpu-v5p-8_train.log";
const char* kGrpo = "configlog_maxtext_grpo_llama3.1-8b_config_dump.log";
const char* kGpt3 = "configlog_maxtext_gpu_a3-h100x8_gpt3-22b_train.log";

ConfigLog scan(std::string_view text, ConfigLogOptions options = {}, std::size_t block = 0) {
  ConfigLogScanner scanner(options);
  if (block == 0) block = text.size() + 1;
  for (std::size_t at = 0; at < text.size(); at += block) scanner.feed(text.substr(at, block));
  return scanner.finish("test.log");
}

std::map<std::string, std::string> as_map(const std::vector<ConfigSetting>& settings) {
  std::map<std::string, std::string> out;
  for (const ConfigSetting& s : settings) out[s.key] = s.value;
  return out;
}

std::string temp_file(const std::string& name, const std::string& content) {
  std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path, std::ios::binary) << content;
  return path;
}

// --- lines ---------------------------------------------------------------------------------------

TEST(ConfigParamLine, EveryPrefix) {
  for (const char* line :
       {"I0706 16:49:36.938964 140110937163584 pyconfig.py:559] Config param adam_b1: 0.9",
        "INFO:MaxText.pyconfig:Config param adam_b1: 0.9", "Config param adam_b1: 0.9",
        "2026-08-21 10:00:10,004 - [TrainerNode] Config param adam_b1: 0.9\r"}) {
    auto param = parse_config_param_line(line);
    ASSERT_TRUE(param) << line;
    EXPECT_EQ(param->first, "adam_b1");
    EXPECT_EQ(param->second, "0.9");
  }
  auto empty = parse_config_param_line("Config param audio_path: ");
  ASSERT_TRUE(empty);
  EXPECT_EQ(empty->second, "");
  auto stripped = parse_config_param_line("Config param audio_path:");
  ASSERT_TRUE(stripped);
  EXPECT_EQ(stripped->second, "");
  auto colon = parse_config_param_line("Config param base_output_directory: gs://b/x: y");
  ASSERT_TRUE(colon);
  EXPECT_EQ(colon->second, "gs://b/x: y");
  EXPECT_FALSE(parse_config_param_line("Config parameters were logged"));
  EXPECT_FALSE(parse_config_param_line("Config param has spaces: 1"));
  EXPECT_FALSE(parse_config_param_line("Config param : 1"));
  EXPECT_FALSE(parse_config_param_line("no marker: 1"));
}

// --- real logs
// -------------------------------------------------------------------------------------

TEST(ConfigLogReal, AbslPrefixedTpuLog) {
  ConfigLog log = read_config_log(testdata(kDpo));
  ASSERT_EQ(log.dumps.size(), 1u);
  EXPECT_TRUE(log.dumps[0].complete);
  EXPECT_EQ(log.dumps[0].first_line, 15u);
  EXPECT_EQ(log.dumps[0].last_line, 790u);
  EXPECT_EQ(log.dumps[0].params, 776u);
  EXPECT_EQ(log.selected, 1u);
  ASSERT_EQ(log.params.size(), 776u);
  auto values = as_map(log.params);
  EXPECT_EQ(values["abort_on_inf_loss"], "True");
  EXPECT_EQ(values["audio_path"], "");
  EXPECT_EQ(values["dcn_parallelism"], "[1, -1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]");
  EXPECT_EQ(values["z_loss_multiplier"], "0.0");
  EXPECT_EQ(log.params.front().line, 15u);
}

TEST(ConfigLogReal, PythonLoggingAndPlainPrefixes) {
  ConfigLog grpo = read_config_log(testdata(kGrpo));
  EXPECT_EQ(grpo.params.size(), 516u);
  EXPECT_EQ(grpo.params.front().key, "act_quantization_calibration_method");
  ConfigLog gpt3 = read_config_log(testdata(kGpt3));
  EXPECT_EQ(gpt3.params.size(), 121u);
  EXPECT_EQ(as_map(gpt3.params)["decoder_block"], "gpt3");
}

TEST(ConfigLogReal, BlockBoundariesDoNotMatter) {
  std::string text = read_file(testdata(kDpo));
  ConfigLog whole = scan(text);
  for (std::size_t block : {1u, 7u, 13u, 4096u}) {
    ConfigLog pieces = scan(text, {}, block);
    ASSERT_EQ(pieces.params.size(), whole.params.size()) << block;
    EXPECT_EQ(pieces.lines, whole.lines) << block;
    for (std::size_t i = 0; i < whole.params.size(); ++i) {
      EXPECT_EQ(pieces.params[i].key, whole.params[i].key);
      EXPECT_EQ(pieces.params[i].value, whole.params[i].value);
      EXPECT_EQ(pieces.params[i].line, whole.params[i].line);
    }
  }
}

TEST(ConfigLogReal, RestartLogKeepsTheLastCompleteDump) {
  // configlog_restart.log: the pre-PGO run, the same run killed after 60 keys, the PGO run.
  ConfigLog log = read_config_log(testdata("configlog_restart.log"));
  ASSERT_EQ(log.dumps.size(), 3u);
  EXPECT_TRUE(log.dumps[0].complete);
  EXPECT_FALSE(log.dumps[1].complete);
  EXPECT_THAT(log.dumps[1].incomplete_reason, HasSubstr("stops at ici_autoregressive_parallelism"));
  EXPECT_EQ(log.dumps[1].params, 60u);
  EXPECT_TRUE(log.dumps[2].complete);
  EXPECT_EQ(log.selected, 3u);
  EXPECT_THAT(as_map(log.params)["run_name"], HasSubstr("06-26"));
  ConfigLogOptions first;
  first.dump = 1;
  EXPECT_THAT(as_map(read_config_log(testdata("configlog_restart.log"), first).params)["run_name"],
              HasSubstr("06-16"));
  ConfigLogOptions truncated;
  truncated.dump = 2;
  Error cut = error_of([&] { read_config_log(testdata("configlog_restart.log"), truncated); });
  EXPECT_EQ(cut.line(), 277);
  EXPECT_THAT(cut.message(), HasSubstr("config dump 2 (lines 277-336, 60 keys) is truncated"));
  ConfigLogOptions missing;
  missing.dump = 4;
  EXPECT_THROW(read_config_log(testdata("configlog_restart.log"), missing), Error);
}

TEST(ConfigLogReal, CutLogAndLogWithoutConfig) {
  Error cut = error_of([] { read_config_log(testdata("configlog_truncated.log")); });
  EXPECT_THAT(cut.message(), HasSubstr("no complete config dump"));
  EXPECT_THAT(cut.message(), HasSubstr("last line is cut"));
  std::string no_config = testdata("configlog_no_config_pr1904_e2e_train.log");
  Error missing = error_of([&] { read_config_log(no_config); });
  EXPECT_EQ(missing.file(), no_config);
  EXPECT_THAT(missing.message(), HasSubstr("no `Config param` line"));
  EXPECT_THROW(read_config_log(testdata("no_such.log")), Error);
  ConfigLogOptions list;
  list.list_only = true;
  ConfigLog listed = read_config_log(testdata("configlog_truncated.log"), list);
  ASSERT_EQ(listed.dumps.size(), 1u);
  EXPECT_TRUE(listed.params.empty());
}

// --- dumps in small texts --------------------------------------------------------------------

TEST(ConfigDumps, EndingRightAfterADumpMeansCut) {
  ConfigLog log = scan("start\nConfig param a: 1\nConfig param b: 2\n");
  ASSERT_EQ(log.dumps.size(), 1u);
  EXPECT_FALSE(log.dumps[0].complete);
  EXPECT_THAT(log.dumps[0].incomplete_reason, HasSubstr("ends right after its line 3"));
  EXPECT_EQ(log.selected, 0u);
  // Only config lines (grep output): nothing says the log went on, and nothing says it was cut.
  ConfigLog grep = scan("Config param a: 1\nConfig param b: 2\n");
  EXPECT_TRUE(grep.dumps[0].complete);
  ConfigLog trailing = scan("start\nConfig param a: 1\nConfig param b: 2\n\n   \n");
  EXPECT_FALSE(trailing.dumps[0].complete) << "blank lines are not the log going on";
}

TEST(ConfigDumps, KeysThatDoNotIncreaseStartTheNextDump) {
  std::string text =
      "Config param a: 1\nConfig param b: 2\nnoise\nConfig param c: 3\n"    // dump 1, interleaved
      "restart\nConfig param a: 1\nConfig param b: 5\nConfig param c: 6\n"  // dump 2
      "Config param c: 7\ndone\n";                                          // dump 3: c again
  ConfigLog log = scan(text);
  ASSERT_EQ(log.dumps.size(), 3u);
  EXPECT_EQ(log.dumps[0].params, 3u);
  EXPECT_EQ(log.dumps[0].last_line, 4u);
  EXPECT_EQ(log.dumps[1].first_line, 6u);
  EXPECT_TRUE(log.dumps[1].complete);
  EXPECT_FALSE(log.dumps[2].complete);
  EXPECT_THAT(log.dumps[2].incomplete_reason, HasSubstr("starts at c while dump 1 starts at a"));
  EXPECT_EQ(log.selected, 2u);
  EXPECT_EQ(as_map(log.params)["b"], "5");
}

TEST(ConfigDumps, MemoryHoldsOnlyWhatIsNeeded) {
  std::string text;
  for (int run = 0; run < 50; ++run) {
    text += "boot\n";
    for (char k = 'a'; k <= 'z'; ++k) text += fmt::format("Config param {}: {}\n", k, run);
  }
  text += "end\n";
  ConfigLog log = scan(text, {}, 100);
  EXPECT_EQ(log.dumps.size(), 50u);
  EXPECT_EQ(log.selected, 50u);
  EXPECT_EQ(log.params.size(), 26u);
  EXPECT_EQ(log.params.front().value, "49");
  ConfigLogOptions third;
  third.dump = 3;
  EXPECT_EQ(scan(text, third).params.front().value, "2");
}

TEST(ConfigDumps, VeryLongLinesAreBounded) {
  std::string noise(3u << 20, 'x');
  std::string value(2u << 20, 'v');
  std::string text = "start\n" + noise + "\nprefix " + noise + " Config param a: " + value +
                     "\nConfig param b: 2\nend\n";
  ConfigLog log = scan(text, {}, 65536);
  ASSERT_EQ(log.params.size(), 2u);
  EXPECT_EQ(log.params[0].value, value);
  EXPECT_EQ(log.params[0].line, 3u);
  EXPECT_EQ(log.params[1].line, 4u);
  EXPECT_EQ(log.lines, 5u);
  EXPECT_TRUE(log.dumps[0].complete);
}

TEST(ConfigDumps, StdinIsRead) {
  std::string path = temp_file("configlog_stdin.log", "x\nConfig param a: 1\ny\n");
  FILE* saved = std::freopen(path.c_str(), "r", stdin);
  ASSERT_NE(saved, nullptr);
  ConfigLog log = read_config_log("-");
  EXPECT_EQ(log.source, "<stdin>");
  EXPECT_EQ(log.params.size(), 1u);
  std::remove(path.c_str());
}

// --- values ----------------------------------------------------------------------------------

TEST(CanonicalValue, MeaningNotPrinting) {
  auto same = [](const char* a, const char* b) {
    EXPECT_EQ(canonical_config_value(a), canonical_config_value(b)) << a << " vs " << b;
  };
  auto differ = [](const char* a, const char* b) {
    EXPECT_NE(canonical_config_value(a), canonical_config_value(b)) << a << " vs " << b;
  };
  same("True", "true");
  same("False", "FALSE");
  same("1.0", "1");
  same("1e-08", "1.0e-8");
  same("2e-06", "2e-6");
  same("0.0625", "6.25e-2");
  same("None", "null");
  same("RematLocation.REMAT", "remat");
  same("DatasetType.HF", "hf");
  same("['a', 'b']", "['a','b']");
  same("['a', 'b']", "[a, b]");
  same("(('data', 'fsdp'),)", "[[data,fsdp]]");
  same("()", "[]");
  same("{'rl': False, 'a': 1}", "{a: 1.0, rl: false}");
  same("[1, -1, 1]", "[1,-1,1]");
  same("", " ");
  same("12345678901234567890123", "012345678901234567890123");
  differ("12345678901234567890123", "12345678901234567890124");
  differ("flash", "Flash");
  differ("['1']", "[1]");
  differ("[1, 2]", "[2, 1]");
  differ("1", "2");
  differ("0.1", "0.10000001");
  differ("1,2,0,3", "1,2,3,0");
  differ("True", "1");
  differ("none", "None");
  // Not a literal: blanks outside quotes do not count.
  same("[gs://a: b", "[gs://a:b");
}

TEST(ConfigLogOrText, OtherInputIsReturnedWhole) {
  std::string log = temp_file("or_text.log", "Config param a: 1\nConfig param b: 2\nend\n");
  std::string yaml = temp_file("or_text.yaml", "kind: JobSet\n" + std::string(3u << 20, '#'));
  auto is_yaml = [](std::string_view head) { return head.rfind("kind:", 0) == 0; };
  ConfigLogOrText read = read_config_log_or_text(log, {}, is_yaml);
  EXPECT_FALSE(read.text);
  EXPECT_EQ(as_map(read.log.params)["b"], "2");
  read = read_config_log_or_text(yaml, {}, is_yaml);
  ASSERT_TRUE(read.text);
  EXPECT_EQ(read.text->size(), 13 + (3u << 20));  // beyond the head, all of it
  EXPECT_TRUE(read.log.dumps.empty());
  // A log that is not text of the other kind still has to hold a dump.
  EXPECT_THROW(read_config_log_or_text(yaml, {}, [](std::string_view) { return false; }), Error);
}

// --- damaged logs ------------------------------------------------------------------------------

TEST(ConfigLogScanner, NulByteInAValueIsAnErrorWithItsLine) {
  std::string text =
      std::string("x\nConfig param a: 1\nConfig param b: 2\0x\nConfig param c: 3\n", 58);
  Error e = test::error_of([&] { scan(text); });
  EXPECT_EQ(e.line(), 3);
  EXPECT_EQ(e.message(), "the value of b holds a NUL byte: the log is damaged");
}

TEST(ConfigLogTest, MaskSettingsMasksByKeyAndKeepsOtherValues) {
  SecretMasker::Key key{};
  SecretMasker masker = SecretMasker::with_key(key);
  std::vector<ConfigSetting> settings = {
      {"hf_access_token", "abc123", 3, "--hf_access_token=abc123"},
      {"reasoning_start_token", "<think>", 4, ""},
      {"num_moe_token_chunks", "2", 5, ""},
      {"tokenizer_path", "/models/tok", 6, ""},
      {"wandb_api_key", "", 7, ""}};
  std::vector<ConfigSetting> shown = settings;
  mask_settings(settings, masker);
  EXPECT_EQ(settings[0].value, masker.fingerprint("abc123"));
  EXPECT_EQ(settings[0].origin, "--hf_access_token=" + masker.fingerprint("abc123"));
  for (std::size_t i = 1; i < settings.size(); ++i) EXPECT_EQ(settings[i].value, shown[i].value);
  mask_settings(shown, SecretMasker::showing());
  EXPECT_EQ(shown[0].value, "abc123");
}

}  // namespace
}  // namespace rtb::logs
