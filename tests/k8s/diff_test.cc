#include "rtb/k8s/diff.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rtb/base/error.h"
#include "rtb/base/io.h"
#include "rtb/k8s/dryrun.h"
#include "rtb/k8s/yaml.h"
#include "test_util.h"

namespace rtb::k8s {
namespace {

const std::string kProcSpec = "spec.replicatedJobs[proc].template.spec.template.spec";
const std::string kWorkerSpec = "spec.replicatedJobs[pw-node].template.spec.template.spec";

// Replaces the only occurrence of `from` in 1-based line `line` of `text`; returns "" when the line
// does not contain `from` exactly once, so a test notices a changed fixture.
std::string replace_in_line(const std::string& text, std::size_t line, std::string_view from,
                            std::string_view to) {
  std::size_t start = 0;
  for (std::size_t i = 1; i < line; ++i) {
    start = text.find('\n', start);
    if (start == std::string::npos) return "";
    ++start;
  }
  std::size_t end = text.find('\n', start);
  if (end == std::string::npos) end = text.size();
  std::string_view content(text.data() + start, end - start);
  std::size_t at = content.find(from);
  if (at == std::string_view::npos || content.find(from, at + 1) != std::string_view::npos) {
    return "";
  }
  std::string out = text;
  out.replace(start + at, from.size(), to);
  return out;
}

std::string insert_line_after(const std::string& text, std::size_t line, const std::string& added) {
  std::size_t start = 0;
  for (std::size_t i = 0; i < line; ++i) {
    start = text.find('\n', start);
    if (start == std::string::npos) return "";
    ++start;
  }
  std::string out = text;
  out.insert(start, added + "\n");
  return out;
}

std::string fixture_text() { return read_file(testdata("launch_dryrun.txt")); }

// The trainer JobSet (second document) of a DRY_RUN text.
YAML::Node trainer_of(const std::string& text) {
  DryRun dryrun = parse_dryrun(text, "launch_dryrun.txt");
  if (dryrun.documents.size() != 3) return YAML::Node(YAML::NodeType::Undefined);
  return dryrun.documents[1].root;
}

YAML::Node item_named(const YAML::Node& sequence, std::string_view name) {
  if (sequence.IsSequence()) {
    for (const auto& item : sequence) {
      if (yaml::scalar_at(item, "name") == std::string(name)) return item;
    }
  }
  return YAML::Node(YAML::NodeType::Undefined);
}

YAML::Node container_of(const YAML::Node& jobset, std::string_view job, std::string_view list,
                        std::string_view name) {
  YAML::Node job_node = item_named(yaml::descend(jobset, {"spec", "replicatedJobs"}), job);
  YAML::Node spec = yaml::descend(job_node, {"template", "spec", "template", "spec"});
  return item_named(yaml::lookup(spec, list), name);
}

std::vector<std::string> keys_of(const YAML::Node& map) {
  std::vector<std::string> keys;
  if (map.IsMap()) {
    for (const auto& kv : map) keys.push_back(kv.first.Scalar());
  }
  return keys;
}

// `node` is a mapping (of `count` keys, from `first` to `last`, where given) with these values.
void expect_mapping(const YAML::Node& node, std::optional<std::size_t> count,
                    std::string_view first, std::string_view last,
                    std::initializer_list<std::pair<const char*, const char*>> values) {
  ASSERT_TRUE(node.IsMap());
  std::vector<std::string> keys = keys_of(node);
  if (count) {
    ASSERT_EQ(keys.size(), *count);
  }
  if (!first.empty()) {
    ASSERT_FALSE(keys.empty());
    EXPECT_EQ(keys.front(), first);
  }
  if (!last.empty()) {
    ASSERT_FALSE(keys.empty());
    EXPECT_EQ(keys.back(), last);
  }
  for (const auto& [key, value] : values) {
    EXPECT_EQ(yaml::scalar_at(node, key), std::optional<std::string>(value)) << key;
  }
}

std::string describe(const std::vector<Difference>& differences) {
  std::string out;
  for (const Difference& d : differences) {
    out += fmt::format("{} {} [{}] -> [{}]\n", kind_name(d.kind), d.path, d.old_value, d.new_value);
  }
  return out;
}

std::vector<Difference> diff_expanded(const std::string& a_text, const std::string& b_text) {
  return diff_trees(expand_for_diff(trainer_of(a_text)), expand_for_diff(trainer_of(b_text)));
}

// The one difference between the fixture text `a` and its edit `b` (empty: the edit did not
// apply); nullopt, after a test failure, when there is not exactly one.
std::optional<Difference> only_difference(const std::string& a, const std::string& b) {
  if (b.empty()) {
    ADD_FAILURE() << "the edit did not apply";
    return std::nullopt;
  }
  std::vector<Difference> found = diff_expanded(a, b);
  if (found.size() != 1u) {
    ADD_FAILURE() << "expected one difference, found:\n" << describe(found);
    return std::nullopt;
  }
  return found[0];
}

// --- paths and keys
// -------------------------------------------------------------------------------

TEST(DiffPaths, ChildAndItem) {
  // A key made of [A-Za-z0-9_-] is `.key` (no dot at the start of a path).
  test::expect_calls<const char*, const char*, const char*>(
      path_child, {{{"", "spec"}, "spec"},
                   {{"spec", "replicatedJobs"}, "spec.replicatedJobs"},
                   {{"a", "with-dash_and_9"}, "a.with-dash_and_9"}});
  // Any other key, the empty one included, is `[key]`.
  test::expect_calls<const char*, const char*, const char*>(
      path_child, {{{"metadata.labels", "kueue.x-k8s.io/queue-name"},
                    "metadata.labels[kueue.x-k8s.io/queue-name]"},
                   {{"a", "has space"}, "a[has space]"},
                   {{"", "a.b"}, "[a.b]"},
                   {{"a", ""}, "a[]"}});
  // A list item's key is always `[key]`.
  test::expect_calls<const char*, const char*, const char*>(
      path_item, {{{"spec.containers", "main"}, "spec.containers[main]"},
                  {{"args", "--xla_foo"}, "args[--xla_foo]"},
                  {{"x", "3"}, "x[3]"}});
}

TEST(SequenceItemKeys, ByName) {
  EXPECT_THAT(sequence_item_keys(YAML::Load("- name: main\n  image: a\n- name: proxy\n")),
              ElementsAre("main", "proxy"));
}

TEST(SequenceItemKeys, ByContainerPortWhenNamesAreAbsentOrRepeat) {
  EXPECT_THAT(sequence_item_keys(YAML::Load("- containerPort: 8471\n- containerPort: 20002\n")),
              ElementsAre("8471", "20002"));
  EXPECT_THAT(sequence_item_keys(
                  YAML::Load("- {name: p, containerPort: 1}\n- {name: p, containerPort: 2}\n")),
              ElementsAre("1", "2"));
}

TEST(SequenceItemKeys, PositionalFallback) {
  // Names repeat and there are no ports.
  EXPECT_THAT(sequence_item_keys(YAML::Load("- name: a\n- name: a\n- name: b\n")),
              ElementsAre("0", "1", "2"));
  // One item has no name.
  EXPECT_THAT(sequence_item_keys(YAML::Load("- name: a\n- image: b\n")), ElementsAre("0", "1"));
  // Scalars.
  EXPECT_THAT(sequence_item_keys(YAML::Load("[x, y, z]")), ElementsAre("0", "1", "2"));
  // Ports repeat too.
  EXPECT_THAT(sequence_item_keys(YAML::Load("- containerPort: 1\n- containerPort: 1\n")),
              ElementsAre("0", "1"));
  EXPECT_THAT(sequence_item_keys(YAML::Load("[]")), IsEmpty());
}

TEST(FlagItemKeys, DashDash) {
  EXPECT_THAT(flag_item_keys({"--a=1", "--b", "--no-c", "--a=2", "positional", "-v", "--a",
                              "--d=x=y", "--", "positional"},
                             FlagStyle::kDashDash),
              ElementsAre("--a", "--b", "--c", "--a#2", "#4", "#5", "--a#3", "--d", "#8", "#9"));
}

TEST(FlagItemKeys, KeyValue) {
  EXPECT_THAT(flag_item_keys({"k=v", "j=1", "k=w", "bare", "k=", "x=a=b"}, FlagStyle::kKeyValue),
              ElementsAre("k", "j", "k#2", "#3", "k#3", "x"));
}

TEST(FlagItemKeys, Empty) { EXPECT_THAT(flag_item_keys({}, FlagStyle::kDashDash), IsEmpty()); }

TEST(FlagStringVariables, Names) {
  for (const char* name : {"LIBTPU_INIT_ARGS", "XLA_FLAGS"}) {
    EXPECT_TRUE(is_flag_string_variable(name)) << name;
  }
  for (const char* name : {"MAXTEXT_EXTRA_FLAGS", "libtpu_init_args", "PATH"}) {
    EXPECT_FALSE(is_flag_string_variable(name)) << name;
  }
}

// --- expand_for_diff
// ------------------------------------------------------------------------------

class ExpandedTrainer : public ::testing::Test {
 protected:
  void SetUp() override {
    trainer_ = trainer_of(fixture_text());
    ASSERT_TRUE(trainer_.IsMap());
    before_ = yaml::emit(trainer_);
    expanded_ = expand_for_diff(trainer_);
    main_ = container_of(expanded_, "proc", "containers", "main");
    ASSERT_TRUE(main_.IsMap());
    startup_ = yaml::lookup(main_, "startup");
    ASSERT_TRUE(startup_.IsMap());
  }
  YAML::Node trainer_, expanded_, main_, startup_;
  std::string before_;
};

TEST_F(ExpandedTrainer, InputIsNotModified) { EXPECT_EQ(yaml::emit(trainer_), before_); }

TEST_F(ExpandedTrainer, CommandBecomesShellScriptAndStartup) {
  EXPECT_THAT(keys_of(main_), ::testing::IsSupersetOf({"name", "command", "script", "startup"}));
  YAML::Node command = yaml::lookup(main_, "command");
  ASSERT_TRUE(command.IsSequence());
  ASSERT_EQ(command.size(), 2u);
  EXPECT_EQ(command[0].Scalar(), "bash");
  EXPECT_EQ(command[1].Scalar(), "-c");
  std::string script = yaml::scalar_at(main_, "script").value_or("");
  EXPECT_THAT(script, HasSubstr("<startup>"));
  EXPECT_THAT(script, HasSubstr("PID=$!"));
  EXPECT_THAT(script, Not(HasSubstr("--worker_id")));
  EXPECT_EQ(yaml::scalar_at(startup_, "program"),
            std::optional<std::string>("python -m tunix.experimental.distributed.runtime.main"));
}

TEST(ExpandForDiff, ArgumentsAfterTheScriptAreComparedAsItsLines) {
  // render-bench packs a driver too large for the script into the arguments after it: a change
  // there is a change of the script, with the command's shell words as they were.
  YAML::Node a = trainer_of(fixture_text());
  YAML::Node command = container_of(a, "proc", "containers", "main")["command"];
  command.push_back("bench-client");
  command.push_back("AAAA\nBBBB\n");
  YAML::Node b = YAML::Clone(a);
  container_of(b, "proc", "containers", "main")["command"][4] = "AAAA\nCCCC\n";
  YAML::Node expanded = container_of(expand_for_diff(a), "proc", "containers", "main");
  EXPECT_EQ(yaml::lookup(expanded, "command").size(), 2u);
  EXPECT_THAT(yaml::scalar_at(expanded, "script").value_or(""),
              HasSubstr("\n<argument $0>\nbench-client\n<argument $1>\nAAAA\nBBBB\n"));
  std::vector<Difference> differences = diff_trees(expand_for_diff(a), expand_for_diff(b));
  ASSERT_EQ(differences.size(), 1u) << describe(differences);
  EXPECT_THAT(differences[0].path, ::testing::EndsWith("containers[main].script"));
}

TEST_F(ExpandedTrainer, StartupEnvironment) {
  YAML::Node env = yaml::lookup(startup_, "env");
  expect_mapping(env, 30, "PYTHONUNBUFFERED", "ENABLE_PJRT_COMPATIBILITY",
                 {{"ENABLE_MULTI_NUMA", ""}, {"WEIGHT_SYNC_DISABLE_TIMEOUTS", "1"}});
  expect_mapping(yaml::lookup(env, "MAXTEXT_EXTRA_FLAGS"), 30, "custom_mesh_and_rule",
                 "fp8_moe_fake_quant", {{"ragged_buffer_factor", "ragged_buffer_factor=2.0"}});
  expect_mapping(yaml::lookup(env, "LIBTPU_INIT_ARGS"), 15,
                 "--DANGEROUS_tpu_runtime_abi_verification_disabled", "",
                 {{"--xla_tpu_scoped_vmem_limit_kib", "--xla_tpu_scoped_vmem_limit_kib=65472"}});
}

TEST_F(ExpandedTrainer, ArgvKeyedByFlag) {
  YAML::Node argv = yaml::lookup(startup_, "argv");
  expect_mapping(argv, 58, "", "--skip_first_n_profiler_steps",
                 {{"--worker_id", "--worker_id=abtest-train"},
                  {"--optimizer_chain_kwargs", "--optimizer_chain_kwargs={'max_norm': 0.0625}"},
                  {"--mesh_fsdp", "--mesh_fsdp=32"}});
  std::vector<std::string> keys = keys_of(argv);
  ASSERT_GE(keys.size(), 4u);
  EXPECT_THAT(
      std::vector<std::string>(keys.begin(), keys.begin() + 4),
      ElementsAre("--discovery_addrs", "--process_executor", "--process_main", "--worker_id"));
}

TEST_F(ExpandedTrainer, ProxyArgsKeyedByFlag) {
  YAML::Node proxy = container_of(expanded_, "proc", "initContainers", "pathways-proxy");
  expect_mapping(yaml::lookup(proxy, "args"), 19, "", "--sidecar_name",
                 {{"--xla_tpu_dvfs_p_state", "--xla_tpu_dvfs_p_state=7"},
                  {"--temporary_flags_for_debugging",
                   "--temporary_flags_for_debugging=temporary_flag_for_"
                   "debugging_test_only_hold_death_ref=false"}});
}

TEST_F(ExpandedTrainer, WorkerLibtpuValueExpanded) {
  YAML::Node worker = container_of(expanded_, "pw-node", "containers", "pathways-worker");
  YAML::Node entry = item_named(yaml::lookup(worker, "env"), "LIBTPU_INIT_ARGS");
  expect_mapping(yaml::lookup(entry, "value"), 16, "--xla_tpu_use_tc_device_shape_on_sc", "",
                 {{"--megascale_port", "--megascale_port=-1"}});
  // Other entries are unchanged, quoted strings included.
  YAML::Node skip =
      yaml::lookup(item_named(yaml::lookup(worker, "env"), "SKIP_MEGASCALE_PJRT_CLIENT"), "value");
  ASSERT_TRUE(skip.IsScalar());
  EXPECT_EQ(skip.Scalar(), "true");
  EXPECT_EQ(skip.Tag(), "!");
  // The worker's args are a flag list too.
  expect_mapping(yaml::lookup(worker, "args"), std::nullopt, "", "",
                 {{"--server_port", "--server_port=29005"}});
}

TEST(ExpandForDiff, RolloutStartup) {
  DryRun dryrun = parse_dryrun(fixture_text(), "launch_dryrun.txt");
  YAML::Node expanded = expand_for_diff(dryrun.documents.at(2).root);
  YAML::Node startup =
      yaml::lookup(container_of(expanded, "proc", "containers", "main"), "startup");
  ASSERT_TRUE(startup.IsMap());
  YAML::Node libtpu = yaml::descend(startup, {"env", "LIBTPU_INIT_ARGS"});
  ASSERT_TRUE(libtpu.IsMap());
  EXPECT_EQ(libtpu.size(), 6u);  // the value's leading space makes no empty item
  EXPECT_EQ(yaml::scalar_at(yaml::lookup(startup, "argv"), "--worker_id"),
            std::optional<std::string>("--worker_id=abtest-roll-${JOB_INDEX}"));
}

TEST(ExpandForDiff, UnreadableStartupStaysText) {
  for (const char* name : {"bad/unbalanced_quote.txt", "bad/no_startup_block.txt"}) {
    SCOPED_TRACE(name);
    DryRun dryrun = parse_dryrun(read_file(testdata(name)), name);
    ASSERT_EQ(dryrun.documents.size(), 3u);
    YAML::Node expanded = expand_for_diff(dryrun.documents[1].root);
    YAML::Node main = container_of(expanded, "proc", "containers", "main");
    ASSERT_TRUE(main.IsMap());
    EXPECT_FALSE(yaml::lookup(main, "startup").IsDefined());
    YAML::Node command = yaml::lookup(main, "command");
    ASSERT_TRUE(command.IsSequence());
    EXPECT_EQ(command.size(), 3u);
    // Still comparable with itself.
    EXPECT_THAT(diff_trees(expanded, expand_for_diff(dryrun.documents[1].root)), IsEmpty());
  }
}

TEST(ExpandForDiff, NotAJobSetIsCopied) {
  YAML::Node plain = YAML::Load("a: [1, 2]\nb: {c: \"4\"}\n");
  YAML::Node expanded = expand_for_diff(plain);
  EXPECT_EQ(yaml::emit(expanded), yaml::emit(plain));
  EXPECT_THAT(diff_trees(plain, expanded), IsEmpty());
}

// --- diff_trees on the fixture
// --------------------------------------------------------------------

TEST(DiffFixture, IdenticalRendersHaveNoDifferences) {
  std::string text = fixture_text();
  DryRun a = parse_dryrun(text, "a");
  DryRun b = parse_dryrun(text, "b");
  ASSERT_EQ(a.documents.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_THAT(diff_trees(a.documents[i].root, b.documents[i].root), IsEmpty());
    EXPECT_THAT(
        diff_trees(expand_for_diff(a.documents[i].root), expand_for_diff(b.documents[i].root)),
        IsEmpty());
  }
}

// One edit of the fixture and the one difference it makes.
struct FixtureEdit {
  const char* name;
  std::size_t line;  // 1-based
  const char* from;  // replaced by `to` in that line; nullptr: `to` is a new line after it
  std::string to;
  Difference::Kind kind;
  std::string path, old_value, new_value;
};

const FixtureEdit kFixtureEdits[] = {
    {"ChangedMaxTextItemIsOneDifference", 456, "ragged_buffer_factor=2.0",
     "ragged_buffer_factor=4.0", Difference::Kind::kChanged,
     "spec.replicatedJobs[proc].template.spec.template.spec.containers[main].startup.env."
     "MAXTEXT_EXTRA_FLAGS[ragged_buffer_factor]",
     "ragged_buffer_factor=2.0", "ragged_buffer_factor=4.0"},
    {"ChangedArgvFlagIsOneDifference", 456, "--mesh_fsdp=32", "--mesh_fsdp=16",
     Difference::Kind::kChanged, kProcSpec + ".containers[main].startup.argv[--mesh_fsdp]",
     "--mesh_fsdp=32", "--mesh_fsdp=16"},
    // After --temporary_flags_for_debugging (line 402), before the 14 XLA flags.
    {"InsertedProxyFlagIsOneAddition", 402, nullptr, "              - \"--xla_new=1\"",
     Difference::Kind::kAdded, kProcSpec + ".initContainers[pathways-proxy].args[--xla_new]", "",
     "--xla_new=1"},
    // The line is now empty, which YAML ignores inside the sequence.
    {"RemovedProxyFlagIsOneRemoval", 416, "              - \"--xla_tpu_dvfs_p_state=7\"", "",
     Difference::Kind::kRemoved,
     kProcSpec + ".initContainers[pathways-proxy].args[--xla_tpu_dvfs_p_state]",
     "--xla_tpu_dvfs_p_state=7", ""},
    {"ChangedWorkerLibtpuFlag", 598, "--xla_tpu_dvfs_p_state=7", "--xla_tpu_dvfs_p_state=3",
     Difference::Kind::kChanged,
     kWorkerSpec +
         ".containers[pathways-worker].env[LIBTPU_INIT_ARGS].value[--xla_tpu_dvfs_p_state]",
     "--xla_tpu_dvfs_p_state=7", "--xla_tpu_dvfs_p_state=3"},
};

class DiffFixtureEdit : public ::testing::TestWithParam<FixtureEdit> {};

TEST_P(DiffFixtureEdit, OneEditIsOneDifference) {
  const FixtureEdit& edit = GetParam();
  std::string a = fixture_text();
  std::string b = edit.from ? replace_in_line(a, edit.line, edit.from, edit.to)
                            : insert_line_after(a, edit.line, edit.to);
  std::optional<Difference> found = only_difference(a, b);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->kind, edit.kind);
  EXPECT_EQ(found->path, edit.path);
  EXPECT_EQ(found->old_value, edit.old_value);
  EXPECT_EQ(found->new_value, edit.new_value);
}

INSTANTIATE_TEST_SUITE_P(Edits, DiffFixtureEdit, ::testing::ValuesIn(kFixtureEdits),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(DiffFixture, ChangedWrapperLineIsOneDifferenceInTheScript) {
  std::string a = fixture_text();
  // The `sleep 5` of the trainer's wrapper loop (the trainer document is lines 268-653).
  std::size_t line = 0;
  std::size_t start = 0;
  for (std::size_t n = 1; start < a.size() && line == 0; ++n) {
    std::size_t end = a.find('\n', start);
    std::string content = a.substr(start, end - start);
    if (n > 268 && n < 654 && content.find_first_not_of(' ') != std::string::npos &&
        content.substr(content.find_first_not_of(' ')) == "sleep 5") {
      line = n;
    }
    start = end + 1;
  }
  ASSERT_NE(line, 0u);
  std::optional<Difference> found =
      only_difference(a, replace_in_line(a, line, "sleep 5", "sleep 10"));
  ASSERT_TRUE(found);
  EXPECT_EQ(found->path, kProcSpec + ".containers[main].script");
  EXPECT_THAT(found->new_value, HasSubstr("sleep 10"));
}

TEST(DiffFixture, ReorderedStartupAssignmentsAreNoDifference) {
  std::string a = fixture_text();
  std::string b = replace_in_line(a, 456, "PYTHONUNBUFFERED=1       TUNIX_IS_INTERNAL_ENV=false",
                                  "TUNIX_IS_INTERNAL_ENV=false       PYTHONUNBUFFERED=1");
  ASSERT_FALSE(b.empty());
  EXPECT_THAT(diff_expanded(a, b), IsEmpty()) << describe(diff_expanded(a, b));
}

TEST(DiffFixture, ReorderedEnvEntriesAndContainersAreNoDifference) {
  YAML::Node a = trainer_of(fixture_text());
  YAML::Node b = YAML::Clone(a);
  // Reverse the worker's env list and swap the head pod's two initContainers.
  YAML::Node worker = container_of(b, "pw-node", "containers", "pathways-worker");
  YAML::Node env = yaml::lookup(worker, "env");
  ASSERT_TRUE(env.IsSequence());
  ASSERT_GT(env.size(), 3u);
  YAML::Node reversed(YAML::NodeType::Sequence);
  for (std::size_t i = env.size(); i-- > 0;) reversed.push_back(env[i]);
  worker["env"] = reversed;
  YAML::Node head = yaml::descend(item_named(yaml::descend(b, {"spec", "replicatedJobs"}), "proc"),
                                  {"template", "spec", "template", "spec"});
  YAML::Node init = yaml::lookup(head, "initContainers");
  ASSERT_EQ(init.size(), 2u);
  YAML::Node swapped(YAML::NodeType::Sequence);
  swapped.push_back(init[1]);
  swapped.push_back(init[0]);
  head["initContainers"] = swapped;
  ASSERT_NE(yaml::emit(a), yaml::emit(b));
  EXPECT_THAT(diff_trees(a, b), IsEmpty()) << describe(diff_trees(a, b));
  EXPECT_THAT(diff_trees(expand_for_diff(a), expand_for_diff(b)), IsEmpty());
}

// --- diff_trees on small trees
// --------------------------------------------------------------------

TEST(DiffTrees, QuotedVersusPlainIsATypeChange) {
  std::vector<Difference> found = diff_trees(YAML::Load("a: \"4\"\n"), YAML::Load("a: 4\n"));
  ASSERT_EQ(found.size(), 1u) << describe(found);
  EXPECT_EQ(found[0].kind, Difference::Kind::kTypeChanged);
  EXPECT_EQ(found[0].path, "a");
  EXPECT_EQ(kind_name(found[0].kind), "type-changed");
  EXPECT_NE(found[0].old_value, found[0].new_value);
  EXPECT_THAT(diff_trees(YAML::Load("a: 'true'\n"), YAML::Load("a: true\n")), ::testing::SizeIs(1));
  EXPECT_THAT(diff_trees(YAML::Load("a: \"4\"\n"), YAML::Load("a: '4'\n")), IsEmpty());
}

TEST(DiffTrees, NumbersAreWhatYamlReadsAsNumbers) {
  // Kubernetes reads YAML 1.1 (go-yaml): a plain scalar is a number only in a number's shape;
  // words that C's float parsing takes (`infinity`, `nan`, `inf`) are strings. Kueue issue 8101's
  // live JobSet prints `command: [sleep, infinity]`, which a render writes `"infinity"`.
  auto kinds = [](const char* a, const char* b) {
    std::string out;
    for (const Difference& d : diff_trees(YAML::Load(a), YAML::Load(b)))
      out += std::string(kind_name(d.kind)) + ";";
    return out;
  };
  for (const char* word : {"infinity", "inf", "-inf", "nan", "NaN", "Infinity", "e5", "0x"}) {
    EXPECT_EQ(
        kinds(("a: \"" + std::string(word) + "\"").c_str(), ("a: " + std::string(word)).c_str()),
        "")
        << word << " is a string either way";
  }
  for (const char* number : {"1", "-1", "+1.5", "1e5", ".5", "0x1F", ".inf", "-.inf", ".nan"}) {
    EXPECT_EQ(kinds(("a: \"" + std::string(number) + "\"").c_str(),
                    ("a: " + std::string(number)).c_str()),
              "type-changed;")
        << number << " plain is a number";
  }
}

TEST(DiffTrees, ChangedScalarsAndPaths) {
  std::vector<Difference> found =
      diff_trees(YAML::Load("metadata:\n  labels:\n    scheduling.x-k8s.io/gang-id: \"abtest\"\n"),
                 YAML::Load("metadata:\n  labels:\n    scheduling.x-k8s.io/gang-id: \"bench\"\n"));
  ASSERT_EQ(found.size(), 1u) << describe(found);
  EXPECT_EQ(found[0].kind, Difference::Kind::kChanged);
  EXPECT_EQ(found[0].path, "metadata.labels[scheduling.x-k8s.io/gang-id]");
  EXPECT_EQ(found[0].old_value, "abtest");
  EXPECT_EQ(found[0].new_value, "bench");
  EXPECT_EQ(kind_name(Difference::Kind::kChanged), "changed");
}

TEST(DiffTrees, AddedAndRemovedSubtrees) {
  YAML::Node small = YAML::Load("x: 1\n");
  YAML::Node big = YAML::Load("x: 1\ny:\n  z: [1, 2]\n  w: \"s\"\n");
  // One way the subtree is added, the other way removed: one side empty, the other the subtree.
  struct Way {
    YAML::Node from, to;
    Difference::Kind kind;
    const char* name;
  };
  for (const Way& way : {Way{small, big, Difference::Kind::kAdded, "added"},
                         Way{big, small, Difference::Kind::kRemoved, "removed"}}) {
    SCOPED_TRACE(way.name);
    std::vector<Difference> found = diff_trees(way.from, way.to);
    ASSERT_EQ(found.size(), 1u) << describe(found);
    EXPECT_EQ(found[0].kind, way.kind);
    EXPECT_EQ(found[0].path, "y");
    bool added = way.kind == Difference::Kind::kAdded;
    EXPECT_EQ(added ? found[0].old_value : found[0].new_value, "");
    const std::string& subtree = added ? found[0].new_value : found[0].old_value;
    EXPECT_THAT(subtree, HasSubstr("z: [1, 2]"));
    EXPECT_THAT(subtree, HasSubstr("w: \"s\""));
    EXPECT_EQ(kind_name(way.kind), way.name);
  }
}

TEST(DiffTrees, WhereOnlyFindsTheSameDifferencesWithoutTheirValues) {
  const YAML::Node a =
      YAML::Load("a: \"4\"\nb: x\nc: {d: 1}\ne: [1, 2]\nf: --steps=1 --warmup=2\ns: {t: 1}\n");
  const YAML::Node b = YAML::Load(
      "a: 4\nb: y\nc: [1]\ng: {h: [1, 2]}\nf: --steps=2 --warmup=2\ns: {t: 1, u: {v: 2}}\n");
  const std::vector<Difference> full = diff_trees(a, b);
  const std::vector<Difference> where = diff_trees(a, b, "", DiffDetail::kWhere);
  ASSERT_EQ(full.size(), 7u) << describe(full);
  ASSERT_EQ(where.size(), full.size()) << describe(where);
  for (std::size_t i = 0; i < full.size(); ++i) {
    SCOPED_TRACE(full[i].path);
    EXPECT_EQ(where[i].path, full[i].path);
    EXPECT_EQ(where[i].kind, full[i].kind);
    EXPECT_FALSE(full[i].old_value.empty() && full[i].new_value.empty());
    EXPECT_EQ(where[i].old_value, "");
    EXPECT_EQ(where[i].new_value, "");
    EXPECT_FALSE(where[i].subtree.IsDefined());
  }
}

TEST(DiffTrees, SequencesByNamePortAndPosition) {
  std::vector<Difference> by_name =
      diff_trees(YAML::Load("c:\n- name: a\n  v: 1\n- name: b\n  v: 2\n"),
                 YAML::Load("c:\n- name: b\n  v: 3\n- name: a\n  v: 1\n- name: n\n"));
  ASSERT_EQ(by_name.size(), 2u) << describe(by_name);
  EXPECT_EQ(by_name[0].path, "c[b].v");
  EXPECT_EQ(by_name[0].kind, Difference::Kind::kChanged);
  EXPECT_EQ(by_name[1].path, "c[n]");
  EXPECT_EQ(by_name[1].kind, Difference::Kind::kAdded);

  std::vector<Difference> by_port =
      diff_trees(YAML::Load("ports:\n- containerPort: 80\n  protocol: TCP\n- containerPort: 81\n"),
                 YAML::Load("ports:\n- containerPort: 81\n- containerPort: 80\n  protocol: UDP\n"));
  ASSERT_EQ(by_port.size(), 1u) << describe(by_port);
  EXPECT_EQ(by_port[0].path, "ports[80].protocol");

  std::vector<Difference> positional =
      diff_trees(YAML::Load("v: [1, 2, 3]\n"), YAML::Load("v: [1, 5, 3, 4]\n"));
  ASSERT_EQ(positional.size(), 2u) << describe(positional);
  EXPECT_EQ(positional[0].path, "v[1]");
  EXPECT_EQ(positional[0].old_value, "2");
  EXPECT_EQ(positional[0].new_value, "5");
  EXPECT_EQ(positional[1].path, "v[3]");
  EXPECT_EQ(positional[1].kind, Difference::Kind::kAdded);
}

TEST(DiffTrees, TypeChangesBetweenShapes) {
  std::vector<Difference> found = diff_trees(YAML::Load("a: [1]\nb: {c: 1}\nc: x\nd: null\n"),
                                             YAML::Load("a: {x: 1}\nb: 1\nc: [x]\nd: 1\n"));
  ASSERT_EQ(found.size(), 4u) << describe(found);
  for (const Difference& d : found) EXPECT_EQ(d.kind, Difference::Kind::kTypeChanged) << d.path;
  EXPECT_EQ(found[0].path, "a");
  EXPECT_EQ(found[3].path, "d");
}

TEST(DiffTrees, OrderIsThatOfAThenWhatOnlyBHas) {
  std::vector<Difference> found =
      diff_trees(YAML::Load("z: 1\ny: 2\nx: 3\n"), YAML::Load("w: 0\nx: 4\ny: 5\nz: 6\n"));
  std::vector<std::string> paths;
  for (const Difference& d : found) paths.push_back(d.path);
  EXPECT_THAT(paths, ElementsAre("z", "y", "x", "w"));
}

TEST(DiffTrees, BasePathPrefixesEveryPath) {
  std::vector<Difference> found =
      diff_trees(YAML::Load("a: {b: 1}\n"), YAML::Load("a: {b: 2}\n"), "doc");
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].path, "doc.a.b");
}

