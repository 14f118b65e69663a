#include "rtb/k8s/dryrun.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "rtb/base/error.h"
#include "rtb/base/io.h"
#include "rtb/k8s/yaml.h"
#include "test_util.h"

namespace rtb::k8s {
namespace {

// 1-based numbers of the lines that are exactly `---`.
std::vector<std::size_t> separator_lines(const std::string& text) {
  std::vector<std::size_t> found;
  std::vector<std::string> lines = lines_of(text);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (lines[i] == "---") found.push_back(i + 1);
  }
  return found;
}

// 1-based number of the only line containing `needle` (0 when none or several).
std::size_t unique_line(const std::string& text, std::string_view needle) {
  std::size_t found = 0;
  std::vector<std::string> lines = lines_of(text);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].find(needle) == std::string::npos) continue;
    if (found != 0) return 0;
    found = i + 1;
  }
  return found;
}

std::string name_of(const Document& doc) {
  return yaml::scalar_at(yaml::lookup(doc.root, "metadata"), "name").value_or("<none>");
}

// Each document's metadata.name and first line, in order.
std::vector<std::pair<std::string, std::size_t>> names_and_lines(const DryRun& dryrun) {
  std::vector<std::pair<std::string, std::size_t>> out;
  for (const Document& doc : dryrun.documents) out.emplace_back(name_of(doc), doc.first_line);
  return out;
}

Error error_of(std::string_view text, const std::string& source) {
  return test::error_of([&] { parse_dryrun(text, source); });
}

// --- the main fixture
// -----------------------------------------------------------------------------

class DryRunMainFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    text_ = read_file(testdata("launch_dryrun.txt"));
    dryrun_ = parse_dryrun(text_, "launch_dryrun.txt");
  }
  std::string text_;
  DryRun dryrun_;
};

TEST_F(DryRunMainFixture, ThreeDocumentsStartingAfterEachSeparator) {
  EXPECT_EQ(dryrun_.source, "launch_dryrun.txt");
  std::vector<std::size_t> separators = separator_lines(text_);
  ASSERT_THAT(separators, ElementsAre(138u, 268u, 654u));
  ASSERT_EQ(dryrun_.documents.size(), 3u);
  std::vector<std::size_t> first_lines;
  for (const Document& doc : dryrun_.documents) first_lines.push_back(doc.first_line);
  EXPECT_THAT(first_lines, ElementsAre(139u, 269u, 655u));
  for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(first_lines[i], separators[i] + 1);
  EXPECT_EQ(name_of(dryrun_.documents[0]), "abtest-orch");
  EXPECT_EQ(name_of(dryrun_.documents[1]), "abtest-train");
  EXPECT_EQ(name_of(dryrun_.documents[2]), "abtest-roll");
  for (const Document& doc : dryrun_.documents) {
    EXPECT_TRUE(doc.root.IsMap());
    EXPECT_EQ(yaml::scalar_at(doc.root, "kind"), std::optional<std::string>("JobSet"));
  }
}

TEST_F(DryRunMainFixture, PreambleIsSkippedAsOneChunk) {
  // Lines 1-137: kubectl echoes, one of them spread over 128 lines.
  EXPECT_EQ(dryrun_.skipped_chunks, 1u);
  std::vector<std::string> lines = lines_of(text_);
  std::string preamble;
  for (std::size_t i = 0; i < 137; ++i) preamble += lines[i] + "\n";
  ASSERT_THAT(preamble, HasSubstr("\nabtest-roll-126\n"));
  DryRun only_preamble = parse_dryrun(preamble, "preamble");
  EXPECT_TRUE(only_preamble.documents.empty());
  EXPECT_EQ(only_preamble.skipped_chunks, 1u);
  EXPECT_TRUE(only_preamble.diagnostics.empty());
}

TEST_F(DryRunMainFixture, RepeatedKeyGivesExactlyOneWarningWithFileAndLine) {
  ASSERT_EQ(dryrun_.diagnostics.size(), 1u);
  EXPECT_EQ(dryrun_.diagnostics[0].severity, Severity::kNote);
  EXPECT_THAT(text_of(dryrun_.diagnostics[0]), HasSubstr("launch_dryrun.txt:191: "));
  EXPECT_THAT(dryrun_.diagnostics[0].message, HasSubstr("priorityClassName"));
  // The document is kept, and the key's value is there.
  YAML::Node spec = yaml::descend(dryrun_.documents[0].root, {"spec"});
  EXPECT_TRUE(spec.IsMap());
}

