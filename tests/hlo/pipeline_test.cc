// Tests of the pipelined mode of the HLO splitter (pipeline.h): where pieces start, and that
// pieces scanned on other threads (with their own filters) give exactly what one thread gives.
#include "rtb/hlo/pipeline.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "counting_filter.h"
#include "fixtures.h"
#include "rtb/base/error.h"
#include "rtb/hlo/scan.h"
#include "rtb/hlo/syntax.h"

namespace rtb::hlo {
namespace {

using fixtures::read_fixture;

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

TEST(HloPipeline, NextPieceStartFindsTheLineAfterAComputationsEnd) {
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
TEST(HloPipeline, PipelinedModeGivesTheSameStatements) {
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
TEST(HloPipeline, FilterDropsAndNotesStatements) {
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

TEST(HloPipeline, PipelinedModeStopsWhenTheCallbackThrows) {
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