TEST(DiffTrees, RepeatedKeysIdenticalAreNoDifference) {
  EXPECT_THAT(diff_trees(YAML::Load("p: a\nq: 1\np: b\n"), YAML::Load("p: a\nq: 1\np: b\n")),
              IsEmpty());
}

// Regression: diff_trees once compared a repeated key once per occurrence in `a`, so one change
// was reported twice (the real orchestrator repeats priorityClassName).
TEST(DiffTrees, RepeatedKeyChangeIsReportedOnce) {
  std::vector<Difference> found =
      diff_trees(YAML::Load("p: a\nq: 1\np: b\n"), YAML::Load("p: a\nq: 1\np: c\n"));
  ASSERT_EQ(found.size(), 1u) << describe(found);
  EXPECT_EQ(found[0].path, "p");
  EXPECT_EQ(found[0].new_value, "c");
}

// --- deep trees
// -----------------------------------------------------------------------------------

constexpr int kDeep = 100000;

// A chain of `depth` nested mappings {k: {k: ... {leaf: value}}}, built without ever reassigning
// a Node variable (which would write through into the tree).
YAML::Node deep_maps(int depth, const std::string& leaf) {
  std::vector<YAML::Node> chain;
  chain.reserve(depth);
  for (int i = 0; i < depth; ++i) chain.emplace_back(YAML::NodeType::Map);
  for (int i = 0; i + 1 < depth; ++i) chain[i]["k"] = chain[i + 1];
  chain[depth - 1]["leaf"] = leaf;
  return chain[0];
}

