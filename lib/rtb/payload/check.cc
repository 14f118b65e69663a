#include "rtb/payload/check.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstring>
#include <exception>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <thread>
#include <utility>

#include "rtb/base/error.h"
#include "rtb/base/memory.h"
#include "rtb/payload/repeats.h"
#include "rtb/payload/routing.h"
#include "rtb/payload/slots.h"

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

// What one row's checks found, apart from its layout (which depends on the rows before it): the
// failures per check and the first few described. Rows are checked by several threads and their
// tallies merged into the report in row order, so the report is the same as one thread's.
struct RowTally {
  explicit RowTally(int max_examples) : max_examples(max_examples) {}
  // `describe` is called only for listed failures, as in Recorder::fail.
  template <typename Describe>
  void fail(CheckId id, const Describe& describe) {
    if (failures[id]++ < max_examples) examples.emplace_back(id, describe());
  }
  int max_examples;
  std::int64_t count = 0, first = -1, last = -1;  // the row's real tokens: how many, where
  std::array<std::int64_t, kCheckCount> failures{};
  std::vector<std::pair<CheckId, std::string>> examples;  // in the order found
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
  // Adds a row's failures after those recorded so far.
  void absorb(RowTally& tally) {
    for (int id = 0; id < kCheckCount; ++id) results_[id].failures += tally.failures[id];
    for (auto& [id, text] : tally.examples) {
      if (static_cast<int>(results_[id].examples.size()) < max_examples_) {
        results_[id].examples.push_back(std::move(text));
      }
    }
  }
  std::vector<CheckResult> take() { return std::move(results_); }

 private:
  int max_examples_;
  std::vector<CheckResult> results_;
};

std::string value_text(double value) { return fmt::format("{}", value); }

// One row's per-token fields: read from the source into a RowScratch, or in the payload's memory.
struct RowFields {
  std::span<const std::int32_t> ids, segments, positions;
  std::span<const float> mask, advantages, logps;
};

// One expert of one layer, as a thread counts it: the stamp of the last token that listed it
// there (a token listing it twice in a layer finds its own stamp) beside its load, so that both
// are one address.
struct ExpertCell {
  std::uint32_t stamp;
  std::uint32_t load;
};

// What one thread checking rows keeps between them: read buffers, the real-token flags of the row,
// and its share of the expert loads.
struct RowScratch {
  std::vector<std::int32_t> ids, segments, positions;
  std::vector<float> mask, advantages, logps;
  std::vector<char> real;
  std::vector<std::int16_t> slots;       // a block of routed_experts
  std::optional<RoutingCursor> routing;  // makes the blocks of a routing built on demand
  // Well-formed tokens seen last, to count a repeat of one once (repeats.h); unset when the
  // routing repeats too little to pay for the lookups.
  std::optional<RepeatedTokens> repeats;
  // Loads [layer][expert] of the well-formed real tokens this thread counted, with their stamps,
  // and how many tokens. uint32 keeps a cell at 8 bytes (60 layers of 512 experts: 240 KiB, in
  // the L2 cache); a load grows by at most 1 per token, so the loads move to `wide_loads` before
  // `counted_since_widen` could pass 2^32 - 1. Mapped zero pages: with the experts unknown (every
  // int16 id) only the pages of the ids seen are touched.
  LargeArray<ExpertCell> cells;
  std::uint32_t stamp = 0;  // the last token's
  std::vector<std::int64_t> wide_loads;
  std::int64_t counted = 0;
  std::int64_t counted_since_widen = 0;
  int largest_expert = -1;
};

// Bytes of routed_experts read at a time: a block stays in the L2 cache while it is checked.
constexpr std::int64_t kRoutingBlockBytes = 128 << 10;
// Rows whose tallies are kept before they are merged (memory does not grow with the rows).
constexpr std::int64_t kRowsPerBatch = 256;
// Copies of tokens a checking thread keeps to find repeats: one huge page (1,747 tokens of 60 x
// top-10).
constexpr std::size_t kRepeatBytes = 2 << 20;
// A thread stops looking for repeats when fewer than 1 in kRepeatsWorthIt of its first
// kRepeatTrial lookups found one: a lookup (a hash of the token's slots) costs about a tenth of
// counting them.
constexpr std::int64_t kRepeatTrial = 2048;
constexpr std::int64_t kRepeatsWorthIt = 8;
// A token that differs from the one in its place in at most this many layers is a near twin
// (count_near_twin).
constexpr int kNearTwinLayers = 8;

