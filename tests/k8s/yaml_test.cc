#include "rtb/k8s/yaml.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "rtb/base/error.h"
#include "rtb/base/io.h"
#include "rtb/k8s/dryrun.h"
#include "test_util.h"

namespace rtb::k8s::yaml {
namespace {

namespace fs = std::filesystem;

std::string escaped(std::string_view text) {
  std::string out = "'";
  for (unsigned char c : text) {
    if (c < 0x20 || c == 0x7f || c == '\'' || c == '\\') {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "'";
}

// A canonical text of a tree: types, scalar values and tags, key order (repeated keys included),
// and the flow/block style of non-empty collections. Two trees are "equal" when these match.
void canonical(const YAML::Node& node, std::string& out) {
  switch (node.Type()) {
    case YAML::NodeType::Undefined:
      out += "<undefined>";
      return;
    case YAML::NodeType::Null:
      out += "~";
      return;
    case YAML::NodeType::Scalar:
      out += "<" + node.Tag() + ">" + escaped(node.Scalar());
      return;
    case YAML::NodeType::Sequence: {
      bool flow = node.size() > 0 && node.Style() == YAML::EmitterStyle::Flow;
      out += flow ? "flow[" : "[";
      for (const auto& item : node) {
        canonical(item, out);
        out += ", ";
      }
      out += "]";
      return;
    }
    case YAML::NodeType::Map: {
      bool flow = node.size() > 0 && node.Style() == YAML::EmitterStyle::Flow;
      out += flow ? "flow{" : "{";
      for (const auto& kv : node) {
        canonical(kv.first, out);
        out += ": ";
        canonical(kv.second, out);
        out += ", ";
      }
      out += "}";
      return;
    }
  }
}

std::string canonical(const YAML::Node& node) {
  std::string out;
  canonical(node, out);
  return out;
}

std::string hex(std::string_view text) {
  std::string out;
  for (unsigned char c : text) out += fmt::format("{:02x}", c);
  return out;
}

// What a YAML reader is expected to see in a tree loaded by yaml-cpp, one line per node: `N` for
// null, `P hex` for a plain scalar, `Q str hex` for a quoted (or block) scalar, which must be a
// string, `S n` / `M n` for collections (a mapping's keys and values alternate).
void listing(const YAML::Node& node, std::string& out) {
  switch (node.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null:
      out += "N\n";
      return;
    case YAML::NodeType::Scalar:
      out += (node.Tag() == "!" ? "Q str " : "P ") + hex(node.Scalar()) + "\n";
      return;
    case YAML::NodeType::Sequence:
      out += fmt::format("S {}\n", node.size());
      for (const auto& item : node) listing(item, out);
      return;
    case YAML::NodeType::Map:
      out += fmt::format("M {}\n", node.size());
      for (const auto& kv : node) {
        listing(kv.first, out);
        listing(kv.second, out);
      }
      return;
  }
}

std::string listing(const YAML::Node& node) {
  std::string out;
  listing(node, out);
  return out;
}

// The same listing made by PyYAML's composer (which keeps repeated keys and node styles).
constexpr std::string_view kPyYamlLister = R"(import sys, yaml
NULL = 'tag:yaml.org,2002:null'
def walk(node, out):
    if isinstance(node, yaml.ScalarNode):
        plain = node.style is None or node.style == ''
        if plain and node.tag == NULL:
            out.append('N')
        elif plain:
            out.append('P ' + node.value.encode('utf-8').hex())
        else:
            out.append('Q ' + node.tag.rsplit(':', 1)[-1] + ' ' + node.value.encode('utf-8').hex())
    elif isinstance(node, yaml.SequenceNode):
        out.append('S %d' % len(node.value))
        for item in node.value:
            walk(item, out)
    else:
        out.append('M %d' % len(node.value))
        for key, value in node.value:
            walk(key, out)
            walk(value, out)
out = []
with open(sys.argv[1], encoding='utf-8') as f:
    if len(sys.argv) > 2:  # a stream of documents, each listed after a line DOC
        for root in yaml.compose_all(f, Loader=yaml.SafeLoader):
            out.append('DOC')
            walk(root, out)
    else:
        root = yaml.compose(f, Loader=yaml.SafeLoader)
        if root is None:
            out.append('N')
        else:
            walk(root, out)
sys.stdout.write(''.join(line + '\n' for line in out))
)";

class TempFile {
 public:
  explicit TempFile(std::string_view content) {
    static int counter = 0;
    path_ = fs::temp_directory_path() /
            fmt::format("rtb_yaml_test_{}_{}.txt", static_cast<long>(getpid()), ++counter);
    std::ofstream(path_, std::ios::binary) << content;
  }
  ~TempFile() {
    std::error_code ignored;
    fs::remove(path_, ignored);
  }
  std::string path() const { return path_.string(); }

 private:
  fs::path path_;
};

// Runs PyYAML on `text` (a stream of documents when `stream`); returns its listing, or
// "ERROR: ..." with its output.
std::string pyyaml_listing(std::string_view text, bool stream = false) {
  TempFile script(kPyYamlLister);
  TempFile data(text);
  std::string command =
      "/usr/bin/python3 " + script.path() + " " + data.path() + (stream ? " stream" : "") + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return "ERROR: popen failed";
  std::string out;
  char buffer[4096];
  std::size_t n;
  while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) out.append(buffer, n);
  int status = pclose(pipe);
  if (status != 0) return "ERROR: python3 exited with " + std::to_string(status) + ":\n" + out;
  return out;
}

// Emitted texts, each checked by PyYAML against the tree yaml-cpp reads from it, in one run of
// PyYAML (one document per text).
class PyYamlBatch {
 public:
  void add(const std::string& emitted, const YAML::Node& yaml_cpp_tree) {
    stream_ += "---\n" + emitted;
    expected_ += "DOC\n" + listing(yaml_cpp_tree);
  }
  ::testing::AssertionResult Agrees() const {
    std::string python = pyyaml_listing(stream_, /*stream=*/true);
    if (python == expected_) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "PyYAML disagrees with yaml-cpp\n  PyYAML:   " << python
                                         << "\n  expected: " << expected_ << "\nstream:\n"
                                         << stream_;
  }