TEST_F(DryRunMainFixture, LineOfNodesMatchesTheFile) {
  const Document& trainer = dryrun_.documents[1];
  EXPECT_EQ(trainer.line_of(yaml::lookup(trainer.root, "kind")), 284u);
  EXPECT_EQ(trainer.line_of(yaml::descend(trainer.root, {"metadata", "name"})), 286u);
  EXPECT_EQ(dryrun_.documents[0].line_of(yaml::lookup(dryrun_.documents[0].root, "kind")), 154u);
  EXPECT_EQ(dryrun_.documents[2].line_of(yaml::lookup(dryrun_.documents[2].root, "kind")), 670u);

  // A node deep in the trainer: the pathways-rm --instance_type argument.
  YAML::Node jobs = yaml::descend(trainer.root, {"spec", "replicatedJobs"});
  ASSERT_TRUE(jobs.IsSequence());
  YAML::Node init =
      yaml::descend(jobs[0], {"template", "spec", "template", "spec", "initContainers"});
  ASSERT_TRUE(init.IsSequence());
  YAML::Node args = yaml::lookup(init[0], "args");
  ASSERT_TRUE(args.IsSequence());
  std::size_t found_line = 0;
  for (const auto& arg : args) {
    if (arg.Scalar() == "--instance_type=tpu7x:4x4x8") found_line = trainer.line_of(arg);
  }
  std::size_t expected = unique_line(text_, "--instance_type=tpu7x:4x4x8");
  EXPECT_EQ(expected, 367u);
  EXPECT_EQ(found_line, expected);

  // The rollout's replicas.
  const Document& rollout = dryrun_.documents[2];
  YAML::Node roll_jobs = yaml::descend(rollout.root, {"spec", "replicatedJobs"});
  ASSERT_TRUE(roll_jobs.IsSequence());
  EXPECT_EQ(rollout.line_of(yaml::lookup(roll_jobs[0], "replicas")),
            unique_line(text_, "replicas: 128"));
}

TEST(DryRunLineOf, NodeWithoutAMarkGivesTheDocumentsFirstLine) {
  Document doc{YAML::Load("a: 1\n"), 42};
  EXPECT_EQ(doc.line_of(YAML::Node("made in code")), 42u);
  EXPECT_EQ(doc.line_of(yaml::lookup(doc.root, "a")), 42u);
  DryRun dryrun = parse_dryrun("x\n---\n\n\na: 1\nb:\n  c: 2\n", "f");
  ASSERT_EQ(dryrun.documents.size(), 1u);
  const Document& parsed = dryrun.documents[0];
  EXPECT_EQ(parsed.first_line, 3u);
  EXPECT_EQ(parsed.line_of(yaml::lookup(parsed.root, "a")), 5u);
  EXPECT_EQ(parsed.line_of(yaml::descend(parsed.root, {"b", "c"})), 7u);
}

// --- the other fixtures
// ---------------------------------------------------------------------------

TEST(DryRunFixtures, V5pFixture) {
  std::string text = read_file(testdata("launch_dryrun_v5p.txt"));
  DryRun dryrun = parse_dryrun(text, "v5p.txt");
  ASSERT_EQ(dryrun.documents.size(), 3u);
  EXPECT_EQ(dryrun.skipped_chunks, 1u);
  std::vector<std::size_t> separators = separator_lines(text);
  ASSERT_THAT(separators, ElementsAre(26u, 156u, 509u));
  for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(dryrun.documents[i].first_line, separators[i] + 1);
  // The repeated priorityClassName of the orchestrator: its second occurrence in that document.
  std::vector<std::string> lines = lines_of(text);
  std::vector<std::size_t> occurrences;
  for (std::size_t i = separators[0]; i < separators[1]; ++i) {
    if (lines[i].find("priorityClassName:") != std::string::npos) occurrences.push_back(i + 1);
  }
  ASSERT_EQ(occurrences.size(), 2u);
  ASSERT_EQ(dryrun.diagnostics.size(), 1u);
  EXPECT_THAT(dryrun.diagnostics[0].where, EndsWith(fmt::format("v5p.txt:{}", occurrences[1])));
}

TEST(DryRunFixtures, NotYamlGivesNoDocuments) {
  DryRun dryrun = parse_dryrun(read_file(testdata("bad/not_yaml.txt")), "not_yaml.txt");
  EXPECT_TRUE(dryrun.documents.empty());
  EXPECT_EQ(dryrun.skipped_chunks, 1u);
  EXPECT_TRUE(dryrun.diagnostics.empty());
}