// Counts one token's `layers` groups of K experts (every one in [0, experts)) into
// cells[layer][expert].load, the token's stamp `stamp` (never used before) marking the experts it
// listed. Returns `layers` when every group lists K distinct experts, else the layer of the first
// repeat, with *slot its place in the group (the groups before it and the slots before it in its
// group are counted). K > 0 is known at compile time, so the group's loop unrolls into a few
// instructions per slot; K = 0 takes `topk` at run time.
template <int K>
int count_groups(const std::int16_t* token, int layers, int topk, std::size_t experts,
                 ExpertCell* cells, std::uint32_t stamp, int* slot) {
  const int k_count = K > 0 ? K : topk;
  for (int layer = 0; layer < layers; ++layer, token += k_count, cells += experts) {
    for (int k = 0; k < k_count; ++k) {
      ExpertCell& cell = cells[static_cast<std::uint16_t>(token[k])];
      if (cell.stamp == stamp) {
        *slot = k;
        return layer;
      }
      cell.stamp = stamp;
      ++cell.load;
    }
  }
  return layers;
}

using CountGroups = int (*)(const std::int16_t*, int, int, std::size_t, ExpertCell*, std::uint32_t,
                            int*);

// count_groups for `topk`: unrolled up to 16 experts per token, else the run-time loop.
CountGroups count_groups_for(int topk) {
  constexpr int kUnrolled = 16;
  static constexpr auto table = []<int... N>(std::integer_sequence<int, N...>) {
    return std::array<CountGroups, sizeof...(N)>{count_groups<N>...};
  }
  (std::make_integer_sequence<int, kUnrolled + 1>());
  return topk >= 1 && topk <= kUnrolled ? table[static_cast<std::size_t>(topk)] : count_groups<0>;
}

class Verifier {
 public:
  // `direct`: arrays whose data is in memory already (by name), read in place instead of
  // through `source`.
  // `built_routing`: routed_experts is made on demand from this layout (a build that is not
  // written), each checking thread with a cursor of its own, a block at a time.
  Verifier(const ByteSource& source, const std::vector<ArrayInfo>& arrays,
           const VerifyOptions& options,
           std::map<std::string, std::span<const std::byte>, std::less<>> direct = {},
           std::shared_ptr<const RoutingLayout> built_routing = nullptr)
      : source_(source),
        arrays_(arrays),
        o_(options),
        rec_(options.max_examples),
        direct_(std::move(direct)),
        built_routing_(std::move(built_routing)) {}

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

  // Elements [first, first + count) of a usable array: in place when its data is in memory, else
  // read into `buffer`.
  template <typename T>
  std::span<const T> elements(const ArrayInfo& info, std::int64_t first, std::int64_t count,
                              std::vector<T>& buffer) const {
    auto in_memory = direct_.find(info.name);
    if (in_memory != direct_.end() && in_memory->second.size() == info.data_bytes &&
        info.dtype == dtype_of<T>() && first >= 0 && count >= 0 && first + count <= info.count) {
      return {reinterpret_cast<const T*>(in_memory->second.data()) + first,
              static_cast<std::size_t>(count)};
    }
    buffer.resize(static_cast<std::size_t>(count));
    read_elements(source_, info, first, std::span(buffer));
    return buffer;
  }