 private:
  std::string stream_;
  std::string expected_;
};

// Checks that `original` (a tree loaded by yaml-cpp) survives emit -> load with the same canonical
// form, and that PyYAML reads the emitted text as the same values with the same string-ness.
::testing::AssertionResult RoundTrips(const YAML::Node& original) {
  std::string text;
  try {
    text = emit(original);
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "emit threw: " << e.what();
  }
  YAML::Node back;
  try {
    back = YAML::Load(text);
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure()
           << "yaml-cpp cannot read the emitted text (" << e.what() << "):\n"
           << text;
  }
  if (canonical(back) != canonical(original)) {
    return ::testing::AssertionFailure()
           << "yaml-cpp reads back a different tree\n  before: " << canonical(original)
           << "\n  after:  " << canonical(back) << "\nemitted:\n"
           << text;
  }
  std::string python = pyyaml_listing(text);
  std::string expected = listing(original);
  if (python != expected) {
    return ::testing::AssertionFailure() << "PyYAML disagrees with yaml-cpp\n  PyYAML:   " << python
                                         << "\n  expected: " << expected << "\nemitted:\n"
                                         << text;
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult TextRoundTrips(const std::string& yaml_text) {
  return RoundTrips(YAML::Load(yaml_text));
}

// --- emit(): types and shapes
// ---------------------------------------------------------------------

TEST(YamlEmit, QuotedNumbersAndBooleansStayQuotedStrings) {
  YAML::Node root = YAML::Load(
      "a: \"4\"\nb: 'true'\nc: \"16\"\nd: \"false\"\ne: '0.5'\nf: \"null\"\ng: \"~\"\nh: \"\"\n");
  std::string text = emit(root);
  EXPECT_THAT(text, HasSubstr("a: \"4\"\n"));
  EXPECT_THAT(text, HasSubstr("b: \"true\"\n"));
  EXPECT_THAT(text, HasSubstr("c: \"16\"\n"));
  EXPECT_THAT(text, HasSubstr("f: \"null\"\n"));
  EXPECT_THAT(text, HasSubstr("h: \"\"\n"));
  EXPECT_TRUE(RoundTrips(root));
}

TEST(YamlEmit, PlainScalarsStayPlain) {
  YAML::Node root = YAML::Load("a: 4\nb: true\nc: 1.5\nd: abc\ne: gs://bucket/x\nf: -1\n");
  std::string text = emit(root);
  EXPECT_EQ(text, "a: 4\nb: true\nc: 1.5\nd: abc\ne: gs://bucket/x\nf: -1\n");
  EXPECT_TRUE(RoundTrips(root));
}

TEST(YamlEmit, FlowSequencesAndMappingsStayFlow) {
  const std::string input =
      "values: [0, 75]\nnames: [\"HEALTHY\", \"DEGRADED\"]\ntargets: [proc]\n"
      "policy: {restartStrategy: Recreate, maxRestarts: 3}\nnested: {a: [1, {b: \"2\"}]}\n";
  std::string text = emit(YAML::Load(input));
  EXPECT_THAT(text, HasSubstr("values: [0, 75]\n"));
  EXPECT_THAT(text, HasSubstr("names: [\"HEALTHY\", \"DEGRADED\"]\n"));
  EXPECT_THAT(text, HasSubstr("policy: {restartStrategy: Recreate, maxRestarts: 3}\n"));
  EXPECT_TRUE(TextRoundTrips(input));
}

TEST(YamlEmit, BlockCollectionsStayBlock) {
  const std::string input =
      "spec:\n  containers:\n  - name: main\n    args:\n    - --a=1\n    - --b\n"
      "  - name: side\n    ports:\n    - containerPort: 80\n      name: http\n"
      "matrix:\n- - a\n  - b\n- - c\n";
  std::string text = emit(YAML::Load(input));
  EXPECT_THAT(text, Not(HasSubstr("[")));
  EXPECT_TRUE(TextRoundTrips(input));
}

TEST(YamlEmit, RepeatedKeysAreKeptInOrder) {
  const std::string input =
      "spec:\n  priorityClassName: medium\n  x: 1\n  priorityClassName: high\n";
  YAML::Node back = YAML::Load(emit(YAML::Load(input)));
  std::vector<std::string> keys;
  for (const auto& kv : back["spec"]) keys.push_back(kv.first.Scalar());
  EXPECT_THAT(keys, ElementsAre("priorityClassName", "x", "priorityClassName"));
  EXPECT_TRUE(TextRoundTrips(input));
}

TEST(YamlEmit, NullsRoundTrip) {
  const std::string input =
      "a: null\nb: ~\nc:\nd:\n- null\n- ~\n-\ne: {x: null, y: ~}\nf: [null, ~]\n";
  YAML::Node back = YAML::Load(emit(YAML::Load(input)));
  EXPECT_TRUE(back["a"].IsNull());
  EXPECT_TRUE(back["c"].IsNull());
  EXPECT_TRUE(back["d"][2].IsNull());
  EXPECT_TRUE(back["f"][1].IsNull());
  EXPECT_TRUE(TextRoundTrips(input));
}

TEST(YamlEmit, EmptyCollectionsRoundTrip) {
  const std::string input = "a: {}\nb: []\nc:\n  x: []\n  y: {}\nd:\n- []\n- {}\n";
  YAML::Node back = YAML::Load(emit(YAML::Load(input)));
  EXPECT_TRUE(back["a"].IsMap() && back["a"].size() == 0);
  EXPECT_TRUE(back["b"].IsSequence() && back["b"].size() == 0);
  EXPECT_TRUE(back["d"][0].IsSequence());
  EXPECT_TRUE(TextRoundTrips(input));
  EXPECT_TRUE(RoundTrips(YAML::Node(YAML::NodeType::Map)));
  EXPECT_TRUE(RoundTrips(YAML::Node(YAML::NodeType::Sequence)));
}

TEST(YamlEmit, ExplicitTagsAreKept) {
  const std::string input = "a: !!str 4\nb: !custom x\nc: !!int \"7\"\n";
  std::string text = emit(YAML::Load(input));
  YAML::Node back = YAML::Load(text);
  EXPECT_EQ(back["a"].Tag(), "tag:yaml.org,2002:str");
  EXPECT_EQ(back["b"].Tag(), "!custom");
  EXPECT_EQ(back["a"].Scalar(), "4");
  EXPECT_EQ(canonical(back), canonical(YAML::Load(input)));
}

TEST(YamlEmit, EmitIsStableOnItsOwnOutput) {
  std::string input = read_file(testdata("launch_dryrun.txt"));
  DryRun dryrun = parse_dryrun(input, "launch_dryrun.txt");
  ASSERT_EQ(dryrun.documents.size(), 3u);
  for (const Document& doc : dryrun.documents) {
    std::string once = emit(doc.root);
    EXPECT_EQ(emit(YAML::Load(once)), once);
  }
}

TEST(YamlEmit, FixtureDocumentsRoundTripForBothReaders) {
  for (const char* name : {"launch_dryrun.txt", "launch_dryrun_v5p.txt", "trainer_no_proxy.txt"}) {
    DryRun dryrun = parse_dryrun(read_file(testdata(name)), name);
    ASSERT_EQ(dryrun.documents.size(), 3u) << name;
    for (const Document& doc : dryrun.documents) {
      EXPECT_TRUE(RoundTrips(doc.root)) << name << " document at line " << doc.first_line;
    }
  }
}

TEST(YamlEmit, FixtureQuotedNumericStringsStayQuoted) {
  DryRun dryrun = parse_dryrun(read_file(testdata("launch_dryrun.txt")), "launch_dryrun.txt");
  std::string trainer = emit(dryrun.documents.at(1).root);
  for (const char* line :
       {"google.com/tpu: \"4\"\n", "cloud.google.com/gke-tpu-slice-topology: \"4x4x8\"\n",
        "kueue.x-k8s.io/podset-slice-size: \"16\"\n",
        "cluster-autoscaler.kubernetes.io/safe-to-evict: \"false\"\n", "values: [0, 75]\n",
        "completions: 32\n"}) {
    EXPECT_THAT(trainer, HasSubstr(line));
  }
  // The client script stays a readable literal block.
  EXPECT_THAT(trainer, HasSubstr("- |"));
  EXPECT_THAT(trainer, ContainsRegex("\n +\\) & PID=\\$!\n"));
}

// --- emit(): literal blocks
// -----------------------------------------------------------------------

struct LiteralCase {
  const char* label;
  std::string text;
};

std::vector<LiteralCase> literal_cases() {
  return {
      {"simple", "line one\nline two\n"},
      {"no trailing newline", "line one\nline two"},
      {"trailing blank lines", "a\nb\n\n\n"},
      {"one trailing blank line", "a\nb\n\n"},
      {"leading spaces on the first line", "   indented first\nsecond\n"},
      {"leading spaces, no trailing newline", "  x\n    y"},
      {"leading blank lines", "\n\nafter blanks\n"},
      {"internal blank lines", "a\n\n\nb\n"},
      {"tabs", "\tstarts with a tab\nmiddle\ttab\n\t\n"},
      {"trailing spaces on lines", "trailing  \nspaces \n"},
      {"a line that is only spaces", "a\n   \nb\n"},
      {"first line only spaces", "   \nx\n"},
      {"last line only spaces", "a\n  "},
      {"ends with spaces and newlines", "a\n  \n\n"},
      {"yaml-looking content", "# not a comment\n- not an item\nkey: value\n---\n...\n"},
      {"quotes and backslashes", "echo \"$X\" 'y' \\\nnext\n"},
      {"non-ascii", "gr\xc3\xbc\xc3\x9f\n\xe2\x82\xac 5\n"},
      {"bash wrapper",
       "echo \"Program Start: $(date)\"\n(\n         A=1   B='x y'   python -m m --k=v   \n) & "
       "PID=$!\nwait $PID\n"},
  };
}

// A quoted multi-line string as a mapping value, a sequence item, a value inside a sequence item's
// mapping, and a value nested deeper: each is emitted as a literal block and reads back exactly.
TEST(YamlEmitLiteral, MultiLineQuotedStringsAreLiteralBlocksAndReadBackExactly) {
  // Every case's reread tree, checked once more (with PyYAML) as one document.
  YAML::Node all(YAML::NodeType::Sequence);
  PyYamlBatch pyyaml;
  for (const LiteralCase& c : literal_cases()) {
    SCOPED_TRACE(c.label);
    YAML::Node root(YAML::NodeType::Map);
    root["script"] = string_scalar(c.text);
    YAML::Node command(YAML::NodeType::Sequence);
    command.push_back(string_scalar("bash"));
    command.push_back(string_scalar("-c"));
    command.push_back(string_scalar(c.text));
    YAML::Node container(YAML::NodeType::Map);
    container["name"] = string_scalar("main");
    container["script"] = string_scalar(c.text);
    container["command"] = command;
    YAML::Node containers(YAML::NodeType::Sequence);
    containers.push_back(container);
    root["spec"]["template"]["containers"] = containers;

    std::string text = emit(root);
    EXPECT_THAT(text, HasSubstr("script: |")) << text;
    EXPECT_THAT(text, Not(HasSubstr("\\n"))) << text;
    YAML::Node back;
    ASSERT_NO_THROW(back = YAML::Load(text)) << text;
    EXPECT_EQ(back["script"].Scalar(), c.text) << text;
    EXPECT_EQ(back["script"].Tag(), "!");
    YAML::Node back_container = back["spec"]["template"]["containers"][0];
    EXPECT_EQ(back_container["script"].Scalar(), c.text) << text;
    EXPECT_EQ(back_container["command"][2].Scalar(), c.text) << text;
    EXPECT_EQ(back_container["command"][2].Tag(), "!");
    all.push_back(back);
    pyyaml.add(text, back);
  }
  EXPECT_TRUE(pyyaml.Agrees());
  EXPECT_TRUE(RoundTrips(YAML::Load(emit(all))));
}

TEST(YamlEmitLiteral, RootScalarReadsBack) {
  for (const LiteralCase& c : literal_cases()) {
    SCOPED_TRACE(c.label);
    std::string text = emit(string_scalar(c.text));
    YAML::Node back;
    ASSERT_NO_THROW(back = YAML::Load(text)) << text;
    EXPECT_EQ(back.Scalar(), c.text) << text;
    EXPECT_EQ(pyyaml_listing(text), "Q str " + hex(c.text) + "\n") << text;
  }
}

// Regression (fixed): a string that is only newlines ("\n") is emitted as `|` with no content line,
// which both yaml-cpp and PyYAML read back as "" (clip chomping keeps no newline when there is no
// content).
TEST(YamlEmitLiteral, StringOfOnlyNewlinesReadsBack) {
  for (const std::string text : {"\n", "\n\n", "\n\n\n"}) {
    YAML::Node root(YAML::NodeType::Map);
    root["s"] = string_scalar(text);
    std::string emitted = emit(root);
    EXPECT_EQ(YAML::Load(emitted)["s"].Scalar(), text) << emitted;
    EXPECT_TRUE(RoundTrips(YAML::Load(emitted))) << emitted;
  }
}

// --- emit(): scalars that need double quotes
// -------------------------------------------------------

std::vector<std::string> awkward_strings() {
  return {": ",
          "a: b",
          "a:",
          "key:\tvalue",
          " #x",
          "a #b",
          "#x",
          "- a",
          "-",
          "--",
          "? x",
          "?",
          "*alias",
          "&anchor",
          "!tag",
          "|",
          ">",
          "%x",
          "@x",
          "`x",
          "'x",
          "\"x",
          "{x}",
          "[x]",
          "x, y",
          "a,b",
          "]",
          "}",
          ",",
          "\x01ctrl",
          "\r",
          "a\rb",
          "a\r\nb\r\n",
          "\x7f",
          "\x1b[0m",
          "",
          " lead",
          "trail ",
          "\t",
          "tab\t",
          "---",
          "...",
          "\\back\\",
          "a\"b'c",
          "null",
          "~",
          "true",
          "4",
          "0x1F",
          "1e3",
          ".inf",
          "yes",
          "012",
          "a\tb",
          "multi\nline\r",
          "\xc3\xa9: x",
          "-1",
          "--flag=a b",
          "a:b",
          "x # y"};
}

TEST(YamlEmitQuoting, QuotedStringsReadBackExactlyAsStrings) {
  // Every value's reread tree, checked once more (with PyYAML) as one document.
  YAML::Node all(YAML::NodeType::Sequence);
  PyYamlBatch pyyaml;
  for (const std::string& value : awkward_strings()) {
    SCOPED_TRACE(escaped(value));
    YAML::Node root(YAML::NodeType::Map);
    root["v"] = string_scalar(value);
    YAML::Node seq(YAML::NodeType::Sequence);
    seq.push_back(string_scalar(value));
    root["block"] = seq;
    YAML::Node flow(YAML::NodeType::Sequence);
    flow.SetStyle(YAML::EmitterStyle::Flow);
    flow.push_back(string_scalar(value));
    flow.push_back(string_scalar("after"));
    root["flow"] = flow;
    YAML::Node flow_map(YAML::NodeType::Map);
    flow_map.SetStyle(YAML::EmitterStyle::Flow);
    flow_map["k"] = string_scalar(value);
    root["flow_map"] = flow_map;

    std::string text = emit(root);
    YAML::Node back;
    ASSERT_NO_THROW(back = YAML::Load(text)) << text;
    EXPECT_EQ(back["v"].Scalar(), value) << text;
    EXPECT_EQ(back["v"].Tag(), "!") << text;
    EXPECT_EQ(back["block"][0].Scalar(), value) << text;
    ASSERT_EQ(back["flow"].size(), 2u) << text;
    EXPECT_EQ(back["flow"][0].Scalar(), value) << text;
    EXPECT_EQ(back["flow_map"]["k"].Scalar(), value) << text;
    all.push_back(back);
    pyyaml.add(text, back);
  }
  EXPECT_TRUE(pyyaml.Agrees());
  EXPECT_TRUE(RoundTrips(YAML::Load(emit(all))));
}

// Programmatic plain scalars (no tag) that would not read back as plain text get quoted.
TEST(YamlEmitQuoting, UntaggedStringsThatAreNotPlainSafeReadBackExactly) {
  for (const std::string& value : awkward_strings()) {
    if (value.empty()) continue;  // an empty untagged scalar is null-like either way
    SCOPED_TRACE(escaped(value));
    YAML::Node root(YAML::NodeType::Map);
    root["v"] = YAML::Node(value);
    YAML::Node flow(YAML::NodeType::Sequence);
    flow.SetStyle(YAML::EmitterStyle::Flow);
    flow.push_back(YAML::Node(value));
    flow.push_back(YAML::Node("after"));
    root["flow"] = flow;
    std::string text = emit(root);
    YAML::Node back;
    ASSERT_NO_THROW(back = YAML::Load(text)) << text;
    if (!plain_is_safe(value, false)) {
      EXPECT_EQ(back["v"].Tag(), "!") << text;
    }
    if (back["v"].IsScalar()) {
      EXPECT_EQ(back["v"].Scalar(), value) << text;
    }
    ASSERT_EQ(back["flow"].size(), 2u) << text;
    if (back["flow"][0].IsScalar()) {
      EXPECT_EQ(back["flow"][0].Scalar(), value) << text;
    }
  }
}

TEST(YamlEmitQuoting, KeysThatNeedQuotingReadBack) {
  const std::vector<std::string> keys = {
      "a: b", "#x",  "- x", "a #b", "x\ny", "",    "*k", "&k",   "!k",
      "[k]",  "{k}", "k,",  "'k",   "\"k",  "? k", "%k", "@k",   "`k",
      "|k",   ">k",  "---", "...",  " k",   "k ",  "k:", "\x01", "kueue.x-k8s.io/queue-name",
      "true", "4",   "a\\b"};
  YAML::Node root(YAML::NodeType::Map);
  for (std::size_t i = 0; i < keys.size(); ++i) root.force_insert(string_scalar(keys[i]), i);
  YAML::Node nested(YAML::NodeType::Map);
  for (std::size_t i = 0; i < keys.size(); ++i) nested.force_insert(YAML::Node(keys[i]), i);
  root["nested"] = nested;
  std::string text = emit(root);
  YAML::Node back;
  ASSERT_NO_THROW(back = YAML::Load(text)) << text;
  ASSERT_EQ(back.size(), keys.size() + 1) << text;
  std::size_t i = 0;
  for (const auto& kv : back) {
    if (i < keys.size()) {
      EXPECT_EQ(kv.first.Scalar(), keys[i]) << text;
      EXPECT_EQ(kv.second.as<std::size_t>(), i) << text;
    }
    ++i;
  }
  i = 0;
  for (const auto& kv : back["nested"]) {
    if (!keys[i].empty()) {
      EXPECT_EQ(kv.first.Scalar(), keys[i]) << text;
    }
    ++i;
  }
  EXPECT_EQ(i, keys.size());
  EXPECT_TRUE(RoundTrips(back));
}

// Regression (fixed): a top-level key that begins with a document marker followed by a space ("---
// x", "... x") is emitted plain at column 0, where both readers take it for a document marker.
TEST(YamlEmitQuoting, TopLevelKeysThatLookLikeDocumentMarkers) {
  for (const std::string key : {"--- x", "... x"}) {
    YAML::Node root(YAML::NodeType::Map);
    root.force_insert(YAML::Node(key), 1);
    root.force_insert(string_scalar("plain"), 2);
    std::string text = emit(root);
    YAML::Node back;
    ASSERT_NO_THROW(back = YAML::Load(text)) << text;
    ASSERT_EQ(back.size(), 2u) << text;
    EXPECT_EQ(back.begin()->first.Scalar(), key) << text;
    EXPECT_TRUE(RoundTrips(back));
  }
}

// Regression (fixed): a mapping whose key is the plain scalar `null` or `~` (a valid YAML mapping;
// yaml-cpp loads the key as a Null node) cannot be emitted.
TEST(YamlEmit, NullKeysRoundTrip) {
  EXPECT_TRUE(TextRoundTrips("null: 1\nother: 2\n"));
  EXPECT_TRUE(TextRoundTrips("a:\n  ~: x\n"));
}

TEST(YamlEmit, NonScalarKeyThrowsRtbError) {
  YAML::Node root = YAML::Load("? [a, b]\n: 1\n");
  EXPECT_THROW(emit(root), rtb::Error);
  YAML::Node map_key = YAML::Load("? {a: 1}\n: 1\n");
  EXPECT_THROW(emit(map_key), rtb::Error);
}

// --- string_scalar / set_string -----------------------------------------------------------------

TEST(YamlStrings, StringScalarIsEmittedQuoted) {
  YAML::Node root(YAML::NodeType::Map);
  root["replicas"] = string_scalar("16");
  root["flag"] = string_scalar("true");
  root["name"] = string_scalar("abtest");
  root["word"] = string_scalar("null");
  std::string text = emit(root);
  EXPECT_THAT(text, HasSubstr("replicas: \"16\"\n"));
  EXPECT_THAT(text, HasSubstr("flag: \"true\"\n"));
  EXPECT_THAT(text, HasSubstr("name: \"abtest\"\n"));
  EXPECT_THAT(text, HasSubstr("word: \"null\"\n"));
  EXPECT_EQ(pyyaml_listing(text), listing(YAML::Load(text)));
  YAML::Node back = YAML::Load(text);
  EXPECT_EQ(back["replicas"].Tag(), "!");
  EXPECT_EQ(back["flag"].Scalar(), "true");
}

TEST(YamlStrings, SetStringOnAnExistingPlainScalarWritesAQuotedString) {
  YAML::Node root = YAML::Load("spec:\n  replicas: 4\n  other: 1\nlist: [1, 2]\n");
  set_string(descend(root, {"spec", "replicas"}), "8");
  set_string(root["list"][1], "x");
  std::string text = emit(root);
  EXPECT_EQ(text, "spec:\n  replicas: \"8\"\n  other: 1\nlist: [1, \"x\"]\n");
  EXPECT_EQ(pyyaml_listing(text), listing(YAML::Load(text)));
}

TEST(YamlStrings, SetStringOnANewKeyAddsIt) {
  YAML::Node root = YAML::Load("a: 1\n");
  set_string(root["b"], "4");
  set_string(root["c"], "multi\nline\n");
  std::string text = emit(root);
  EXPECT_EQ(text, "a: 1\nb: \"4\"\nc: |\n  multi\n  line\n");
  YAML::Node back = YAML::Load(text);
  EXPECT_EQ(back["c"].Scalar(), "multi\nline\n");
}

TEST(YamlStrings, SetStringOnAQuotedStringKeepsItQuoted) {
  YAML::Node root = YAML::Load("anno: \"16\"\n");
  set_string(lookup(root, "anno"), "8");
  EXPECT_EQ(emit(root), "anno: \"8\"\n");
}

// --- lookup / descend / scalar_at ---------------------------------------------------------------

TEST(YamlLookup, ReturnsTheLastOfRepeatedKeys) {
  YAML::Node root = YAML::Load("p: first\nq: 1\np: second\np: third\n");
  YAML::Node found = lookup(root, "p");
  ASSERT_TRUE(found.IsDefined());
  EXPECT_EQ(found.Scalar(), "third");
  EXPECT_EQ(lookup(root, "q").Scalar(), "1");
}

TEST(YamlLookup, MissingKeyOrNonMappingGivesUndefined) {
  YAML::Node root = YAML::Load("a: 1\nlist: [1, 2]\n");
  EXPECT_FALSE(lookup(root, "missing").IsDefined());
  EXPECT_FALSE(lookup(root["list"], "a").IsDefined());
  EXPECT_FALSE(lookup(root["a"], "a").IsDefined());
  EXPECT_FALSE(lookup(YAML::Node(YAML::NodeType::Undefined), "a").IsDefined());
  // Looking up never adds a key.
  EXPECT_EQ(emit(root), "a: 1\nlist: [1, 2]\n");
}

TEST(YamlLookup, ReturnedNodeRefersToTheTree) {
  YAML::Node root = YAML::Load("spec:\n  replicas: 4\n");
  YAML::Node spec = lookup(root, "spec");
  spec["replicas"] = 5;
  EXPECT_EQ(root["spec"]["replicas"].as<int>(), 5);
}

TEST(YamlLookup, DescendFollowsKeys) {
  YAML::Node root = YAML::Load(
      "spec:\n  template:\n    spec:\n      name: inner\n  template:\n    spec:\n      name: "
      "last\nother: {a: {b: c}}\n");
  EXPECT_EQ(descend(root, {"other", "a", "b"}).Scalar(), "c");
  // Through a repeated key, the last one is followed.
  EXPECT_EQ(descend(root, {"spec", "template", "spec", "name"}).Scalar(), "last");
  EXPECT_FALSE(descend(root, {"other", "missing", "b"}).IsDefined());
  EXPECT_FALSE(descend(root, {"other", "a", "b", "c"}).IsDefined());
  EXPECT_EQ(canonical(descend(root, {})), canonical(root));
}

TEST(YamlLookup, DescendAndLookupDoNotModifyTheTree) {
  const std::string input = "spec:\n  a:\n    b: 1\n  c: [1, 2]\n  a:\n    b: 2\nmeta: {name: x}\n";
  YAML::Node root = YAML::Load(input);
  std::string before = emit(root);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(descend(root, {"spec", "a", "b"}).Scalar(), "2");
    EXPECT_FALSE(descend(root, {"spec", "x", "y"}).IsDefined());
    EXPECT_EQ(lookup(lookup(root, "meta"), "name").Scalar(), "x");
    EXPECT_FALSE(lookup(root, "nothing").IsDefined());
  }
  EXPECT_EQ(emit(root), before);
  EXPECT_EQ(canonical(root), canonical(YAML::Load(input)));
}

TEST(YamlLookup, ScalarAt) {
  YAML::Node root = YAML::Load("a: \"4\"\nb: {c: 1}\nd: [1]\ne: x\ne: y\nf: null\n");
  EXPECT_EQ(scalar_at(root, "a"), std::optional<std::string>("4"));
  EXPECT_EQ(scalar_at(root, "b"), std::nullopt);
  EXPECT_EQ(scalar_at(root, "d"), std::nullopt);
  EXPECT_EQ(scalar_at(root, "e"), std::optional<std::string>("y"));
  EXPECT_EQ(scalar_at(root, "f"), std::nullopt);
  EXPECT_EQ(scalar_at(root, "missing"), std::nullopt);
  EXPECT_EQ(scalar_at(root["d"], "a"), std::nullopt);
}

// --- duplicate_keys -----------------------------------------------------------------------------

TEST(YamlDuplicateKeys, ReportsEachRepeatedKeyOnceWithTheLineOfItsSecondOccurrence) {
  YAML::Node root = YAML::Load(
      "a: 1\n"            // 0
      "b:\n"              // 1
      "  c: 1\n"          // 2
      "  c: 2\n"          // 3
      "  c: 3\n"          // 4
      "a: 2\n"            // 5
      "list:\n"           // 6
      "- name: x\n"       // 7
      "  name: y\n"       // 8
      "- {k: 1, k: 2}\n"  // 9
  );
  EXPECT_THAT(duplicate_keys(root),
              UnorderedElementsAre(Pair("a", 5), Pair("c", 3), Pair("name", 8), Pair("k", 9)));
}

TEST(YamlDuplicateKeys, NoneWhenKeysAreDistinct) {
  EXPECT_TRUE(duplicate_keys(YAML::Load("a: 1\nb:\n  a: 2\nc: [{a: 1}, {a: 2}]\n")).empty());
  EXPECT_TRUE(duplicate_keys(YAML::Load("- 1\n- 2\n")).empty());
  EXPECT_TRUE(duplicate_keys(YAML::Load("scalar")).empty());
}

TEST(YamlDuplicateKeys, FixtureOrchestratorRepeatsPriorityClassName) {
  std::string text = read_file(testdata("launch_dryrun.txt"));
  DryRun dryrun = parse_dryrun(text, "launch_dryrun.txt");
  ASSERT_EQ(dryrun.documents.size(), 3u);
  const Document& orchestrator = dryrun.documents[0];
  auto found = duplicate_keys(orchestrator.root);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].first, "priorityClassName");
  // The line is 0-based in the document; the file has it at line 191.
  EXPECT_EQ(orchestrator.first_line + static_cast<std::size_t>(found[0].second), 191u);
  EXPECT_TRUE(duplicate_keys(dryrun.documents[1].root).empty());
  EXPECT_TRUE(duplicate_keys(dryrun.documents[2].root).empty());
}

TEST(YamlDuplicateKeys, DeepTreeDoesNotOverflowTheStack) {
  constexpr int kDepth = 100000;
  std::vector<YAML::Node> chain;
  chain.reserve(kDepth);
  for (int i = 0; i < kDepth; ++i) chain.emplace_back(YAML::NodeType::Map);
  for (int i = 0; i + 1 < kDepth; ++i) chain[i]["k"] = chain[i + 1];
  chain[kDepth - 1]["dup"] = 1;
  chain[kDepth - 1].force_insert("dup", 2);
  auto found = duplicate_keys(chain[0]);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].first, "dup");
}

