#include "rtb/k8s/shell.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "rtb/base/error.h"
#include "test_util.h"

namespace rtb::k8s::shell {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> values(const std::vector<Word>& words) {
  std::vector<std::string> out;
  for (const Word& word : words) out.push_back(word.value);
  return out;
}

std::string error_of(std::string_view text) {
  try {
    split(text);
  } catch (const Error& error) {
    return error.message();
  }
  return "(no error)";
}

// Texts and the message split() refuses each with.
void expect_errors(std::initializer_list<std::pair<std::string, std::string>> cases) {
  for (const auto& [text, message] : cases) EXPECT_EQ(error_of(text), message) << text;
}

// The example startup line of the brief (trainer, rollout and orchestrator features in one line).
const std::string kBriefLine =
    std::string(11, ' ') +
    "PYTHONUNBUFFERED=1       TUNIX_IS_INTERNAL_ENV=false  WEIGHT_SYNC_DISABLE_TIMEOUTS=\"1\" "
    "ENABLE_MULTI_NUMA= LIBTPU_INIT_ARGS='--a=1 --b=2' MAXTEXT_EXTRA_FLAGS=\"k=v k2=v2\" python -m "
    "tunix.experimental.distributed.runtime.main --process_main=x.y.main "
    "--optimizer_chain_kwargs=\"{'max_norm': 0.0625}\" "
    "--trainable_parameters_mask='^(?!.*routed_experts/gate/kernel).*' "
    "--vllm_config_json='{\"max_model_len\": 8}' SANDBOX_TOLERATIONS=\"[{\"key\":\"workload\"}]\" "
    "--worker_id=abtest-roll-${JOB_INDEX}   ";

// A trainer startup line shaped like the real one (dryrun-structure.md 3.3-3.5 and 6): 27 spaces of
// indent, runs of spaces where optional variables were empty, trailing blanks.
const std::string kTrainerLine =
    std::string(27, ' ') +
    "PYTHONUNBUFFERED=1       TUNIX_IS_INTERNAL_ENV=false       WEIGHT_SYNC_DISABLE_TIMEOUTS=\"1\""
    "                     ENABLE_MULTI_NUMA= "
    "LIBTPU_INIT_ARGS='--DANGEROUS_tpu_runtime_abi_verification_disabled=true "
    "--xla_tpu_use_tc_device_shape_on_sc=true --xla_tpu_scoped_vmem_limit_kib=65472 "
    "--xla_tpu_dvfs_p_state=7' "
    "MAXTEXT_EXTRA_FLAGS=\"custom_mesh_and_rule=cp-as-ep use_gdn_kernel=true "
    "use_ring_of_experts=true ragged_buffer_factor=2.0 num_moe_token_chunks=2 sa_block_q=1024 "
    "context=remat optimizer_memory_host_offload=true rollout_fp8_moe=true "
    "fp8_moe_fake_quant=true\"    python -m tunix.experimental.distributed.runtime.main "
    "--process_main=tunix.experimental.distributed.run_trainer_node.main "
    "--maxtext_model_name=qwen3.5-397b-a17b "
    "--maxtext_ckpt_path=gs://example-bucket/ckpt/model/0/items "
    "--maxtext_warmup_steps_fraction=0.0 "
    "--maxtext_attention=flash --base_num_kv_heads=2 --remat_policy=custom "
    "--learning_rate_final_fraction=1.0 --rollout_mesh_tp=1 --use_weight_converter=true "
    "--max_seq_token_per_tpu=65536 --maxtext_skip_step_on_spikes=false "
    "--maxtext_skip_step_on_nan=true --profiler_steps=0 --skip_first_n_profiler_steps=-1 "
    "--optimizer_chain_kwargs=\"{'max_norm': 0.0625}\" "
    "--trainable_parameters_mask='^(?!.*routed_experts/gate/kernel).*'  --no-use_rollout_logps"
    "      \t  ";

const std::string kRolloutLine =
    "  ENABLE_MULTI_NUMA=  LIBTPU_INIT_ARGS=\" "
    "--xla_tpu_use_minor_sharding_for_major_trivial_input="
    "true --xla_tpu_dvfs_p_state=7\" "
    "VLLM_RAY_EXTRA_ENV_VARS_TO_COPY=\"TPU_NAME,LIBTPU_INIT_ARGS,\" "
    "python -m tunix.experimental.distributed.runtime.main "
    "--process_main=tunix.experimental.distributed.run_rollout_node.main "
    "--vllm_config_json='{\"max_model_len\": 65536, \"gpu_memory_utilization\": 0.9}' "
    "--worker_id=abtest-roll-${JOB_INDEX}  ";

const std::string kOrchestratorLine =
    "   ORCHESTRATOR_ID=\"abtest-orch\" "
    "SANDBOX_TOLERATIONS=\"[{\"key\":\"workload\",\"operator\":\"Equal\",\"value\":\"sandbox\"}]\" "
    "python -m tunix.experimental.distributed.runtime.main "
    "--process_main=tunix.experimental.distributed.run_deepswe_dist.main --trainer_fsdp=64 "
    "--tpu_topology=8x8x8 ";

TEST(ShellSplit, BriefLineGivesEnvProgramAndArgv) {
  SimpleCommand command = parse_command(kBriefLine);
  std::vector<std::pair<std::string, std::string>> env;
  for (const Assignment& a : command.env) env.emplace_back(a.name, a.value);
  EXPECT_THAT(env,
              ElementsAre(std::pair<std::string, std::string>{"PYTHONUNBUFFERED", "1"},
                          std::pair<std::string, std::string>{"TUNIX_IS_INTERNAL_ENV", "false"},
                          std::pair<std::string, std::string>{"WEIGHT_SYNC_DISABLE_TIMEOUTS", "1"},
                          std::pair<std::string, std::string>{"ENABLE_MULTI_NUMA", ""},
                          std::pair<std::string, std::string>{"LIBTPU_INIT_ARGS", "--a=1 --b=2"},
                          std::pair<std::string, std::string>{"MAXTEXT_EXTRA_FLAGS", "k=v k2=v2"}));
  EXPECT_EQ(command.env[2].source, "WEIGHT_SYNC_DISABLE_TIMEOUTS=\"1\"");
  EXPECT_EQ(command.env[4].source, "LIBTPU_INIT_ARGS='--a=1 --b=2'");
  EXPECT_THAT(
      values(command.words),
      ElementsAre("python", "-m", "tunix.experimental.distributed.runtime.main",
                  "--process_main=x.y.main", "--optimizer_chain_kwargs={'max_norm': 0.0625}",
                  "--trainable_parameters_mask=^(?!.*routed_experts/gate/kernel).*",
                  "--vllm_config_json={\"max_model_len\": 8}",
                  "SANDBOX_TOLERATIONS=[{key:workload}]", "--worker_id=abtest-roll-${JOB_INDEX}"));
  for (std::size_t i = 0; i + 1 < command.words.size(); ++i) {
    EXPECT_FALSE(command.words[i].expands) << command.words[i].source;
  }
  EXPECT_TRUE(command.words.back().expands);
  for (const Assignment& a : command.env) EXPECT_FALSE(a.expands) << a.source;
}

TEST(ShellSplit, SourcesAreVerbatimAndOffsetsPointAtThem) {
  for (const std::string& line : {kBriefLine, kTrainerLine, kRolloutLine, kOrchestratorLine}) {
    std::vector<Word> words = split(line);
    std::string rejoined;
    for (const Word& word : words) {
      EXPECT_EQ(line.substr(word.offset, word.source.size()), word.source);
      rejoined += word.source + " ";
    }
    EXPECT_EQ(values(split(rejoined)), values(words));
  }
  std::vector<Word> words = split("  a 'b c'  \"d\"e");
  ASSERT_EQ(words.size(), 3u);
  EXPECT_EQ(words[1].source, "'b c'");
  EXPECT_EQ(words[1].offset, 4u);
  EXPECT_EQ(words[2].source, "\"d\"e");
  EXPECT_EQ(words[2].offset, 11u);
}

TEST(ShellSplit, RealTrainerLineSurvives) {
  SimpleCommand command = parse_command(kTrainerLine);
  ASSERT_EQ(command.env.size(), 6u);
  EXPECT_EQ(command.env[3].name, "ENABLE_MULTI_NUMA");
  EXPECT_EQ(command.env[3].value, "");
  EXPECT_EQ(command.env[4].value,
            "--DANGEROUS_tpu_runtime_abi_verification_disabled=true "
            "--xla_tpu_use_tc_device_shape_on_sc=true --xla_tpu_scoped_vmem_limit_kib=65472 "
            "--xla_tpu_dvfs_p_state=7");
  EXPECT_THAT(command.env[5].value, HasSubstr("sa_block_q=1024 context=remat"));
  EXPECT_EQ(command.env[5].value.find('"'), std::string::npos);
  ASSERT_GE(command.words.size(), 4u);
  EXPECT_EQ(command.words[0].value, "python");
  EXPECT_EQ(command.words[3].value,
            "--process_main=tunix.experimental.distributed.run_trainer_node.main");
  EXPECT_EQ(command.words[command.words.size() - 3].value,
            "--optimizer_chain_kwargs={'max_norm': 0.0625}");
  EXPECT_EQ(command.words.back().value, "--no-use_rollout_logps");
  EXPECT_EQ(command.words.back().source, "--no-use_rollout_logps");
}

TEST(ShellSplit, RealRolloutAndOrchestratorLinesSurvive) {
  SimpleCommand rollout = parse_command(kRolloutLine);
  ASSERT_EQ(rollout.env.size(), 3u);
  EXPECT_EQ(rollout.env[1].value,
            " --xla_tpu_use_minor_sharding_for_major_trivial_input=true --xla_tpu_dvfs_p_state=7");
  EXPECT_EQ(rollout.env[2].value, "TPU_NAME,LIBTPU_INIT_ARGS,");
  EXPECT_THAT(values(rollout.words),
              ElementsAre("python", "-m", "tunix.experimental.distributed.runtime.main",
                          "--process_main=tunix.experimental.distributed.run_rollout_node.main",
                          "--vllm_config_json={\"max_model_len\": 65536, "
                          "\"gpu_memory_utilization\": 0.9}",
                          "--worker_id=abtest-roll-${JOB_INDEX}"));
  EXPECT_EQ(rollout.words.back().source, "--worker_id=abtest-roll-${JOB_INDEX}");

  SimpleCommand orchestrator = parse_command(kOrchestratorLine);
  ASSERT_EQ(orchestrator.env.size(), 2u);
  EXPECT_EQ(orchestrator.env[0].value, "abtest-orch");
  // The inner double quotes are not escaped, so bash concatenates quoted and unquoted parts.
  EXPECT_EQ(orchestrator.env[1].value, "[{key:workload,operator:Equal,value:sandbox}]");
  EXPECT_EQ(orchestrator.words.back().value, "--tpu_topology=8x8x8");
}

TEST(ShellSplit, BlanksSeparateWordsAndMakeNoEmptyWords) {
  EXPECT_TRUE(split("").empty());
  EXPECT_TRUE(split("  \t  ").empty());
  EXPECT_THAT(values(split("a")), ElementsAre("a"));
  EXPECT_THAT(values(split("   a     b\t\tc \t ")), ElementsAre("a", "b", "c"));
  EXPECT_THAT(values(split("a\tb")), ElementsAre("a", "b"));
}

TEST(ShellSplit, QuotedEmptyStringsAreWords) {
  EXPECT_THAT(values(split("''")), ElementsAre(""));
  EXPECT_THAT(values(split("a '' \"\" b")), ElementsAre("a", "", "", "b"));
  SimpleCommand command = parse_command("ENABLE_MULTI_NUMA= X='' Y=\"\" prog");
  ASSERT_EQ(command.env.size(), 3u);
  for (const Assignment& a : command.env) EXPECT_EQ(a.value, "") << a.source;
  EXPECT_EQ(command.env[0].source, "ENABLE_MULTI_NUMA=");
}

TEST(ShellSplit, AdjacentPartsConcatenate) {
  EXPECT_THAT(values(split("a'b c'\"d e\"f\\ g")), ElementsAre("ab cd ef g"));
  EXPECT_THAT(values(split("--k=\"{'a': 1}\"'x'")), ElementsAre("--k={'a': 1}x"));
}

TEST(ShellSplit, BackslashesOutsideQuotes) {
  EXPECT_THAT(values(split(R"(\a\ b \\ \' \" \$x \;)")),
              ElementsAre("a b", "\\", "'", "\"", "$x", ";"));
  EXPECT_FALSE(split(R"(\$x)")[0].expands);
  EXPECT_THAT(values(split("tail\\")), ElementsAre("tail\\"));  // as bash -c does at the very end
}

TEST(ShellSplit, BackslashesInsideDoubleQuotes) {
  // Only $ ` " \ and newline are escaped; any other backslash stays.
  EXPECT_THAT(values(split(R"("\$ \` \" \\ \a \n \'")")), ElementsAre("$ ` \" \\ \\a \\n \\'"));
  EXPECT_FALSE(split(R"("\$HOME")")[0].expands);
  EXPECT_THAT(values(split("\"a\\\nb\"")), ElementsAre("ab"));
}

TEST(ShellSplit, NothingIsSpecialInsideSingleQuotes) {
  std::vector<Word> words = split("'\\n \\\\ \" $HOME `x` $(y) \\\n'");
  ASSERT_EQ(words.size(), 1u);
  EXPECT_EQ(words[0].value, "\\n \\\\ \" $HOME `x` $(y) \\\n");
  EXPECT_FALSE(words[0].expands);
}

TEST(ShellSplit, BackslashNewlineContinuesInsideAndBetweenWords) {
  EXPECT_THAT(values(split("ab\\\ncd")), ElementsAre("abcd"));
  EXPECT_THAT(values(split("a \\\n  b \\\n\tc")), ElementsAre("a", "b", "c"));
  EXPECT_THAT(values(split("\\\n\\\na")), ElementsAre("a"));
  std::vector<Word> words = split("x ab\\\ncd y");
  ASSERT_EQ(words.size(), 3u);
  EXPECT_EQ(words[1].source, "ab\\\ncd");
}

TEST(ShellSplit, ExpansionsStayLiteralAndAreMarked) {
  struct Case {
    std::string text;
    std::string value;
    bool expands;
  };
  const std::vector<Case> cases = {
      {"$VAR", "$VAR", true},
      {"a${X}b", "a${X}b", true},
      {"$(a \"b c\")", "$(a \"b c\")", true},
      {"`date +%s`", "`date +%s`", true},
      {"$((1 + 2))", "$((1 + 2))", true},
      {"\"$HOME/x y\"", "$HOME/x y", true},
      {"\"`a b`\"", "`a b`", true},
      {"'$HOME'", "$HOME", false},
      {"'$(a b)'", "$(a b)", false},
      {"$", "$", false},
      {"a$", "a$", false},
      {"\"$\"", "$", false},
      {"$1$@$#$?", "$1$@$#$?", true},
      {"$(echo \"$(date \"+%s\")\" 'x)')", "$(echo \"$(date \"+%s\")\" 'x)')", true},
      {"${x:-'}'}", "${x:-'}'}", true},
      {"\"${x:-\"a b\"}\"", "${x:-\"a b\"}", true},
      {"$(a $(b `c`) (d))", "$(a $(b `c`) (d))", true},
      {"--worker_id=abtest-roll-${JOB_INDEX}", "--worker_id=abtest-roll-${JOB_INDEX}", true},
  };
  for (const Case& c : cases) {
    std::vector<Word> words = split(c.text);
    ASSERT_EQ(words.size(), 1u) << c.text;
    EXPECT_EQ(words[0].value, c.value) << c.text;
    EXPECT_EQ(words[0].expands, c.expands) << c.text;
    EXPECT_EQ(words[0].source, c.text);
  }
  // Blanks, quotes and operators inside a substitution do not end the word.
  EXPECT_THAT(values(split("a $(b; c | d) e")), ElementsAre("a", "$(b; c | d)", "e"));
}

TEST(ShellSplit, TildeGlobAndBracePatternsMarkTheWord) {
  struct Case {
    std::string text;
    bool expands;
  };
  const std::vector<Case> cases = {
      {"~/x", true},     {"A=~/x", true},  {"PATH=a:~/b", true}, {"--a=~/x", false},
      {"'~'/x", false},  {"\\~", false},   {"a~", false},        {"a*", true},
      {"\"a*\"", false}, {"x?", true},     {"[ab]", true},       {"{a,b}", true},
      {"x{1..3}", true}, {"x{a}y", false}, {"'{a,b}'", false},   {"a,b", false},
  };
  for (const Case& c : cases) {
    std::vector<Word> words = split(c.text);
    ASSERT_EQ(words.size(), 1u) << c.text;
    EXPECT_EQ(words[0].expands, c.expands) << c.text;
  }
}

TEST(ShellSplit, AnsiCAndLocaleQuotes) {
  EXPECT_THAT(values(split(R"($'a\tb\x41\101\u00e9\'q\cA\e\z' $"lo cal")")),
              ElementsAre("a\tbAA\xc3\xa9'q\x01\x1b\\z", "lo cal"));
  EXPECT_THAT(values(split(R"($'ab\0cd'x)")), ElementsAre("abx"));  // bash drops the rest at NUL
  EXPECT_FALSE(split(R"($'$HOME')")[0].expands);
  EXPECT_THAT(values(split(R"("$'x'")")), ElementsAre("$'x'"));
}

TEST(ShellSplit, NewlineEndsTheCommand) {
  EXPECT_THAT(values(split("a b\n")), ElementsAre("a", "b"));
  EXPECT_THAT(values(split("\n# leading comment\n  a b  # trailing comment\n\n   \n# more\n")),
              ElementsAre("a", "b"));
  EXPECT_THAT(values(split("a#b c")), ElementsAre("a#b", "c"));
  EXPECT_THAT(values(split("'a\nb' \"c\nd\"")), ElementsAre("a\nb", "c\nd"));
  EXPECT_EQ(error_of("a b\nc"),
            "unexpected text after the end of the command (a newline ends it) at line 2, column 1");
  EXPECT_EQ(error_of("a\n\n   'c'"),
            "unexpected text after the end of the command (a newline ends it) at line 3, column 4");
}

TEST(ShellSplit, UnterminatedQuotesNameTheirColumn) {
  std::string long_line = std::string(811, 'x') + "'abc def";
  long_line[400] = ' ';
  expect_errors({
      {long_line, "unterminated single quote starting at column 812"},
      {"a \"b c", "unterminated double quote starting at column 3"},
      {"a \"b\\\"", "unterminated double quote starting at column 3"},
      {"x=$(echo (a)", "unterminated $( starting at column 3"},
      {"x=$((1+2)", "unterminated $( starting at column 3"},
      {"  ${x", "unterminated ${ starting at column 3"},
      {"a `b", "unterminated backquote starting at column 3"},
      {"$(echo \"a)", "unterminated double quote starting at column 8"},
      {"$(echo 'a)", "unterminated single quote starting at column 8"},
      {"$'a\\'", "unterminated $' quote starting at column 1"},
      {"\n  'b", "unterminated single quote starting at line 2, column 3"},
  });
}

TEST(ShellSplit, ShellOperatorsAreRejected) {
  std::string line = "PYTHONUNBUFFERED=1 python -m a.b.main; rm -rf x";
  expect_errors({
      {line, "unexpected shell operator ';' at column 38"},
      {"a & b", "unexpected shell operator '&' at column 3"},
      {"a|b", "unexpected shell operator '|' at column 2"},
      {"a >out", "unexpected shell operator '>' at column 3"},
      {"a <in", "unexpected shell operator '<' at column 3"},
      {"(a)", "unexpected shell operator '(' at column 1"},
      {"a)", "unexpected shell operator ')' at column 2"},
  });
  // Quoted or escaped, they are ordinary bytes.
  EXPECT_THAT(values(split("';&|<>()' \";&|<>()\" \\;\\&")),
              ElementsAre(";&|<>()", ";&|<>()", ";&"));
}

TEST(ShellSplit, DeepNestingNeitherRecursesNorSlowsDown) {
  constexpr int kDepth = 200000;
  std::string text = "x=";
  for (int i = 0; i < kDepth; ++i) text += i % 2 ? "\"$(" : "${";
  for (int i = kDepth; i-- > 0;) text += i % 2 ? ")\"" : "}";
  std::vector<Word> words = split(text);
  ASSERT_EQ(words.size(), 1u);
  EXPECT_EQ(words[0].value, text);
  EXPECT_TRUE(words[0].expands);
  text.pop_back();
  EXPECT_THAT(error_of(text), HasSubstr("unterminated"));
}

TEST(ShellParseCommand, SplitsLeadingAssignmentsFromProgramAndArgv) {
  SimpleCommand command = parse_command("A=1 _b2='x y' C=$HOME prog A=2 --k=v");
  ASSERT_EQ(command.env.size(), 3u);
  EXPECT_EQ(command.env[1].name, "_b2");
  EXPECT_EQ(command.env[1].value, "x y");
  EXPECT_EQ(command.env[1].source, "_b2='x y'");
  EXPECT_EQ(command.env[2].value, "$HOME");
  EXPECT_TRUE(command.env[2].expands);
  EXPECT_THAT(values(command.words), ElementsAre("prog", "A=2", "--k=v"));
}

TEST(ShellParseCommand, WordsThatAreNotAssignments) {
  // A quoted or escaped name, a name starting with a digit or a missing name make the program word.
  for (std::string text : {"\"A\"=1 x", "A\\=1 x", "1A=1 x", "=1 x", "A-B=1 x", "'A=1' x"}) {
    SimpleCommand command = parse_command(text);
    EXPECT_TRUE(command.env.empty()) << text;
    EXPECT_EQ(command.words.size(), 2u) << text;
  }
}

TEST(ShellParseCommand, EnvOnlyAndEmptyCommands) {
  SimpleCommand command = parse_command("  A=1 B=  ");
  EXPECT_EQ(command.env.size(), 2u);
  EXPECT_TRUE(command.words.empty());
  EXPECT_TRUE(parse_command("  ").env.empty());
  EXPECT_THROW(parse_command("A+=1 prog"), Error);
  EXPECT_THROW(parse_command("A=1 'b"), Error);
}

TEST(ShellQuote, ShortestSafeForm) {
  // A value and its shortest quoted form.
  std::pair<std::string, std::string> cases[] = {
      {"--xla_tpu_dvfs_p_state=7", "--xla_tpu_dvfs_p_state=7"},
      {"gs://bucket/a,b@c%d+e:f", "gs://bucket/a,b@c%d+e:f"},
      {"", "''"},
      {"a b", "'a b'"},
      {"it's", "'it'\\''s'"},
      {"'", "''\\'''"},
  };
  for (const auto& [value, quoted] : cases) EXPECT_EQ(quote(value), quoted) << value;
  for (std::string value : {"~", "~x", "#x", "a*", "a?", "[a]", "{a,b}", "!x", "$x", "a\nb", "é"}) {
    EXPECT_EQ(quote(value).front(), '\'') << value;
  }
  EXPECT_THROW(quote(std::string("a\0b", 3)), Error);
  EXPECT_EQ(join({"--a=1", "x y", ""}), "--a=1 'x y' ''");
  EXPECT_EQ(join({}), "");
}

// logs::Random byte strings (1..255), biased towards the bytes that matter to shells.
std::vector<std::string> random_values(std::uint32_t seed, int count) {
  std::mt19937 random(seed);
  const std::string special = "'\"\\$`\n\t !#~*?[]{}()<>|&;=-%\r";
  std::uniform_int_distribution<int> length(0, 24);
  std::uniform_int_distribution<int> any_byte(1, 255);
  std::uniform_int_distribution<int> pick(0, 2);
  std::uniform_int_distribution<std::size_t> special_index(0, special.size() - 1);
  std::vector<std::string> out;
  for (int i = 0; i < count; ++i) {
    std::string value;
    for (int n = length(random); n > 0; --n) {
      value +=
          pick(random) == 0 ? special[special_index(random)] : static_cast<char>(any_byte(random));
    }
    out.push_back(value);
  }
  return out;
}

TEST(ShellQuote, SplitReadsBackEveryQuotedValue) {
  std::vector<std::string> generated = random_values(20240601, 4000);
  for (const std::string& value : generated) {
    std::vector<Word> words = split(quote(value));
    ASSERT_EQ(words.size(), 1u) << quote(value);
    EXPECT_EQ(words[0].value, value);
    EXPECT_FALSE(words[0].expands);
  }
  for (std::size_t start = 0; start + 50 <= generated.size(); start += 50) {
    std::vector<std::string> list(generated.begin() + start, generated.begin() + start + 50);
    EXPECT_EQ(values(split(join(list))), list);
  }
}

// Runs processes on temporary files in a private directory.
class ShellProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("rtb_shell_test_" + std::to_string(::getpid()) + "_" + info->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path write(const std::string& name, const std::string& content) {
    fs::path path = dir_ / name;
    std::ofstream(path, std::ios::binary) << content;
    return path;
  }

  // Runs `command` in dir_ through /bin/sh and returns its stdout; expects exit status 0.
  std::string run(const std::string& command) {
    std::string full = "cd '" + dir_.string() + "' && " + command;
    FILE* pipe = ::popen(full.c_str(), "r");
    if (pipe == nullptr) throw std::runtime_error("popen failed");
    std::string output;
    char buffer[4096];
    for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;)
      output.append(buffer, n);
    EXPECT_EQ(::pclose(pipe), 0) << command;
    return output;
  }

  static std::vector<std::string> nul_separated(const std::string& output) {
    std::vector<std::string> out;
    std::size_t start = 0;
    for (std::size_t end; (end = output.find('\0', start)) != std::string::npos; start = end + 1) {
      out.push_back(output.substr(start, end - start));
    }
    EXPECT_EQ(start, output.size()) << "output does not end in NUL";
    return out;
  }

  std::vector<std::string> hostile_values() {
    std::string marker = (dir_ / "pwned").string();
    std::vector<std::string> hostile = {
        "$(touch " + marker + ")",
        "`touch " + marker + "`",
        "\"; touch " + marker + "; \"",
        "'; touch " + marker + "; '",
        "$(touch \"" + marker + "\")'\"`",
        "",
        "it's",
        "\"",
        "'",
        "''",
        "\\",
        "\\\\'\\",
        "a\nb",
        "\n",
        "line\\\ncontinued",
        "$HOME",
        "${HOME}",
        "$((1+1))",
        "~",
        "~root/x",
        "#not a comment",
        "-n",
        "--k=v",
        "a=b",
        "=",
        "*",
        "{a,b}",
        "!x",
        "[ab]",
        "%s\\0",
        "é日本語",
        "\xff\xfe",
        " leading",
        "trailing ",
        "\t",
        "\x01\x1f\x7f",
        "--optimizer_chain_kwargs={'max_norm': 0.0625}",
        "[{\"key\":\"workload\"}]",
        " --xla_a=1 --xla_b=2",
        "a;b&c|d<e>f(g)h",
    };
    std::vector<std::string> generated = random_values(7, 500);
    hostile.insert(hostile.end(), generated.begin(), generated.end());
    return hostile;
  }

  fs::path dir_;
};

TEST_F(ShellProcessTest, BashReadsQuotedWordsBackVerbatim) {
  std::vector<std::string> hostile = hostile_values();
  fs::path script = write("words.sh", "printf '%s\\0' " + join(hostile) + "\n");
  EXPECT_EQ(nul_separated(run("LC_ALL=C.UTF-8 bash words.sh")), hostile);
  EXPECT_FALSE(fs::exists(dir_ / "pwned"));
  EXPECT_EQ(run("bash -n words.sh"), "");
}

TEST_F(ShellProcessTest, PythonShlexReadsQuotedWordsBackVerbatim) {
  std::vector<std::string> hostile = hostile_values();
  write("words.txt", join(hostile));
  const std::string program =
      "import shlex, sys\n"
      "text = open(sys.argv[1], 'rb').read().decode('utf-8', 'surrogateescape')\n"
      "out = b''.join(w.encode('utf-8', 'surrogateescape') + b'\\0' for w in shlex.split(text))\n"
      "sys.stdout.buffer.write(out)\n";
  write("read_words.py", program);
  EXPECT_EQ(nul_separated(run("/usr/bin/python3 read_words.py words.txt")), hostile);
}

// A random command line made of the constructs split() accepts and bash evaluates without
// expanding anything (no substitutions, tildes, globs or brace patterns).
std::string random_command_line(std::mt19937& random) {
  auto pick = [&](const std::vector<std::string>& choices) {
    return choices[std::uniform_int_distribution<std::size_t>(0, choices.size() - 1)(random)];
  };
  const std::vector<std::string> plain = {"a",        "b9",   "X_Y",  "--k=v", "=", ":", ",",
                                          ".",        "/",    "@",    "%",     "+", "-", "a#b",
                                          "\xc3\xa9", "\xff", "$V1/", "${V2}", "$ "};
  const std::vector<std::string> in_single = {"a",  " ",    "\"",   "\\", "$x", "`",
                                              "\n", "\\\n", "#",    "~",  "*",  "\xe6\x97\xa5",
                                              ";",  "(",    "{a,b}"};
  const std::vector<std::string> in_double = {
      "a",   " ", "'", "\n", "\\\"", "\\\\", "\\$",   "\\`",      "\\a",  "\\\n",
      "\\'", "#", "*", "~",  "$ ",   ";",    "{a,b}", "\xc3\xa9", "$V1/", "${V2}"};
  const std::vector<std::string> escaped = {"\\a", "\\ ", "\\'", "\\\"", "\\\\", "\\$", "\\`",
                                            "\\;", "\\&", "\\#", "\\~",  "\\*",  "\\{", "\\\n"};
  const std::vector<std::string> in_ansi_c = {
      "a", " ", "\\n", "\\t", "\\'", "\\\\", "\\x41", "\\101", "\\u00e9", "\\cA", "\\q", "\"", "$"};
  const std::vector<std::string> blanks = {" ", "\t", "   ", " \\\n "};
  std::string line;
  int parts = std::uniform_int_distribution<int>(1, 12)(random);
  for (int i = 0; i < parts; ++i) {
    int n = std::uniform_int_distribution<int>(0, 4)(random);
    // A quoted run: `open`, n pieces that may stand inside it, `close`.
    auto quoted = [&](const char* open, const std::vector<std::string>& inside, char close) {
      line += open;
      while (n-- > 0) line += pick(inside);
      line += close;
    };
    switch (std::uniform_int_distribution<int>(0, 6)(random)) {
      case 0:
        line += pick(plain);
        break;
      case 1:
        quoted("'", in_single, '\'');
        break;
      case 2:
      case 3:
        quoted(std::uniform_int_distribution<int>(0, 3)(random) == 0 ? "$\"" : "\"", in_double,
               '"');
        break;
      case 4:
        line += pick(escaped);
        break;
      case 5:
        quoted("$'", in_ansi_c, '\'');
        break;
      default:
        line += pick(blanks);
        break;
    }
  }
  return line;
}

TEST_F(ShellProcessTest, SplitAgreesWithBashOnRandomCommandLines) {
  std::mt19937 random(42);
  std::string script;
  std::vector<std::vector<std::string>> expected;
  for (int i = 0; i < 600; ++i) {
    std::string line = "printf '%s\\0' START " + random_command_line(random) + " END";
    std::vector<std::string> words = values(split(line));
    expected.emplace_back(words.begin() + 3, words.end());  // without printf, format, START
    script += line + "\n";
  }
  // Real lines too. Variables hold their own reference, so bash's expansion equals our literal.
  for (const std::string& line : {kBriefLine, kTrainerLine, kRolloutLine, kOrchestratorLine}) {
    expected.push_back(values(split(line)));
    expected.back().push_back("END");
    script += "printf '%s\\0' START " + line + " END\n";
  }
  write("lines.sh", script);
  std::vector<std::string> output = nul_separated(
      run("JOB_INDEX='${JOB_INDEX}' V1='$V1' V2='${V2}' LC_ALL=C.UTF-8 bash lines.sh"));
  std::vector<std::vector<std::string>> actual;
  for (const std::string& word : output) {
    if (word == "START") {
      actual.emplace_back();
    } else {
      ASSERT_FALSE(actual.empty());
      actual.back().push_back(word);
    }
  }
  ASSERT_EQ(actual.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(actual[i], expected[i]) << "line " << i + 1;
  }
}

}  // namespace
}  // namespace rtb::k8s::shell
