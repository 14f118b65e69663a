#include "rtb/payload/check.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "rtb/base/error.h"
#include "rtb/payload/routing.h"

namespace rtb::payload {
namespace {

enum CheckId {
  kFields,
  kDtypes,
  kShapes,
  kMask,
  kPadding,
  kTokenIds,
  kLayout,
  kSegments,
  kAdvantages,
  kOldLogps,
  kRouting,
  kRoutingTargets,
  kCheckCount
};

struct CheckInfo {
  const char* name;
  const char* what;
};

constexpr CheckInfo kCheckInfo[kCheckCount] = {
    {"fields", "every field of the payload is present (old_per_token_logps is optional)"},
    {"dtypes",
     "each field has its dtype (int32 ids and segments, float32 masks and values, "
     "int16 routing)"},
    {"shapes", "[R, T] per-token fields, [R, 0] prompt fields, [R, T, L, K] routed_experts"},
    {"mask",
     "completion_mask is 0 on padding and, in each segment, 0 on a prompt of p tokens then 1 on "
     "the rest (at least one token; p <= max_prompt_length when known)"},
    {"padding",
     "padding holds pad id 0, segment 0, position 0, advantage 0, log-prob 0 and "
     "routed experts -1"},
    {"token_ids", "real token ids lie in [1, vocab)"},
    {"layout",
     "each row's real tokens are one run, starting at 0 (pad end) or moved right by its "
     "padding rounded down to pad_align (pad start), the same for all rows; rows "
     "without real tokens come last"},
    {"segments",
     "segment ids 1..n in order, positions counting from 0 in each segment, "
     "boundaries on multiples of 64 when the row has room for them"},
    {"advantages",
     "advantages are finite and constant on each segment's completion, 0 on its prompt "
     "(random: non-zero; zero: 0)"},
    {"old_logps",
     "old_per_token_logps are finite and negative on completion tokens, 0 on prompt tokens"},
    {"routing", "every real token has K distinct experts in [0, E) at every layer"},
    {"routing_targets",
     "each layer's max/mean expert load is within 1% of its target (or one "
     "token of the hottest load at tiny shapes)"},
};

enum class Kind { kPerToken, kEmpty, kRouted, kBytes };

struct FieldSpec {
  const char* name;
  DType dtype;
  Kind kind;
  bool required;
};

constexpr FieldSpec kFieldSpecs[] = {
    {"completion_ids", DType::kInt32, Kind::kPerToken, true},
    {"completion_mask", DType::kFloat32, Kind::kPerToken, true},
    {"segment_ids", DType::kInt32, Kind::kPerToken, true},
    {"segment_positions", DType::kInt32, Kind::kPerToken, true},
    {"advantages", DType::kFloat32, Kind::kPerToken, true},
    {"old_per_token_logps", DType::kFloat32, Kind::kPerToken, false},
    {"routed_experts", DType::kInt16, Kind::kRouted, true},
    {"prompt_ids", DType::kInt32, Kind::kEmpty, true},
    {"prompt_mask", DType::kFloat32, Kind::kEmpty, true},
    {"payload_settings", DType::kUInt8, Kind::kBytes, false},  // read by the caller
};

}  // namespace

std::vector<std::string_view> check_names() {
  std::vector<std::string_view> names;
  for (const CheckInfo& info : kCheckInfo) names.emplace_back(info.name);
  return names;
}

namespace {

class Recorder {
 public:
  explicit Recorder(int max_examples) : max_examples_(max_examples) {
    for (const CheckInfo& info : kCheckInfo) {
      CheckResult result;
      result.name = info.name;
      result.what = info.what;
      results_.push_back(std::move(result));
    }
  }
  // `describe` is called only for listed failures, so counting many stays cheap.
  template <typename Describe>
  void fail(CheckId id, const Describe& describe) {
    CheckResult& result = results_[id];
    ++result.failures;
    if (static_cast<int>(result.examples.size()) < max_examples_) {
      result.examples.push_back(describe());
    }
  }
  void skip(CheckId id, std::string reason) {
    if (results_[id].skipped) return;
    results_[id].skipped = true;
    results_[id].skip_reason = std::move(reason);
  }
  std::vector<CheckResult> take() { return std::move(results_); }

 private:
  int max_examples_;
  std::vector<CheckResult> results_;
};

std::string value_text(double value) { return fmt::format("{}", value); }

// One row's per-token fields, read from the source.
struct RowFields {
  std::vector<std::int32_t> ids, segments, positions;
  std::vector<float> mask, advantages, logps;
};

class Verifier {
 public:
  Verifier(const ByteSource& source, const std::vector<ArrayInfo>& arrays,
           const VerifyOptions& options)
      : source_(source), arrays_(arrays), o_(options), rec_(options.max_examples) {}