// --- plain_is_safe ------------------------------------------------------------------------------

TEST(YamlPlainIsSafe, SafeValues) {
  for (const char* value : {"abc",
                            "a b",
                            "a:b",
                            "a#b",
                            "-1",
                            "-a",
                            "--flag=x",
                            "?a",
                            ":a",
                            "http://x:80/y",
                            "gs://bucket/x",
                            "4",
                            "true",
                            "null",
                            "a-b_c.d",
                            "tpu7x:4x4x8",
                            "$(PATHWAYS_HEAD):29001",
                            "a'b",
                            "a\"b",
                            "\xc3\xa9"}) {
    EXPECT_TRUE(plain_is_safe(value, false)) << escaped(value);
  }
  for (const char* value : {"abc", "a:b", "-1", "4", "a b"}) {
    EXPECT_TRUE(plain_is_safe(value, true)) << escaped(value);
  }
}

TEST(YamlPlainIsSafe, UnsafeValues) {
  for (const char* value :
       {"",   " a",   "a ",  "\ta",   "a\t",  "- a",  "-",    "? a", "?",  ": a",
        ":",  "a: b", "a:",  "a:\tb", "a #b", "#a",   "*a",   "&a",  "!a", "|",
        ">",  "'a",   "\"a", "%a",    "@a",   "`a",   "[a",   "]a",  "{a", "}a",
        ",a", "---",  "...", "a\nb",  "a\rb", "\x01", "a\x7f"}) {
    EXPECT_FALSE(plain_is_safe(value, false)) << escaped(value);
  }
  for (const char* value : {"a,b", "a[b", "a]", "{a", "a}", "-[", "-,", "?]", ":{"}) {
    EXPECT_FALSE(plain_is_safe(value, true)) << escaped(value);
  }
}