YAML::Node deep_sequences(int depth, const std::string& leaf) {
  std::vector<YAML::Node> chain;
  chain.reserve(depth);
  for (int i = 0; i < depth; ++i) chain.emplace_back(YAML::NodeType::Sequence);
  for (int i = 0; i + 1 < depth; ++i) chain[i].push_back(chain[i + 1]);
  chain[depth - 1].push_back(leaf);
  return chain[0];
}

// Two chains of `kDeep` levels made by `build`, one with the leaf "old", one with "new", differ in
// that leaf alone, at a path of `path_size` characters: found without overflowing the stack.
void expect_deep_leaf_change(YAML::Node (*build)(int, const std::string&), std::size_t path_size) {
  std::vector<Difference> found = diff_trees(build(kDeep, "old"), build(kDeep, "new"));
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].kind, Difference::Kind::kChanged);
  EXPECT_EQ(found[0].old_value, "old");
  EXPECT_EQ(found[0].new_value, "new");
  EXPECT_EQ(found[0].path.size(), path_size);
}

TEST(DiffDeep, DeepMappingsDoNotOverflowTheStack) {
  expect_deep_leaf_change(deep_maps,
                          std::string("k.").size() * (kDeep - 1) + std::string("leaf").size());
}

TEST(DiffDeep, DeepSequencesDoNotOverflowTheStack) {
  expect_deep_leaf_change(deep_sequences, std::string("[0]").size() * kDeep);
}