  VerifyReport run() {
    if (o_.experts < 0 || o_.experts > kMaxExperts) {
      fail("--experts must be in 1..{} (got {})", kMaxExperts, o_.experts);
    }
    if (o_.ep < 1 || (o_.experts > 0 && o_.experts % o_.ep != 0)) {
      fail("expert parallelism {} does not divide {} experts into equal groups", o_.ep, o_.experts);
    }
    if (o_.pad_align) check_pad_align(*o_.pad_align);
    if (o_.max_prompt_length && *o_.max_prompt_length < 0) {
      fail("--max-prompt-length must be at least 0 (got {})", *o_.max_prompt_length);
    }
    // Unknown experts: count loads over every int16 id and keep the ids seen (see check_targets).
    experts_ = o_.experts > 0 ? o_.experts : kMaxExperts + 1;
    report_.experts = o_.experts;
    report_.settings = o_.settings;
    check_fields();
    if (report_.rows > 0 || report_.tokens > 0) check_rows();
    check_targets();
    report_.checks = rec_.take();
    return std::move(report_);
  }

 private:
  static constexpr int kMaxExperts = 32767;  // int16 expert ids

  const ArrayInfo* usable(const char* name) const {
    auto it = usable_.find(name);
    return it == usable_.end() ? nullptr : find_array(arrays_, name);
  }

  void check_fields() {
    // R and T from the first per-token field with a 2-D shape, else from the routing.
    for (const char* name : {"completion_ids", "segment_ids", "completion_mask", "advantages",
                             "segment_positions", "routed_experts"}) {
      const ArrayInfo* info = find_array(arrays_, name);
      if (info != nullptr && info->shape.size() >= 2) {
        report_.rows = info->shape[0];
        report_.tokens = info->shape[1];
        break;
      }
    }
    std::set<std::string> known;
    for (const FieldSpec& spec : kFieldSpecs) {
      known.insert(spec.name);
      const ArrayInfo* info = find_array(arrays_, spec.name);
      if (info == nullptr) {
        if (spec.required) {
          rec_.fail(kFields, [&] { return fmt::format("{}: missing", spec.name); });
        }
        continue;
      }
      bool ok = true;
      if (info->dtype != spec.dtype) {
        ok = false;
        rec_.fail(kDtypes, [&] {
          return fmt::format("{}: {}, expected {}", spec.name, dtype_name(info->dtype),
                             dtype_name(spec.dtype));
        });
      }
      std::vector<std::int64_t> expected;
      switch (spec.kind) {
        case Kind::kPerToken:
          expected = {report_.rows, report_.tokens};
          break;
        case Kind::kEmpty:
          expected = {report_.rows, 0};
          break;
        case Kind::kRouted:
          expected = {report_.rows, report_.tokens, -1, -1};
          if (info->shape.size() == 4) {
            expected[2] = info->shape[2];
            expected[3] = info->shape[3];
          }
          break;
        case Kind::kBytes:
          expected = {info->shape.empty() ? -1 : info->shape[0]};
          break;
      }
      bool shape_ok = info->shape.size() == expected.size();
      for (std::size_t d = 0; shape_ok && d < expected.size(); ++d) {
        shape_ok = expected[d] < 0 ? false : info->shape[d] == expected[d];
      }
      if (spec.kind == Kind::kRouted && shape_ok) {
        if (info->shape[2] < 1 || info->shape[3] < 1 || info->shape[3] > experts_) {
          shape_ok = false;
        }
      }
      if (!shape_ok) {
        ok = false;
        rec_.fail(kShapes, [&] {
          std::string want = spec.kind == Kind::kRouted
                                 ? fmt::format("[{}, {}, L, K] with 1 <= K <= {}", report_.rows,
                                               report_.tokens, experts_)
                             : spec.kind == Kind::kBytes ? std::string("a 1-D array")
                                                         : format_shape(expected);
          return fmt::format("{}: shape {}, expected {}", spec.name, format_shape(info->shape),
                             want);
        });
      }
      if (ok) usable_.insert(spec.name);
      if (spec.kind == Kind::kRouted && ok) {
        report_.layers = static_cast<int>(info->shape[2]);
        report_.topk = static_cast<int>(info->shape[3]);
      }
      if (std::string_view(spec.name) == "old_per_token_logps") report_.has_old_logps = true;
    }
    check_recorded_shape();
    for (const ArrayInfo& info : arrays_) {
      if (!known.count(info.name)) {
        report_.diagnostics.push_back(
            {Severity::kNote, "",
             fmt::format("field '{}' ({} {}) is not part of the spec; not checked", info.name,
                         dtype_name(info.dtype), format_shape(info.shape))});
      }
    }
  }