// Candidate plain scalars: every three-character string over indicators, blanks and letters.
std::vector<std::string> plain_candidates() {
  std::vector<std::string> candidates;
  const std::string alphabet = "a-:#?,[]{} '\"!&*|>%@`.\t";
  for (char first : alphabet) {
    for (char second : alphabet) {
      for (char third : std::string("a :")) candidates.push_back(std::string{first, second, third});
    }
  }
  return candidates;
}

// Writes every accepted candidate plain into `context` and checks that yaml-cpp and PyYAML read
// each back as the same text.
void CheckAcceptedValuesReadBack(bool in_flow) {
  std::vector<std::string> values;
  std::string text = in_flow ? "items: [" : "items:\n";
  for (const std::string& value : plain_candidates()) {
    if (!plain_is_safe(value, in_flow)) continue;
    values.push_back(value);
    text += in_flow ? value + ", " : "- " + value + "\n";
  }
  if (in_flow) text += "end]\n";
  ASSERT_GT(values.size(), 40u);  // the check below is not vacuous
  std::vector<std::string> misread;
  for (const std::string& value : values) {
    // One document per value, so one misread value does not hide the others.
    std::string doc = in_flow ? "items: [" + value + ", end]\n" : "items:\n- " + value + "\n";
    try {
      YAML::Node back = YAML::Load(doc);
      if (!back["items"][0].IsScalar() || back["items"][0].Scalar() != value ||
          back["items"].size() != (in_flow ? 2u : 1u)) {
        misread.push_back(value);
      }
    } catch (const YAML::Exception&) {
      misread.push_back(value);
    }
  }
  EXPECT_THAT(misread, ::testing::IsEmpty()) << "yaml-cpp misreads these plain scalars";
  YAML::Node expected(YAML::NodeType::Map);
  YAML::Node items(YAML::NodeType::Sequence);
  for (const std::string& value : values) items.push_back(YAML::Node(value));
  if (in_flow) items.push_back(YAML::Node("end"));
  std::string listed = "M 1\nP " + hex("items") + "\n" + fmt::format("S {}\n", items.size());
  for (const auto& item : items) listed += "P " + hex(item.Scalar()) + "\n";
  EXPECT_EQ(pyyaml_listing(text), listed) << text;
}

