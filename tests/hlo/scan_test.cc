// Tests of the streaming layer of the HLO reader (scan.h): the statement splitter (mapped and
// read sources, block sizes) and its errors. The classification is in chunk_test.cc, the
// pipelined mode in pipeline_test.cc.
#include "rtb/hlo/scan.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "counting_filter.h"
#include "fixtures.h"
#include "rtb/base/error.h"
#include "rtb/hlo/syntax.h"
#include "test_util.h"

namespace rtb::hlo {
namespace {

using fixtures::fixture_path;
using fixtures::line_of;
using fixtures::read_fixture;

// ---- hlo_scan: classification and splitting -----------------------------------------------------

std::vector<Statement> split_all(const std::string& text, std::size_t max_read,
                                 SplitEnd* end_out = nullptr, std::size_t block = 4096,
                                 std::vector<std::string>* texts = nullptr) {
  MemorySource source(text, "<test>", max_read);
  SplitOptions options;
  options.block_bytes = block;
  std::vector<Statement> out;
  SplitEnd end = split_statements(source, options, [&](const Statement& s) {
    out.push_back(s);
    if (texts != nullptr) texts->emplace_back(s.text);
  });
  if (end_out != nullptr) *end_out = end;
  return out;
}

TEST(HloScan, SplitsMultiLineInstructionsByBracketDepth) {
  const std::string text = read_fixture("handwritten_multiline.hlo.txt");
  std::vector<std::string> texts;
  SplitEnd end;
  std::vector<Statement> statements = split_all(text, SIZE_MAX, &end, 4096, &texts);
  EXPECT_TRUE(end.clean);
  EXPECT_EQ(end.depth, 0);
  // The all-gather-start spans 11 lines and is one statement, starting at its first line.
  auto start = std::find_if(texts.begin(), texts.end(), [](const std::string& t) {
    return t.find("%ag-start = ") != std::string::npos;
  });
  ASSERT_NE(start, texts.end());
  EXPECT_THAT(*start, HasSubstr("\"note\":\"brackets in strings: ) ] } ( [ {\"}"));
  EXPECT_EQ(statements[static_cast<std::size_t>(start - texts.begin())].line,
            line_of(text, "%ag-start = "));
  // The shape alone on its line does not end the ROOT instruction.
  auto root = std::find_if(texts.begin(), texts.end(), [](const std::string& t) {
    return t.find("ROOT %ar = ") != std::string::npos;
  });
  ASSERT_NE(root, texts.end());
  EXPECT_THAT(*root, HasSubstr("to_apply=%add.clone"));
}

TEST(HloScan, SameStatementsWhateverTheReadAndBlockSizes) {
  const std::string text = read_fixture("handwritten_escaped_backend_config.hlo.txt") +
                           read_fixture("handwritten_multiline.hlo.txt");
  std::vector<std::string> reference;
  split_all(text, SIZE_MAX, nullptr, 1 << 20, &reference);
  for (std::size_t max_read : {1, 7, 63, 64, 65, 1000}) {
    for (std::size_t block : {64, 100, 4096}) {
      std::vector<std::string> texts;
      split_all(text, max_read, nullptr, block, &texts);
      EXPECT_EQ(texts, reference) << "max_read " << max_read << " block " << block;
    }
  }
}

TEST(HloScan, EscapedQuotesKeepBracketsInsideStrings) {
  const std::string text = read_fixture("handwritten_escaped_backend_config.hlo.txt");
  std::vector<std::string> texts;
  SplitEnd end;
  split_all(text, SIZE_MAX, &end, 4096, &texts);
  EXPECT_TRUE(end.clean) << end.message;
  auto cp = std::find_if(texts.begin(), texts.end(), [](const std::string& t) {
    return t.find("%cp = ") != std::string::npos;
  });
  ASSERT_NE(cp, texts.end());
  EXPECT_THAT(*cp, HasSubstr("metadata={op_name=\"body/\\\"permute\\\"\"}"));
}

TEST(HloScan, StatementLongerThanTheLimitStopsWithItsLine) {
  std::string text = "HloModule m\n\nENTRY %e {\n  %x = f32[] constant(0), note=\"";
  text += std::string(3000, 'a');
  text += "\"\n}\n";
  MemorySource source(text, "<test>");
  SplitOptions options;
  options.block_bytes = 256;
  options.max_statement_bytes = 1000;
  int statements = 0;
  SplitEnd end = split_statements(source, options, [&](const Statement&) { ++statements; });
  EXPECT_FALSE(end.clean);
  EXPECT_EQ(end.line, 4);
  EXPECT_THAT(end.message, HasSubstr("longer than"));
}

TEST(HloScan, NulByteStopsAtItsLine) {
  std::string text = "HloModule m\nline two\nbad ";
  text += '\0';
  text += "\n";
  SplitEnd end;
  split_all(text, SIZE_MAX, &end);
  EXPECT_FALSE(end.clean);
  EXPECT_EQ(end.line, 3);
  EXPECT_THAT(end.message, HasSubstr("NUL"));
}

TEST(HloScan, UnbalancedClosingBracketIsAnError) {
  SplitEnd end;
  split_all("HloModule m\n\nENTRY %e {\n}\n}\n", SIZE_MAX, &end);
  EXPECT_FALSE(end.clean);
  EXPECT_EQ(end.line, 5);
}

TEST(HloScan, ReportsAnUnterminatedComputation) {
  SplitEnd end;
  split_all("HloModule m\n\nENTRY %e {\n  %x = f32[] constant(0)\n", SIZE_MAX, &end);
  EXPECT_TRUE(end.clean);
  EXPECT_EQ(end.depth, 1);
}

TEST(HloScan, MappedAndReadFilesGiveTheSameStatements) {
  // About 40 MB, so that the mapping is released behind the scan (every 16 MiB) on the way.
  const std::string one = read_fixture("handwritten_multiline.hlo.txt");
  const std::string body = one.substr(one.find("%fused_computation.1"));
  std::string text = one;
  while (text.size() < (40u << 20)) text += body;
  std::string path = (std::filesystem::temp_directory_path() / "rtb_hlo_test_XXXXXX").string();
  int fd = ::mkstemp(path.data());
  ASSERT_GE(fd, 0);
  ::close(fd);
  std::ofstream(path, std::ios::binary) << text;
  auto digest = [&](bool map) {
    FileSource source(path, map ? FileAccess::kMapped : FileAccess::kStream);
    EXPECT_EQ(source.contiguous().empty(), !map);
    std::size_t count = 0;
    std::size_t hash = 0;
    SplitOptions options;
    SplitEnd end = split_statements(source, options, [&](const Statement& s) {
      ++count;
      hash = hash * 31 + std::hash<std::string_view>{}(s.text) + static_cast<std::size_t>(s.line);
    });
    EXPECT_TRUE(end.clean);
    EXPECT_EQ(end.bytes, text.size());
    return std::make_pair(count, hash);
  };
  auto mapped = digest(true);
  auto read = digest(false);
  std::filesystem::remove(path);
  EXPECT_EQ(mapped, read);
  EXPECT_GT(mapped.first, 100000u);
}

// What the splitter accepts, and where it reports an error, does not depend on where its 64-byte
// chunks fall (the pieces of the pipelined mode start at other offsets). Found by
// fuzz/hlo_pieces_fuzz: an error's `lines` and a ')' that a later '(' on the same line balances
// depended on the alignment, and so did a statement up to 63 bytes over the length limit.
TEST(HloScan, ErrorsDoNotDependOnWhereChunksFall) {
  auto split = [](const std::string& text, std::size_t max_statement) {
    MemorySource source(text, "<test>");
    SplitOptions options;
    options.threads = 1;
    options.max_statement_bytes = max_statement;
    std::size_t statements = 0;
    SplitEnd end = split_statements(source, options, [&](const Statement&) { ++statements; });
    return std::make_tuple(statements, end.clean, end.line, end.lines, end.message);
  };
  using Result = std::tuple<std::size_t, bool, std::int64_t, std::int64_t, std::string>;
  for (std::size_t shift = 0; shift < 64; ++shift) {
    SCOPED_TRACE(shift);
    std::string head = "HloModule m" + std::string(shift, ' ') + "\n";
    // A ')' balanced again before the line ends is not an error (the statement is the
    // analyser's to judge); one that is not, is, on its line.
    EXPECT_EQ(split(head + "x ) y ( z\n", 1 << 20), Result(2, true, 0, 2, ""));
    EXPECT_EQ(split(head + "x ) y\nz\n", 1 << 20),
              Result(1, false, 2, 2, "unbalanced closing bracket"));
    EXPECT_EQ(split(head + "x ) y", 1 << 20), Result(1, false, 2, 2, "unbalanced closing bracket"));
    // A statement of exactly the limit passes; one byte more is an error, on its first line.
    std::string instruction = "  %x = f32[] constant(0)" + std::string(70, ' ');
    std::string body = head + "%a {\n" + instruction + "\n}\n";
    EXPECT_TRUE(std::get<1>(split(body, instruction.size())));
    auto too_long = split(body, instruction.size() - 1);
    EXPECT_FALSE(std::get<1>(too_long));
    EXPECT_EQ(std::get<2>(too_long), 3);
    EXPECT_EQ(std::get<3>(too_long), 3);
    // Which error a long statement meets first is a matter of position, not of where the chunk
    // checks fall: a NUL byte or an unbalanced line end within the limit is reported as such,
    // one past it as the statement being too long. (Found by fuzz/hlo_pieces_fuzz: a NUL past
    // the limit but in the chunk after it was "binary data" with one thread, "too long" with
    // pieces.)
    std::string open = "  %x = f32[] custom-call(";
    std::size_t limit = open.size() + 120;  // the module line, too, stays within it
    for (std::size_t at : {limit, limit + 1}) {
      SCOPED_TRACE(at);
      std::string statement = open + std::string(at - open.size(), ' ');
      bool within = at == limit;
      std::string too_long_message = "statement longer than " + std::to_string(limit) +
                                     " bytes (an unterminated string or bracket, or not HLO "
                                     "text?)";
      auto nul = split(head + "%a {\n" + statement + '\0' + " )\n}\n", limit);
      EXPECT_EQ(std::get<4>(nul),
                within ? "binary data (NUL byte): not HLO text" : too_long_message);
      EXPECT_EQ(std::get<2>(nul), 3);
      // custom-call( opens a bracket at depth 1; three closing ones go below zero at the newline.
      auto unbalanced = split(head + "%a {\n" + statement.substr(0, at - 3) + ")))\n}\n", limit);
      EXPECT_EQ(std::get<4>(unbalanced), within ? "unbalanced closing bracket" : too_long_message);
      EXPECT_EQ(std::get<2>(unbalanced), 3);
    }
  }
}

}  // namespace
}  // namespace rtb::hlo
