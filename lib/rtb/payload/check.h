// The checks of docs/payload-spec.md run on any payload: a file written by either builder (this
// library's or the bench driver's NumPy one) or a payload in memory (view_payload). The arrays
// are read row by row (routing in blocks of tokens), so memory does not grow with the rows; rows
// are checked by several threads (the source's read_at is called from them), each row in one
// pass over its contiguous data, and merged in row order.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rtb/base/diagnostic.h"
#include "rtb/base/outcome.h"
#include "rtb/payload/builder.h"
#include "rtb/payload/load.h"
#include "rtb/payload/npy.h"
#include "rtb/payload/settings.h"

namespace rtb::payload {

struct VerifyOptions {
  int experts = 0;  // 0: not known; the largest expert id in the routing + 1 (with a note)
  std::int64_t vocab = kDefaultVocab;
  std::vector<double> targets;  // per layer, already scaled; empty: loads reported, not checked
  std::optional<PadPosition> pad_position;  // required position; unset: either, but one for all
  // pad_align of pad position start; unset: a moved row need only start on a multiple of 64
  // inside its padding.
  std::optional<std::int64_t> pad_align;
  std::optional<AdvantageMode> advantages;  // unset: either
  // The prompt of a segment is at most this long (0: no prompt); unset: checked only for its
  // structure (a run of mask 0 then a run of mask 1 in every segment).
  std::optional<std::int64_t> max_prompt_length;
  std::int64_t pad_id = 0;
  // The file's payload_settings: the arrays must agree with what it records (shape, real length,
  // segments per row, final rows, old log-probs).
  std::optional<PayloadSettings> recorded;
  std::vector<SettingSource> settings;  // what was used and from where, for the report
  int ep = 1;
  double buffer_factor = 2.75;
  int max_examples = 5;  // failures listed per check (all are counted)
  // Threads checking rows (0: the machine's cores); the report does not depend on it.
  int threads = 0;
  // The portable kernels instead of the SIMD ones (slots.h); the report is the same, which the
  // tests and the fuzzer check.
  bool portable = false;
  // Tokens each checking thread remembers to find repeats (repeats.h): -1 fills 2 MiB with
  // copies, 0 looks for none; the report is the same, which the tests check.
  int repeat_entries = -1;
};

// What verify's command line gave (unset: not given).
struct VerifyFlags {
  std::optional<int> experts;
  std::optional<std::int64_t> vocab;
  std::optional<std::vector<double>> routing_targets;  // as given, before the routing scale
  std::string routing_targets_source;                  // where they came from
  std::optional<double> routing_scale;
  bool no_targets = false;
  std::optional<PadPosition> pad_position;
  std::optional<std::int64_t> pad_align;
  std::optional<AdvantageMode> advantages;
  std::optional<std::int64_t> max_prompt_length;
};

// Verify's options: each setting from the command line when given, else from the file's
// payload_settings when recorded, else unknown (see VerifyOptions). `base` carries the options
// that are not settings (ep, buffer factor, examples). Sets `targets_source` ("" when no target
// table is checked). Throws rtb::Error when --routing-scale must rescale recorded targets that
// cannot be unscaled (a recorded scale of 0).
VerifyOptions resolve_verify_options(const VerifyFlags& flags,
                                     const std::optional<PayloadSettings>& recorded,
                                     VerifyOptions base, std::string* targets_source);

// The names of every check verify runs ("fields", "dtypes", ... "routing_targets"), in report
// order: the one list the reports, the docs and the tests count.
std::vector<std::string_view> check_names();

struct CheckResult {
  std::string name;  // "fields", "routing", ...
  std::string what;  // one line: what the check asserts
  std::int64_t failures = 0;
  std::vector<std::string> examples;  // "field[row r, token t]: what is wrong"
  bool skipped = false;
  std::string skip_reason;
  bool passed() const { return failures == 0; }
};

struct VerifyReport {
  std::int64_t rows = 0;
  std::int64_t tokens = 0;
  int layers = 0;
  int topk = 0;
  int experts = 0;
  bool has_old_logps = false;
  std::int64_t real_rows = 0;
  std::int64_t padding_rows = 0;  // rows without a real token (final micro-batch)
  std::int64_t real_tokens = 0;
  std::int64_t min_real_len = 0;
  std::int64_t max_real_len = 0;
  std::string pad_position;  // "end", "start", "end (no row moves)", "mixed" or "none"
  std::vector<CheckResult> checks;
  std::vector<LoadStats> per_layer;  // achieved, from the routing
  std::vector<double> targets;       // checked against (empty: none)
  // Notes (no place): fields outside the spec, an expert count inferred. --json `diagnostics`,
  // and `notes` (the messages) until check-payload verify's next schema version.
  std::vector<Diagnostic> diagnostics;
  std::vector<SettingSource> settings;  // the settings checked against and where each came from
  bool passed() const;                  // every check passed (a skipped check passes)
  // kPass when every check passed, else kFail: the verdict of verify and build. (Input that
  // cannot be judged never gets a report: verify_payload throws rtb::Error.)
  Outcome outcome() const;
  const CheckResult* check(const std::string& name) const;
};

// Runs every check. Throws rtb::Error only when the input cannot be read at all (a damaged file,
// bad options) or is no bench payload: a file without routed_experts (kRoutedExpertsMember) is
// refused as measure refuses it, naming the members it has (require_member), rather than failing
// every check. Everything the spec requires of a payload's content is a check that passes or
// fails.
VerifyReport verify_payload(const ByteSource& source, const std::vector<ArrayInfo>& arrays,
                            const VerifyOptions& options);
// The same on a payload in memory (view_payload): build checks what it built.
VerifyReport verify_payload(const Payload& payload, const VerifyOptions& options);

// The checks `check-payload build` runs on what it built: the experts, vocab, targets, padding,
// advantages and prompt length it was built with, its thread count, and the payload_settings the
// file will record (read back from the JSON, so a build also checks its own settings). The
// caller sets what only the check has (ep, buffer_factor, max_examples).
VerifyOptions checks_of_build(const Payload& payload);

}  // namespace rtb::payload