TEST(DryRunFixtures, OnlyTextThatCouldBeAMappingIsParsed) {
  // Text with no ':', '?' or '{' cannot be a YAML mapping: skipped without a parse (a 20 MiB line
  // of it took yaml-cpp seconds). A complex key and a flow mapping still are documents.
  DryRun text = parse_dryrun(std::string(1 << 20, 'a') + "\n---\nlog line\n", "t");
  EXPECT_TRUE(text.documents.empty());
  EXPECT_EQ(text.skipped_chunks, 2u);
  DryRun complex_key = parse_dryrun("? a\n---\n{b: 1}\n", "t");
  ASSERT_EQ(complex_key.documents.size(), 2u);
  EXPECT_TRUE(complex_key.documents[0].root["a"].IsDefined());
  EXPECT_EQ(complex_key.documents[1].root["b"].Scalar(), "1");
}

TEST(DryRunFixtures, EmptyGivesNoDocuments) {
  DryRun dryrun = parse_dryrun(read_file(testdata("bad/empty.txt")), "empty.txt");
  EXPECT_TRUE(dryrun.documents.empty());
  EXPECT_EQ(dryrun.skipped_chunks, 0u);
  EXPECT_TRUE(dryrun.diagnostics.empty());
  EXPECT_TRUE(parse_dryrun("", "e").documents.empty());
  EXPECT_TRUE(parse_dryrun("\n\n", "e").documents.empty());
  EXPECT_TRUE(parse_dryrun("---\n---\n", "e").documents.empty());
}

TEST(DryRunFixtures, SmallFixturesSplitWhereTheirSeparatorsAre) {
  for (const char* name : {"trainer_no_proxy.txt", "bad/no_trainer.txt", "bad/two_trainers.txt",
                           "bad/no_startup_block.txt", "bad/unbalanced_quote.txt"}) {
    SCOPED_TRACE(name);
    std::string text = read_file(testdata(name));
    DryRun dryrun = parse_dryrun(text, name);
    std::vector<std::size_t> separators = separator_lines(text);
    ASSERT_EQ(dryrun.documents.size(), separators.size());
    for (std::size_t i = 0; i < separators.size(); ++i) {
      EXPECT_EQ(dryrun.documents[i].first_line, separators[i] + 1);
    }
    EXPECT_EQ(dryrun.skipped_chunks, 1u);
  }
}

// --- YAML errors
// ----------------------------------------------------------------------------------

const std::string kObjectStart =
    "echo start\n"                            // 1
    "---\n"                                   // 2
    "# comment\n"                             // 3
    "apiVersion: jobset.x-k8s.io/v1alpha2\n"  // 4
    "kind: JobSet\n"                          // 5
    "metadata:\n";                            // 6

TEST(DryRunErrors, ObjectWithASyntaxErrorThrowsWithItsLine) {
  Error illegal_value = error_of(kObjectStart + "  name: a: b\nspec: {}\n", "f.txt");
  EXPECT_EQ(illegal_value.file(), "f.txt");
  EXPECT_EQ(illegal_value.line(), 7);
  EXPECT_THAT(illegal_value.message(), HasSubstr("YAML"));
  EXPECT_THAT(std::string(illegal_value.what()), HasSubstr("f.txt:7:"));

  Error bad_item = error_of(kObjectStart + "  name: x\n - bad\nspec: {}\n", "f.txt");
  EXPECT_EQ(bad_item.file(), "f.txt");
  EXPECT_EQ(bad_item.line(), 8);

  Error tab = error_of(kObjectStart + "  name: x\n\tspec: 1\n", "g.txt");
  EXPECT_EQ(tab.file(), "g.txt");
  EXPECT_EQ(tab.line(), 8);
}

TEST(DryRunErrors, SyntaxErrorInTheSecondObjectCountsFromItsSeparator) {
  std::string text =
      "pre\n---\nkind: JobSet\nmetadata:\n  name: ok\n---\nkind: JobSet\n"
      "metadata:\n  name: a: b\n";
  Error error = error_of(text, "two.txt");
  EXPECT_EQ(error.file(), "two.txt");
  EXPECT_EQ(error.line(), 9);
}

TEST(DryRunErrors, ChunksThatDoNotLookLikeObjectsAreSkippedEvenWhenInvalid) {
  // `kind:` not at column 0, or absent: launcher output, whatever it contains.
  DryRun dryrun = parse_dryrun(
      "Deleting: a: b\n  kind: x: y\n---\nkind: JobSet\nmetadata:\n  name: a\n---\n"
      "[unclosed\n---\n- a list\n- of items\n",
      "f");
  EXPECT_THAT(names_and_lines(dryrun), ElementsAre(Pair("a", 4u)));
  EXPECT_EQ(dryrun.skipped_chunks, 3u);
}

// --- separators and line endings
// ------------------------------------------------------------------