  template <typename T>
  bool read_row(const char* name, std::int64_t row, std::vector<T>& out) {
    const ArrayInfo* info = usable(name);
    if (info == nullptr) {
      out.clear();
      return false;
    }
    out.resize(report_.tokens);
    read_elements(source_, *info, row * report_.tokens, std::span(out));
    return true;
  }

  // The arrays against the shape payload_settings records.
  void check_recorded_shape() {
    if (!o_.recorded) return;
    const PayloadSettings& r = *o_.recorded;
    auto compare = [&](CheckId id, const char* key, const std::optional<std::int64_t>& recorded,
                       std::int64_t actual) {
      if (recorded && *recorded != actual) {
        rec_.fail(id, [&] {
          return fmt::format("payload_settings records {} {}, the arrays have {}", key, *recorded,
                             actual);
        });
      }
    };
    compare(kShapes, "rows", r.rows, report_.rows);
    compare(kShapes, "tokens", r.tokens, report_.tokens);
    if (usable("routed_experts")) {
      compare(kShapes, "layers", r.layers, report_.layers);
      compare(kShapes, "topk", r.topk, report_.topk);
    }
    if (r.old_logps && *r.old_logps != report_.has_old_logps) {
      rec_.fail(kFields, [&] {
        return fmt::format("payload_settings records old_logps {}, but old_per_token_logps is {}",
                           *r.old_logps, report_.has_old_logps ? "present" : "missing");
      });
    }
  }

  // Where a row's real tokens start (pad position end or start) and whether the rows agree.
  void check_row_start(std::int64_t row, std::int64_t first, std::int64_t count) {
    const std::int64_t tokens = report_.tokens, padding = tokens - count;
    bool end_ok = first == 0;
    bool start_ok = false;
    std::string start_rule;
    if (o_.pad_align) {
      std::int64_t shift = pad_start_shift(tokens, count, *o_.pad_align);
      start_ok = first == shift;
      start_rule = fmt::format("{} (pad start: {} padding tokens rounded down to pad_align {})",
                               shift, padding, *o_.pad_align);
    } else {
      // pad_align unknown: a moved row starts on the segment grid, inside its padding.
      start_ok = first > 0 && first % kSegmentAlign == 0 && first <= padding;
      start_rule = fmt::format(
          "a multiple of {} up to its {} padding tokens (pad start; pad_align not known)",
          kSegmentAlign, padding);
    }
    if (first > 0 && start_ok) {
      saw_moved_ = true;
      smallest_shift_ = smallest_shift_ < 0 ? first : std::min(smallest_shift_, first);
    } else if (end_ok) {
      largest_unmoved_padding_ = std::max(largest_unmoved_padding_, padding);
    }
    if (!end_ok && !start_ok) {
      rec_.fail(kLayout, [&] {
        return fmt::format("row {}: real tokens start at {}, expected 0 (pad end) or {}", row,
                           first, start_rule);
      });
    } else if (o_.pad_position == PadPosition::kEnd && !end_ok) {
      rec_.fail(kLayout, [&] {
        return fmt::format("row {}: real tokens start at {}, expected 0 (pad position end)", row,
                           first);
      });
    } else if (o_.pad_position == PadPosition::kStart && o_.pad_align && !start_ok) {
      rec_.fail(kLayout, [&] {
        return fmt::format(
            "row {}: real tokens start at {}, expected {} (pad position start, "
            "pad_align {})",
            row, first, pad_start_shift(tokens, count, *o_.pad_align), *o_.pad_align);
      });
    }
  }

  // A row left at 0 with at least as much padding as a moved row's shift was not moved although
  // pad start would move it.
  bool rows_mix_positions() const {
    return saw_moved_ && smallest_shift_ >= 0 && largest_unmoved_padding_ >= smallest_shift_;
  }

