// The bench payload builder (docs/payload-spec.md): one synthetic micro-batch with the
// trainer warm-up payload's fields, shapes and dtypes, varied token ids, segments, tail padding
// (or padding first), seeded advantages and replayed top-k routing whose per-layer max/mean
// expert load hits a target table.
//
// Rows are laid out as Tunix's sequence packer lays them out (layout v2): a segment is one
// trajectory, a prompt of p tokens then a completion of len - p >= 1 tokens. Ids, segment ids,
// positions (0..len-1) and routing cover the whole segment; completion_mask, advantages and
// old_per_token_logps only its completion (0 on the prompt). p is 0 when max_prompt_length is 0
// (the old layout) or the segment has one token, else a seeded draw in [1, min(P, len - 1)].
//
// How the routing is laid out (the spec leaves this to the builder):
//  * Loads. Per layer, the N real tokens of the micro-batch make N*K assignments. The expert
//    ranks get the smooth exponential profile of expert_load_profile (routing_load.h), whose
//    max/mean is the layer's scaled target; a seeded permutation per layer decides which expert
//    id holds which rank, so hot experts are spread over the ids (and the expert-parallel ranks).
//  * Assignment. The loads are laid end to end in expert-id order as a sequence S of N*K slots;
//    column c (0 <= c < N) gets the K experts S[c], S[c + N], ..., S[c + (K-1) N]. An expert's
//    run in S is at most N long, so no column holds an expert twice, and each expert gets
//    exactly its load. Columns go to tokens by strides: the real tokens are cut into m tiles of
//    at most 256 consecutive tokens, and tile t takes columns t, t + m, t + 2m, ..., so every
//    tile (and so every row and every context-parallel chunk) sees the whole profile in
//    proportion; a seeded permutation shuffles the columns inside a tile, and another the order
//    of each column's K experts (S lists them by expert id).
//  * Speed. Tile t+1's columns are tile t's plus one, so its experts differ only where a run of
//    S starts; the builder keeps one tile's experts for all layers (256 x L x K int16: 300 KB at
//    L = 60, K = 10, so it stays in the L2 cache) and applies those few changes between tiles,
//    so writing the routing is a streaming copy of that block per tile. Threads take contiguous
//    ranges of tiles; the result does not depend on their number.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "rtb/base/diagnostic.h"
#include "rtb/base/memory.h"
#include "rtb/payload/npy.h"

namespace rtb::payload {

inline constexpr std::int64_t kSegmentAlign = 64;       // the GatedDeltaNet chunk
inline constexpr std::int64_t kDefaultPadAlign = 4096;  // the largest Splash block of the recipe
inline constexpr std::int64_t kDefaultVocab = 248320;   // Qwen3.5-397B-A17B
// The bench's regular rows: 60,948 real tokens of a 65,536-token budget (4,588 of padding).
inline constexpr std::int64_t kBenchTokens = 65536;
inline constexpr std::int64_t kBenchPadding = 4588;
inline constexpr std::int64_t kRoutingTileTokens = 256;

enum class PadPosition { kEnd, kStart };
enum class AdvantageMode { kRandom, kZero };
std::string_view to_string(PadPosition position);
std::string_view to_string(AdvantageMode mode);
PadPosition parse_pad_position(std::string_view text);      // "end" | "start"; throws otherwise
AdvantageMode parse_advantage_mode(std::string_view text);  // "random" | "zero"

// The default real length of a row: the budget minus the bench's share of padding,
// tokens - round(tokens * 4588 / 65536) (half up, as the driver), at least 1: 60,948 of 65,536.
std::int64_t default_real_length(std::int64_t tokens);

struct PayloadOptions {
  std::int64_t rows = 0;
  std::int64_t tokens = 0;  // T, the token budget of a row
  int layers = 0;
  int topk = 0;
  int experts = 0;
  std::int64_t vocab = kDefaultVocab;
  std::int64_t real_len = -1;          // -1: default_real_length(tokens)
  int segments = 1;                    // per real row
  bool segments_given = false;         // --segments was given (recorded as "segments_rule")
  std::int64_t max_prompt_length = 0;  // P; 0: every segment is all completion
  std::int64_t final_rows = -1;        // real rows; -1: all rows (a regular micro-batch)
  PadPosition pad_position = PadPosition::kEnd;
  std::int64_t pad_align = kDefaultPadAlign;
  std::vector<double> routing_targets;  // one per layer, before routing_scale
  std::string routing_targets_source;   // where the table came from (recorded in the file)
  double routing_scale = 1.0;
  AdvantageMode advantages = AdvantageMode::kRandom;
  bool old_logps = true;
  std::uint64_t seed = 0;
  int threads = 0;  // 0: the machine's cores
};

// Fills the defaults and checks every option (rows, tokens >= 1; 1 <= real_len <= tokens;
// pad_align a positive multiple of 64; final_rows in [0, rows]; targets per validate_
// routing_targets after scaling). Segments beyond the real length are clamped, with a warning
// appended to `diagnostics` (warnings). Throws rtb::Error naming the option.
PayloadOptions resolve_payload_options(PayloadOptions options,
                                       std::vector<Diagnostic>* diagnostics);

// The first real position of a row under pad position "start": its trailing padding rounded
// down to a multiple of pad_align (0 when it has less padding than that).
std::int64_t pad_start_shift(std::int64_t tokens, std::int64_t real_len, std::int64_t pad_align);

// The one check of a pad_align (render-bench, check-payload, the builder): a positive multiple
// of kSegmentAlign. Throws rtb::Error otherwise.
void check_pad_align(std::int64_t pad_align);

// Where the real tokens and segments of one row lie.
struct RowLayout {
  std::int64_t start = 0;   // first real position
  std::int64_t length = 0;  // real tokens; 0 for a padding row of the final micro-batch
  std::vector<std::int64_t> segment_starts;  // relative to `start`, ascending, the first is 0
  std::vector<std::int64_t> prompt_lengths;  // per segment: its first p tokens are the prompt
};

// The layout of `row` for resolved options. Segment cut points are seeded per row and fall on
// multiples of 64; when the row is too short for that, on any distinct positions. Prompt lengths
// are seeded per (row, segment), see the top of this file.
RowLayout row_layout(const PayloadOptions& resolved, std::int64_t row);

// Large arrays are rtb::LargeArray (base/memory.h), populated up front when mapped.
using rtb::LargeArray;

// The routing's plan (the loads laid out as runs of S, the tiles and the seeded shuffles; see the
// top of this file), from which any part of routed_experts can be written. Defined in builder.cc;
// immutable, so threads share it.
struct RoutingLayout;

// How build_payload keeps routed_experts: in memory, or on demand, only its layout, a window at
// a time through a RoutingCursor. A payload made on demand is checked and written without ever
// holding the whole array (160 MB at 8 x 16,384 tokens, 60 layers, top-10; 5 GB at the seed's
// 64 x 65,536), and pays no first touch of fresh memory for it.
enum class RoutingStorage { kInMemory, kOnDemand };

// Writes windows of routed_experts from its layout, for one thread. Windows asked for in
// ascending order cost what writing the whole array costs (one tile's experts kept and changed
// where runs start); a window before the previous one computes its first tile from scratch.
class RoutingCursor {
 public:
  explicit RoutingCursor(std::shared_ptr<const RoutingLayout> layout);
  ~RoutingCursor();
  RoutingCursor(RoutingCursor&&) noexcept;
  RoutingCursor& operator=(RoutingCursor&&) noexcept;