TEST(DiffDeep, AddedLeafUnderADeepChain) {
  YAML::Node a = deep_maps(kDeep, "v");
  YAML::Node b = deep_maps(kDeep, "v");
  // Add a sibling at the bottom of b, reaching it through a fresh variable per step.
  std::vector<YAML::Node> path{b};
  for (int i = 0; i + 1 < kDeep; ++i) path.push_back(path.back()["k"]);
  path.back()["extra"] = "x";
  std::vector<Difference> found = diff_trees(a, b);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].kind, Difference::Kind::kAdded);
  EXPECT_EQ(found[0].new_value, "x");
  EXPECT_EQ(found[0].path.substr(found[0].path.size() - 7), "k.extra");
}

}  // namespace
}  // namespace rtb::k8s

// --- issue 16: command lines in any string, null collections, subtree leaves --------------------

namespace rtb::k8s {
namespace {

std::string one_line_each(const std::vector<Difference>& found) {
  std::string out;
  for (const Difference& d : found) {
    out += std::string(kind_name(d.kind)) + " " + d.path + ": " + d.old_value + " -> " +
           d.new_value + "\n";
  }
  return out;
}

YAML::Node string_map(std::string_view key, std::string_view value) {
  YAML::Node map(YAML::NodeType::Map);
  map[std::string(key)] = yaml::string_scalar(std::string(value));
  return map;
}

TEST(CommandLineAsFlags, KeysFlagsValuesAndWords) {
  std::optional<YAML::Node> flags = command_line_as_flags(
      "cd /app && python3 -m maxtext.train base.yml steps=10 --lr 0.1 --no-remat --a=1 --a=2");
  ASSERT_TRUE(flags.has_value());
  std::vector<std::string> keys;
  for (const auto& kv : *flags) keys.push_back(kv.first.Scalar() + "=" + kv.second.Scalar());
  EXPECT_THAT(keys, ElementsAre("#0=cd", "#1=/app", "&&=&&", "#2=python3", "-m=-m maxtext.train",
                                "#3=base.yml", "steps=steps=10", "--lr=--lr 0.1",
                                "--remat=--no-remat", "--a=--a=1", "--a#2=--a=2"));
}

TEST(CommandLineAsFlags, NotACommandLine) {
  EXPECT_FALSE(command_line_as_flags("python -m tunix.main"))
      << "no long flag nor name=value: a program, compared whole";
  EXPECT_FALSE(command_line_as_flags("--only-one-word"));
  EXPECT_FALSE(command_line_as_flags("echo a;\necho --b=1")) << "several lines: a script";
  EXPECT_FALSE(command_line_as_flags("python x.py --msg 'unterminated"));
  EXPECT_FALSE(command_line_as_flags("just some words"));
}

TEST(DiffTreesCommandLines, AChangedFlagInAnyStringIsThatFlag) {
  // An env value that is not one of the known flag variables, an args item that is a bash -c
  // script: one changed flag each, not two 1,000-character lines.
  std::string flags;
  for (int i = 0; i < 40; ++i) flags += " --xla_flag_number_" + std::to_string(i) + "=true";
  std::string old_command = "python3 train.py --steps 10" + flags + " 2>&1 | tee /tmp/log";
  std::string new_command = "python3 train.py --steps 20" + flags + " 2>&1 | tee /tmp/log";
  ASSERT_GT(old_command.size(), 1000u);
  std::vector<Difference> found =
      diff_trees(string_map("TRAIN_CMD", old_command), string_map("TRAIN_CMD", new_command));
  EXPECT_EQ(one_line_each(found), "changed TRAIN_CMD[--steps]: --steps 10 -> --steps 20\n");

  found = diff_trees(string_map("s", "echo start; python3 -m maxtext.train a.yml steps=5 x=1"),
                     string_map("s", "echo start; python3 -m maxtext.train a.yml steps=5 x=2"));
  EXPECT_EQ(one_line_each(found), "changed s[x]: x=1 -> x=2\n");

  // Only one side reads as a command line: the whole values, as before.
  found = diff_trees(string_map("s", "python3 a.py --a=1"), string_map("s", "python3 'a.py"));
  EXPECT_EQ(one_line_each(found), "changed s: python3 a.py --a=1 -> python3 'a.py\n");
  // A program without flags stays one value.
  found = diff_trees(string_map("s", "python -m a"), string_map("s", "python3 /tmp/b.py"));
  EXPECT_EQ(one_line_each(found), "changed s: python -m a -> python3 /tmp/b.py\n");
  // A flag added and one removed.
  found = diff_trees(string_map("s", "run --a=1 --b=2"), string_map("s", "run --a=1 --c=3"));
  EXPECT_EQ(one_line_each(found), "removed s[--b]: --b=2 -> \nadded s[--c]:  -> --c=3\n");
}

TEST(DiffTreesNullCollections, EmptyAgainstFilledIsEntriesNotATypeChange) {
  std::vector<Difference> found =
      diff_trees(YAML::Load("metadata:\n  annotations:\n  labels: {a: b}\n"),
                 YAML::Load("metadata:\n  annotations: {x/y: z}\n  labels:\n"));
  EXPECT_EQ(one_line_each(found),
            "added metadata.annotations[x/y]:  -> z\nremoved metadata.labels.a: b -> \n");
  EXPECT_THAT(diff_trees(YAML::Load("a:\nb: ~\n"), YAML::Load("a: {}\nb: []\n")), IsEmpty())
      << "an empty value is an empty collection";
  found = diff_trees(YAML::Load("a:\n"), YAML::Load("a: 1\n"));
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].kind, Difference::Kind::kTypeChanged) << "null against a scalar still is";
}