  void check_rows() {
    const std::int64_t tokens = report_.tokens;
    RowFields f;
    const ArrayInfo* routed = usable("routed_experts");
    if (routed == nullptr) rec_.skip(kRouting, "routed_experts is missing or malformed");
    if (!usable("segment_ids") && !usable("completion_mask")) {
      for (CheckId id :
           {kMask, kPadding, kTokenIds, kLayout, kSegments, kAdvantages, kOldLogps, kRouting}) {
        rec_.skip(id, "neither segment_ids nor completion_mask tells real tokens from padding");
      }
      return;
    }
    if (routed != nullptr) {
      counter_.emplace(report_.layers, report_.topk, experts_);
      seen_.assign(experts_, -1);
    }
    std::vector<char> real(tokens);
    std::int64_t first_padding_row = -1;
    for (std::int64_t row = 0; row < report_.rows; ++row) {
      bool have_ids = read_row("completion_ids", row, f.ids);
      bool have_mask = read_row("completion_mask", row, f.mask);
      bool have_segments = read_row("segment_ids", row, f.segments);
      bool have_positions = read_row("segment_positions", row, f.positions);
      bool have_advantages = read_row("advantages", row, f.advantages);
      bool have_logps = read_row("old_per_token_logps", row, f.logps);
      // Real tokens are the segments' tokens; without segment ids, the mask's (no prompt then).
      std::int64_t count = 0, first = -1, last = -1;
      for (std::int64_t i = 0; i < tokens; ++i) {
        real[i] = have_segments ? f.segments[i] > 0 : f.mask[i] != 0.0f;
        if (real[i]) {
          ++count;
          if (first < 0) first = i;
          last = i;
        }
      }
      // layout
      if (count == 0) {
        ++report_.padding_rows;
        if (first_padding_row < 0) first_padding_row = row;
      } else {
        if (first_padding_row >= 0) {
          rec_.fail(kLayout, [&] {
            return fmt::format(
                "row {}: has {} real tokens after row {} which has none (padding "
                "rows of the final micro-batch come last)",
                row, count, first_padding_row);
          });
        }
        ++report_.real_rows;
        report_.real_tokens += count;
        report_.min_real_len =
            report_.real_rows == 1 ? count : std::min(report_.min_real_len, count);
        report_.max_real_len = std::max(report_.max_real_len, count);
        if (last - first + 1 != count) {
          rec_.fail(kLayout, [&] {
            return fmt::format(
                "row {}: real tokens are not one run ({} of them between positions "
                "{} and {})",
                row, count, first, last);
          });
        }
        if (o_.recorded && o_.recorded->real_len && *o_.recorded->real_len != count) {
          rec_.fail(kLayout, [&] {
            return fmt::format("row {}: {} real tokens, payload_settings records real_len {}", row,
                               count, *o_.recorded->real_len);
          });
        }
        check_row_start(row, first, count);
      }
      TokenFields have{have_ids,       have_mask,       have_segments,
                       have_positions, have_advantages, have_logps};
      check_token_fields(row, f, real, have, first, count);
      if (routed != nullptr) check_routing_row(*routed, row, real);
    }
    if (rows_mix_positions()) {
      rec_.fail(kLayout, [&] {
        return std::string(
            "rows mix pad positions: some are moved right (start), others with "
            "as much padding are not (end)");
      });
    }
    if (o_.recorded && o_.recorded->rows && *o_.recorded->rows == report_.rows) {
      std::int64_t expected = o_.recorded->final_rows.value_or(report_.rows);
      if (report_.real_rows != expected) {
        rec_.fail(kLayout, [&] {
          return fmt::format("{} real rows, payload_settings records {} (final_rows {})",
                             report_.real_rows, expected,
                             o_.recorded->final_rows ? std::to_string(expected) : "null");
        });
      }
    }
    bool end_with_room =
        o_.pad_align && largest_unmoved_padding_ >= *o_.pad_align;  // pad start would move it
    report_.pad_position = report_.real_rows == 0 ? "none"
                           : rows_mix_positions() ? "mixed"
                           : saw_moved_           ? "start"
                           : end_with_room        ? "end"
                                                  : "end (no row moves)";
  }

  struct TokenFields {
    bool ids, mask, segments, positions, advantages, logps;
  };

