// Tests of the streaming layer of the HLO reader (hlo_scan): the 64-byte classification, the
// statement splitter (single-thread and pipelined, mapped and read sources) and its errors.
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

// Text that fools next_piece_start: lines starting with '}' inside a multi-line string and
// inside a multi-line attribute, each followed by a line the guess takes for a new statement.
std::string misleading_text() {
  return "HloModule m, is_scheduled=true\n\n"
         "ENTRY %e (p: f32[]) -> f32[] {\n"
         "  %p = f32[] parameter(0)\n"
         "  %c = f32[] custom-call(%p), custom_call_target=\"x\", backend_config=\"line1\n"
         "}\n"
         "\n"
         "not a header {\n"
         "}\n"
         "more\"\n"
         "  %d = f32[] custom-call(%c), custom_call_target=\"y\", backend_config={\n"
         "\"a\": 1\n"
         "}\n"
         "\n"
         "  ROOT %r = f32[] add(%p, %d)\n"
         "}\n"
         "\n"
         "%f (q: f32[]) -> f32[] {\n"
         "  ROOT %q = f32[] parameter(0)\n"
         "}\n\n";
}

TEST(HloScan, NextPieceStartFindsTheLineAfterAComputationsEnd) {
  std::string text = "HloModule m\n\n%a {\n  %x = f32[] constant(0)\n}\n\n%b {\n}\nENTRY %c {\n}\n";
  std::size_t after_a = text.find("}\n") + 2;
  EXPECT_EQ(next_piece_start(text, 0), after_a);
  EXPECT_EQ(next_piece_start(text, 5), after_a);
  EXPECT_EQ(next_piece_start(text, after_a - 2), after_a);  // from the '}' itself
  std::size_t after_b = text.find("}\nENTRY") + 2;
  EXPECT_EQ(next_piece_start(text, after_a), after_b);
  EXPECT_EQ(next_piece_start(text, after_b), text.size());  // the last '}': nothing follows
  // A '}' line followed by an indented line is not a computation's end.
  EXPECT_EQ(next_piece_start("x\n}\n  y\n", 0), std::string("x\n}\n  y\n").size());
  EXPECT_EQ(next_piece_start("", 0), 0u);
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

// Drops `parameter` instructions and statements without a head (see CountingFilter).
bool parameter_or_no_head(const Statement& st) {
  return st.head == nullptr || st.head->opcode == "parameter";
}

using Seen =
    std::vector<std::tuple<std::string, std::int64_t, std::int64_t, std::string, std::uint32_t>>;

// Every statement a split delivers (text, line, depth after, opcode, note count), and its end.
Seen split_with(const std::string& text, int threads, std::size_t piece_bytes, bool filtered,
                SplitEnd* end_out) {
  MemorySource source(text, "<test>");
  SplitOptions options;
  options.threads = threads;
  options.piece_bytes = piece_bytes;
  fixtures::CountingFilter filter(parameter_or_no_head);
  Seen seen;
  SplitEnd end = split_statements(
      source, options,
      [&](const Statement& st) {
        if (filtered) {
          EXPECT_NE(st.note, nullptr);
          if (st.note != nullptr && st.head != nullptr) {
            EXPECT_EQ(st.note->key, st.head->name);
          }
        }
        seen.emplace_back(st.text, st.line, st.depth_after,
                          st.head != nullptr ? std::string(st.head->opcode) : "",
                          st.note != nullptr ? st.note->count : 0);
      },
      filtered ? &filter : nullptr);
  if (end_out != nullptr) *end_out = end;
  return seen;
}

// The pipelined mode (pieces scanned on other threads, the callback on the caller's) gives
// exactly the statements, lines and notes of the single-thread mode, wherever the text is cut,
// including where the guessed piece starts are wrong and at inputs that end early or break off.
TEST(HloScan, PipelinedModeGivesTheSameStatements) {
  std::vector<std::string> texts = {
      read_fixture("handwritten_multiline.hlo.txt"),
      read_fixture("handwritten_escaped_backend_config.hlo.txt"),
      read_fixture("maxtext_ref_llama3_8b_tpu-v6e-4_8fcc9e13.hlo.txt"),
      read_fixture("maxtext_ref_deepseek3_tpu-v6e-4_28b37f85_sparsecore.hlo.txt"),
      read_fixture("bad/truncated_mid_instruction.hlo.txt"),
      "HloModule m\n\nENTRY %e {\n  ROOT %x = f32[]", misleading_text(),
      // Broken in a later piece: unbalanced bracket, NUL byte, a string that never ends.
      misleading_text() + misleading_text() + "}\n" + misleading_text(),
      misleading_text() + std::string("%g {\n  %x = f32[] constant(0)\0\n}\n", 34),
      misleading_text() + "%h {\n  %s = f32[] custom-call(), backend_config=\"\n}\n\n%i {\n}\n"};
  std::string many;  // more than one hand-over batch
  while (many.size() < (3u << 20)) many += read_fixture("handwritten_multiline.hlo.txt");
  texts.push_back(many);
  std::string fooled;
  while (fooled.size() < (256u << 10)) fooled += misleading_text().substr(32);
  texts.push_back("HloModule m\n\n" + fooled);
  for (std::size_t t = 0; t < texts.size(); ++t) {
    const std::string& text = texts[t];
    for (bool filtered : {false, true}) {
      SplitEnd single_end;
      Seen single = split_with(text, 1, 0, filtered, &single_end);
      for (int threads : {2, 3}) {
        for (std::size_t piece :
             {std::size_t{0}, std::size_t{1}, std::size_t{100}, std::size_t{4096}}) {
          SCOPED_TRACE(
              fmt::format("text {} filtered {} threads {} piece {}", t, filtered, threads, piece));
          SplitEnd end;
          Seen got = split_with(text, threads, piece, filtered, &end);
          EXPECT_EQ(got, single);
          EXPECT_EQ(end.clean, single_end.clean);
          EXPECT_EQ(end.line, single_end.line);
          EXPECT_EQ(end.message, single_end.message);
          EXPECT_EQ(end.lines, single_end.lines);
          EXPECT_EQ(end.bytes, single_end.bytes);
          if (single_end.clean) {
            EXPECT_EQ(end.depth, single_end.depth);
          }
          EXPECT_EQ(end.partial_statement, single_end.partial_statement);
          EXPECT_EQ(end.pending.count, single_end.pending.count);
        }
      }
    }
  }
}

// A filter sees every statement on the scanning side, drops some and notes others; the callback
// gets the kept ones in order with their notes, and can annotate the note of a later statement
// through Statement::ahead. The dropped statements are all counted, on kept notes or at the end.
TEST(HloScan, FilterDropsAndNotesStatements) {
  std::string text;
  while (text.size() < (6u << 20)) text += read_fixture("handwritten_multiline.hlo.txt");
  std::size_t kept[2] = {0, 0};
  std::size_t counted[2] = {0, 0};
  std::size_t annotated_seen[2] = {0, 0};
  for (int threads : {1, 2}) {
    MemorySource source(text, "<test>");
    SplitOptions options;
    options.threads = threads;
    fixtures::CountingFilter filter(parameter_or_no_head);
    SplitEnd end = split_statements(
        source, options,
        [&](const Statement& st) {
          ASSERT_NE(st.note, nullptr);
          ASSERT_NE(st.head, nullptr);
          EXPECT_NE(st.head->opcode, "parameter");
          if (st.note->hash == 7) ++annotated_seen[threads - 1];
          if (st.ahead != nullptr) st.ahead->hash = 7;
          ++kept[threads - 1];
          counted[threads - 1] += st.note->count;
        },
        &filter);
    counted[threads - 1] += end.pending.count;
  }
  EXPECT_EQ(kept[0], kept[1]);
  EXPECT_EQ(counted[0], counted[1]);
  EXPECT_GT(counted[0], 0u);
  EXPECT_GT(kept[0], 0u);
  EXPECT_EQ(annotated_seen[0], 0u);  // one thread: no look-ahead
  EXPECT_GT(annotated_seen[1], kept[1] / 2);
}

TEST(HloScan, PipelinedModeStopsWhenTheCallbackThrows) {
  std::string text;
  while (text.size() < (8u << 20)) text += read_fixture("handwritten_multiline.hlo.txt");
  MemorySource source(text, "<test>");
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
