// Tests of the HLO overlap analysis (hlo): pairing, windows, compute, bytes, trip counts and bad
// input, on the real and hand-written dumps in testdata/hlo. Expected figures are worked out
// from the fixture text in the comments next to them.
#include "rtb/hlo/analysis.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "fixtures.h"
#include "rtb/base/error.h"
#include "rtb/hlo/report.h"
#include "test_util.h"

namespace rtb::hlo {
namespace {

using fixtures::fixture_path;
using fixtures::line_of;
using fixtures::read_fixture;

const Collective& find_entry(const Analysis& a, const std::string& start_or_done) {
  for (const Collective& c : a.collectives) {
    if (c.start == start_or_done || c.done == start_or_done) return c;
  }
  ADD_FAILURE() << "no entry " << start_or_done;
  static const Collective none;
  return none;
}

const KindTotals* kind_totals(const Analysis& a, const std::string& kind) {
  for (const KindTotals& k : a.by_kind) {
    if (k.kind == kind) return &k;
  }
  return nullptr;
}

// ---- analysis on hand-written fixtures ----------------------------------------------------------

TEST(HloAnalysis, AsyncStartWrappingAllToAllIsNamedByTheWrappedOp) {
  const std::string text = read_fixture("handwritten_async_all_to_all.hlo.txt");
  Analysis a = analyze_file(fixture_path("handwritten_async_all_to_all.hlo.txt"));
  EXPECT_TRUE(a.scheduled);
  EXPECT_FALSE(a.truncated);
  ASSERT_EQ(a.collectives.size(),
            2u);  // the all-to-alls inside the async computations are not extra
  const Collective& first = a.collectives[0];
  EXPECT_EQ(first.kind, "all-to-all");
  EXPECT_EQ(first.category, Category::kCollective);
  EXPECT_EQ(first.wrapper, "async-start");
  EXPECT_EQ(first.start, "a2a-start");
  EXPECT_EQ(first.done, "a2a-done");  // paired through the update
  EXPECT_EQ(first.status, Status::kOverlapped);
  // Between %a2a-start and %a2a-done: %a2a-update and %dot.1; the dot is the only compute.
  EXPECT_EQ(first.window_instructions, 2);
  EXPECT_EQ(first.window_compute, 1);
  EXPECT_THAT(first.compute_sample, ElementsAre("dot.1"));
  EXPECT_EQ(first.bytes, 4 * 1024 * 512 * 2);  // the async-done's bf16[4,1024,512]
  EXPECT_EQ(first.op_name, "jit(step)/moe/all_to_all");
  EXPECT_EQ(first.start_line, line_of(text, "%a2a-start ="));
  EXPECT_EQ(first.done_line, line_of(text, "%a2a-done ="));
  const Collective& second = a.collectives[1];
  EXPECT_EQ(second.status, Status::kExposed);
  EXPECT_EQ(second.window_instructions, 1);  // only %bitcast.1: exposed
  EXPECT_EQ(a.total_collectives.exposed_bytes, 4 * 1024 * 512 * 2);
  EXPECT_EQ(a.total_collectives.overlapped, 1);
}

TEST(HloAnalysis, MultiLineInstructionsAndStringsWithBrackets) {
  const std::string text = read_fixture("handwritten_multiline.hlo.txt");
  Analysis a = analyze_file(fixture_path("handwritten_multiline.hlo.txt"));
  ASSERT_EQ(a.collectives.size(), 2u);
  const Collective& ag = find_entry(a, "ag-start");
  EXPECT_EQ(ag.kind, "all-gather");
  EXPECT_EQ(ag.done, "ag-done");
  EXPECT_EQ(ag.status, Status::kOverlapped);
  EXPECT_EQ(ag.bytes, 32 * 128 * 2);  // the done's bf16[32,128] (the TPU layout adds nothing)
  EXPECT_EQ(ag.op_name, "jit(step)/layer[0]/\"gather\" (x)");
  EXPECT_EQ(ag.start_line, line_of(text, "%ag-start ="));
  const Collective& ar = find_entry(a, "ar");
  EXPECT_FALSE(ar.async);
  EXPECT_EQ(ar.status, Status::kExposed);
  EXPECT_EQ(ar.start_line, line_of(text, "ROOT %ar ="));
  // Counted in the fixture: 3 headers ending in '{', 11 lines starting "%name =" / "ROOT %name =".
  EXPECT_EQ(a.computations, 3);
  EXPECT_EQ(a.instructions, 11);
}

TEST(HloAnalysis, EscapedStringBackendConfigGivesTheTripCount) {
  Analysis a = analyze_file(fixture_path("handwritten_escaped_backend_config.hlo.txt"));
  ASSERT_EQ(a.collectives.size(), 1u);
  const Collective& cp = a.collectives[0];
  EXPECT_EQ(cp.kind, "collective-permute");
  EXPECT_EQ(cp.computation, "body");
  EXPECT_EQ(cp.executions, 6);  // the ENTRY's while: "known_trip_count":{"n":"6"} (escaped)
  EXPECT_TRUE(cp.executions_known);
  EXPECT_EQ(cp.bytes, 2048 * 4);  // f32[2048]
  EXPECT_EQ(cp.op_name, "body/\"permute\"");
  EXPECT_EQ(a.total.exposed_bytes, 6 * 2048 * 4);
}

TEST(HloAnalysis, NestedTupleShapesAndAllDtypes) {
  Analysis a = analyze_file(fixture_path("handwritten_nested_tuples.hlo.txt"));
  const Collective& combined = find_entry(a, "combined-start");
  // The done's tuple (bf16[64,16], (f8e4m3fn[64,16], f8e5m2[64,16])): 2 + 1 + 1 bytes per element.
  EXPECT_EQ(combined.bytes, 64 * 16 * 2 + 64 * 16 + 64 * 16);
  EXPECT_EQ(combined.status, Status::kOverlapped);
  const Collective& ar = find_entry(a, "ar-start");
  // s4[16,16] = 256 x 4 bits = 128 B, u4[3] = 12 bits -> 2 B, pred[16] = 16 B, c64[4] = 32 B,
  // f32[] = 4 B.
  EXPECT_EQ(ar.bytes, 128 + 2 + 16 + 32 + 4);
  EXPECT_EQ(ar.status, Status::kExposed);
  const Collective& dynamic = find_entry(a, "ag-dynamic");
  EXPECT_EQ(dynamic.bytes, 32 * 4 * 4);  // f32[<=32,4] counts its bound 32
}

TEST(HloAnalysis, WhileLoopsWeightByKnownTripCountsAndResolveCompute) {
  Analysis a = analyze_file(fixture_path("handwritten_while_trip_counts.hlo.txt"));
  ASSERT_EQ(a.collectives.size(), 6u);
  // The window holds a while whose body holds a while whose body holds a fusion.
  const Collective& ag = find_entry(a, "ag-start");
  EXPECT_EQ(ag.status, Status::kOverlapped);
  EXPECT_THAT(ag.compute_sample, ElementsAre("outer"));
  // A call whose computation has no compute does not hide anything.
  EXPECT_EQ(find_entry(a, "ar-start").status, Status::kExposed);
  // A conditional with a dot in one branch is compute.
  EXPECT_EQ(find_entry(a, "cp-start").status, Status::kOverlapped);
  // Loop bodies: 4 and 4 x 8 executions; a while without known_trip_count is a lower bound.
  const Collective& body_cp = find_entry(a, "body-cp-start");
  EXPECT_EQ(body_cp.executions, 4);
  EXPECT_TRUE(body_cp.executions_known);
  const Collective& inner = find_entry(a, "inner-ar");
  EXPECT_EQ(inner.executions, 32);
  EXPECT_EQ(inner.computation, "inner_body");
  const Collective& rs = find_entry(a, "rs");
  EXPECT_EQ(rs.executions, 1);
  EXPECT_FALSE(rs.executions_known);
  const KindTotals* all_reduce = kind_totals(a, "all-reduce");
  ASSERT_NE(all_reduce, nullptr);
  EXPECT_EQ(all_reduce->totals.instances, 2);
  // %ar-start in main (1 run) + %inner-ar in inner_body (4 x 8 = 32 runs), f32[1024] = 4096 B.
  EXPECT_EQ(all_reduce->totals.executions, 33);
  EXPECT_EQ(all_reduce->totals.exposed_bytes, 33 * 4096);
  EXPECT_EQ(a.total.executions_unknown, 1);
}

TEST(HloAnalysis, SendRecvAndCopyPairs) {
  Analysis a = analyze_file(fixture_path("handwritten_send_recv_copy.hlo.txt"));
  ASSERT_EQ(a.collectives.size(), 4u);
  const Collective& recv = find_entry(a, "recv");
  EXPECT_EQ(recv.kind, "recv");
  EXPECT_EQ(recv.done, "recv-done");
  EXPECT_EQ(recv.bytes, 512 * 512 * 4);  // f32[512,512] of recv-done's (data, token)
  EXPECT_EQ(recv.status, Status::kOverlapped);
  const Collective& send = find_entry(a, "send");
  EXPECT_EQ(send.bytes, 512 * 512 * 4);  // from the send: its done is a token
  EXPECT_EQ(send.status, Status::kOverlapped);
  const Collective& copy = find_entry(a, "copy-start");
  EXPECT_EQ(copy.kind, "copy");
  EXPECT_EQ(copy.category, Category::kCopy);
  EXPECT_EQ(copy.status, Status::kOverlapped);
  EXPECT_EQ(find_entry(a, "copy-start.1").status, Status::kExposed);
  // Copies are not collectives in the collective totals.
  EXPECT_EQ(a.total_collectives.instances, 2);
  EXPECT_EQ(a.total.instances, 4);
}

TEST(HloAnalysis, UnpairedStartsAndDonesAreReportedNotFatal) {
  Analysis a = analyze_file(fixture_path("handwritten_unpaired.hlo.txt"));
  ASSERT_EQ(a.collectives.size(), 4u);
  const Collective& done = find_entry(a, "cp-done");
  EXPECT_EQ(done.status, Status::kUnpairedDone);
  EXPECT_EQ(done.start, "");
  EXPECT_EQ(done.kind, "collective-permute");
  EXPECT_EQ(done.executions, 3);  // %body runs known_trip_count 3 times
  const Collective& start = find_entry(a, "cp-start.next");
  EXPECT_EQ(start.status, Status::kUnpairedStart);
  EXPECT_EQ(start.bytes, 256);  // no done: element 1 of the start's tuple, f32[64]
  EXPECT_FALSE(start.in_truncated_computation);
  EXPECT_EQ(find_entry(a, "ag-start").status, Status::kExposed);
  EXPECT_EQ(find_entry(a, "ag-done.again").status, Status::kUnpairedDone);
  EXPECT_EQ(a.total.unpaired, 3);
  EXPECT_EQ(a.total.instances, 4);
  EXPECT_EQ(a.total.executions, 1);  // unpaired entries are not counted as executions
}

TEST(HloAnalysis, ResultsDoNotDependOnReadOrBlockSizes) {
  const std::string text = read_fixture("handwritten_while_trip_counts.hlo.txt");
  Analysis reference = analyze_text(text, "x");
  Options options;
  options.block_bytes = 64;
  for (std::size_t max_read : {1, 13, 64, 4096}) {
    Analysis a = analyze_text(text, "x", options, max_read);
    ASSERT_EQ(a.collectives.size(), reference.collectives.size());
    for (std::size_t i = 0; i < a.collectives.size(); ++i) {
      EXPECT_EQ(a.collectives[i].start, reference.collectives[i].start);
      EXPECT_EQ(a.collectives[i].status, reference.collectives[i].status);
      EXPECT_EQ(a.collectives[i].executions, reference.collectives[i].executions);
      EXPECT_EQ(a.collectives[i].start_line, reference.collectives[i].start_line);
    }
  }
}

TEST(HloAnalysis, CrLfLineEndsAreAccepted) {
  std::string text = read_fixture("handwritten_async_all_to_all.hlo.txt");
  std::string crlf;
  for (char c : text) {
    if (c == '\n') crlf += '\r';
    crlf += c;
  }
  Analysis a = analyze_text(crlf, "crlf");
  ASSERT_EQ(a.collectives.size(), 2u);
  EXPECT_EQ(a.collectives[0].status, Status::kOverlapped);
}

TEST(HloAnalysis, ComputationRegexFiltersTheReport) {
  Options options;
  options.computation_regex = "body$";
  Analysis a = analyze_file(fixture_path("handwritten_while_trip_counts.hlo.txt"), options);
  std::vector<std::string> computations;
  for (const Collective& c : a.collectives) computations.push_back(c.computation);
  EXPECT_THAT(computations, ElementsAre("outer_body", "inner_body", "unknown_body"));
  // Executions still come from the whole call graph.
  EXPECT_EQ(find_entry(a, "inner-ar").executions, 32);
  options.computation_regex = "([";
  EXPECT_THROW(analyze_file(fixture_path("handwritten_while_trip_counts.hlo.txt"), options), Error);
}

// ---- analysis on real dumps ---------------------------------------------------------------------

TEST(HloAnalysis, RealMaxTextDumpCutAt2000LinesIsTruncated) {
  const std::string name = "maxtext_ref_llama3_8b_tpu-v6e-4_8fcc9e13.hlo.txt";
  const std::string text = read_fixture(name);
  Analysis a = analyze_file(fixture_path(name));
  EXPECT_EQ(a.module, "jit_train_step");
  EXPECT_TRUE(a.scheduled);
  EXPECT_TRUE(a.truncated);
  EXPECT_EQ(a.truncated_line, 2000);
  EXPECT_THAT(a.truncation_reason, HasSubstr("ends inside computation"));
  EXPECT_EQ(a.lines, 2000);
  // Every instruction line starts "  %name = "; the Pallas custom-calls continue over two more
  // lines (frontend_attributes={kernel_metadata={\n"xprof_metadata":...\n}}, metadata=...),
  // one of which starts with "}}" and must not close the computation.
  EXPECT_THAT(text, HasSubstr("\n}}, metadata={op_name="));
  std::int64_t instruction_lines = 0;
  for (const char* start : {"\n  %", "\n  ROOT %"}) {
    for (std::size_t at = text.find(start); at != std::string::npos;
         at = text.find(start, at + 1)) {
      ++instruction_lines;
    }
  }
  EXPECT_EQ(instruction_lines, 1459);
  EXPECT_EQ(a.instructions, instruction_lines);
  const KindTotals* all_gather = kind_totals(a, "all-gather");
  ASSERT_NE(all_gather, nullptr);
  EXPECT_EQ(all_gather->totals.instances, 7);  // synchronous, mesh-style replica groups
  EXPECT_EQ(all_gather->totals.exposed, 7);
  const KindTotals* copy = kind_totals(a, "copy");
  ASSERT_NE(copy, nullptr);
  EXPECT_EQ(copy->totals.instances, 6);
  const KindTotals* slice = kind_totals(a, "slice");  // async-start wrapping slices
  ASSERT_NE(slice, nullptr);
  EXPECT_EQ(slice->totals.instances, 8);
  EXPECT_EQ(slice->category, Category::kOther);
  const Collective& ag = find_entry(a, "all-gather.97");
  EXPECT_EQ(ag.start_line, line_of(text, "%all-gather.97 ="));
  EXPECT_EQ(ag.bytes, 1 * 32 * 128 * 4096 * 2);
  EXPECT_EQ(ag.op_name, "jit(train_step)/jvp()/while/body/closed_call/dot_general");
  const Collective& slice_pair = find_entry(a, "slice-start.24");
  EXPECT_EQ(slice_pair.done, "slice-done.24");
  EXPECT_EQ(slice_pair.bytes, 4194304);  // s8[4194304]
}

TEST(HloAnalysis, RealDumpCutBetweenAsyncStartAndDone) {
  Analysis a = analyze_file(fixture_path("maxtext_ref_deepseek3_tpu-v6e-4_8fcc9e13.hlo.txt"));
  EXPECT_TRUE(a.truncated);
  std::vector<const Collective*> unpaired;
  for (const Collective& c : a.collectives) {
    if (!c.paired_or_sync()) unpaired.push_back(&c);
  }
  ASSERT_EQ(unpaired.size(), 1u);
  EXPECT_EQ(unpaired[0]->status, Status::kUnpairedStart);
  EXPECT_TRUE(unpaired[0]->in_truncated_computation);
  EXPECT_EQ(unpaired[0]->start_line, 2000);
  EXPECT_EQ(kind_totals(a, "all-gather")->totals.instances, 10);
}

TEST(HloAnalysis, RealSparseCoreDumpWithExecutionThreads) {
  Analysis a =
      analyze_file(fixture_path("maxtext_ref_deepseek3_tpu-v6e-4_28b37f85_sparsecore.hlo.txt"));
  const KindTotals* all_reduce = kind_totals(a, "all-reduce");
  ASSERT_NE(all_reduce, nullptr);
  EXPECT_EQ(all_reduce->totals.instances, 5);  // brace replica_groups, frontend_attributes
  const Collective& ar = find_entry(a, "all-reduce.141");
  EXPECT_EQ(ar.bytes, 512LL * 129280 * 2);
  // 15 async-start/async-done on the sparsecore thread, all paired.
  std::int64_t async_pairs = 0;
  for (const Collective& c : a.collectives) {
    if (c.async) {
      ++async_pairs;
      EXPECT_EQ(c.wrapper, "async-start");
      EXPECT_FALSE(c.done.empty());
    }
  }
  EXPECT_EQ(async_pairs, 15);
}

TEST(HloAnalysis, RealXlaTestsOfAsyncForms) {
  struct Case {
    std::string test;  // testdata/hlo/<test>.hlo.txt
    std::string kind;
    std::size_t entries;
    std::int64_t overlapped;
  };
  const std::vector<Case> cases = {
      {"latency_hiding_scheduler__AllGatherAsyncBalance", "all-gather", 2, 0},
      {"latency_hiding_scheduler__AllReduceAsyncBalance", "all-reduce", 2, 0},
      {"latency_hiding_scheduler__AllToAllAsyncBalance", "all-to-all", 2, 0},
      {"latency_hiding_scheduler__RaggedAllToAll", "ragged-all-to-all", 1, 0},
      {"latency_hiding_scheduler__WhileWithCompleteResourceList", "collective-permute", 3, 1},
      {"latency_hiding_scheduler__BalanceChainedCollectivePermutesLoopedEinsum",
       "collective-permute", 4, 0},
      {"command_buffer_scheduling__ReduceScatterStartFollowedByDone", "reduce-scatter", 1, 0},
      {"command_buffer_scheduling__DoNotCaptureUnmatchedAsyncDone", "all-reduce", 2, 1},
      {"hlo_parser__CombinedCollectivePermuteStartAndDone", "collective-permute", 1, 0},
      {"hlo_parser__CollectivePermuteStartAndDoneInplaceUpdate", "collective-permute", 1, 0},
      {"memory_space_assignment__TupleInPlaceAsyncCollectivePermuteRoot", "collective-permute", 1,
       0},
      {"hlo_parser__AsyncOpsWithSyntaxSugarAndThreadName", "custom-call", 1, 0},
      {"hlo_parser__CopyStartAndCopyDone", "copy", 2, 0},
      {"nvptx_compiler__RemovesUnnecessaryCopyInPostSchedulingPipelines", "all-gather", 1, 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.test);
    Analysis a = analyze_file(fixture_path(c.test + ".hlo.txt"));
    EXPECT_FALSE(a.truncated);
    EXPECT_EQ(a.collectives.size(), c.entries);
    ASSERT_EQ(a.by_kind.size(), 1u);
    EXPECT_EQ(a.by_kind[0].kind, c.kind);
    EXPECT_EQ(a.total.overlapped, c.overlapped);
    EXPECT_EQ(a.total.unpaired, 0);
  }
}

TEST(HloAnalysis, RealXlaTestsOfSyncAndUnscheduledForms) {
  struct Case {
    std::string file;
    std::vector<std::string> kinds;  // in file order
    std::int64_t executions;         // total, weighted
    std::int64_t overlapped;
    bool scheduled;
  };
  const std::vector<Case> cases = {
      {"all_reduce_normalizer__Simple.hlo.txt", {"all-reduce"}, 1, 0, false},
      // known_trip_count in a backend_config spread over two lines
      {"collective_pipelining_analyzer__ReduceScatterWithExpensiveOpsToDUSIsNotTriviallyPipelined"
       ".hlo.txt",
       {"reduce-scatter"},
       10,
       0,
       false},
      {"fusion_emitter_device_legacy__SplitKNontrivialBitcast.hlo.txt", {}, 0, 0, true},
      {"hlo_parser__AllReduceStartAndDone.hlo.txt", {"all-reduce"}, 1, 0, false},
      {"hlo_parser__CollectivePermuteStartAndDone.hlo.txt", {"collective-permute"}, 1, 0, false},
      {"hlo_parser__SendRecv.hlo.txt", {"recv", "send"}, 2, 0, false},
      {"latency_hiding_scheduler__ResourceLimitWithinAnnotationGroup.hlo.txt",
       {"collective-permute", "all-gather", "all-gather"},
       3,
       2,
       true},
      {"latency_hiding_scheduler__ScheduleLoopPeeledSendDoneBeforeWhile.hlo.txt",
       {"send", "recv"},
       2,
       0,
       true},
      {"while_loop_unroller__LoopWithCollective2.hlo.txt",
       {"collective-permute", "collective-permute", "collective-permute", "collective-permute"},
       4,
       0,
       false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.file);
    Analysis a = analyze_file(fixture_path(c.file));
    EXPECT_EQ(a.scheduled, c.scheduled);
    std::vector<std::string> kinds;
    for (const Collective& entry : a.collectives) kinds.push_back(entry.kind);
    EXPECT_EQ(kinds, c.kinds);
    EXPECT_EQ(a.total.executions, c.executions);
    EXPECT_EQ(a.total.overlapped, c.overlapped);
  }
}

// Any number of scanning threads and any cut of the dump into pieces give the report of one
// thread: pieces of 1 byte (one computation each), 300 bytes and the automatic size.
TEST(HloAnalysis, ThreadsAndPiecesGiveTheSameReport) {
  const std::vector<std::string> paths = fixtures::all_fixture_paths();
  auto report = [](const std::string& path, int threads, std::size_t piece_bytes,
                   bool keep_schedule) {
    Options options;
    options.threads = threads;
    options.piece_bytes = piece_bytes;
    options.keep_schedule = keep_schedule;
    try {
      Analysis a = analyze_file(path, options);
      std::string text = format_json(a);
      if (a.schedule) text += render_svg(a);
      return text;
    } catch (const Error& e) {
      return std::string("error: ") + e.what();
    }
  };
  for (const std::string& path : paths) {
    for (bool keep_schedule : {false, true}) {
      std::string single = report(path, 1, 0, keep_schedule);
      for (int threads : {2, 3}) {
        for (std::size_t piece_bytes : {std::size_t{1}, std::size_t{300}, std::size_t{0}}) {
          SCOPED_TRACE(fmt::format("{} threads {} pieces {} keep_schedule {}", path, threads,
                                   piece_bytes, keep_schedule));
          EXPECT_EQ(report(path, threads, piece_bytes, keep_schedule), single);
        }
      }
    }
  }
}

TEST(HloAnalysis, InvariantsHoldOnEveryFixture) {
  for (const auto& entry :
       std::filesystem::directory_iterator(std::string(RTB_TESTDATA_DIR) + "/hlo")) {
    if (!entry.is_regular_file()) continue;
    SCOPED_TRACE(entry.path().string());
    Options options;
    options.keep_schedule = true;
    Analysis a = analyze_file(entry.path().string(), options);
    Totals sum;
    for (const Collective& c : a.collectives) {
      sum.add(c);
      EXPECT_FALSE(c.kind.empty());
      EXPECT_FALSE(c.computation.empty());
      EXPECT_GE(c.bytes, 0);
      EXPECT_GE(c.executions, 0);
      EXPECT_LE(c.window_compute, c.window_instructions);
      if (c.paired_or_sync() && c.async) {
        EXPECT_FALSE(c.start.empty());
        EXPECT_FALSE(c.done.empty());
        EXPECT_LT(c.start_line, c.done_line);
        EXPECT_EQ(c.status == Status::kOverlapped, c.window_compute > 0);
      }
      if (!c.async) {
        EXPECT_EQ(c.status, Status::kExposed);
      }
    }
    EXPECT_EQ(sum.instances, a.total.instances);
    EXPECT_EQ(sum.exposed_bytes, a.total.exposed_bytes);
    EXPECT_EQ(a.total.overlapped + a.total.exposed, a.total.executions);
    EXPECT_NO_THROW(YAML::Load(format_json(a)));
    EXPECT_FALSE(format_text(a).empty());
    if (a.schedule) {
      EXPECT_NO_THROW(render_svg(a));
    }
  }
}

TEST(HloAnalysis, RealXlaTestAsyncSendRecvGroup) {
  Analysis a =
      analyze_file(fixture_path("hlo_verifier__VerifyAsyncComputationPartiallyPipelined.hlo.txt"));
  const Collective& group = find_entry(a, "async-comp-start");
  EXPECT_EQ(group.kind, "send+recv");
  EXPECT_EQ(group.category, Category::kCollective);
  EXPECT_EQ(group.done, "async-comp-done");
  // The sends and recvs inside the wrapped computation are not reported again.
  EXPECT_EQ(a.collectives.size(), 3u);
}

TEST(HloAnalysis, UnscheduledModuleIsFlagged) {
  Analysis a = analyze_file(fixture_path("xla_bench_hlo_llama31_405b_bf16_16x8.hlo.txt"));
  EXPECT_FALSE(a.scheduled);
  ASSERT_FALSE(a.diagnostics.empty());
  EXPECT_EQ(a.diagnostics[0].severity, Severity::kNote);
  EXPECT_THAT(a.diagnostics[0].where, StartsWith(a.file));
  EXPECT_THAT(a.diagnostics[0].message, HasSubstr("not scheduled"));
  EXPECT_EQ(kind_totals(a, "all-gather")->totals.instances, 16);
  EXPECT_EQ(kind_totals(a, "all-reduce")->totals.instances, 50);
  EXPECT_FALSE(a.truncated);
}

// ---- bad input ----------------------------------------------------------------------------------

std::string analysis_error_of(const std::string& name) {
  return test::error_of([&] { analyze_file(fixture_path("bad/" + name)); }).what();
}

TEST(HloBadInput, NothingUsableIsAnErrorWithFileAndLine) {
  EXPECT_THAT(analysis_error_of("not_hlo.txt"), HasSubstr("not_hlo.txt:1: not an HLO module"));
  EXPECT_THAT(analysis_error_of("binary.bin"), HasSubstr("binary.bin:1: not an HLO module"));
  EXPECT_THAT(analysis_error_of("empty.hlo.txt"), HasSubstr("empty input"));
  EXPECT_THAT(analysis_error_of("header_only.hlo.txt"), HasSubstr("no computation"));
  EXPECT_THAT(analysis_error_of("garbage_instruction.hlo.txt"),
              HasSubstr("garbage_instruction.hlo.txt:5: expected an instruction"));
  EXPECT_THAT(analysis_error_of("missing.hlo.txt"), HasSubstr("cannot open"));
}

TEST(HloBadInput, ProblemsAfterCompleteComputationsTruncateTheReport) {
  Analysis nul = analyze_file(fixture_path("bad/nul_inside.hlo.txt"));
  EXPECT_TRUE(nul.truncated);
  EXPECT_EQ(nul.truncated_line, 17);
  EXPECT_THAT(nul.truncation_reason, HasSubstr("NUL"));
  EXPECT_EQ(nul.collectives.size(), 2u);  // from the complete ENTRY

  Analysis brace = analyze_file(fixture_path("bad/stray_brace.hlo.txt"));
  EXPECT_TRUE(brace.truncated);
  EXPECT_EQ(brace.truncated_line, 8);

  Analysis cut = analyze_file(fixture_path("bad/truncated_mid_instruction.hlo.txt"));
  EXPECT_TRUE(cut.truncated);
  EXPECT_THAT(cut.truncation_reason, HasSubstr("ends inside computation main"));
  ASSERT_EQ(cut.collectives.size(), 1u);
  EXPECT_EQ(cut.collectives[0].status, Status::kUnpairedStart);
  EXPECT_TRUE(cut.collectives[0].in_truncated_computation);
}

TEST(HloBadInput, HugeSingleLineFailsFastWithBoundedMemory) {
  // 50 MB on one line: stops at the statement limit (16 MiB by default) with the line number.
  std::string text =
      "HloModule huge, is_scheduled=true\n\nENTRY %e {\n  %x = f32[] constant(0)\n}\n";
  text += "%later {\n  %y = f32[] parameter(0), note=\"";
  text.append(50u << 20, 'x');
  Analysis a = analyze_text(text, "huge");
  EXPECT_TRUE(a.truncated);
  EXPECT_EQ(a.truncated_line, 7);
  EXPECT_THAT(a.truncation_reason, HasSubstr("longer than 16 MiB"));
  EXPECT_THROW(analyze_text(std::string(50u << 20, 'a'), "a"), Error);
}

TEST(HloAnalysis, StatusAndCategoryNames) {
  test::expect_cases<std::string_view, Status>(status_name,
                                               {{Status::kOverlapped, "overlapped"},
                                                {Status::kExposed, "exposed"},
                                                {Status::kUnpairedStart, "unpaired-start"},
                                                {Status::kUnpairedDone, "unpaired-done"}});
  test::expect_cases<std::string_view, Category>(category_name,
                                                 {{Category::kCollective, "collective"},
                                                  {Category::kCopy, "copy"},
                                                  {Category::kOther, "other"}});
}

}  // namespace
}  // namespace rtb::hlo