  void check_token_fields(std::int64_t row, const RowFields& f, const std::vector<char>& real,
                          const TokenFields& have, std::int64_t first, std::int64_t count) {
    const std::int64_t tokens = report_.tokens;
    auto at = [row](const char* field, std::int64_t i) {
      return fmt::format("{}[row {}, token {}]", field, row, i);
    };
    std::int32_t segment = 0;         // current segment id
    std::int64_t segment_start = -1;  // its first position
    std::int64_t prompt = 0;          // mask-0 tokens at the start of the segment
    std::int64_t completion = 0;      // mask-1 tokens after them
    bool mask_order_failed = false;   // one failure per segment for a 0 after the completion
    float segment_advantage = 0;
    bool have_advantage = false;     // segment_advantage holds the completion's first value
    std::vector<std::int64_t> cuts;  // segment starts after the first, relative to `first`
    bool segments_ok = true;
    // A segment ends: its prompt (the leading mask-0 run) must leave a completion and fit P.
    auto finish_segment = [&](std::int64_t end) {
      if (segment_start < 0 || !have.mask) return;
      std::int64_t length = end - segment_start;
      if (completion == 0) {
        rec_.fail(kMask, [&] {
          return fmt::format(
              "completion_mask[row {}, tokens {}..{}]: segment {} has no "
              "completion token (mask 0 on all {} tokens)",
              row, segment_start, end - 1, segment, length);
        });
        return;
      }
      if (!o_.max_prompt_length) return;
      const std::int64_t limit = std::min(*o_.max_prompt_length, length - 1);
      if (prompt > limit || (limit >= 1 && prompt == 0)) {
        rec_.fail(kMask, [&] {
          return fmt::format(
              "completion_mask[row {}, tokens {}..{}]: segment {} of {} tokens has a prompt of "
              "{}, expected {} (max_prompt_length {})",
              row, segment_start, end - 1, segment, length, prompt,
              limit >= 1 ? fmt::format("1..{}", limit) : std::string("0"), *o_.max_prompt_length);
        });
      }
    };
    for (std::int64_t i = 0; i < tokens; ++i) {
      if (!real[i]) {
        if (have.mask && !(f.mask[i] == 0.0f)) {
          rec_.fail(kMask, [&] {
            return fmt::format("{} = {} on padding, expected 0", at("completion_mask", i),
                               value_text(f.mask[i]));
          });
        }
        if (have.ids && f.ids[i] != o_.pad_id) {
          rec_.fail(kPadding, [&] {
            return fmt::format("{} = {} on padding, expected pad id {}", at("completion_ids", i),
                               f.ids[i], o_.pad_id);
          });
        }
        if (have.segments && f.segments[i] != 0) {
          rec_.fail(kPadding, [&] {
            return fmt::format("{} = {} on padding, expected 0", at("segment_ids", i),
                               f.segments[i]);
          });
        }
        if (have.positions && f.positions[i] != 0) {
          rec_.fail(kPadding, [&] {
            return fmt::format("{} = {} on padding, expected 0", at("segment_positions", i),
                               f.positions[i]);
          });
        }
        if (have.advantages && !(f.advantages[i] == 0.0f)) {
          rec_.fail(kPadding, [&] {
            return fmt::format("{} = {} on padding, expected 0", at("advantages", i),
                               value_text(f.advantages[i]));
          });
        }
        if (have.logps && !(f.logps[i] == 0.0f)) {
          rec_.fail(kPadding, [&] {
            return fmt::format("{} = {} on padding, expected 0", at("old_per_token_logps", i),
                               value_text(f.logps[i]));
          });
        }
        continue;
      }
      if (have.ids && (f.ids[i] < 1 || f.ids[i] >= o_.vocab)) {
        rec_.fail(kTokenIds, [&] {
          return fmt::format("{} = {}, expected an id in [1, {})", at("completion_ids", i),
                             f.ids[i], o_.vocab);
        });
      }
      bool new_segment = have.segments ? f.segments[i] != segment : i == first;
      if (new_segment) {
        finish_segment(i);
        if (have.segments && f.segments[i] != segment + 1 && segments_ok) {
          segments_ok = false;
          rec_.fail(kSegments, [&] {
            return fmt::format(
                "{} = {} after segment {}, expected {} (ids count up from 1, one "
                "run each)",
                at("segment_ids", i), f.segments[i], segment, segment + 1);
          });
        }
        segment = have.segments ? f.segments[i] : 1;
        segment_start = i;
        prompt = completion = 0;
        mask_order_failed = false;
        have_advantage = false;
        if (i != first) cuts.push_back(i - first);
      }
      // Without a mask every real token counts as completion (the layout without prompts).
      bool on_completion = !have.mask || f.mask[i] != 0.0f;
      if (have.mask) {
        if (!(f.mask[i] == 0.0f || f.mask[i] == 1.0f)) {
          rec_.fail(kMask, [&] {
            return fmt::format("{} = {}, expected 1 (completion) or 0 (prompt)",
                               at("completion_mask", i), value_text(f.mask[i]));
          });
        } else if (on_completion) {
          ++completion;
        } else if (completion == 0) {
          ++prompt;
        } else if (!mask_order_failed) {
          mask_order_failed = true;
          rec_.fail(kMask, [&] {
            return fmt::format(
                "{} = 0 after {} completion tokens of segment {}, expected 1 (a segment is a "
                "prompt, mask 0, then its completion, mask 1)",
                at("completion_mask", i), completion, segment);
          });
        }
      }
      if (!on_completion) {
        if (have.advantages && !(f.advantages[i] == 0.0f)) {
          rec_.fail(kAdvantages, [&] {
            return fmt::format("{} = {} on a prompt token (mask 0), expected 0",
                               at("advantages", i), value_text(f.advantages[i]));
          });
        }
        if (have.logps && !(f.logps[i] == 0.0f)) {
          rec_.fail(kOldLogps, [&] {
            return fmt::format("{} = {} on a prompt token (mask 0), expected 0",
                               at("old_per_token_logps", i), value_text(f.logps[i]));
          });
        }
      } else {
        if (have.logps && !(std::isfinite(f.logps[i]) && f.logps[i] < 0.0f)) {
          rec_.fail(kOldLogps, [&] {
            return fmt::format("{} = {}, expected a finite negative log-prob",
                               at("old_per_token_logps", i), value_text(f.logps[i]));
          });
        }
        if (have.advantages && !have_advantage) {
          have_advantage = true;
          segment_advantage = f.advantages[i];
          if (!std::isfinite(segment_advantage)) {
            rec_.fail(kAdvantages, [&] {
              return fmt::format("{} = {}, expected a finite value", at("advantages", i),
                                 value_text(segment_advantage));
            });
          } else if (o_.advantages == AdvantageMode::kRandom && segment_advantage == 0.0f) {
            rec_.fail(kAdvantages, [&] {
              return fmt::format("{} = 0 for segment {}, expected a random (non-zero) advantage",
                                 at("advantages", i), segment);
            });
          } else if (o_.advantages == AdvantageMode::kZero && segment_advantage != 0.0f) {
            rec_.fail(kAdvantages, [&] {
              return fmt::format("{} = {} for segment {}, expected 0 (advantages zero)",
                                 at("advantages", i), value_text(segment_advantage), segment);
            });
          }
        } else if (have.advantages && !(f.advantages[i] == segment_advantage) &&
                   std::isfinite(segment_advantage)) {
          rec_.fail(kAdvantages, [&] {
            return fmt::format("{} = {} but segment {} starts with {} (one advantage per segment)",
                               at("advantages", i), value_text(f.advantages[i]), segment,
                               value_text(segment_advantage));
          });
        }
      }
      if (have.positions && f.positions[i] != i - segment_start) {
        rec_.fail(kSegments, [&] {
          return fmt::format("{} = {}, expected {} (position inside segment {})",
                             at("segment_positions", i), f.positions[i], i - segment_start,
                             segment);
        });
      }
    }
    if (count > 0) finish_segment(first + count);
    if (count > 0 && have.segments) {
      std::int64_t segments = static_cast<std::int64_t>(cuts.size()) + 1;
      bool room = (count - 1) / kSegmentAlign >= segments - 1;
      for (std::int64_t cut : cuts) {
        if (room && cut % kSegmentAlign != 0) {
          rec_.fail(kSegments, [&] {
            return fmt::format(
                "segment_ids[row {}]: segment starts at {} from the row's first "
                "token, not a multiple of {} (the row has room for {} aligned "
                "segments)",
                row, cut, kSegmentAlign, segments);
          });
        }
      }
      std::optional<std::int64_t> recorded =
          o_.recorded ? o_.recorded->segments_of_row(row) : std::nullopt;
      if (recorded && *recorded != segments) {
        rec_.fail(kSegments, [&] {
          return fmt::format("segment_ids[row {}]: {} segments, payload_settings records {}", row,
                             segments, *recorded);
        });
      }
    }
  }

