// The checks of payload-spec.md run on any payload: a file written by either builder (this
// library's or the bench driver's NumPy one) or a payload in memory (view_payload). The arrays
// are read row by row (routing in blocks of tokens), so memory does not grow with the rows.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "rtb/npy.h"
#include "rtb/payload.h"
#include "rtb/routing_load.h"

namespace rtb {

struct VerifyOptions {
  int experts = 512;
  std::int64_t vocab = kDefaultVocab;
  std::vector<double> targets;  // per layer, already scaled; empty: loads reported, not checked
  std::optional<PadPosition> pad_position;  // required position; unset: either, but one for all
  std::int64_t pad_align = kDefaultPadAlign;
  std::optional<AdvantageMode> advantages;  // unset: either
  int ep = 1;
  double buffer_factor = 2.75;
  int max_examples = 5;  // failures listed per check (all are counted)
};

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
  std::vector<std::string> notes;
  bool passed() const;
  const CheckResult* check(const std::string& name) const;
};

// Runs every check. Throws rtb::Error only when the input cannot be read at all (a damaged file,
// bad options); everything the spec requires of the content is a check that passes or fails.
VerifyReport verify_payload(const ByteSource& source, const std::vector<ArrayInfo>& arrays,
                            const VerifyOptions& options);

}  // namespace rtb