TEST(YamlPlainIsSafe, AcceptedValuesReadBackUnchangedInBlockContext) {
  CheckAcceptedValuesReadBack(/*in_flow=*/false);
}

// Regression (fixed): in flow context plain_is_safe accepts `?` inside or at the start of a scalar
// ("a?a",
// "?aa") and a leading `:` (":aa"), but yaml-cpp 0.7 fails on `[a?a]` ("unknown token") and
// PyYAML fails on `[a?a]` and on `[:aa]`.
TEST(YamlPlainIsSafe, AcceptedValuesReadBackUnchangedInFlowContext) {
  CheckAcceptedValuesReadBack(/*in_flow=*/true);
}

TEST(YamlStrings, ValuesThatAreNotUtf8AreRefusedNotMangled) {
  EXPECT_THAT(
      [] { string_scalar("caf\xe9"); },
      ::testing::ThrowsMessage<Error>(HasSubstr("is not UTF-8 text (byte 0xe9 at offset 3)")));
  YAML::Node root = YAML::Load("a: b\n");
  EXPECT_THROW(set_string(root["a"], "\xff"), Error);
  EXPECT_EQ(root["a"].Scalar(), "b");
  EXPECT_EQ(string_scalar("caf\xc3\xa9").Scalar(), "caf\xc3\xa9");
}