  void check_routing_row(const ArrayInfo& routed, std::int64_t row, const std::vector<char>& real) {
    const std::int64_t tokens = report_.tokens,
                       per_token = std::int64_t{report_.layers} * report_.topk;
    const std::int64_t block = std::max<std::int64_t>(1, (std::int64_t{1} << 20) / per_token);
    buffer_.resize(static_cast<std::size_t>(std::min(block, tokens) * per_token));
    for (std::int64_t first = 0; first < tokens; first += block) {
      std::int64_t n = std::min(block, tokens - first);
      std::span<std::int16_t> slots(buffer_.data(), static_cast<std::size_t>(n * per_token));
      read_elements(source_, routed, (row * tokens + first) * per_token, slots);
      for (std::int64_t t = 0; t < n; ++t) {
        const std::int16_t* token = slots.data() + t * per_token;
        std::int64_t i = first + t;
        if (!real[i]) {
          for (std::int64_t s = 0; s < per_token; ++s) {
            if (token[s] != -1) {
              rec_.fail(kPadding, [&] {
                return fmt::format(
                    "routed_experts[row {}, token {}, layer {}] = {} on padding, "
                    "expected -1",
                    row, i, s / report_.topk, token_text(token, s / report_.topk));
              });
              break;
            }
          }
          continue;
        }
        bool token_ok = true;
        for (int layer = 0; layer < report_.layers; ++layer) {
          ++stamp_;
          const std::int16_t* experts = token + layer * report_.topk;
          for (int k = 0; k < report_.topk; ++k) {
            std::int16_t e = experts[k];
            if (e < 0 || e >= experts_) {
              token_ok = false;
              rec_.fail(kRouting, [&] {
                return fmt::format(
                    "routed_experts[row {}, token {}, layer {}] = {}: {} is not "
                    "an expert in [0, {})",
                    row, i, layer, token_text(token, layer), e, experts_);
              });
              break;
            }
            largest_expert_ = std::max<int>(largest_expert_, e);
            if (seen_[e] == stamp_) {
              token_ok = false;
              rec_.fail(kRouting, [&] {
                return fmt::format(
                    "routed_experts[row {}, token {}, layer {}] = {}: expert {} "
                    "appears twice",
                    row, i, layer, token_text(token, layer), e);
              });
              break;
            }
            seen_[e] = stamp_;
          }
        }
        // Loads count only well-formed tokens, so an id out of range cannot index past the end.
        if (token_ok) counter_->add_token(token);
      }
    }
  }