  template <typename T>
  bool read_row(const char* name, std::int64_t row, std::vector<T>& buffer,
                std::span<const T>& out) const {
    const ArrayInfo* info = usable(name);
    if (info == nullptr) {
      out = {};
      return false;
    }
    out = elements(*info, row * report_.tokens, report_.tokens, buffer);
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
    const ArrayInfo* routed = usable("routed_experts");
    if (routed == nullptr) rec_.skip(kRouting, "routed_experts is missing or malformed");
    if (!usable("segment_ids") && !usable("completion_mask")) {
      for (CheckId id :
           {kMask, kPadding, kTokenIds, kLayout, kSegments, kAdvantages, kOldLogps, kRouting}) {
        rec_.skip(id, "neither segment_ids nor completion_mask tells real tokens from padding");
      }
      return;
    }
    routed_ = routed;
    count_groups_ = count_groups_for(report_.topk);
    const std::int64_t rows = report_.rows;
    int threads = o_.threads > 0
                      ? o_.threads
                      : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    threads =
        static_cast<int>(std::clamp<std::int64_t>(threads, 1, std::max<std::int64_t>(rows, 1)));
    std::vector<RowScratch>& scratch = scratch_;
    scratch.resize(static_cast<std::size_t>(threads));
    if (routed_ != nullptr) {
      const std::size_t per_token = static_cast<std::size_t>(report_.layers) * report_.topk;
      const std::size_t entries = o_.repeat_entries < 0
                                      ? RepeatedTokens::entries_for(per_token, kRepeatBytes)
                                      : static_cast<std::size_t>(o_.repeat_entries);
      for (RowScratch& s : scratch) {
        s.cells = LargeArray<ExpertCell>(static_cast<std::size_t>(report_.layers) * experts_,
                                         PageAdvice::kNone);
        if (entries > 0 && per_token > 0) s.repeats.emplace(per_token, entries);
      }
    }
    std::int64_t first_padding_row = -1;
    for (std::int64_t begin = 0; begin < rows; begin += kRowsPerBatch) {
      const std::int64_t end = std::min(rows, begin + kRowsPerBatch);
      std::vector<RowTally> tallies(static_cast<std::size_t>(end - begin),
                                    RowTally(o_.max_examples));
      check_row_batch(begin, end, tallies, scratch);
      for (std::int64_t row = begin; row < end; ++row) {
        RowTally& tally = tallies[static_cast<std::size_t>(row - begin)];
        check_layout(row, tally.count, tally.first, tally.last, first_padding_row);
        rec_.absorb(tally);
      }
    }
    if (routed_ != nullptr) {
      counted_ = true;  // the threads' loads are added up per layer by check_targets
      for (RowScratch& s : scratch) add_pending_repeats(s);
      for (const RowScratch& s : scratch) {
        largest_expert_ = std::max(largest_expert_, s.largest_expert);
        counted_tokens_ += s.counted;
      }
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

  // The layout of one row, in row order (it depends on the rows before it).
  void check_layout(std::int64_t row, std::int64_t count, std::int64_t first, std::int64_t last,
                    std::int64_t& first_padding_row) {
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
      report_.min_real_len = report_.real_rows == 1 ? count : std::min(report_.min_real_len, count);
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
  }

  // Checks rows [begin, end) with the threads of `scratch`, each taking the next row; a row's
  // findings go to its tally. An error (an unreadable row) is rethrown for the first row that
  // had one, after every row before it was checked, as one thread would.
  void check_row_batch(std::int64_t begin, std::int64_t end, std::vector<RowTally>& tallies,
                       std::vector<RowScratch>& scratch) {
    std::atomic<std::int64_t> next{begin};
    std::atomic<std::int64_t> failed_row{end};
    std::vector<std::exception_ptr> errors(static_cast<std::size_t>(end - begin));
    auto work = [&](RowScratch& s) {
      for (;;) {
        const std::int64_t row = next.fetch_add(1);
        if (row >= end || row > failed_row.load()) return;
        try {
          check_row(row, s, tallies[static_cast<std::size_t>(row - begin)]);
        } catch (...) {
          errors[static_cast<std::size_t>(row - begin)] = std::current_exception();
          std::int64_t seen = failed_row.load();
          while (row < seen && !failed_row.compare_exchange_weak(seen, row)) {
          }
        }
      }
    };
    const std::size_t helpers_wanted =
        std::min<std::size_t>(scratch.size(), static_cast<std::size_t>(end - begin)) - 1;
    std::vector<std::thread> helpers;
    for (std::size_t w = 1; w <= helpers_wanted; ++w) {
      try {
        helpers.emplace_back(work, std::ref(scratch[w]));
      } catch (const std::system_error&) {
        break;  // no more threads: the others take the rows
      }
    }
    work(scratch[0]);
    for (std::thread& helper : helpers) helper.join();
    if (failed_row.load() < end) {
      std::rethrow_exception(errors[static_cast<std::size_t>(failed_row.load() - begin)]);
    }
  }

  // Every check of one row but its layout.
  void check_row(std::int64_t row, RowScratch& s, RowTally& t) const {
    const std::int64_t tokens = report_.tokens;
    RowFields f;
    bool have_ids = read_row("completion_ids", row, s.ids, f.ids);
    bool have_mask = read_row("completion_mask", row, s.mask, f.mask);
    bool have_segments = read_row("segment_ids", row, s.segments, f.segments);
    bool have_positions = read_row("segment_positions", row, s.positions, f.positions);
    bool have_advantages = read_row("advantages", row, s.advantages, f.advantages);
    bool have_logps = read_row("old_per_token_logps", row, s.logps, f.logps);
    // Real tokens are the segments' tokens; without segment ids, the mask's (no prompt then).
    std::vector<char>& real = s.real;
    real.resize(static_cast<std::size_t>(tokens));
    std::int64_t count = 0, first = -1, last = -1;
    for (std::int64_t i = 0; i < tokens; ++i) {
      real[i] = have_segments ? f.segments[i] > 0 : f.mask[i] != 0.0f;
      if (real[i]) {
        ++count;
        if (first < 0) first = i;
        last = i;
      }
    }
    t.count = count;
    t.first = first;
    t.last = last;
    TokenFields have{have_ids,       have_mask,       have_segments,
                     have_positions, have_advantages, have_logps};
    check_token_fields(row, f, real, have, first, count, t);
    if (routed_ != nullptr) check_routing_row(*routed_, row, s, t);
  }

  struct TokenFields {
    bool ids, mask, segments, positions, advantages, logps;
  };

  void check_token_fields(std::int64_t row, const RowFields& f, const std::vector<char>& real,
                          const TokenFields& have, std::int64_t first, std::int64_t count,
                          RowTally& t) const {
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
        t.fail(kMask, [&] {
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
        t.fail(kMask, [&] {
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
          t.fail(kMask, [&] {
            return fmt::format("{} = {} on padding, expected 0", at("completion_mask", i),
                               value_text(f.mask[i]));
          });
        }
        if (have.ids && f.ids[i] != o_.pad_id) {
          t.fail(kPadding, [&] {
            return fmt::format("{} = {} on padding, expected pad id {}", at("completion_ids", i),
                               f.ids[i], o_.pad_id);
          });
        }
        if (have.segments && f.segments[i] != 0) {
          t.fail(kPadding, [&] {
            return fmt::format("{} = {} on padding, expected 0", at("segment_ids", i),
                               f.segments[i]);
          });
        }
        if (have.positions && f.positions[i] != 0) {
          t.fail(kPadding, [&] {
            return fmt::format("{} = {} on padding, expected 0", at("segment_positions", i),
                               f.positions[i]);
          });
        }
        if (have.advantages && !(f.advantages[i] == 0.0f)) {
          t.fail(kPadding, [&] {
            return fmt::format("{} = {} on padding, expected 0", at("advantages", i),
                               value_text(f.advantages[i]));
          });
        }
        if (have.logps && !(f.logps[i] == 0.0f)) {
          t.fail(kPadding, [&] {
            return fmt::format("{} = {} on padding, expected 0", at("old_per_token_logps", i),
                               value_text(f.logps[i]));
          });
        }
        continue;
      }
      if (have.ids && (f.ids[i] < 1 || f.ids[i] >= o_.vocab)) {
        t.fail(kTokenIds, [&] {
          return fmt::format("{} = {}, expected an id in [1, {})", at("completion_ids", i),
                             f.ids[i], o_.vocab);
        });
      }
      bool new_segment = have.segments ? f.segments[i] != segment : i == first;
      if (new_segment) {
        finish_segment(i);
        if (have.segments && f.segments[i] != segment + 1 && segments_ok) {
          segments_ok = false;
          t.fail(kSegments, [&] {
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
          t.fail(kMask, [&] {
            return fmt::format("{} = {}, expected 1 (completion) or 0 (prompt)",
                               at("completion_mask", i), value_text(f.mask[i]));
          });
        } else if (on_completion) {
          ++completion;
        } else if (completion == 0) {
          ++prompt;
        } else if (!mask_order_failed) {
          mask_order_failed = true;
          t.fail(kMask, [&] {
            return fmt::format(
                "{} = 0 after {} completion tokens of segment {}, expected 1 (a segment is a "
                "prompt, mask 0, then its completion, mask 1)",
                at("completion_mask", i), completion, segment);
          });
        }
      }
      if (!on_completion) {
        if (have.advantages && !(f.advantages[i] == 0.0f)) {
          t.fail(kAdvantages, [&] {
            return fmt::format("{} = {} on a prompt token (mask 0), expected 0",
                               at("advantages", i), value_text(f.advantages[i]));
          });
        }
        if (have.logps && !(f.logps[i] == 0.0f)) {
          t.fail(kOldLogps, [&] {
            return fmt::format("{} = {} on a prompt token (mask 0), expected 0",
                               at("old_per_token_logps", i), value_text(f.logps[i]));
          });
        }
      } else {
        if (have.logps && !(std::isfinite(f.logps[i]) && f.logps[i] < 0.0f)) {
          t.fail(kOldLogps, [&] {
            return fmt::format("{} = {}, expected a finite negative log-prob",
                               at("old_per_token_logps", i), value_text(f.logps[i]));
          });
        }
        if (have.advantages && !have_advantage) {
          have_advantage = true;
          segment_advantage = f.advantages[i];
          if (!std::isfinite(segment_advantage)) {
            t.fail(kAdvantages, [&] {
              return fmt::format("{} = {}, expected a finite value", at("advantages", i),
                                 value_text(segment_advantage));
            });
          } else if (o_.advantages == AdvantageMode::kRandom && segment_advantage == 0.0f) {
            t.fail(kAdvantages, [&] {
              return fmt::format("{} = 0 for segment {}, expected a random (non-zero) advantage",
                                 at("advantages", i), segment);
            });
          } else if (o_.advantages == AdvantageMode::kZero && segment_advantage != 0.0f) {
            t.fail(kAdvantages, [&] {
              return fmt::format("{} = {} for segment {}, expected 0 (advantages zero)",
                                 at("advantages", i), value_text(segment_advantage), segment);
            });
          }
        } else if (have.advantages && !(f.advantages[i] == segment_advantage) &&
                   std::isfinite(segment_advantage)) {
          t.fail(kAdvantages, [&] {
            return fmt::format("{} = {} but segment {} starts with {} (one advantage per segment)",
                               at("advantages", i), value_text(f.advantages[i]), segment,
                               value_text(segment_advantage));
          });
        }
      }
      if (have.positions && f.positions[i] != i - segment_start) {
        t.fail(kSegments, [&] {
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
          t.fail(kSegments, [&] {
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
        t.fail(kSegments, [&] {
          return fmt::format("segment_ids[row {}]: {} segments, payload_settings records {}", row,
                             segments, *recorded);
        });
      }
    }
  }

  // The routing of one row: -1 on padding; on each real token K distinct experts in [0, E) at
  // every layer, counted into the loads. One pass per token over its L*K contiguous slots: their
  // smallest and largest (slots.h) settle the range and padding checks, and the loads are counted
  // while a stamp per expert finds an expert listed twice in a layer. A token that fails is
  // checked again by check_token_routing, which names what is wrong.
  void check_routing_row(const ArrayInfo& routed, std::int64_t row, RowScratch& s,
                         RowTally& t) const {
    const std::int64_t tokens = report_.tokens,
                       per_token = std::int64_t{report_.layers} * report_.topk;
    const std::int64_t block = std::max<std::int64_t>(
        1, kRoutingBlockBytes / (per_token * std::int64_t{sizeof(std::int16_t)}));
    SlotRange (*const range_of)(const std::int16_t*, std::size_t) =
        o_.portable ? slot_range_portable : slot_range;
    if (s.counted_since_widen > std::numeric_limits<std::uint32_t>::max() - tokens) {
      add_pending_repeats(s);  // the loads it adds are part of what widen moves
      widen(s);
    }
    for (std::int64_t first = 0; first < tokens; first += block) {
      const std::int64_t n = std::min(block, tokens - first);
      std::span<const std::int16_t> slots;
      if (built_routing_ != nullptr) {
        if (!s.routing) s.routing.emplace(built_routing_);
        s.slots.resize(static_cast<std::size_t>(n * per_token));
        s.routing->write(row * tokens + first, s.slots);
        slots = s.slots;
      } else {
        slots = elements(routed, (row * tokens + first) * per_token, n * per_token, s.slots);
      }
      for (std::int64_t k = 0; k < n; ++k) {
        const std::int16_t* token = slots.data() + k * per_token;
        const std::int64_t i = first + k;
        if (!s.real[i]) {
          const SlotRange range = range_of(token, static_cast<std::size_t>(per_token));
          if (range.min != -1 || range.max != -1) padding_routing_failure(row, i, token, t);
          continue;
        }
        if (s.repeats && s.repeats->lookups() == kRepeatTrial) end_repeat_trial(s);
        if (s.repeats && (s.repeats->repeat(token) || count_near_twin(token, s))) {
          // The same slots as a token that passed, or as one but for a few layers that pass: its
          // loads are added later.
          ++s.counted;
          ++s.counted_since_widen;
          continue;
        }
        const SlotRange range = range_of(token, static_cast<std::size_t>(per_token));
        if (range.min >= 0 && range.max < experts_ && count_token(token, s)) {
          s.largest_expert = std::max<int>(s.largest_expert, range.max);
          if (s.repeats) remember_token(token, s);
          continue;
        }
        check_token_routing(row, i, token, s, t);
      }
    }
  }

  void padding_routing_failure(std::int64_t row, std::int64_t i, const std::int16_t* token,
                               RowTally& t) const {
    const std::int64_t per_token = std::int64_t{report_.layers} * report_.topk;
    for (std::int64_t slot = 0; slot < per_token; ++slot) {
      if (token[slot] != -1) {
        t.fail(kPadding, [&] {
          return fmt::format(
              "routed_experts[row {}, token {}, layer {}] = {} on padding, "
              "expected -1",
              row, i, slot / report_.topk, token_text(token, slot / report_.topk));
        });
        break;
      }
    }
  }

  // A new token stamp (stamps restart at 1 before they would wrap).
  static std::uint32_t next_stamp(RowScratch& s) {
    if (s.stamp == std::numeric_limits<std::uint32_t>::max()) {
      for (ExpertCell& cell : s.cells.span()) cell.stamp = 0;
      s.stamp = 0;
    }
    return ++s.stamp;
  }

  // Counts a real token whose slots are all experts in [0, E) into the loads, unless a layer
  // lists an expert twice: then nothing of it is counted and it returns false.
  bool count_token(const std::int16_t* token, RowScratch& s) const {
    const int layers = report_.layers;
    int slot = 0;
    const int layer = count_groups_(token, layers, report_.topk, static_cast<std::size_t>(experts_),
                                    s.cells.data(), next_stamp(s), &slot);
    if (layer < layers) {
      uncount(token, layer, slot, s);
      return false;
    }
    ++s.counted;
    ++s.counted_since_widen;
    return true;
  }

  // Remembers a token count_token took, adding the pending repeats of the one it replaces.
  void remember_token(const std::int16_t* token, RowScratch& s) const {
    s.repeats->remember(token, [&](const RepeatedTokens::Pending& p) { add_repeats(p, s); });
  }

  // Stops looking for repeats when the trial found too few.
  void end_repeat_trial(RowScratch& s) const {
    if (s.repeats->hits() * kRepeatsWorthIt >= s.repeats->lookups()) return;
    add_pending_repeats(s);
    s.repeats.reset();
  }

  // A real token that repeat() did not find, whose place holds a token (its twin) that differs
  // from it in a few layers only (the builder's tokens a tile apart differ where a run starts):
  // when the token's experts in those layers are in [0, E) and distinct, it takes the twin's
  // place and returns true. The twin's pending repeats then become the token's, after their
  // difference is added where the two differ, so neither is counted slot by slot. False (and
  // nothing changed) otherwise: the caller checks and counts the token as any other.
  bool count_near_twin(const std::int16_t* token, RowScratch& s) const {
    const std::optional<RepeatedTokens::Pending> twin = s.repeats->occupant();
    if (!twin) return false;
    const int topk = report_.topk;
    const std::int16_t* other = twin->slots.data();
    // The layers where they differ, in order: compared 8 bytes (4 slots) at a time.
    std::array<int, kNearTwinLayers> changed;
    int n = 0;
    auto differs_at = [&](std::size_t slot) {
      const int layer = static_cast<int>(slot) / topk;
      if (n > 0 && changed[static_cast<std::size_t>(n - 1)] == layer) return true;
      if (n == kNearTwinLayers) return false;
      changed[static_cast<std::size_t>(n++)] = layer;
      return true;
    };
    const std::size_t slots = static_cast<std::size_t>(report_.layers) * topk;
    std::size_t slot = 0;
    for (; slot + 4 <= slots; slot += 4) {
      std::uint64_t a, b;
      std::memcpy(&a, token + slot, 8);
      std::memcpy(&b, other + slot, 8);
      if (a == b) continue;
      for (std::size_t i = slot; i < slot + 4; ++i) {
        if (token[i] != other[i] && !differs_at(i)) return false;
      }
    }
    for (; slot < slots; ++slot) {
      if (token[slot] != other[slot] && !differs_at(slot)) return false;
    }
    if (n == 0) return false;
    const std::size_t experts = static_cast<std::size_t>(experts_);
    const std::uint32_t stamp = next_stamp(s);
    int largest = -1;
    for (int i = 0; i < n; ++i) {
      const int layer = changed[static_cast<std::size_t>(i)];
      ExpertCell* cells = s.cells.data() + static_cast<std::size_t>(layer) * experts;
      for (int k = 0; k < topk; ++k) {
        const std::int16_t e = token[layer * topk + k];
        if (e < 0 || e >= experts_ || cells[e].stamp == stamp) return false;
        cells[e].stamp = stamp;
        largest = std::max<int>(largest, e);
      }
    }
    // count x (twin - token) where they differ: uint32 arithmetic wraps a load below zero for a
    // while, and the token's pending copies bring it back (add_pending_repeats runs before any
    // load is read or widened).
    for (int i = 0; twin->count > 0 && i < n; ++i) {
      const int layer = changed[static_cast<std::size_t>(i)];
      ExpertCell* cells = s.cells.data() + static_cast<std::size_t>(layer) * experts;
      for (int k = layer * topk; k < (layer + 1) * topk; ++k) {
        if (token[k] == other[k]) continue;
        cells[static_cast<std::uint16_t>(other[k])].load += twin->count;
        cells[static_cast<std::uint16_t>(token[k])].load -= twin->count;
      }
    }
    s.largest_expert = std::max(s.largest_expert, largest);
    s.repeats->take_place(token);
    return true;
  }

  // Adds a remembered token's repeats to the loads: `count` more on each of its slots' cells.
  void add_repeats(const RepeatedTokens::Pending& p, RowScratch& s) const {
    const std::size_t experts = static_cast<std::size_t>(experts_);
    ExpertCell* cells = s.cells.data();
    const std::int16_t* slot = p.slots.data();
    for (int layer = 0; layer < report_.layers; ++layer, cells += experts) {
      for (int k = 0; k < report_.topk; ++k, ++slot) {
        cells[static_cast<std::uint16_t>(*slot)].load += p.count;
      }
    }
  }

  void add_pending_repeats(RowScratch& s) const {
    if (s.repeats) s.repeats->drain([&](const RepeatedTokens::Pending& p) { add_repeats(p, s); });
  }

  // Takes back what count_token counted of a token before layer `layer`, slot `slot`.
  void uncount(const std::int16_t* token, int layer, int slot, RowScratch& s) const {
    const std::size_t experts = static_cast<std::size_t>(experts_);
    for (int l = 0; l <= layer; ++l) {
      const int slots = l < layer ? report_.topk : slot;
      for (int k = 0; k < slots; ++k) {
        --s.cells[static_cast<std::size_t>(l) * experts +
                  static_cast<std::uint16_t>(token[l * report_.topk + k])]
              .load;
      }
    }
  }

  // Moves a thread's uint32 loads into its int64 ones.
  static void widen(RowScratch& s) {
    if (s.wide_loads.empty()) s.wide_loads.assign(s.cells.size(), 0);
    for (std::size_t cell = 0; cell < s.cells.size(); ++cell) {
      s.wide_loads[cell] += s.cells[cell].load;
      s.cells[cell].load = 0;
    }
    s.counted_since_widen = 0;
  }

  // A real token that count_token did not take: every failure of it, named, layer by layer (a
  // layer's first wrong slot); counted only when well-formed after all.
  void check_token_routing(std::int64_t row, std::int64_t i, const std::int16_t* token,
                           RowScratch& s, RowTally& t) const {
    bool token_ok = true;
    const std::uint32_t stamp = next_stamp(s);
    for (int layer = 0; layer < report_.layers; ++layer) {
      const std::int16_t* experts = token + layer * report_.topk;
      ExpertCell* cells = s.cells.data() + static_cast<std::size_t>(layer) * experts_;
      for (int k = 0; k < report_.topk; ++k) {
        std::int16_t e = experts[k];
        if (e < 0 || e >= experts_) {
          token_ok = false;
          t.fail(kRouting, [&] {
            return fmt::format(
                "routed_experts[row {}, token {}, layer {}] = {}: {} is not "
                "an expert in [0, {})",
                row, i, layer, token_text(token, layer), e, experts_);
          });
          break;
        }
        s.largest_expert = std::max<int>(s.largest_expert, e);
        if (cells[e].stamp == stamp) {
          token_ok = false;
          t.fail(kRouting, [&] {
            return fmt::format(
                "routed_experts[row {}, token {}, layer {}] = {}: expert {} "
                "appears twice",
                row, i, layer, token_text(token, layer), e);
          });
          break;
        }
        cells[e].stamp = stamp;
      }
    }
    // Loads count only well-formed tokens, so an id out of range cannot index past the end.
    if (token_ok) {
      if (!count_token(token, s)) {
        fail("internal: routed_experts[row {}, token {}] passed and failed its check", row, i);
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
    if (!counted_) {
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
    std::vector<std::int64_t> loads(experts);
    for (int layer = 0; layer < report_.layers; ++layer) {
      // The threads' counts of the layer (experts <= experts_, the cells' width).
      const std::size_t base = static_cast<std::size_t>(layer) * static_cast<std::size_t>(experts_);
      std::fill(loads.begin(), loads.end(), 0);
      for (const RowScratch& s : scratch_) {
        for (std::size_t e = 0; e < experts; ++e) {
          loads[e] += s.cells[base + e].load + (s.wide_loads.empty() ? 0 : s.wide_loads[base + e]);
        }
      }
      report_.per_layer.push_back(summarize_loads(loads, counted_tokens_, o_.ep, o_.buffer_factor));
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
  std::map<std::string, std::span<const std::byte>, std::less<>> direct_;
  std::shared_ptr<const RoutingLayout> built_routing_;
  std::set<std::string, std::less<>> usable_;
  const ArrayInfo* routed_ = nullptr;   // routed_experts when usable and real tokens are known
  CountGroups count_groups_ = nullptr;  // for the routing's top-k
  // The threads that checked rows, with the loads they counted of the well-formed real tokens.
  std::vector<RowScratch> scratch_;
  bool counted_ = false;             // the loads were counted
  std::int64_t counted_tokens_ = 0;  // those tokens: each counts in every layer
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
  // The checks read the arrays in place rather than copy them out of the view.
  std::map<std::string, std::span<const std::byte>, std::less<>> direct = {
      {"completion_ids", std::as_bytes(std::span(payload.completion_ids))},
      {"completion_mask", std::as_bytes(std::span(payload.completion_mask))},
      {"segment_ids", std::as_bytes(std::span(payload.segment_ids))},
      {"segment_positions", std::as_bytes(std::span(payload.segment_positions))},
      {"advantages", std::as_bytes(std::span(payload.advantages))},
      {"old_per_token_logps", std::as_bytes(std::span(payload.old_per_token_logps))},
  };
  if (payload.routed_experts.size() == 0 && payload.routing != nullptr) {
    return Verifier(*view.source, view.arrays, options, std::move(direct), payload.routing).run();
  }
  direct.emplace("routed_experts", std::as_bytes(std::span(payload.routed_experts.data(),
                                                           payload.routed_experts.size())));
  return Verifier(*view.source, view.arrays, options, std::move(direct)).run();
}

VerifyOptions checks_of_build(const Payload& payload) {
  VerifyOptions checks;
  checks.experts = payload.options.experts;
  checks.vocab = payload.options.vocab;
  checks.targets = payload.targets;
  checks.pad_position = payload.options.pad_position;
  checks.pad_align = payload.options.pad_align;
  checks.advantages = payload.options.advantages;
  checks.max_prompt_length = payload.options.max_prompt_length;
  checks.recorded = parse_payload_settings(payload.settings_json, "payload_settings");
  checks.threads = payload.options.threads;
  return checks;
}

}  // namespace rtb::payload