TEST(DryRunSplit, CrlfSeparatorsAndLines) {
  DryRun dryrun = parse_dryrun(
      "pre\r\n---\r\nkind: JobSet\r\nmetadata:\r\n  name: a\r\n---\r\nkind: JobSet\r\n"
      "metadata:\r\n  name: b\r\n",
      "crlf.txt");
  ASSERT_THAT(names_and_lines(dryrun), ElementsAre(Pair("a", 3u), Pair("b", 7u)));
  EXPECT_EQ(
      dryrun.documents[1].line_of(yaml::descend(dryrun.documents[1].root, {"metadata", "name"})),
      9u);
}

TEST(DryRunSplit, LastDocumentWithoutTrailingNewline) {
  DryRun dryrun = parse_dryrun("echo x\n---\nkind: JobSet\nmetadata:\n  name: last", "f");
  EXPECT_THAT(names_and_lines(dryrun), ElementsAre(Pair("last", 3u)));
}

TEST(DryRunSplit, OnlyLinesThatAreExactlyThreeDashesSeparate) {
  DryRun dryrun = parse_dryrun(
      "---\nkind: JobSet\nmetadata:\n  name: a\nscript: |\n  ---\n  x\nnote: \"--- \"\n---\n"
      "kind: JobSet\nmetadata:\n  name: b\n",
      "f");
  ASSERT_EQ(dryrun.documents.size(), 2u);
  EXPECT_EQ(yaml::scalar_at(dryrun.documents[0].root, "script"),
            std::optional<std::string>("---\nx\n"));
  EXPECT_EQ(name_of(dryrun.documents[1]), "b");
  EXPECT_EQ(dryrun.documents[1].first_line, 10u);
}

TEST(DryRunSplit, RepeatedKeysWarnPerOccurrenceWithFileLines) {
  DryRun dryrun = parse_dryrun(
      "---\nkind: JobSet\nmetadata:\n  name: a\n  name: b\nspec:\n  x: 1\n  x: 2\n", "dup.yaml");
  ASSERT_EQ(dryrun.documents.size(), 1u);
  EXPECT_EQ(name_of(dryrun.documents[0]), "b");  // the last one wins
  ASSERT_EQ(dryrun.diagnostics.size(), 2u);
  std::string all = text_of(dryrun.diagnostics[0]) + "\n" + text_of(dryrun.diagnostics[1]);
  EXPECT_THAT(all, HasSubstr("dup.yaml:5:"));
  EXPECT_THAT(all, HasSubstr("dup.yaml:8:"));
  EXPECT_THAT(all, HasSubstr("'name'"));
  EXPECT_THAT(all, HasSubstr("'x'"));
}

TEST(DryRunSplit, DocumentsAreIndependentTrees) {
  DryRun dryrun = parse_dryrun("---\nkind: A\nv: 1\n---\nkind: B\nv: 1\n", "f");
  ASSERT_EQ(dryrun.documents.size(), 2u);
  dryrun.documents[0].root["v"] = 5;
  EXPECT_EQ(yaml::scalar_at(dryrun.documents[1].root, "v"), std::optional<std::string>("1"));
}

TEST(DryRunBytes, NulAndInvalidUtf8InAnObjectAreRefusedWithLineAndColumn) {
  std::string nul =
      std::string("log\n---\napiVersion: v1\nkind: JobSet\nmetadata:\n  name: a") + '\0' + "b\n";
  Error error = error_of(nul, "d.txt");
  EXPECT_EQ(error.file(), "d.txt");
  EXPECT_EQ(error.line(), 6);
  EXPECT_EQ(error.message(), "column 10: a NUL byte (YAML must be UTF-8 text)");

  std::string latin1 = "apiVersion: v1\nkind: JobSet\nmetadata: {name: caf\xe9}\n";
  error = error_of(latin1, "d.txt");
  EXPECT_EQ(error.line(), 3);
  EXPECT_THAT(error.message(), HasSubstr("column 21: a byte that is not valid UTF-8"));
}

TEST(DryRunBytes, BinaryLogOutputBetweenDocumentsIsSkippedAndUtf8IsKept) {
  std::string text = std::string("progress \xff\xfe\0 bar\n---\n", 21) +
                     "apiVersion: v1\nkind: JobSet\nmetadata: {name: caf\xc3\xa9}\n";
  DryRun dryrun = parse_dryrun(text, "d.txt");
  ASSERT_EQ(dryrun.documents.size(), 1u);
  EXPECT_EQ(dryrun.skipped_chunks, 1u);
  EXPECT_EQ(name_of(dryrun.documents[0]), "caf\xc3\xa9");
}

}  // namespace
}  // namespace rtb::k8s
