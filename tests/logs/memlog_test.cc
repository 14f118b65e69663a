#include "rtb/logs/memlog.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>

#include "rtb/base/error.h"
#include "rtb/base/io.h"
#include "test_util.h"

namespace rtb::logs {
namespace {

constexpr long long kGiB = 1LL << 30;

std::vector<std::string> names(const MemLog& log) {
  std::vector<std::string> out;
  for (const ProgramMemory& p : log.programs) out.push_back(p.name);
  return out;
}

// A reading in one line, "kind: program names", with "; problems: ..." only when it has some,
// so that one comparison checks that a log reads cleanly, as what, and with which programs.
std::string outline(const MemLog& log) {
  std::string out = fmt::format("{}: {}", memlog_kind_id(log.kind), fmt::join(names(log), " "));
  if (!log.problems().empty())
    out += fmt::format("; problems: {}", fmt::join(log.problems(), " | "));
  return out;
}

std::string stats5(long long gen, long long arg, long long out, long long alias, long long temp) {
  return fmt::format(
      "CompiledMemoryStats(generated_code_size_in_bytes={}, argument_size_in_bytes={}, "
      "output_size_in_bytes={}, alias_size_in_bytes={}, temp_size_in_bytes={})",
      gen, arg, out, alias, temp);
}

TEST(MemLog, EngineCompileWithHostFieldsReportTableAndPeak) {
  MemLog log = read_memlog(testdata("memlog_engine_compile_a.log"));
  ASSERT_EQ(outline(log), "engine_compile: fwd_bwd fwd_bwd_accum update");
  const ProgramMemory& fwd = log.programs[0];
  EXPECT_EQ(fwd.line, 11u);
  EXPECT_EQ(fwd.generated_code, 52428800);
  EXPECT_EQ(fwd.argument, 25 * kGiB);
  EXPECT_EQ(fwd.output, 4 * kGiB);
  EXPECT_EQ(fwd.alias, 0);
  EXPECT_EQ(fwd.temp, 55 * kGiB);
  EXPECT_EQ(fwd.host_temp, 2 * kGiB);
  EXPECT_EQ(fwd.host_argument, 0);
  EXPECT_EQ(fwd.resident, 84 * kGiB);
  // +state from MaxText's table: the optimizer state fwd_bwd is not passed.
  EXPECT_EQ(fwd.state, static_cast<long long>(8.75 * kGiB));
  EXPECT_EQ(fwd.need(), static_cast<long long>(92.75 * kGiB));
  ASSERT_TRUE(fwd.cost.has_value());
  EXPECT_DOUBLE_EQ(*fwd.cost->flops, 2.125e16);
  EXPECT_DOUBLE_EQ(*fwd.cost->bytes_accessed, 4.4e12);
  EXPECT_DOUBLE_EQ(*fwd.cost->transcendentals, 1.3e10);
  EXPECT_DOUBLE_EQ(*fwd.cost->optimal_seconds, -1.0);
  const ProgramMemory& update = log.programs[2];
  EXPECT_EQ(update.resident, (40 + 36 - 36 + 2) * kGiB);
  EXPECT_EQ(update.state, 0);
  EXPECT_EQ(log.device_peak, static_cast<long long>(92.75 * kGiB));
  EXPECT_EQ(log.compile_topology, "tpu7x-256");
  ASSERT_EQ(log.notes().size(), 1u);
  EXPECT_THAT(log.notes()[0], HasSubstr("WEIGHT-SYNC STAGING"));
  // The note is a Diagnostic placed at its line; no problems.
  ASSERT_EQ(log.diagnostics.size(), 1u);
  EXPECT_EQ(log.diagnostics[0].severity, Severity::kNote);
  EXPECT_EQ(log.diagnostics[0].where, testdata("memlog_engine_compile_a.log") + ":28");
  EXPECT_TRUE(log.problems().empty());
  EXPECT_EQ(log.oom_lines, 0u);
}

TEST(MemLog, OlderEngineCompileFiveFieldsAndListCost) {
  MemLog log = read_memlog(testdata("memlog_engine_compile_5field.log"));
  ASSERT_EQ(outline(log), "engine_compile: fwd_bwd accumulate update");
  EXPECT_FALSE(log.programs[0].host_temp.has_value());
  EXPECT_FALSE(log.programs[0].state.has_value());
  EXPECT_EQ(log.programs[0].resident, 16 * kGiB);
  EXPECT_DOUBLE_EQ(*log.programs[0].cost->flops, 3.0e13);
  EXPECT_EQ(log.programs[1].resident, 2 * kGiB);
  EXPECT_EQ(log.compile_topology, "v5p-64");
}

TEST(MemLog, TrainCompileHasOneUnnamedProgram) {
  MemLog log = read_memlog(testdata("memlog_train_compile.log"));
  ASSERT_EQ(outline(log), "train_compile: train_step");
  EXPECT_EQ(log.programs[0].resident, 16 * kGiB);
  EXPECT_DOUBLE_EQ(*log.programs[0].cost->flops, 4.21e13);
}

TEST(MemLog, RealLiveRunExcerpts) {
  // MaxText's docs (2026-07-20): the newer "Total estimated memory size" line.
  MemLog newer = read_memlog(testdata("memlog_maxtext_docs_excerpts_5f0dabb4.log"));
  ASSERT_EQ(outline(newer), "live_run: train_step");
  const ProgramMemory& p = newer.programs[0];
  EXPECT_EQ(p.source, ProgramSource::kEstimatedTotal);
  EXPECT_EQ(p.line, 29u);
  EXPECT_EQ(p.resident, std::llround(100.4 * kGiB));
  EXPECT_EQ(p.output, std::llround(44.5 * kGiB));
  EXPECT_EQ(p.temp, std::llround(55.9 * kGiB));
  EXPECT_EQ(p.argument, std::llround(44.5 * kGiB));
  EXPECT_EQ(p.host_temp, 0);
  // 44.5 + 55.9 + 44.5 - 100.4: the donated state counted twice.
  EXPECT_NEAR(static_cast<double>(*p.alias) / kGiB, 44.5, 1e-6);
  EXPECT_FALSE(p.generated_code.has_value());
  // The older "Total memory size" line of the same document.
  MemLog older = read_memlog(testdata("memlog_maxtext_docs_excerpts_5505348a.log"));
  ASSERT_EQ(outline(older), "live_run: train_step");
  EXPECT_EQ(older.programs[0].resident, std::llround(100.4 * kGiB));
  MemLog pr = read_memlog(testdata("memlog_maxtext_pr1904_e2e_train.log"));
  ASSERT_THAT(names(pr), ElementsAre("train_step"));
  EXPECT_EQ(pr.programs[0].temp, std::llround(10.6 * kGiB));
  // A bare print(memory_analysis()) from a JAX issue (GPU, jax 0.4.20).
  MemLog bare = read_memlog(testdata("memlog_jax_issue18954_memory_analysis.log"));
  ASSERT_EQ(outline(bare), "train_compile: train_step");  // an unnamed stats line
  EXPECT_EQ(bare.programs[0].generated_code, 2856);
  EXPECT_EQ(bare.programs[0].resident, 0);
}

TEST(MemLog, TpuProgramUsageLinesKeepTheLargest) {
  MemLog log = read_memlog(testdata("memlog_live_tpu_usage.log"));
  ASSERT_EQ(outline(log), "live_run: tpu_programs");
  const ProgramMemory& p = log.programs[0];
  EXPECT_EQ(p.count, 3u);
  EXPECT_EQ(p.line, 4u);
  EXPECT_EQ(p.resident, std::llround(71.94 * kGiB));
  EXPECT_EQ(p.capacity, std::llround(94.74 * kGiB));
  EXPECT_EQ(log.capacity, std::llround(94.74 * kGiB));
  EXPECT_FALSE(log.compile_topology.has_value()) << "an empty Config param value is no topology";
}

TEST(MemLog, OutOfMemoryReportsInEveryShape) {
  MemLog hlo = read_memlog(testdata("memlog_oom_engine_hlo_temporaries.log"));
  ASSERT_EQ(hlo.ooms.size(), 1u);
  EXPECT_EQ(hlo.ooms[0].line, 6u);
  EXPECT_EQ(hlo.ooms[0].memory_space, "hbm");
  EXPECT_EQ(hlo.ooms[0].required, std::llround(100.13 * kGiB));
  EXPECT_EQ(hlo.ooms[0].available, std::llround(94.74 * kGiB));
  EXPECT_EQ(hlo.capacity, std::llround(94.74 * kGiB));
  EXPECT_FALSE(hlo.has_analysis());
  EXPECT_EQ(hlo.kind, MemLogKind::kEngineCompile) << "from its start line";

  MemLog used = read_memlog(testdata("memlog_oom_train_compile_used_of.log"));
  ASSERT_EQ(used.ooms.size(), 1u) << "the 'Total hbm usage' breakdown is not another report";
  EXPECT_EQ(used.ooms[0].memory_space, "hbm");
  EXPECT_EQ(used.ooms[0].required, std::llround(21.95 * kGiB));
  EXPECT_EQ(used.ooms[0].available, std::llround(15.48 * kGiB));

  MemLog runtime = read_memlog(testdata("memlog_oom_runtime_allocate.log"));
  ASSERT_EQ(runtime.ooms.size(), 1u);
  EXPECT_EQ(runtime.ooms[0].kind, OomKind::kAllocate);
  EXPECT_EQ(runtime.ooms[0].required, 64 * kGiB);
  // "There are 10.51G free" is what was free, not what the device holds (issue 16).
  EXPECT_EQ(runtime.ooms[0].free, std::llround(10.51 * kGiB));
  EXPECT_FALSE(runtime.ooms[0].available.has_value());
  EXPECT_TRUE(runtime.has_analysis());

  MemLog vmem = parse_memlog(
      "RuntimeError: Bad StatusOr access: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran "
      "out of memory in memory space vmem. Used 32.42M of 16.00M vmem. Exceeded vmem capacity by "
      "16.42M\n",
      "vmem.log");
  ASSERT_EQ(vmem.ooms.size(), 1u);
  EXPECT_EQ(vmem.ooms[0].memory_space, "vmem");
  EXPECT_EQ(vmem.ooms[0].required, std::llround(32.42 * 1024 * 1024));
  EXPECT_FALSE(vmem.capacity.has_value()) << "a VMEM size is not the HBM capacity";
}

// Issue 16: "Attempting to allocate 125.25M. ... There are 44.87M free." is an allocation that
// failed with that much free; the free memory is not the HBM per device, and both sizes keep MiB.
TEST(MemLog, RuntimeAllocationFailureKeepsItsUnitsAndIsNoCapacity) {
  MemLog log = read_memlog(testdata("memlog_oom_runtime_allocate_mib.log"));
  ASSERT_EQ(log.ooms.size(), 1u);
  const OomReport& oom = log.ooms[0];
  EXPECT_EQ(oom.line, 4u);
  EXPECT_EQ(oom.kind, OomKind::kAllocate);
  EXPECT_EQ(oom.memory_space, "hbm") << "from (0x0x0_HBM0)";
  ASSERT_TRUE(oom.required && oom.free);
  EXPECT_EQ(oom.required->bytes, std::llround(125.25 * 1024 * 1024));
  EXPECT_EQ(oom.required->unit, 2);
  EXPECT_EQ(oom.free->bytes, std::llround(44.87 * 1024 * 1024));
  EXPECT_EQ(format_logged_size(*oom.required), "125.25 MiB");
  EXPECT_EQ(format_logged_size(*oom.free), "44.87 MiB");
  EXPECT_FALSE(oom.available.has_value());
  EXPECT_FALSE(log.capacity.has_value()) << "free memory is not the HBM per device";

  MemLog wrapped = read_memlog(testdata("memlog_oom_runtime_allocate_wrapped.log"));
  ASSERT_EQ(wrapped.ooms.size(), 1u);
  EXPECT_EQ(wrapped.oom_lines, 1u) << "the continuation line is the same report";
  EXPECT_EQ(wrapped.ooms[0].required, std::llround(125.25 * 1024 * 1024));
  EXPECT_EQ(wrapped.ooms[0].free, std::llround(44.87 * 1024 * 1024));
  EXPECT_EQ(wrapped.ooms[0].memory_space, "hbm");
  EXPECT_THAT(wrapped.ooms[0].text, HasSubstr("possible. There are 44.87M free."));
}

// Issue 16: a program-load reservation failure inside an ANSI-coloured IPython traceback (the
// sizes themselves wrapped in bold) gave no figures.
TEST(MemLog, ReserveFailureInsideAColouredTraceback) {
  MemLog log = read_memlog(testdata("memlog_oom_runtime_reserve_ansi_traceback.log"));
  ASSERT_EQ(log.ooms.size(), 1u);
  const OomReport& oom = log.ooms[0];
  EXPECT_EQ(oom.line, 5u);
  EXPECT_EQ(oom.kind, OomKind::kReserve);
  EXPECT_EQ(oom.required, std::llround(14.96 * kGiB));
  EXPECT_EQ(oom.free, std::llround(1.33 * kGiB));
  EXPECT_EQ(oom.reserved, 0);
  ASSERT_TRUE(oom.reserved.has_value());
  EXPECT_EQ(oom.reservable, std::llround(1.33 * kGiB));
  EXPECT_EQ(oom.text.find('\x1b'), std::string::npos) << oom.text;
  EXPECT_THAT(oom.text, HasSubstr("XlaRuntimeError: RESOURCE_EXHAUSTED: Attempting to reserve"));
  EXPECT_FALSE(log.capacity.has_value());
}

TEST(MemLog, WrappedE0101ReserveFailureWithMixedUnits) {
  MemLog log = read_memlog(testdata("memlog_oom_runtime_reserve_e0101_wrapped.log"));
  ASSERT_EQ(log.ooms.size(), 1u);
  EXPECT_EQ(log.oom_lines, 1u);
  const OomReport& oom = log.ooms[0];
  EXPECT_EQ(oom.line, 2u);
  EXPECT_EQ(oom.kind, OomKind::kReserve);
  ASSERT_TRUE(oom.required && oom.free && oom.reserved && oom.reservable);
  EXPECT_EQ(format_logged_size(*oom.required), "29.49 GiB");
  EXPECT_EQ(format_logged_size(*oom.free), "147.64 MiB");
  EXPECT_EQ(format_logged_size(*oom.reserved), "0 B");
  EXPECT_EQ(format_logged_size(*oom.reservable), "147.64 MiB");
  EXPECT_THAT(oom.text, HasSubstr("E0101: RuntimeProgramAllocationFailure:"));
  EXPECT_THAT(oom.text, HasSubstr("memory. That was not possible. There are 147.64M free"));

  // Without its figures line the report still counts, and the next line is read as usual.
  MemLog cut = parse_memlog(
      "Attempting to reserve 2.00G at the bottom of memory.\n"
      "That was not possible.\n"
      "XLA::TPU program HBM usage: 1.00G / 31.25G\n",
      "cut.log");
  ASSERT_EQ(cut.ooms.size(), 1u);
  EXPECT_EQ(cut.ooms[0].required, 2 * kGiB);
  EXPECT_FALSE(cut.ooms[0].free.has_value());
  EXPECT_EQ(cut.programs.size(), 1u);
}

TEST(MemLog, TerminalEscapesAreRemoved) {
  // A size split by colour codes is read whole (the stripping itself: tests/base/text_test.cc).
  MemLog log = parse_memlog(
      "\x1b[1mRESOURCE_EXHAUSTED\x1b[0m: Attempting to allocate 1\x1b[1m2.50\x1b[0mM. That was not "
      "possible. There are \x1b[31m3.00M\x1b[0m free.\n",
      "escapes.log");
  ASSERT_EQ(log.ooms.size(), 1u);
  EXPECT_EQ(log.ooms[0].required, std::llround(12.5 * 1024 * 1024));
  EXPECT_EQ(log.ooms[0].free, 3 * 1024 * 1024);
}

// Real compile OOMs (MaxText Gemma-4 logs): units as printed, the capacity from "Used X of Y".
TEST(MemLog, RealCompileOutOfMemoryLogs) {
  MemLog hbm = read_memlog(testdata("memlog_maxtext_gemma4_compile_oom_E1000.log"));
  ASSERT_FALSE(hbm.ooms.empty());
  const OomReport& first = hbm.ooms[0];
  EXPECT_EQ(first.kind, OomKind::kCompile);
  EXPECT_EQ(first.memory_space, "hbm");
  EXPECT_EQ(first.required, std::llround(94.77 * kGiB));
  EXPECT_EQ(first.available, std::llround(94.74 * kGiB));
  EXPECT_EQ(hbm.capacity, std::llround(94.74 * kGiB));

  MemLog vmem = read_memlog(testdata("memlog_maxtext_gemma4_compile_oom_vmem_L1776-1790.log"));
  ASSERT_EQ(vmem.ooms.size(), 1u);
  EXPECT_EQ(vmem.ooms[0].line, 7u);
  EXPECT_EQ(vmem.ooms[0].memory_space, "vmem");
  ASSERT_TRUE(vmem.ooms[0].required && vmem.ooms[0].available);
  EXPECT_EQ(format_logged_size(*vmem.ooms[0].required), "66.93 MiB");
  EXPECT_EQ(format_logged_size(*vmem.ooms[0].available), "63.94 MiB");
  EXPECT_FALSE(vmem.capacity.has_value());
}

TEST(MemLog, LoggedSizes) {
  EXPECT_EQ(parse_logged_size("52.5K")->unit, 1);
  EXPECT_EQ(parse_logged_size("0B")->unit, 0);
  EXPECT_EQ(parse_logged_size("64.00GiB")->bytes, 64 * kGiB);
  EXPECT_FALSE(parse_logged_size("...").has_value());
  EXPECT_EQ(format_logged_size({1536, 1}), "1.50 KiB");
  EXPECT_EQ(format_logged_size({5 * kGiB / 2, 3}), "2.50 GiB");
  EXPECT_EQ(format_logged_size({1024LL * kGiB, 4}), "1.00 TiB");
  EXPECT_EQ(format_logged_size({7, 0}), "7 B");
}

// Found by fuzz/memlog_fuzz: a line that ends right after "exceeds available <space>" threw
// std::out_of_range (substr at npos) instead of being read as a report without an available size.
TEST(MemLog, OutOfMemoryLineEndingAtTheMemorySpace) {
  for (std::string ending : {"", "\n", "\r\n"}) {
    MemLog log = parse_memlog(
        "RESOURCE_EXHAUSTED: Ran out of memory on HBM, the total memory required for HLO "
        "temporaries (100.13G) exceeds available HBM" +
            ending,
        "cut.log");
    ASSERT_EQ(log.ooms.size(), 1u);
    EXPECT_EQ(log.ooms[0].memory_space, "hbm");
    EXPECT_EQ(log.ooms[0].required, std::llround(100.13 * kGiB));
    EXPECT_FALSE(log.ooms[0].available.has_value());
  }
}

TEST(MemLog, StatsSplitAtTheFirstEqualsAndIgnoreExtraFields) {
  MemLog log = parse_memlog(
      "Memory analysis: CompiledMemoryStats(generated_code_size_in_bytes=7, "
      "argument_size_in_bytes=100, peak_memory_in_bytes=999, output_size_in_bytes=50, "
      "serialized_buffer_assignment_proto=b'k=v, x)', alias_size_in_bytes=20, "
      "temp_size_in_bytes=30)\n",
      "extra.log");
  EXPECT_THAT(log.problems(), IsEmpty());
  ASSERT_EQ(log.programs.size(), 1u);
  EXPECT_EQ(log.programs[0].resident, 100 + 50 - 20 + 30);
  EXPECT_EQ(log.programs[0].generated_code, 7);
}

TEST(MemLog, MalformedInputIsAProblemWithItsLine) {
  auto first_problem = [](const std::string& text) {
    MemLog log = parse_memlog(text, "x.log");
    return log.problems().empty() ? std::string("none") : log.problems().front();
  };
  EXPECT_THAT(first_problem("Memory analysis: " + stats5(1, 2, 3, 0, 4).substr(0, 60) + "\n"),
              HasSubstr("x.log:1: Memory analysis: CompiledMemoryStats(...) is cut short"));
  std::string missing =
      "Memory analysis: CompiledMemoryStats(generated_code_size_in_bytes=1, "
      "argument_size_in_bytes=2, output_size_in_bytes=3, alias_size_in_bytes=0)";
  EXPECT_THAT(first_problem(missing), HasSubstr("has no temp_size_in_bytes"));
  EXPECT_THAT(first_problem("\nMemory analysis: None\n"),
              HasSubstr("x.log:2: Memory analysis: None"));
  EXPECT_THAT(first_problem("Memory analysis: " + stats5(1, 9223372036854775807LL, 3, 0, 4)),
              HasSubstr("is not a byte count"));
  EXPECT_THAT(first_problem("Memory analysis: " + stats5(1, -2, 3, 0, 4)),
              HasSubstr("argument_size_in_bytes='-2' is not a byte count"));
  EXPECT_THAT(first_problem("Memory analysis: 42\n"), HasSubstr("expected CompiledMemoryStats"));
  EXPECT_THAT(first_problem("Cost analysis: 'flops'\nMemory analysis: " + stats5(1, 1, 1, 0, 1)),
              HasSubstr("x.log:1: Cost analysis: a str, not a dict"));
  EXPECT_THAT(first_problem("Cost analysis: {'flops': 1.0}\n"),
              HasSubstr("x.log:1: 'train_step' has a Cost analysis but no Memory analysis"));

  MemLog truncated = read_memlog(testdata("memlog_bad_truncated_dict.log"));
  ASSERT_FALSE(truncated.problems().empty());
  EXPECT_THAT(truncated.problems()[0],
              HasSubstr("memlog_bad_truncated_dict.log:2: Cost analysis: column 49: "
                        "unterminated string"));
  MemLog malformed = read_memlog(testdata("memlog_bad_malformed_stats.log"));
  ASSERT_EQ(malformed.problems().size(), 1u);
  EXPECT_THAT(malformed.problems()[0],
              HasSubstr(":3: Memory analysis: argument_size_in_bytes='2GB' "
                        "is not a byte count"));
  EXPECT_FALSE(malformed.has_analysis());
  // A problem is a warning at "source:line"; problems() is its text.
  ASSERT_EQ(malformed.diagnostics.size(), 1u);
  EXPECT_EQ(malformed.diagnostics[0].severity, Severity::kWarning);
  EXPECT_EQ(malformed.diagnostics[0].where, testdata("memlog_bad_malformed_stats.log") + ":3");
  EXPECT_EQ(malformed.problems()[0], text_of(malformed.diagnostics[0]));
  MemLog headless = read_memlog(testdata("memlog_bad_header_without_stats.log"));
  ASSERT_EQ(headless.problems().size(), 1u);
  EXPECT_THAT(headless.problems()[0],
              HasSubstr("memlog_bad_header_without_stats.log:5: kernel 'fwd_bwd_accum' has no "
                        "Memory analysis"));
  EXPECT_THAT(names(headless), ElementsAre("fwd_bwd", "update"));
}

TEST(MemLog, RepeatedSectionsAndLogPrefixes) {
  std::string text =
      "[pod/trainer-0] --- fwd_bwd ---\n"
      "[pod/trainer-0] Memory analysis: " +
      stats5(0, 1, 0, 0, 1) +
      "\n"
      "--- fwd_bwd ---\n"
      "Memory analysis: " +
      stats5(0, 2, 0, 0, 2) +
      "\n"
      "Memory analysis: " +
      stats5(0, 3, 0, 0, 3) +
      "\n"
      "--- not a section\n---\n";
  MemLog log = parse_memlog(text, "p.log");
  EXPECT_THAT(log.problems(), IsEmpty());
  EXPECT_THAT(names(log), ElementsAre("fwd_bwd", "fwd_bwd#2", "fwd_bwd#3"));
  EXPECT_EQ(log.programs[2].resident, 6);
}

TEST(MemLog, SectionLinesOutsideACompileAreNotKernels) {
  MemLog log = parse_memlog(
      "--- summary ---\nTotal memory size: 1.0 GB, Output size: 0.5 GB, "
      "Temp size: 0.5 GB, Argument size: 0.5 GB, Host temp size: 0.0 GB.\n",
      "live.log");
  EXPECT_THAT(log.problems(), IsEmpty());
  EXPECT_THAT(names(log), ElementsAre("train_step"));
  MemLog engine = parse_memlog("Jitting and compiling the engine's kernels...\n--- fwd_bwd ---\n",
                               "engine.log");
  ASSERT_EQ(engine.problems().size(), 1u);
  EXPECT_THAT(engine.problems()[0], HasSubstr("engine.log:2: kernel 'fwd_bwd' has no Memory"));
}

TEST(MemLog, EmptyInputHasNothing) {
  MemLog log = read_memlog(testdata("memlog_bad_empty.log"));
  EXPECT_FALSE(log.has_analysis());
  EXPECT_THAT(log.problems(), IsEmpty());
  EXPECT_EQ(log.lines, 0u);
  EXPECT_EQ(log.kind, MemLogKind::kUnknown);
}

TEST(MemLog, StreamsLinesLongerThanTheBound) {
  char path[] = "/tmp/memlog_test_XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  {
    std::ofstream out(path, std::ios::binary);
    out << "--- fwd_bwd ---\nCost analysis: {'flops': [";
    std::string block(1 << 20, '1');
    for (std::size_t written = 0; written <= kMaxMemLogLine; written += block.size()) out << block;
    out << "]}\nMemory analysis: " << stats5(0, 5, 0, 0, 5) << "\n";
    for (int i = 0; i < 200000; ++i) out << "completed step: " << i << ", seconds: 1.0\n";
  }
  MemLog log = read_memlog(path);
  std::remove(path);
  ASSERT_EQ(log.problems().size(), 1u);
  EXPECT_THAT(log.problems()[0], HasSubstr(":2: Cost analysis: the line is longer than"));
  ASSERT_THAT(names(log), ElementsAre("fwd_bwd"));
  EXPECT_EQ(log.programs[0].resident, 10);
  EXPECT_EQ(log.lines, 200003u);
}

TEST(MemLog, ByteSizes) {
  EXPECT_EQ(parse_byte_size("21.95G"), std::llround(21.95 * kGiB));
  EXPECT_EQ(parse_byte_size("530.00M"), 530LL << 20);
  EXPECT_EQ(parse_byte_size("1.7K"), std::llround(1.7 * 1024));
  EXPECT_EQ(parse_byte_size("0B"), 0);
  EXPECT_EQ(parse_byte_size("64.00GiB"), 64 * kGiB);
  EXPECT_EQ(parse_byte_size("12"), 12);
  EXPECT_FALSE(parse_byte_size("G").has_value());
  EXPECT_FALSE(parse_byte_size("12X").has_value());
  EXPECT_FALSE(parse_byte_size("").has_value());
  EXPECT_FALSE(parse_byte_size("99999999999E").has_value());
}

}  // namespace
}  // namespace rtb::logs
