// What diff-renders and diff-configs print: the --ignore / --only filter over difference paths,
// and the text, --stat and --json writers (schemas "rtb.diff-renders/1", "rtb.diff-configs/1"
// and "rtb.diff-configs.dumps/1", documented in the tools' README section).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rtb/base/diagnostic.h"
#include "rtb/base/outcome.h"
#include "rtb/bench/config_diff.h"
#include "rtb/bench/diff_render.h"
#include "rtb/k8s/diff.h"

namespace rtb::bench {

// Globs over paths and keys: `*` matches any run of characters, `?` one character and `\c` the
// character c; everything else stands for itself, `[` and `]` included (paths use them).
bool glob_match(std::string_view glob, std::string_view text);

// --ignore GLOB, --ignore-file FILE and --only GLOB.
class DiffFilter {
 public:
  void ignore(std::string glob) { ignore_.push_back(std::move(glob)); }
  void only(std::string glob) { only_.push_back(std::move(glob)); }
  // One glob per line; blank lines and lines starting with `#` are skipped, and blanks around a
  // glob are dropped. Throws rtb::Error when the file cannot be read.
  void ignore_file(const std::string& path);

  // A glob matches a difference when it matches `document:path` or the path alone, or an
  // ancestor of either (a prefix that ends before a `.` or `[`): `--ignore metadata.labels`
  // ignores every label. Kept: no ignore glob matches and, when there are only globs, one does.
  bool keep(std::string_view document, std::string_view path) const;
  bool empty() const { return ignore_.empty() && only_.empty(); }

 private:
  std::vector<std::string> ignore_, only_;
};

struct ReportedDifference {
  std::string document;  // the document's label (diff_render.h)
  k8s::Difference difference;
  std::optional<BenchChange> allowed;  // --expect-bench: the render-bench change it is
  std::string why;                     // --expect-bench: why an unexpected one is not allowed
};

struct ReportedDocument {
  std::string label, kind;
  std::optional<std::string> a_name, b_name;
  std::size_t a_line = 0, b_line = 0;
  std::size_t differences = 0;  // kept by the filter
  Pairing paired_by = Pairing::kNone;
  std::string role;  // diff_render.h's DocumentDiff::role
};

struct RenderReport {
  std::string a_source, b_source;
  bool expect_bench = false;
  std::vector<ReportedDocument> documents;
  std::vector<ReportedDifference> differences;  // kept by the filter
  std::size_t ignored = 0;                      // left out by the filter
  // Server-populated fields that differ and were left out (`doc:path`; diff_render.h).
  std::vector<std::string> hidden_server_fields;
  // Fields the JobSet API defaulted or Kueue added on the live side, left out likewise.
  struct HiddenDefault {
    std::string document, path;
    std::string_view reason;
  };
  std::vector<HiddenDefault> hidden_defaults;
  // What reading A and B noted (k8s::DryRun::diagnostics, A's then B's; the tool adds them):
  // --json `diagnostics`.
  std::vector<Diagnostic> diagnostics;
  std::size_t unexpected() const;  // --expect-bench: kept and not allowed
  // kFail when differences (or, with --expect-bench, unexpected ones) remain, else kPass.
  Outcome outcome() const;
};

RenderReport make_render_report(std::string a_source, std::string b_source, const RenderDiff& diff,
                                const DiffFilter& filter);
// The documents list holds the one pair compared, labelled "trainer".
RenderReport make_expect_bench_report(std::string a_source, std::string b_source,
                                      const ExpectBenchResult& result, const DiffFilter& filter);
// Several results (check_expect_bench_arms): one document per arm's program, labelled
// "trainer[<arm>]" (just "trainer" for a result without an arm).
RenderReport make_expect_bench_report(std::string a_source, std::string b_source,
                                      const std::vector<ExpectBenchResult>& results,
                                      const DiffFilter& filter);

struct TextStyle {
  bool color = false;         // ANSI colours (the tools decide: a terminal, NO_COLOR unset)
  bool show_allowed = false;  // --expect-bench: list the allowed differences too
};

// One line per difference: `~ doc:path: old -> new`, `+ doc:path: new`, `- doc:path: old`,
// `! doc:path: old -> new` (type change). A changed flag shows its values (`...[--xla_foo]: 1 ->
// 2`). Indented under its line: a changed multi-line value's line diff (`N lines -> M lines`,
// then hunks), an added or removed mapping or list's leaves (`[0].key: value`, relative paths).
// Other multi-line values show their first line and their line count. --expect-bench: only
// unexpected differences (with show_allowed, the allowed ones too), each with why. First, one line
// per pair of documents matched as the only one of their kind and role (Pairing::kOnlyOne); last,
// a line that counts the hidden server-populated fields, and one that counts the hidden defaulted
// and admission fields, if any. Empty when nothing is left.
std::string format_render_text(const RenderReport& report, const TextStyle& style);
// Counts by document and area (diff_area), then a total line.
std::string format_render_stat(const RenderReport& report);
std::string format_render_json(const RenderReport& report);

// The area of a path for --stat: `metadata`, `spec.failurePolicy`, `replicatedJobs[pw-node]
// .completions`, `replicatedJobs[proc].containers[main].startup.argv`, ...
std::string diff_area(std::string_view path);

// --- diff-configs --------------------------------------------------------------------------------

// `~ key: old -> new`, `+ key: new`, `- key: old`, one line each, in key order.
std::string format_config_text(const std::vector<ConfigDifference>& differences,
                               const TextStyle& style);
std::string format_config_json(const ConfigSide& a, const ConfigSide& b,
                               const std::vector<ConfigDifference>& differences,
                               const std::optional<std::string>& keys_regex);
// --list-dumps: one line per dump of each log.
std::string format_dump_list(const std::vector<ConfigSide>& sides);
std::string format_dump_list_json(const std::vector<ConfigSide>& sides);

}  // namespace rtb::bench
