// Tests of the analyser's statement filter (prefilter.h): the notes it writes for the statements
// it keeps, what it drops, how pieces' notes merge, and (through the analysis) that dropping
// changes no report.
#include "rtb/hlo/prefilter.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "fixtures.h"
#include "rtb/base/error.h"
#include "rtb/hlo/analysis.h"
#include "rtb/hlo/flat_index.h"
#include "rtb/hlo/opcodes.h"
#include "rtb/hlo/report.h"
#include "rtb/hlo/syntax.h"

namespace rtb::hlo {
namespace {

// Runs `filter` over the statements of `text` (one thread), as the splitter would.
struct Kept {
  std::string text;
  StatementNote note;
};
std::vector<Kept> run_filter(const std::string& text, Prefilter& filter, StatementNote* pending) {
  std::vector<Kept> kept;
  MemorySource source(text, "<test>");
  SplitOptions options;
  options.threads = 1;
  SplitEnd end = split_statements(
      source, options,
      [&](const Statement& s) {
        kept.push_back(Kept{std::string(s.text), *s.note});
      },
      &filter);
  EXPECT_TRUE(end.clean) << end.message;
  if (pending != nullptr) *pending = end.pending;
  return kept;
}

// A module up to the start of an all-gather in its entry, after a fusion computation.
const std::string kModuleToStart =
    "HloModule m, is_scheduled=true\n\n"
    "%fused (p: f32[8]) -> f32[8] {\n"
    "  %p = f32[8]{0} parameter(0)\n"
    "  ROOT %n = f32[8]{0} negate(%p)\n"
    "}\n\n"
    "ENTRY %main (a: f32[8]) -> f32[8] {\n"
    "  %a = f32[8]{0} parameter(0)\n"
    "  %s = f32[8]{0} all-gather-start(%a), dimensions={0}\n";

const std::string kModule = kModuleToStart +
                            "  %b = f32[8]{0} add(%a, %a)\n"
                            "  %f = f32[8]{0} fusion(%b), kind=kLoop, calls=%fused\n"
                            "  %d = f32[8]{0} all-gather-done(%s)\n"
                            "  ROOT %r = f32[8]{0} some-new-op(%d)\n"
                            "}\n";

TEST(HloPrefilter, KeepsWhatTheAnalysisNeedsAndCountsTheRest) {
  Prefilter filter(/*keep_all=*/false);
  StatementNote pending;
  std::vector<Kept> kept = run_filter(kModule, filter, &pending);
  ASSERT_EQ(kept.size(), 7u);
  EXPECT_EQ(kept[0].text, "HloModule m, is_scheduled=true");
  EXPECT_EQ(kept[0].note.kind, kNoteNone);
  // A header: its name and hash.
  EXPECT_EQ(kept[1].note.kind, kNoteHeader);
  EXPECT_EQ(kept[1].note.key, "fused");
  EXPECT_EQ(kept[1].note.hash, hash_name("fused"));
  // The next header carries the two dropped instructions of %fused, its dropped plain ROOT
  // (negate) and its dropped `}`.
  EXPECT_EQ(kept[2].note.kind, kNoteHeader);
  EXPECT_EQ(kept[2].note.key, "main");
  EXPECT_EQ(kept[2].note.count, 2u);
  EXPECT_EQ(kept[2].note.tag & kTagRootMask, plain_opcode_tag("negate"));
  EXPECT_NE(kept[2].note.tag & kTagClosed, 0);
  // all-gather-start after the dropped parameter.
  EXPECT_EQ(kept[3].note.kind, kNoteInstruction + static_cast<int>(OpcodeRole::kStart));
  EXPECT_EQ(kept[3].note.count, 1u);
  // The fusion after the dropped add: its callee as key and hash.
  EXPECT_EQ(kept[4].note.kind, kNoteInstruction + static_cast<int>(OpcodeRole::kCompute));
  EXPECT_EQ(kept[4].note.count, 1u);
  EXPECT_EQ(kept[4].note.key, "fused");
  EXPECT_EQ(kept[4].note.hash, hash_name("fused"));
  EXPECT_EQ(kept[5].note.kind, kNoteInstruction + static_cast<int>(OpcodeRole::kDone));
  // A ROOT whose opcode is not in the table goes on, as kOther.
  EXPECT_EQ(kept[6].note.kind, kNoteInstruction + static_cast<int>(OpcodeRole::kOther));
  // The final `}` is held back in the pending note.
  EXPECT_EQ(pending.count, 0u);
  EXPECT_EQ(pending.tag, kTagClosed);
}

TEST(HloPrefilter, KeepAllPassesEveryInstruction) {
  Prefilter filter(/*keep_all=*/true);
  StatementNote pending;
  std::vector<Kept> kept = run_filter(kModule, filter, &pending);
  EXPECT_EQ(kept.size(), 13u);
  for (const Kept& k : kept) EXPECT_EQ(k.note.count, 0u);
  EXPECT_EQ(pending.count, 0u);
  EXPECT_EQ(pending.tag, 0);
}

TEST(HloPrefilter, MergingPendingNotesAddsCountsAndJoinsTags) {
  Prefilter filter(false);
  StatementNote earlier;
  earlier.count = 3;
  earlier.tag = static_cast<std::uint16_t>(plain_opcode_tag("add") | kTagClosed);
  StatementNote later;
  later.count = 2;
  filter.merge_pending(earlier, later);
  EXPECT_EQ(later.count, 5u);
  EXPECT_EQ(later.tag, earlier.tag);
  // A later note with a ROOT of its own keeps it.
  StatementNote own;
  own.tag = plain_opcode_tag("negate");
  filter.merge_pending(earlier, own);
  EXPECT_EQ(own.tag & kTagRootMask, plain_opcode_tag("negate"));
  EXPECT_NE(own.tag & kTagClosed, 0);
  // A fork starts after the module header: its first statement may be a computation header.
  std::unique_ptr<StatementFilter> fork = filter.fork();
  Statement header{"%c (p: f32[]) -> f32[] {", 1, 1, nullptr, nullptr, nullptr};
  StatementNote note;
  ASSERT_TRUE(fork->keep(header, note));
  EXPECT_EQ(note.kind, kNoteHeader);
  EXPECT_EQ(note.key, "c");
}

// Options with `threads` scanning threads; keep_all (keep_schedule) turns the dropping off.
Options reading_options(int threads, bool keep_all) {
  Options options;
  options.threads = threads;
  options.keep_schedule = keep_all;
  return options;
}

// Runs `check` with the options of every way of reading: one or two scanning threads, with the
// filter dropping instructions or (keep_schedule) keeping them all.
template <typename Check>
void for_each_reading(const Check& check) {
  for (int threads : {1, 2}) {
    for (bool keep_all : {false, true}) {
      SCOPED_TRACE(fmt::format("threads {} keep_schedule {}", threads, keep_all));
      check(reading_options(threads, keep_all));
    }
  }
}

// The JSON report (or the error) of `analyze` with the filter dropping what the analysis does not
// need, and with keep_schedule, which turns the dropping off; the schedule itself is left out.
template <typename Analyze>
std::pair<std::string, std::string> reports_dropping_and_keeping(int threads, Analyze analyze) {
  std::string reports[2];
  for (bool keep_all : {false, true}) {
    Options options = reading_options(threads, keep_all);
    try {
      Analysis a = analyze(options);
      a.schedule.reset();
      reports[keep_all ? 1 : 0] = format_json(a);
    } catch (const Error& e) {
      reports[keep_all ? 1 : 0] = std::string("error: ") + e.what();
    }
  }
  return {reports[0], reports[1]};
}

// The reader passes the analysis only the instructions that matter to it (collectives, compute,
// calls) and counts the others (ROOTs and closing `}` lines: see the tests below); keep_schedule
// turns that off (the picture needs every instruction). Both must give the same report, also for
// truncated and broken dumps.
TEST(HloPrefilter, DroppingUninterestingInstructionsChangesNothing) {
  const std::vector<std::string> paths = fixtures::all_fixture_paths();
  for (const std::string& path : paths) {
    SCOPED_TRACE(path);
    for (int threads : {1, 2}) {
      auto analyze = [&](const Options& options) { return analyze_file(path, options); };
      auto [dropping, keeping] = reports_dropping_and_keeping(threads, analyze);
      EXPECT_EQ(dropping, keeping);
    }
  }
}

// Instructions dropped before the end of a dump that stops inside a computation, or before an
// instruction that cannot be read, still count (and windows still count them).
TEST(HloPrefilter, DroppedInstructionsCountUpToTheEndOrTheError) {
  const std::string body = kModuleToStart +
                           "  %b = f32[8]{0} add(%a, %a)\n"
                           "  %c = f32[8]{0} multiply(%b, %b)\n"
                           "  %d = f32[8]{0} all-gather-done(%s)\n"
                           "  %e = f32[8]{0} subtract(%d, %d)\n"
                           "  %f = f32[8]{0} subtract(%e, %e)\n";
  for_each_reading([&](const Options& options) {
    Analysis truncated = analyze_text(body, "t.hlo", options);
    EXPECT_TRUE(truncated.truncated);
    EXPECT_EQ(truncated.instructions, 9);
    ASSERT_EQ(truncated.collectives.size(), 1u);
    EXPECT_EQ(truncated.collectives[0].window_instructions, 2);
    EXPECT_TRUE(truncated.collectives[0].exposed());

    Analysis broken = analyze_text(body + "  this is not an instruction\n}\n", "b.hlo", options);
    EXPECT_TRUE(broken.truncated);
    EXPECT_EQ(broken.truncated_line, 16);
    EXPECT_EQ(broken.instructions, 9);
    EXPECT_EQ(broken.lines, 16);
  });
}

// The scanning thread drops a ROOT with a plain opcode and hands over only its opcode's index;
// an async-start wrapping that computation is still named by the root opcode, also when the
// computation is the last one of a truncated dump, and a root opcode outside the table is kept.
TEST(HloPrefilter, DroppedRootsStillNameAsyncWrappers) {
  const std::string body =
      "HloModule m, is_scheduled=true\n\n"
      "%wrapped_slice (p: f32[8]) -> f32[4] {\n"
      "  %p = f32[8]{0} parameter(0)\n"
      "  ROOT %s = f32[4]{0} slice(%p), slice={[0:4]}\n"
      "}\n\n"
      "%wrapped_odd (q: f32[8]) -> f32[8] {\n"
      "  %q = f32[8]{0} parameter(0)\n"
      "  ROOT %o = f32[8]{0} some-new-op(%q)\n"
      "}\n\n"
      "ENTRY %main (a: f32[8]) -> f32[8] {\n"
      "  %a = f32[8]{0} parameter(0)\n"
      "  %s1 = ((f32[8]), f32[4]) async-start(%a), calls=%wrapped_slice\n"
      "  %d1 = f32[4]{0} async-done(%s1)\n"
      "  %s2 = ((f32[8]), f32[8]) async-start(%a), calls=%wrapped_odd\n"
      "  %d2 = f32[8]{0} async-done(%s2)\n"
      "  %s3 = ((f32[8]), f32[8]) async-start(%a), calls=%wrapped_last\n"
      "  %d3 = f32[8]{0} async-done(%s3)\n"
      "  ROOT %t = (f32[4], f32[8], f32[8]) tuple(%d1, %d2, %d3)\n"
      "}\n\n"
      "%wrapped_last (r: f32[8]) -> f32[8] {\n"
      "  %r = f32[8]{0} parameter(0)\n"
      "  ROOT %n = f32[8]{0} negate(%r)\n";
  for_each_reading([&](const Options& options) {
    for (bool complete : {false, true}) {
      Analysis a = analyze_text(complete ? body + "}\n" : body, "r.hlo", options);
      EXPECT_EQ(a.truncated, !complete);
      EXPECT_EQ(a.instructions, 14);
      ASSERT_EQ(a.collectives.size(), 3u);
      EXPECT_EQ(a.collectives[0].kind, "slice");
      EXPECT_EQ(a.collectives[1].kind, "some-new-op");
      EXPECT_EQ(a.collectives[2].kind, "negate");
    }
  });
}

// The scanning thread also drops each computation's plain `}` line and flags it on the next
// statement it passes on: what follows a close (another computation, text outside
// computations, a stray `}`, the end of the file) must see the computation closed as before.
TEST(HloPrefilter, DroppedClosingBracesCloseTheComputationInOrder) {
  const std::string first =
      "HloModule m, is_scheduled=true\n\n"
      "%f (p: f32[8]) -> f32[8] {\n"
      "  %p = f32[8]{0} parameter(0)\n"
      "  ROOT %n = f32[8]{0} negate(%p)\n"
      "}\n";
  const std::string second =
      "ENTRY %main (a: f32[8]) -> f32[8] {\n"
      "  %a = f32[8]{0} parameter(0)\n"
      "  %s = f32[8]{0} all-gather-start(%a), dimensions={0}\n"
      "  %d = f32[8]{0} all-gather-done(%s)\n"
      "  ROOT %c = f32[8]{0} fusion(%d), kind=kLoop, calls=%f\n"
      "}\n";
  for (const std::string& text :
       {first + second, first + "\n" + second, first + "StackFrames\n" + second,
        first + "}\n" + second, first + "%g (\n" + second, first}) {
    for (int threads : {1, 2}) {
      SCOPED_TRACE(fmt::format("threads {}: {}", threads, text));
      auto analyze = [&](const Options& options) { return analyze_text(text, "c.hlo", options); };
      auto [dropping, keeping] = reports_dropping_and_keeping(threads, analyze);
      EXPECT_EQ(dropping, keeping);
      EXPECT_FALSE(dropping.empty());
    }
  }
}

}  // namespace
}  // namespace rtb::hlo
