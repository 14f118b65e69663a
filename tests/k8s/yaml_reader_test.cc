#include "rtb/k8s/yaml_reader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <yaml-cpp/depthguard.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "rtb/base/io.h"

namespace rtb::k8s::yaml {
namespace {

using ::testing::HasSubstr;

// Where two trees first differ (type, tag, text, style, size, or a node's line), "" when they are
// the same; aliases are followed as the trees share them.
std::string first_mismatch(const YAML::Node& expected, const YAML::Node& actual) {
  struct Pair {
    YAML::Node a, b;
    std::string path;
  };
  std::vector<Pair> pending{{expected, actual, "$"}};
  std::size_t visited = 0;
  while (!pending.empty() && ++visited < 1'000'000) {
    Pair pair = pending.back();
    pending.pop_back();
    const YAML::Node& a = pair.a;
    const YAML::Node& b = pair.b;
    const std::string& path = pair.path;
    auto says = [&](const std::string& what) { return path + ": " + what; };
    if (a.Type() != b.Type())
      return says("type " + std::to_string(a.Type()) + " vs " + std::to_string(b.Type()));
    if (a.Tag() != b.Tag()) return says("tag '" + a.Tag() + "' vs '" + b.Tag() + "'");
    // A missing value's mark is where the parser noticed it (yaml-cpp: the next token, libyaml:
    // the end of the key); only the lines of the nodes written out must agree.
    if (!a.IsNull() && a.Mark().line != b.Mark().line)
      return says("line " + std::to_string(a.Mark().line) + " vs " + std::to_string(b.Mark().line));
    if (a.IsScalar() && a.Scalar() != b.Scalar())
      return says("text '" + a.Scalar() + "' vs '" + b.Scalar() + "'");
    if (a.IsMap() || a.IsSequence()) {
      if (a.size() != b.size()) return says("size");
      if ((a.Style() == YAML::EmitterStyle::Flow) != (b.Style() == YAML::EmitterStyle::Flow))
        return says("style");
    }
    if (a.IsSequence()) {
      for (std::size_t i = 0; i < a.size(); ++i)
        pending.push_back({a[i], b[i], path + "[" + std::to_string(i) + "]"});
    } else if (a.IsMap()) {
      auto x = a.begin();
      auto y = b.begin();
      for (; x != a.end() && y != b.end(); ++x, ++y) {
        pending.push_back({x->first, y->first, path + ".<key " + x->first.Scalar() + ">"});
        pending.push_back({x->second, y->second, path + "." + x->first.Scalar()});
      }
    }
  }
  return "";
}

TEST(ReadDocument, GivesYamlCppTagsTypesAndStyles) {
  const std::string text =
      "plain: abc\n"
      "quoted: \"4\"\n"
      "single: 'true'\n"
      "number: 4\n"
      "tagged: !!str 5\n"
      "custom: !thing x\n"
      "empty:\n"
      "tilde: ~\n"
      "null_word: Null\n"
      "quoted_null: \"null\"\n"
      "block: |\n"
      "  line one\n"
      "  line two\n"
      "folded: >-\n"
      "  a\n"
      "  b\n"
      "flow_seq: [0, 75]\n"
      "flow_map: {a: 1}\n"
      "seq:\n"
      "- x\n"
      "-\n"
      "- name: y\n";
  YAML::Node read = read_document(text);
  EXPECT_EQ(first_mismatch(YAML::Load(text), read), "");
  EXPECT_EQ(read["plain"].Tag(), "?");
  EXPECT_EQ(read["quoted"].Tag(), "!");
  EXPECT_EQ(read["block"].Tag(), "!");
  EXPECT_EQ(read["block"].Scalar(), "line one\nline two\n");
  EXPECT_EQ(read["tagged"].Tag(), "tag:yaml.org,2002:str");
  EXPECT_TRUE(read["empty"].IsNull());
  EXPECT_TRUE(read["null_word"].IsNull());
  EXPECT_TRUE(read["quoted_null"].IsScalar());
  EXPECT_EQ(read["flow_seq"].Style(), YAML::EmitterStyle::Flow);
  EXPECT_EQ(read["block"].Mark().line, 10);
  EXPECT_EQ(read["seq"][2]["name"].Mark().line, 21);
}

TEST(ReadDocument, KeepsRepeatedKeysAndSharesAliases) {
  const std::string text = "a: 1\na: 2\nbase: &b {x: 1}\nuse: *b\n";
  YAML::Node read = read_document(text);
  EXPECT_EQ(first_mismatch(YAML::Load(text), read), "");
  EXPECT_EQ(read.size(), 4u);
  EXPECT_TRUE(read["base"].is(read["use"]));
}

TEST(ReadDocument, EmptyTextIsNullAndOnlyTheFirstDocumentIsRead) {
  EXPECT_TRUE(read_document("").IsNull());
  EXPECT_TRUE(read_document("# only a comment\n").IsNull());
  YAML::Node first = read_document("a: 1\n---\nb: [unclosed\n");
  EXPECT_EQ(first["a"].Scalar(), "1");
}

// read_document's error for `text` as "line N: message", or "no error".
std::string reader_error_of(const std::string& text) {
  try {
    read_document(text);
  } catch (const SyntaxError& e) {
    return "line " + std::to_string(e.line()) + ": " + e.what();
  }
  return "no error";
}

TEST(ReadDocument, SyntaxErrorsSayWhereAndWhat) {
  std::string unclosed = reader_error_of("a: 1\nb: [1, 2\nc: 3\n");
  EXPECT_THAT(unclosed, HasSubstr("flow sequence"));
  EXPECT_THAT(unclosed, ::testing::Not(HasSubstr("line 0:")));
  EXPECT_EQ(reader_error_of("a: *nowhere\n"), "line 0: unknown anchor 'nowhere'");
}

TEST(ReadDocument, NullWords) {
  for (const char* word : {"", "~", "null", "Null", "NULL"}) EXPECT_TRUE(is_null_word(word));
  for (const char* word : {"nul", "NULl", "none", "0", " "}) EXPECT_FALSE(is_null_word(word));
}

// Every `---`-separated chunk of the real inputs in testdata (launcher DRY_RUNs, xpk, kueue and
// JobSet manifests): where yaml-cpp reads a chunk, read_document reads the same tree, lines
// included; where yaml-cpp refuses one, so does read_document (but for nesting deeper than
// yaml-cpp recurses).
TEST(ReadDocument, ReadsEveryRealInputAsYamlCppDoes) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  for (const char* dir : {"", "diff_renders", "bad"}) {
    for (const auto& entry : fs::directory_iterator(fs::path(RTB_TESTDATA_DIR) / dir)) {
      std::string name = entry.path().filename().string();
      bool yaml_like = name.ends_with(".yaml") || name.starts_with("launch_dryrun") ||
                       name.starts_with("dryrun_") || name.starts_with("trainer_");
      if (entry.is_regular_file() && yaml_like) files.push_back(entry.path());
    }
  }
  ASSERT_GE(files.size(), 20u);
  std::size_t documents = 0;
  for (const fs::path& file : files) {
    std::string text = read_file(file.string());
    std::size_t start = 0;
    for (std::size_t chunk_index = 0;; ++chunk_index) {
      std::size_t separator = text.find("\n---\n", start);
      std::string chunk = text.substr(
          start, separator == std::string::npos ? std::string::npos : separator + 1 - start);
      SCOPED_TRACE(file.filename().string() + " chunk " + std::to_string(chunk_index));
      YAML::Node expected;
      bool expected_ok = true;
      try {
        expected = YAML::Load(chunk);
      } catch (const YAML::DeepRecursion&) {
        // Nesting past yaml-cpp's own recursion guard (dryrun_deeper_nesting.txt): libyaml reads
        // it, and the DRY_RUN reader's depth limit refuses it (check_limits, dryrun_test).
        if (separator == std::string::npos) break;
        start = separator + 5;
        continue;
      } catch (const YAML::Exception&) {
        expected_ok = false;
      }
      // Not YAML at all (NUL bytes, invalid UTF-8): the DRY_RUN reader refuses those first.
      if (chunk.find('\0') == std::string::npos && file.filename() != "dryrun_invalid_utf8.txt") {
        try {
          YAML::Node actual = read_document(chunk);
          EXPECT_TRUE(expected_ok) << "yaml-cpp refused it, read_document did not";
          if (expected_ok) {
            EXPECT_EQ(first_mismatch(expected, actual), "");
            ++documents;
          }
        } catch (const SyntaxError& e) {
          EXPECT_FALSE(expected_ok) << "read_document refused it: " << e.what();
        }
      }
      if (separator == std::string::npos) break;
      start = separator + 5;
    }
  }
  EXPECT_GE(documents, 40u);
}

}  // namespace
}  // namespace rtb::k8s::yaml
