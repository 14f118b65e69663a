// Tests of the streaming layer of the HLO reader (hlo_scan): the 64-byte classification, the
// statement splitter (single-thread and pipelined, mapped and read sources) and its errors.
#include "rtb/hlo_scan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "hlo_fixtures.h"
#include "rtb/error.h"
#include "rtb/hlo_syntax.h"

namespace rtb::hlo {
namespace {

using fixtures::fixture_path;
using fixtures::line_of;
using fixtures::read_fixture;
using ::testing::HasSubstr;

// ---- hlo_scan: classification and splitting -----------------------------------------------------

TEST(HloScan, SimdClassificationMatchesPortable) {
  std::mt19937 random(6);
  const std::string alphabet = "\"\\()[]{}\n\0 abc=,%";
  for (int round = 0; round < 2000; ++round) {
    char bytes[64];
    for (char& b : bytes) {
      b = round % 2 == 0 ? alphabet[random() % alphabet.size()] : static_cast<char>(random());
    }
    ASSERT_EQ(classify_chunk(bytes), classify_chunk_portable(bytes)) << "round " << round;
  }
}

TEST(HloScan, PrefixXorMarksBytesInsideQuotes) {
  EXPECT_EQ(prefix_xor(0b1001), 0b0111u);
  EXPECT_EQ(prefix_xor(0), 0u);
  EXPECT_EQ(prefix_xor(1), ~std::uint64_t{0});
}

std::vector<Statement> split_all(const std::string& text, std::size_t max_read,
                                 SplitEnd* end_out = nullptr, std::size_t block = 4096,
                                 std::vector<std::string>* texts = nullptr) {
  MemorySource source(text, max_read);
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
  MemorySource source(text);
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
    FileSource source(path, map);
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

// The pipelined mode (scan on a second thread, opcode checks on the caller's) gives exactly the
// statements of the single-thread mode, including instructions cut after their shape.
TEST(HloScan, PipelinedModeGivesTheSameStatements) {
  std::vector<std::string> texts = {
      read_fixture("handwritten_multiline.hlo.txt"),
      read_fixture("handwritten_escaped_backend_config.hlo.txt"),
      read_fixture("maxtext_ref_llama3_8b_tpu-v6e-4_8fcc9e13.hlo.txt"),
      read_fixture("bad/truncated_mid_instruction.hlo.txt"),
      "HloModule m\n\nENTRY %e {\n  ROOT %x = f32[]"};
  std::string many;  // more than one hand-over batch
  while (many.size() < (3u << 20)) many += read_fixture("handwritten_multiline.hlo.txt");
  texts.push_back(many);
  for (const std::string& text : texts) {
    std::vector<std::tuple<std::string, std::int64_t, std::int64_t, std::string>> got[2];
    SplitEnd ends[2];
    for (int threads : {1, 2}) {
      MemorySource source(text);
      SplitOptions options;
      options.threads = threads;
      ends[threads - 1] = split_statements(source, options, [&](const Statement& st) {
        got[threads - 1].emplace_back(st.text, st.line, st.depth_after,
                                      st.head != nullptr ? std::string(st.head->opcode) : "");
      });
    }
    EXPECT_EQ(got[0], got[1]);
    EXPECT_EQ(ends[0].clean, ends[1].clean);
    EXPECT_EQ(ends[0].lines, ends[1].lines);
    EXPECT_EQ(ends[0].depth, ends[1].depth);
    EXPECT_EQ(ends[0].partial_statement, ends[1].partial_statement);
  }
}

// A filter sees every statement on the scanning side, drops some and notes others; the callback
// gets the kept ones in order with their notes, and can annotate the note of a later statement
// through Statement::ahead. Both modes behave the same.
TEST(HloScan, FilterDropsAndNotesStatements) {
  std::string text;
  while (text.size() < (6u << 20)) text += read_fixture("handwritten_multiline.hlo.txt");
  std::vector<std::tuple<std::string, std::int64_t, std::uint32_t, std::string>> got[2];
  std::size_t all[2] = {0, 0};
  std::size_t annotated_seen[2] = {0, 0};
  for (int threads : {1, 2}) {
    MemorySource source(text);
    SplitOptions options;
    options.threads = threads;
    std::uint32_t dropped = 0;
    StatementFilter filter = [&](const Statement& st, StatementNote& note) {
      ++all[threads - 1];
      if (st.head == nullptr || st.head->opcode == "parameter") {
        ++dropped;
        return false;
      }
      note.kind = st.head->root ? 2 : 1;
      note.count = dropped;
      note.key = st.head->name;
      dropped = 0;
      return true;
    };
    split_statements(
        source, options,
        [&](const Statement& st) {
          ASSERT_NE(st.note, nullptr);
          ASSERT_NE(st.head, nullptr);
          EXPECT_EQ(st.note->key, st.head->name);
          if (st.note->hash == 7) ++annotated_seen[threads - 1];
          if (st.ahead != nullptr) st.ahead->hash = 7;
          got[threads - 1].emplace_back(st.text, st.line, st.note->count,
                                        std::string(st.head->opcode));
        },
        filter);
  }
  EXPECT_EQ(all[0], all[1]);
  EXPECT_EQ(got[0], got[1]);
  ASSERT_FALSE(got[0].empty());
  EXPECT_LT(got[0].size(), all[0]);
  std::uint32_t counted = 0;
  for (const auto& statement : got[0]) {
    EXPECT_NE(std::get<3>(statement), "parameter");
    counted += std::get<2>(statement);
  }
  EXPECT_GT(counted, 0u);
  EXPECT_EQ(annotated_seen[0], 0u);  // one thread: no look-ahead
  EXPECT_GT(annotated_seen[1], got[1].size() / 2);
}

TEST(HloScan, PipelinedModeStopsWhenTheCallbackThrows) {
  std::string text;
  while (text.size() < (8u << 20)) text += read_fixture("handwritten_multiline.hlo.txt");
  MemorySource source(text);
  SplitOptions options;
  options.threads = 2;
  int seen = 0;
  EXPECT_THROW(split_statements(source, options,
                                [&](const Statement&) {
                                  if (++seen == 5000) fail("stop here");
                                }),
               Error);
  EXPECT_EQ(seen, 5000);
}

}  // namespace
}  // namespace rtb::hlo