  std::string token_text(const std::int16_t* token, int layer) const {
    std::string out = "[";
    for (int k = 0; k < report_.topk; ++k) {
      out += (k ? ", " : "") + std::to_string(token[layer * report_.topk + k]);
    }
    return out + "]";
  }

  void check_targets() {
    if (!counter_) {
      rec_.skip(kRoutingTargets, "no usable routing");
      return;
    }
    if (o_.experts == 0) {
      // The model's expert count is not known: the ids seen are all there is to go by (at least
      // K, so a token's K distinct experts fit).
      report_.experts = std::max(largest_expert_ + 1, report_.topk);
      report_.settings.push_back({"experts", std::to_string(report_.experts), "inferred"});
      report_.diagnostics.push_back(
          {Severity::kNote, "",
           fmt::format("experts: {}, inferred from the largest expert id + 1 (give --experts E for "
                       "the model's count; loads and max/mean use this many)",
                       report_.experts)});
      if (report_.experts % o_.ep != 0) {
        fail(
            "expert parallelism {} does not divide the {} experts inferred from the routing; "
            "give --experts",
            o_.ep, report_.experts);
      }
    }
    const std::size_t experts = static_cast<std::size_t>(report_.experts);
    for (int layer = 0; layer < report_.layers; ++layer) {
      report_.per_layer.push_back(summarize_loads(
          counter_->loads(layer).first(experts), counter_->tokens(layer), o_.ep, o_.buffer_factor));
    }
    if (o_.targets.empty()) {
      rec_.skip(kRoutingTargets, "no target table given");
      return;
    }
    if (report_.real_tokens == 0) {
      rec_.skip(kRoutingTargets, "no real tokens");
      return;
    }
    if (static_cast<int>(o_.targets.size()) != report_.layers) {
      rec_.fail(kRoutingTargets, [&] {
        return fmt::format("the target table has {} layers, routed_experts has {}",
                           o_.targets.size(), report_.layers);
      });
      return;
    }
    report_.targets = o_.targets;
    for (int layer = 0; layer < report_.layers; ++layer) {
      const LoadStats& s = report_.per_layer[layer];
      double target = o_.targets[layer];
      double tolerance = routing_target_tolerance(target, s.mean);
      if (!(std::abs(s.max_over_mean - target) <= tolerance)) {
        rec_.fail(kRoutingTargets, [&] {
          return fmt::format(
              "layer {}: max/mean {:.4f} (expert {}: {} of mean {:.1f}), target "
              "{:.4f} +- {:.4f}",
              layer, s.max_over_mean, s.hottest_expert, s.max_load, s.mean, target, tolerance);
        });
      }
    }
  }

