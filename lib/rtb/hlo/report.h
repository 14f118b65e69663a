// Writers for hlo::Analysis: the text report, the --json document, the A/B comparison and the
// --svg picture of one computation's schedule. They return strings; the tool prints them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "rtb/hlo/analysis.h"

namespace rtb::hlo {

struct ReportOptions {
  std::size_t top = 10;  // how many exposed entries to list
  bool list = false;     // also list every entry
};

// "512 B", "1.5 KiB", "16.0 MiB", ... (binary units).

// The human-readable report: header, totals by kind and by computation, the top exposed
// entries with their op_name, unpaired starts/dones, warnings and truncation.
std::string format_text(const Analysis& analysis, const ReportOptions& options = {});

// Everything the run of one dump reports without failing, in the order hlo-overlap logs it: the
// analysis' notes (Analysis::diagnostics), then a warning when the module is not scheduled and one
// when the dump is truncated. The JSON `diagnostics` array and the tool's stderr.
std::vector<Diagnostic> diagnostics_of(const Analysis& analysis);

// The --json document (schema "rtb.hlo-overlap/1", documented in the tool's README section).
// `warnings` (the notes, with their lines) stays beside `diagnostics` until the next schema
// version.
std::string format_json(const Analysis& analysis, const ReportOptions& options = {});

// What makes two analyses "different" for the A/B mode (exit code 1 of `hlo-overlap A B`): a
// kind (collective, copy or other async op) whose weighted totals differ in any of entries,
// executions, bytes, overlapped, exposed, exposed bytes or unpaired, including a kind present on
// one side only. Instruction names, line numbers, op_names and the order of the entries do not
// count, so a recompile that only renames instructions is "same". One line per differing kind,
// e.g. "all-gather: exposed 2 -> 0, exposed bytes 8.0 MiB -> 0 B", in kind order; empty = same.
std::vector<std::string> compare_differences(const Analysis& a, const Analysis& b);

// Side by side of two analyses (A = baseline, B = candidate) with deltas by kind and in total,
// ending with the verdict ("same" or "different" and the differences).
std::string format_compare_text(const Analysis& a, const Analysis& b);
// {"schema": "rtb.hlo-overlap-compare/1", "a": <report>, "b": <report>, "delta": {...},
//  "same": bool, "differences": ["<kind>: ...", ...]}.
std::string format_compare_json(const Analysis& a, const Analysis& b,
                                const ReportOptions& options = {});

// An SVG picture of Analysis::schedule: instructions in schedule order, wrapped into rows,
// compute marked, every start..done window drawn as a bar under the row (green overlapped, red
// exposed, grey unpaired), synchronous collectives as red marks; tooltips name everything.
// Throws rtb::Error if the analysis has no schedule (nothing to draw).
std::string render_svg(const Analysis& analysis);

}  // namespace rtb::hlo