  // Writes cells [first_cell, first_cell + out.size() / (L * K)) of the rows x tokens cells, L * K
  // slots each, as routed_experts holds them. `streaming_stores`: the window is written once and
  // not read soon (a whole array), so stores bypass the cache. Throws rtb::Error for a window
  // outside the array or not a whole number of cells.
  void write(std::int64_t first_cell, std::span<std::int16_t> out, bool streaming_stores = false);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

struct Payload {
  PayloadOptions options;                               // resolved
  std::vector<double> targets;                          // per layer, scaled
  std::vector<std::vector<std::int64_t>> expert_loads;  // [layer][expert], as written
  std::int64_t real_tokens = 0;
  // Warnings about the options (no place); --json `diagnostics`, and `warnings` (the messages)
  // until check-payload.build's next schema version.
  std::vector<Diagnostic> diagnostics;
  std::string settings_json;  // the payload_settings member (payload_settings.h)
  // Fields, C order, [rows, tokens] unless noted.
  std::vector<std::int32_t> completion_ids;
  std::vector<float> completion_mask;
  std::vector<std::int32_t> segment_ids;
  std::vector<std::int32_t> segment_positions;
  std::vector<float> advantages;
  std::vector<float> old_per_token_logps;        // empty when options.old_logps is false
  LargeArray<std::int16_t> routed_experts;       // [rows, tokens, layers, topk]; empty on demand
  std::shared_ptr<const RoutingLayout> routing;  // routed_experts' layout (RoutingCursor)
};

// Builds the whole payload. Deterministic for the options (seed included), whatever `threads`.
Payload build_payload(const PayloadOptions& options,
                      RoutingStorage storage = RoutingStorage::kInMemory);

// routed_experts' bytes for resolved options, whether in memory or on demand.
std::uint64_t routing_bytes(const PayloadOptions& resolved);

// Only the routing (routed_experts), for benchmarks: writes rows x tokens x layers x topk int16
// into `out` for resolved options and the per-layer expert loads (as Payload::expert_loads).
void build_routing(const PayloadOptions& resolved,
                   const std::vector<std::vector<std::int64_t>>& expert_loads,
                   std::span<std::int16_t> out);

// The planned per-layer expert loads for resolved options (what build_payload writes).
std::vector<std::vector<std::int64_t>> plan_expert_loads(const PayloadOptions& resolved,
                                                         const std::vector<double>& targets,
                                                         std::int64_t real_tokens);

// Names of the payload's fields, in the order they are written (payload_settings last).
std::vector<std::string> payload_field_names(bool with_old_logps);

// Writes the payload as an uncompressed .npz (numpy.load reads it). A routing made on demand is
// written a chunk at a time (made twice: once for the CRC before it, once to write it).
void write_payload(const Payload& payload, const std::string& path);

// The payload's arrays as a readable source, without copying, so the checks that read payload
// files (payload_check.h) run on a payload in memory too. The view borrows `payload`.
struct PayloadView {
  std::unique_ptr<ByteSource> source;
  std::vector<ArrayInfo> arrays;
};
PayloadView view_payload(const Payload& payload);

}  // namespace rtb::payload
