#include "rtb/payload_check.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "rtb/error.h"

namespace rtb {
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
    {"mask", "completion_mask is 1 on real tokens (segment id > 0) and 0 on padding"},
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
     "advantages are finite and constant in each segment (random: non-zero; "
     "zero: 0)"},
    {"old_logps", "old_per_token_logps are finite and negative on real tokens"},
    {"routing", "every real token has K distinct experts in [0, E) at every layer"},
    {"routing_targets",
     "each layer's max/mean expert load is within 1% of its target (or one "
     "token of the hottest load at tiny shapes)"},
};

enum class Kind { kPerToken, kEmpty, kRouted };

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
};

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
    if (o_.experts < 1 || o_.experts > 32767) {
      fail("--experts must be in 1..32767 (got {})", o_.experts);
    }
    if (o_.ep < 1 || o_.experts % o_.ep != 0) {
      fail("expert parallelism {} does not divide {} experts into equal groups", o_.ep, o_.experts);
    }
    if (o_.pad_align < 1 || o_.pad_align % kSegmentAlign != 0) {
      fail("--pad-align must be a positive multiple of {} (got {})", kSegmentAlign, o_.pad_align);
    }
    report_.experts = o_.experts;
    check_fields();
    if (report_.rows > 0 || report_.tokens > 0) check_rows();
    check_targets();
    report_.checks = rec_.take();
    return std::move(report_);
  }

 private:
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
      }
      bool shape_ok = info->shape.size() == expected.size();
      for (std::size_t d = 0; shape_ok && d < expected.size(); ++d) {
        shape_ok = expected[d] < 0 ? false : info->shape[d] == expected[d];
      }
      if (spec.kind == Kind::kRouted && shape_ok) {
        if (info->shape[2] < 1 || info->shape[3] < 1 || info->shape[3] > o_.experts) {
          shape_ok = false;
        }
      }
      if (!shape_ok) {
        ok = false;
        rec_.fail(kShapes, [&] {
          std::string want = spec.kind == Kind::kRouted
                                 ? fmt::format("[{}, {}, L, K] with 1 <= K <= {}", report_.rows,
                                               report_.tokens, o_.experts)
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
    for (const ArrayInfo& info : arrays_) {
      if (!known.count(info.name)) {
        report_.notes.push_back(
            fmt::format("field '{}' ({} {}) is not part of the spec; not checked", info.name,
                        dtype_name(info.dtype), format_shape(info.shape)));
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
      counter_.emplace(report_.layers, report_.topk, o_.experts);
      seen_.assign(o_.experts, -1);
    }
    std::vector<char> real(tokens);
    std::int64_t first_padding_row = -1;
    bool saw_moved = false, saw_unmoved_end = false;
    for (std::int64_t row = 0; row < report_.rows; ++row) {
      bool have_ids = read_row("completion_ids", row, f.ids);
      bool have_mask = read_row("completion_mask", row, f.mask);
      bool have_segments = read_row("segment_ids", row, f.segments);
      bool have_positions = read_row("segment_positions", row, f.positions);
      bool have_advantages = read_row("advantages", row, f.advantages);
      bool have_logps = read_row("old_per_token_logps", row, f.logps);
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
        std::int64_t shift = pad_start_shift(tokens, count, o_.pad_align);
        bool end_ok = first == 0;
        bool start_ok = first == shift;
        if (shift == 0) {
          saw_unmoved_end = true;
        } else if (start_ok) {
          saw_moved = true;
        } else if (end_ok) {
          saw_unmoved_end = true;
          end_rows_with_room_ = true;
        }
        if (!end_ok && !start_ok) {
          rec_.fail(kLayout, [&] {
            return fmt::format(
                "row {}: real tokens start at {}, expected 0 (pad end) or {} "
                "(pad start: {} padding tokens rounded down to pad_align {})",
                row, first, shift, tokens - count, o_.pad_align);
          });
        } else if (o_.pad_position == PadPosition::kEnd && !end_ok) {
          rec_.fail(kLayout, [&] {
            return fmt::format("row {}: real tokens start at {}, expected 0 (pad position end)",
                               row, first);
          });
        } else if (o_.pad_position == PadPosition::kStart && !start_ok) {
          rec_.fail(kLayout, [&] {
            return fmt::format(
                "row {}: real tokens start at {}, expected {} (pad position start, "
                "pad_align {})",
                row, first, shift, o_.pad_align);
          });
        }
      }
      check_token_fields(row, f, real, have_ids, have_mask, have_segments, have_positions,
                         have_advantages, have_logps, first, count);
      if (routed != nullptr) check_routing_row(*routed, row, real);
    }
    if (saw_moved && end_rows_with_room_) {
      rec_.fail(kLayout, [&] {
        return std::string(
            "rows mix pad positions: some are moved right (start), others with "
            "as much padding are not (end)");
      });
    }
    report_.pad_position = report_.real_rows == 0             ? "none"
                           : saw_moved && end_rows_with_room_ ? "mixed"
                           : saw_moved                        ? "start"
                           : end_rows_with_room_              ? "end"
                                                              : "end (no row moves)";
    (void)saw_unmoved_end;
  }

  void check_token_fields(std::int64_t row, const RowFields& f, const std::vector<char>& real,
                          bool have_ids, bool have_mask, bool have_segments, bool have_positions,
                          bool have_advantages, bool have_logps, std::int64_t first,
                          std::int64_t count) {
    const std::int64_t tokens = report_.tokens;
    auto at = [row](const char* field, std::int64_t i) {
      return fmt::format("{}[row {}, token {}]", field, row, i);
    };
    std::int32_t segment = 0;         // current segment id
    std::int64_t segment_start = -1;  // its first position
    float segment_advantage = 0;
    std::vector<std::int64_t> cuts;  // segment starts after the first, relative to `first`
    bool segments_ok = true;
    for (std::int64_t i = 0; i < tokens; ++i) {
      if (have_mask) {
        float expected = real[i] ? 1.0f : 0.0f;
        if (!(f.mask[i] == expected)) {
          rec_.fail(kMask, [&] {
            return fmt::format("{} = {}, expected {}", at("completion_mask", i),
                               value_text(f.mask[i]), expected);
          });
        }
      }
      if (!real[i]) {
        if (have_ids && f.ids[i] != 0) {
          rec_.fail(kPadding, [&] {
            return fmt::format("{} = {} on padding, expected pad id 0", at("completion_ids", i),
                               f.ids[i]);
          });
        }
        if (have_segments && f.segments[i] != 0) {
          rec_.fail(kPadding, [&] {
            return fmt::format("{} = {} on padding, expected 0", at("segment_ids", i),
                               f.segments[i]);
          });
        }
        if (have_positions && f.positions[i] != 0) {
          rec_.fail(kPadding, [&] {
            return fmt::format("{} = {} on padding, expected 0", at("segment_positions", i),
                               f.positions[i]);
          });
        }
        if (have_advantages && !(f.advantages[i] == 0.0f)) {
          rec_.fail(kPadding, [&] {
            return fmt::format("{} = {} on padding, expected 0", at("advantages", i),
                               value_text(f.advantages[i]));
          });
        }
        if (have_logps && !(f.logps[i] == 0.0f)) {
          rec_.fail(kPadding, [&] {
            return fmt::format("{} = {} on padding, expected 0", at("old_per_token_logps", i),
                               value_text(f.logps[i]));
          });
        }
        continue;
      }
      if (have_ids && (f.ids[i] < 1 || f.ids[i] >= o_.vocab)) {
        rec_.fail(kTokenIds, [&] {
          return fmt::format("{} = {}, expected an id in [1, {})", at("completion_ids", i),
                             f.ids[i], o_.vocab);
        });
      }
      if (have_logps && !(std::isfinite(f.logps[i]) && f.logps[i] < 0.0f)) {
        rec_.fail(kOldLogps, [&] {
          return fmt::format("{} = {}, expected a finite negative log-prob",
                             at("old_per_token_logps", i), value_text(f.logps[i]));
        });
      }
      bool new_segment = have_segments ? f.segments[i] != segment : i == first;
      if (new_segment) {
        if (have_segments && f.segments[i] != segment + 1 && segments_ok) {
          segments_ok = false;
          rec_.fail(kSegments, [&] {
            return fmt::format(
                "{} = {} after segment {}, expected {} (ids count up from 1, one "
                "run each)",
                at("segment_ids", i), f.segments[i], segment, segment + 1);
          });
        }
        segment = have_segments ? f.segments[i] : 1;
        segment_start = i;
        if (i != first) cuts.push_back(i - first);
        if (have_advantages) {
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
        }
      } else if (have_advantages && !(f.advantages[i] == segment_advantage) &&
                 std::isfinite(segment_advantage)) {
        rec_.fail(kAdvantages, [&] {
          return fmt::format("{} = {} but segment {} starts with {} (one advantage per segment)",
                             at("advantages", i), value_text(f.advantages[i]), segment,
                             value_text(segment_advantage));
        });
      }
      if (have_positions && f.positions[i] != i - segment_start) {
        rec_.fail(kSegments, [&] {
          return fmt::format("{} = {}, expected {} (position inside segment {})",
                             at("segment_positions", i), f.positions[i], i - segment_start,
                             segment);
        });
      }
    }
    if (count > 0 && have_segments) {
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
            if (e < 0 || e >= o_.experts) {
              token_ok = false;
              rec_.fail(kRouting, [&] {
                return fmt::format(
                    "routed_experts[row {}, token {}, layer {}] = {}: {} is not "
                    "an expert in [0, {})",
                    row, i, layer, token_text(token, layer), e, o_.experts);
              });
              break;
            }
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
    for (int layer = 0; layer < report_.layers; ++layer) {
      report_.per_layer.push_back(summarize_loads(counter_->loads(layer), counter_->tokens(layer),
                                                  o_.ep, o_.buffer_factor));
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
  bool end_rows_with_room_ = false;
};

}  // namespace

bool VerifyReport::passed() const {
  return std::all_of(checks.begin(), checks.end(), [](const CheckResult& c) { return c.passed(); });
}

const CheckResult* VerifyReport::check(const std::string& name) const {
  for (const CheckResult& c : checks) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

VerifyReport verify_payload(const ByteSource& source, const std::vector<ArrayInfo>& arrays,
                            const VerifyOptions& options) {
  return Verifier(source, arrays, options).run();
}

}  // namespace rtb