TEST(DiffTreesSubtrees, AddedSubtreesCarryTheirNodeAndLeaves) {
  // xpk 254bbe3f (2026-03-18) added a tolerations list to the worker of 678d7a9f (03-17).
  DryRun old_render =
      parse_dryrun(read_file(testdata("diff_renders/xpk_pathways_v5p-8_at_678d7a9f.yaml")), "a");
  DryRun new_render =
      parse_dryrun(read_file(testdata("diff_renders/xpk_pathways_v5p-8_at_254bbe3f.yaml")), "b");
  std::vector<Difference> found = diff_trees(expand_for_diff(old_render.documents[0].root),
                                             expand_for_diff(new_render.documents[0].root));
  ASSERT_EQ(found.size(), 1u) << one_line_each(found);
  EXPECT_EQ(found[0].kind, Difference::Kind::kAdded);
  EXPECT_EQ(found[0].path, "spec.replicatedJobs[worker].template.spec.template.spec.tolerations");
  ASSERT_TRUE(found[0].subtree.IsSequence());
  Leaves leaves = subtree_leaves(found[0].subtree, 10);
  ASSERT_EQ(leaves.total, 2u);
  EXPECT_EQ(leaves.shown[0].path + ": " + leaves.shown[0].value, "[0].operator: Exists");
  EXPECT_EQ(leaves.shown[1].path + ": " + leaves.shown[1].value, "[0].key: google.com/tpu");
}