  const ByteSource& source_;
  const std::vector<ArrayInfo>& arrays_;
  const VerifyOptions& o_;
  Recorder rec_;
  VerifyReport report_;
  std::set<std::string, std::less<>> usable_;
  std::optional<LoadCounter> counter_;
  std::vector<std::int64_t> seen_;
  std::int64_t stamp_ = 0;
  std::vector<std::int16_t> buffer_;
  int experts_ = 0;  // ids counted: the known experts, or every int16 id when unknown
  int largest_expert_ = -1;
  bool saw_moved_ = false;                     // a row moved right (pad start)
  std::int64_t smallest_shift_ = -1;           // the smallest move of such a row
  std::int64_t largest_unmoved_padding_ = -1;  // the most padding of a row left at 0
};

}  // namespace

bool VerifyReport::passed() const {
  return std::all_of(checks.begin(), checks.end(), [](const CheckResult& c) { return c.passed(); });
}

Outcome VerifyReport::outcome() const { return outcome_of(!passed()); }

const CheckResult* VerifyReport::check(const std::string& name) const {
  for (const CheckResult& c : checks) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

VerifyOptions resolve_verify_options(const VerifyFlags& flags,
                                     const std::optional<PayloadSettings>& recorded,
                                     VerifyOptions o, std::string* targets_source) {
  const PayloadSettings* file = recorded ? &*recorded : nullptr;
  auto used = [&o](const char* name, const auto& value, const char* from) {
    o.settings.push_back({name, fmt::format("{}", value), from});
  };
  // A setting: the option when given, else the file's record when there is one.
  auto pick = [&](const char* name, const auto& option, const auto& in_file, auto& target) {
    if (option) {
      target = *option;
      used(name, *option, "option");
    } else if (in_file) {
      target = *in_file;
      used(name, *in_file, "file");
    }
  };
  o.experts = 0;  // inferred by verify_payload unless known
  if (flags.experts) {
    o.experts = *flags.experts;
    used("experts", *flags.experts, "option");
  } else if (std::optional<int> experts = file ? recorded_experts(*file) : std::nullopt) {
    o.experts = *experts;
    used("experts", *experts, "file");
  }
  pick("vocab", flags.vocab, file ? file->vocab : std::nullopt, o.vocab);
  if (!flags.vocab && !(file && file->vocab)) used("vocab", o.vocab, "default");
  auto position_text = [](const std::optional<PadPosition>& p) {
    return p ? std::optional<std::string>(std::string(to_string(*p))) : std::nullopt;
  };
  std::optional<std::string> position_shown;
  pick("pad_position", position_text(flags.pad_position),
       position_text(file ? file->pad_position : std::nullopt), position_shown);
  if (position_shown) o.pad_position = parse_pad_position(*position_shown);
  pick("pad_align", flags.pad_align, file ? file->pad_align : std::nullopt, o.pad_align);
  auto mode_text = [](const std::optional<AdvantageMode>& m) {
    return m ? std::optional<std::string>(std::string(to_string(*m))) : std::nullopt;
  };
  std::optional<std::string> mode_shown;
  pick("advantages", mode_text(flags.advantages), mode_text(file ? file->advantages : std::nullopt),
       mode_shown);
  if (mode_shown) o.advantages = parse_advantage_mode(*mode_shown);
  pick("max_prompt_length", flags.max_prompt_length, file ? file->max_prompt_length : std::nullopt,
       o.max_prompt_length);
  if (file && file->pad_id) {
    o.pad_id = *file->pad_id;
    used("pad_id", *file->pad_id, "file");
  }

  // Targets: a table given is scaled by --routing-scale, else by the recorded scale; the file's
  // own targets are recorded scaled, and --routing-scale re-scales them.
  targets_source->clear();
  o.targets.clear();
  // Plain values: GCC 12 -O3 warns of an uninitialised optional<double> read here.
  const bool scale_recorded = file != nullptr && file->routing_scale.has_value();
  const double recorded_scale = scale_recorded ? *file->routing_scale : 1.0;
  if (flags.no_targets) {
    o.settings.push_back({"routing_targets", "not checked (--no-targets)", "option"});
  } else if (flags.routing_targets) {
    double scale = flags.routing_scale.value_or(recorded_scale);
    o.targets = scale_routing_targets(*flags.routing_targets, scale);
    *targets_source = flags.routing_targets_source;
    if (scale != 1.0) *targets_source += fmt::format(", scaled by {}", scale);
    used("routing_targets", flags.routing_targets_source, "option");
    if (flags.routing_scale || scale_recorded) {
      used("routing_scale", scale, flags.routing_scale ? "option" : "file");
    }
  } else if (file && file->routing_targets) {
    o.targets = *file->routing_targets;
    std::string source =
        file->routing_targets_source.empty() ? "unnamed table" : file->routing_targets_source;
    *targets_source = source + " (recorded in payload_settings";
    if (flags.routing_scale && *flags.routing_scale != recorded_scale) {
      double was = recorded_scale;
      if (!(was > 0)) {
        fail(
            "the file's targets were recorded at routing scale {}, which cannot be undone; give "
            "--routing-targets with --routing-scale",
            was);
      }
      for (double& target : o.targets) target = 1.0 + (target - 1.0) / was;  // the table as given
      o.targets = scale_routing_targets(o.targets, *flags.routing_scale);
      *targets_source += fmt::format(", re-scaled from {} to {}", was, *flags.routing_scale);
      used("routing_scale", *flags.routing_scale, "option");
    }
    *targets_source += ")";
    used("routing_targets", source, "file");
  } else {
    o.settings.push_back(
        {"routing_targets", file ? "none recorded" : "none (no payload_settings)", "default"});
  }
  o.recorded = recorded;
  return o;
}

VerifyReport verify_payload(const ByteSource& source, const std::vector<ArrayInfo>& arrays,
                            const VerifyOptions& options) {
  require_member(source, arrays, kRoutedExpertsMember,
                 "not a bench payload (docs/payload-spec.md)");
  return Verifier(source, arrays, options).run();
}

VerifyReport verify_payload(const Payload& payload, const VerifyOptions& options) {
  PayloadView view = view_payload(payload);
  return verify_payload(*view.source, view.arrays, options);
}

}  // namespace rtb::payload
