// diff-renders: what really differs between two renders (e2e DRY_RUN outputs or rendered JobSet
// files), flag by flag; with --expect-bench, whether a bench render changed only what render-bench
// may change (see README.md).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <string>
#include <vector>

#include "common/mains.h"
#include "common/tool.h"
#include "rtb/base/error.h"
#include "rtb/base/io.h"
#include "rtb/bench/diff_render.h"
#include "rtb/bench/diff_report.h"
#include "rtb/k8s/dryrun.h"
#include "rtb/k8s/mask.h"

namespace rtb::tool {
namespace {

constexpr const char* kExamples =
    R"(  diff-renders old_dryrun.txt new_dryrun.txt          # did a recipe change touch the trainer?
  diff-renders --by-role run1.txt run2.txt             # JobSets named differently, matched by role
  diff-renders run-a.yaml run-b.yaml                   # one JobSet each, named apart: paired
  diff-renders --expect-bench dryrun.txt bench.yaml    # did the bench keep everything else?
  diff-renders bench-a.yaml bench-b.yaml --rename ab-a=ab-b --ignore '*.startup.driver'
  diff-renders a.txt b.txt --json | jq '.differences[].path'
)";

// Masked as soon as it is read: every difference, line diff and message then shows a credential
// as its fingerprint, the same on both sides when the secret is the same.
rtb::k8s::DryRun load(const std::string& path, const Tool& tool) {
  std::string name = display_name(path);
  rtb::k8s::DryRun dryrun = rtb::k8s::parse_dryrun(read_file(path), name);
  rtb::k8s::mask_documents(dryrun, tool.masker());
  tool.report_diagnostics(dryrun.diagnostics);
  return dryrun;
}

}  // namespace

int diff_renders_main(int argc, char** argv) {
  Tool tool(
      {"diff-renders",
       "Compares two renders (DRY_RUN outputs or rendered JobSet files, - for stdin): documents "
       "matched by kind and name (or role; the only document of a kind and role on each side "
       "pairs whatever its name), lists by key, and strings that hold flags flag by flag, each "
       "difference with a stable path. --expect-bench checks that B, a bench render of the e2e "
       "DRY_RUN A, differs from A's trainer only where render-bench may change it.",
       kExamples});
  CLI::App& app = tool.app();
  std::string a, b, color = "auto";
  std::vector<std::string> renames, ignores, ignore_files, onlys;
  bool by_role = false, json = false, stat = false, expect_bench = false, show_allowed = false,
       server_fields = false;
  rtb::k8s::RoleMains mains;

  app.add_option("A", a, "First render (DRY_RUN output or JobSet YAML), or -")->required();
  app.add_option("B", b, "Second render, or -")->required();
  app.add_flag("--by-role", by_role,
               "Match JobSets by role (trainer, orchestrator, rollout) rather than by name");
  add_repeatable_option(app, "--rename", renames, "OLD=NEW: B's name NEW counts as A's OLD");
  add_repeatable_option(app, "--ignore", ignores,
                        "GLOB: leave out differences whose path (or doc:path) matches; * and ? "
                        "are wildcards, [ ] are literal");
  add_repeatable_option(app, "--ignore-file", ignore_files,
                        "FILE: one --ignore GLOB per line (# comments)");
  add_repeatable_option(app, "--only", onlys, "GLOB: report only differences that match");
  CLI::Option* json_flag = add_json_flag(app, json, "Machine-readable output (rtb.diff-renders/1)");
  app.add_flag("--stat", stat, "Counts by document and area instead of the differences")
      ->excludes(json_flag);
  app.add_flag("--expect-bench", expect_bench,
               "A is an e2e DRY_RUN, B a bench render of it: fail only on differences "
               "render-bench does not make");
  app.add_flag("--show-allowed", show_allowed,
               "With --expect-bench, also list the differences render-bench is allowed to make");
  app.add_flag("--server-fields", server_fields,
               "Also compare what the API server fills in (status, metadata uid, "
               "resourceVersion, managedFields, last-applied annotation, ...) and, against a "
               "live object, what the JobSet API's defaults and Kueue's admission add that the "
               "render lacks: left out by default, as kubectl diff");
  add_color_option(app, color);
  add_role_main_options(app, mains);

  return tool.run(argc, argv, [&] {
    require_one_stdin({a, b}, "A and B");
    bench::DiffFilter filter;
    for (const std::string& glob : ignores) filter.ignore(glob);
    for (const std::string& file : ignore_files) filter.ignore_file(file);
    for (const std::string& glob : onlys) filter.only(glob);
    bench::RenderDiffOptions options;
    options.by_role = by_role;
    options.mains = mains;
    options.server_fields = server_fields;
    for (const std::string& rename : renames)
      options.renames.push_back(bench::parse_rename(rename));
    if (expect_bench && (by_role || !renames.empty()))
      fail("--expect-bench matches the trainer and the bench itself: drop --by-role/--rename");

    rtb::k8s::DryRun left = load(a, tool);
    rtb::k8s::DryRun right = load(b, tool);
    bench::RenderReport report;
    if (expect_bench) {
      // A same-pod bench of several arms: each arm's program, as a bench of one arm.
      std::vector<bench::ExpectBenchResult> results =
          bench::check_expect_bench_arms(left, right, mains);
      report = bench::make_expect_bench_report(left.source, right.source, results, filter);
      spdlog::info(
          "--expect-bench: {} -> {}{}: {} differences, {} allowed, {} unexpected, {} ignored",
          results[0].e2e_name, results[0].bench_name,
          results.size() > 1 ? fmt::format(" ({} arms' programs)", results.size()) : "",
          report.differences.size() + report.ignored,
          report.differences.size() - report.unexpected(), report.unexpected(), report.ignored);
    } else {
      bench::RenderDiff diff = bench::diff_renders(left, right, options);
      report = bench::make_render_report(left.source, right.source, diff, filter);
    }
    // What reading the inputs noted (logged as each was read), for --json too.
    for (const rtb::k8s::DryRun* side : {&left, &right}) {
      report.diagnostics.insert(report.diagnostics.end(), side->diagnostics.begin(),
                                side->diagnostics.end());
    }
    std::string out;
    if (json) {
      out = bench::format_render_json(report);
    } else if (stat) {
      out = report.outcome() == Outcome::kFail || report.ignored ||
                    !report.hidden_server_fields.empty() || !report.hidden_defaults.empty()
                ? bench::format_render_stat(report)
                : "";
    } else {
      out = bench::format_render_text(report, {use_color(color), show_allowed});
    }
    tool.write_report("-", out);
    return report.outcome();
  });
}

}  // namespace rtb::tool