TEST(SubtreeLeaves, PathsValuesListsAndLimit) {
  YAML::Node tree = YAML::Load(
      "name: c\nenv:\nempty: {}\nnone: []\nvalues: [1, 2, 3]\n"
      "command: [bash, -c, \"a\\nb\\n\"]\nports: [{containerPort: 80}, {containerPort: 81}]\n"
      "labels: {a/b: x}\n");
  Leaves leaves = subtree_leaves(tree, 100);
  std::vector<std::string> lines;
  for (const Leaf& leaf : leaves.shown) lines.push_back(leaf.path + ": " + leaf.value);
  EXPECT_THAT(lines, ElementsAre("name: c", "env: null", "empty: {}", "none: []",
                                 "values: [1, 2, 3]", "command[0]: bash", "command[1]: -c",
                                 "command[2]: a\nb\n", "ports[80].containerPort: 80",
                                 "ports[81].containerPort: 81", "labels[a/b]: x"));
  std::string long_list = "v: [";
  for (int i = 0; i < 215; ++i) long_list += (i ? ", " : "") + std::to_string(100 + i);
  YAML::Node list = YAML::Load(long_list + "]\n");
  Leaves cut = subtree_leaves(list, 100);
  ASSERT_EQ(cut.total, 1u);
  EXPECT_THAT(cut.shown[0].value, ::testing::StartsWith("[100, 101, "));
  EXPECT_THAT(cut.shown[0].value, ::testing::EndsWith(", ...] (215 items)"));
  EXPECT_LE(cut.shown[0].value.size(), 130u);
  Leaves limited = subtree_leaves(tree, 3);
  EXPECT_EQ(limited.shown.size(), 3u);
  EXPECT_EQ(limited.total, 11u);
}

TEST(PathSegments, SplitsAtDotsAndKeepsBrackets) {
  EXPECT_THAT(path_segments("spec.replicatedJobs[proc].template.containers[main].env[A.B]"),
              ElementsAre("spec", "replicatedJobs", "[proc]", "template", "containers", "[main]",
                          "env", "[A.B]"));
  EXPECT_THAT(path_segments("a[*][#]"), ElementsAre("a", "[*]", "[#]"));
  EXPECT_THAT(path_segments("a[unclosed"), ElementsAre("a", "[unclosed"));
  EXPECT_THAT(path_segments(""), IsEmpty());
  EXPECT_THAT(path_segments(".a..b."), ElementsAre("a", "b"));
}

}  // namespace
}  // namespace rtb::k8s