TEST(YamlEmitQuoting, ControlCharactersAreEscapedAndReadBack) {
  std::string value("bell\x07 nul\0 del\x7f tab\t", 20);
  YAML::Node root;
  root["k"] = string_scalar(value);
  std::string text = emit(root);
  EXPECT_EQ(text, "k: \"bell\\u0007 nul\\u0000 del\\u007f tab\\t\"\n");
  EXPECT_EQ(YAML::Load(text)["k"].Scalar(), value);
}

// --- limits -----------------------------------------------------------------------------------

// Nine levels of anchors, each aliasing the one before ten times: 10^9 leaves when expanded.
std::string billion_laughs() {
  std::string text = "kind: JobSet\nl0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n";
  for (int level = 1; level <= 9; ++level) {
    text += fmt::format("l{}: &l{} [", level, level);
    for (int i = 0; i < 10; ++i) text += fmt::format("{}*l{}", i == 0 ? "" : ", ", level - 1);
    text += "]\n";
  }
  return text;
}

Error limits_error(const YAML::Node& root, const Limits& limits = {}) {
  try {
    check_limits(root, "f.yaml", 10, limits);
  } catch (const Error& error) {
    return error;
  }
  return Error("(no error)");
}

TEST(CheckLimits, AliasBombIsRefusedAtTheLineWhereTheLimitIsPassed) {
  YAML::Node root = YAML::Load(billion_laughs());
  Error error = limits_error(root);
  EXPECT_EQ(error.file(), "f.yaml");
  EXPECT_GE(error.line(), 10);
  EXPECT_THAT(error.message(), HasSubstr("more than 200000 nodes"));
}

TEST(CheckLimits, DepthBeyondTheLimitIsRefusedAndTheLimitItselfIsAccepted) {
  auto nested = [](int depth) {
    std::string text = "a: ";
    for (int i = 1; i < depth; ++i) text += "[";
    text += "1";
    for (int i = 1; i < depth; ++i) text += "]";
    return YAML::Load(text);
  };
  // "a: [[1]]" is a mapping holding two sequences: depth 3 counts the map and both sequences.
  Limits limits;
  limits.max_depth = 3;
  EXPECT_EQ(limits_error(nested(3), limits).message(), "(no error)");
  EXPECT_THAT(limits_error(nested(4), limits).message(), HasSubstr("more than 3 levels"));
  EXPECT_THAT(limits_error(nested(200)).message(), HasSubstr("more than 64 levels"));
}

TEST(CheckLimits, AliasesWithinTheLimitAreAccepted) {
  YAML::Node root = YAML::Load("base: &b {x: 1, y: [1, 2]}\nuse: *b\nagain: *b\n");
  EXPECT_EQ(limits_error(root).message(), "(no error)");
  Limits small;
  small.max_nodes = 10;  // 1 root + 3 keys + 3 x (map + 2 keys + x + y + 2 items) = 25 > 10
  EXPECT_THAT(limits_error(root, small).message(), HasSubstr("more than 10 nodes"));
}

TEST(CheckLimits, DryRunRefusesAnAliasBombInAnObjectDocument) {
  std::string text =
      "launcher log line\n---\napiVersion: jobset.x-k8s.io/v1alpha2\n" + billion_laughs();
  try {
    parse_dryrun(text, "dry.txt");
    FAIL() << "an alias bomb was accepted";
  } catch (const Error& error) {
    EXPECT_EQ(error.file(), "dry.txt");
    EXPECT_GE(error.line(), 3);
    EXPECT_THAT(error.message(), HasSubstr("nodes"));
  }
}

}  // namespace
}  // namespace rtb::k8s::yaml
