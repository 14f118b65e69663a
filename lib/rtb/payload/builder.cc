#include "rtb/payload/builder.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <limits>
#include <new>
#include <numbers>
#include <numeric>
#include <thread>
#include <unordered_set>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "rtb/base/error.h"
#include "rtb/base/mix.h"
#include "rtb/payload/load.h"
#include "rtb/payload/routing.h"
#include "rtb/payload/settings.h"

namespace rtb::payload {
namespace {

// --- seeded randomness
// ------------------------------------------------------------------------------ Counter-based:
// every value is a hash (mix64) of (seed, stream, index), so it does not depend on the order of
// computation or the number of threads.

enum class Stream : std::uint64_t {
  kTokenIds = 1,
  kLogps = 2,
  kAdvantages = 3,
  kSegmentCuts = 4,
  kExpertRanks = 5,
  kTileShuffle = 6,
  kSlotOrder = 7,
  kPromptLengths = 8,
};

std::uint64_t stream_key(std::uint64_t seed, Stream stream, std::uint64_t sub = 0) {
  return mix64(mix64(seed + kGoldenGamma * (static_cast<std::uint64_t>(stream) + 1)) +
               kGoldenGamma * (sub + 1));
}

std::uint64_t random_at(std::uint64_t key, std::uint64_t index) {
  return mix64(key + kGoldenGamma * (index + 1));
}

// A uniform integer in [0, n) from 64 random bits.
std::uint64_t below(std::uint64_t bits, std::uint64_t n) {
  return static_cast<std::uint64_t>((static_cast<unsigned __int128>(bits) * n) >> 64);
}

// A uniform double in (0, 1).
double open_unit(std::uint64_t bits) { return (static_cast<double>(bits >> 11) + 0.5) * 0x1.0p-53; }

// A sequential generator for the few things drawn in order (permutations, cut points).
class SplitMix {
 public:
  explicit SplitMix(std::uint64_t key) : state_(key) {}
  std::uint64_t next() { return mix64(state_ += kGoldenGamma); }
  std::uint64_t below(std::uint64_t n) { return payload::below(next(), n); }

 private:
  std::uint64_t state_;
};

std::vector<std::int32_t> seeded_permutation(std::int64_t n, std::uint64_t key) {
  std::vector<std::int32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  SplitMix random(key);
  for (std::int64_t i = n - 1; i > 0; --i) {
    std::swap(order[i], order[random.below(static_cast<std::uint64_t>(i) + 1)]);
  }
  return order;
}

// Runs body(begin, end) over [0, n) split into contiguous ranges, one per thread. An exception
// a range throws reaches the caller (the first range's first) once every thread has ended.
template <typename Body>
void parallel_ranges(int threads, std::int64_t n, const Body& body) {
  threads = static_cast<int>(std::clamp<std::int64_t>(threads, 1, std::max<std::int64_t>(n, 1)));
  if (threads == 1) {
    body(std::int64_t{0}, n);
    return;
  }
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(threads));
  std::vector<std::thread> workers;
  for (int w = 0; w < threads; ++w) {
    std::int64_t begin = n * w / threads, end = n * (w + 1) / threads;
    workers.emplace_back([&body, &error = errors[static_cast<std::size_t>(w)], begin, end] {
      try {
        body(begin, end);
      } catch (...) {
        error = std::current_exception();
      }
    });
  }
  for (std::thread& worker : workers) worker.join();
  for (const std::exception_ptr& error : errors) {
    if (error) std::rethrow_exception(error);
  }
}

std::vector<std::int64_t> segment_cuts(std::int64_t length, int segments, std::uint64_t seed,
                                       std::int64_t row) {
  std::vector<std::int64_t> starts = {0};
  if (segments <= 1) return starts;
  std::int64_t needed = segments - 1;
  std::int64_t grid = (length - 1) / kSegmentAlign;  // multiples of 64 inside (0, length)
  bool aligned = grid >= needed;
  std::int64_t choices = aligned ? grid : length - 1;
  // Floyd's sampling of `needed` distinct values in [1, choices].
  SplitMix random(stream_key(seed, Stream::kSegmentCuts, static_cast<std::uint64_t>(row)));
  std::unordered_set<std::int64_t> chosen;
  for (std::int64_t j = choices - needed + 1; j <= choices; ++j) {
    std::int64_t pick = 1 + static_cast<std::int64_t>(random.below(static_cast<std::uint64_t>(j)));
    chosen.insert(chosen.count(pick) ? j : pick);
  }
  for (std::int64_t value : chosen) starts.push_back(aligned ? value * kSegmentAlign : value);
  std::sort(starts.begin(), starts.end());
  return starts;
}

// --- the routing
// -------------------------------------------------------------------------------------

}  // namespace

struct RoutingLayout {
  // A run of S (see builder.h) starting inside tile `tile`: from there on, slot `slot` of pattern
  // row `row` in `layer` holds `expert`.
  struct RunStart {
    std::int64_t tile;
    std::int32_t row;
    std::int32_t layer;
    std::int32_t slot;
    std::int32_t expert;
  };

  RoutingLayout(const PayloadOptions& o, const std::vector<std::vector<std::int64_t>>& loads) {
    rows = o.rows;
    tokens = o.tokens;
    layers = o.layers;
    topk = o.topk;
    experts = o.experts;
    per_token = static_cast<std::int64_t>(layers) * topk;
    real_rows = o.final_rows;
    length = o.real_len;
    start = o.pad_position == PadPosition::kStart
                ? pad_start_shift(o.tokens, o.real_len, o.pad_align)
                : 0;
    n = real_rows * length;
    if (n == 0) return;
    tiles = (n + kRoutingTileTokens - 1) / kRoutingTileTokens;
    small = n / tiles;
    larger_tiles = n % tiles;
    shuffle = seeded_permutation(small, stream_key(o.seed, Stream::kTileShuffle));
    // Where slot k of a column goes among the token's K slots: a seeded shuffle per pattern row
    // and layer, so a token's experts are not listed in expert-id order (band k of S holds ids
    // after band k - 1's).
    slot_at.resize(static_cast<std::size_t>(small + 1) * per_token);
    for (std::int64_t i = 0; i <= small; ++i) {
      for (int layer = 0; layer < layers; ++layer) {
        std::size_t base = static_cast<std::size_t>(i) * per_token + layer * topk;
        SplitMix random(stream_key(o.seed, Stream::kSlotOrder, base));
        for (int k = 0; k < topk; ++k) slot_at[base + k] = k;
        for (int k = topk - 1; k > 0; --k) {
          std::swap(slot_at[base + k], slot_at[base + random.below(k + 1)]);
        }
      }
    }
    // Run starts of S per layer (expert-id order), and where each lands among the tiles.
    if (loads.size() != static_cast<std::size_t>(layers)) fail("internal: loads per layer");
    runs.assign(layers, std::vector<std::int64_t>(experts + 1, 0));
    for (int layer = 0; layer < layers; ++layer) {
      std::vector<std::int64_t>& run = runs[layer];
      for (int e = 0; e < experts; ++e) {
        if (loads[layer][e] < 0 || loads[layer][e] > n) {
          fail("internal: expert {} of layer {} has load {} with {} tokens", e, layer,
               loads[layer][e], n);
        }
        run[e + 1] = run[e] + loads[layer][e];
      }
      if (run[experts] != n * topk) {
        fail("internal: layer {} loads sum to {}, expected {}", layer, run[experts], n * topk);
      }
    }
    // Within a tile, changes of one cell must apply in run order (empty runs share a start): the
    // order (tile, layer, expert). A bucket sort by tile, the starts visited in (layer, expert)
    // order twice (to count each tile's, then to place them), keeps that order within a tile.
    auto for_each_start = [&](const auto& visit) {
      for (int layer = 0; layer < layers; ++layer) {
        for (int e = 1; e < experts; ++e) {
          const std::int64_t begin = runs[layer][e];
          if (begin >= n * topk) continue;
          const std::int64_t column = begin % n;
          visit(RunStart{column % tiles, static_cast<std::int32_t>(column / tiles), layer,
                         static_cast<std::int32_t>(begin / n), e});
        }
      }
    };
    std::vector<std::size_t> next_of_tile(static_cast<std::size_t>(tiles) + 1, 0);
    for_each_start(
        [&](const RunStart& start) { ++next_of_tile[static_cast<std::size_t>(start.tile) + 1]; });
    std::partial_sum(next_of_tile.begin(), next_of_tile.end(), next_of_tile.begin());
    starts.resize(next_of_tile.back());
    for_each_start([&](const RunStart& start) {
      starts[next_of_tile[static_cast<std::size_t>(start.tile)]++] = start;
    });
  }

  std::int64_t tile_size(std::int64_t tile) const { return small + (tile < larger_tiles); }
  std::int64_t tile_begin(std::int64_t tile) const {
    return tile * small + std::min(tile, larger_tiles);
  }
  // The tile of real token `global` (0 <= global < n).
  std::int64_t tile_of(std::int64_t global) const {
    const std::int64_t in_larger = larger_tiles * (small + 1);
    return global < in_larger ? global / (small + 1) : larger_tiles + (global - in_larger) / small;
  }
  // Real tokens before cell `cell` (row-major over rows x tokens), so real token g is at the cell
  // where real_before steps from g to g + 1.
  std::int64_t real_before(std::int64_t cell) const {
    const std::int64_t row = cell / tokens;
    if (row >= real_rows) return n;
    return row * length + std::clamp<std::int64_t>(cell % tokens - start, 0, length);
  }

  // The experts of every column of `tile`, computed from scratch.
  void fill_pattern(std::int64_t tile, std::vector<std::int16_t>& pattern) const {
    std::int64_t size = tile_size(tile);
    for (int layer = 0; layer < layers; ++layer) {
      const std::vector<std::int64_t>& run = runs[layer];
      for (int slot = 0; slot < topk; ++slot) {
        std::int64_t position = tile + slot * n;
        std::int64_t e = std::upper_bound(run.begin(), run.end(), position) - run.begin() - 1;
        for (std::int64_t i = 0; i < size; ++i, position += tiles) {
          while (run[e + 1] <= position) ++e;
          std::size_t base = static_cast<std::size_t>(i) * per_token + layer * topk;
          pattern[base + slot_at[base + slot]] = static_cast<std::int16_t>(e);
        }
      }
    }
  }

  void apply(const RunStart& s, std::vector<std::int16_t>& pattern) const {
    std::size_t base = static_cast<std::size_t>(s.row) * per_token + s.layer * topk;
    pattern[base + slot_at[base + s.slot]] = static_cast<std::int16_t>(s.expert);
  }

  std::int64_t rows = 0, tokens = 0;
  int layers = 0, topk = 0, experts = 0;
  std::int64_t per_token = 0;
  std::int64_t real_rows = 0, length = 0, start = 0;
  std::int64_t n = 0;             // real tokens
  std::int64_t tiles = 0;         // m
  std::int64_t small = 0;         // tokens in the smaller tiles
  std::int64_t larger_tiles = 0;  // tiles with small + 1 tokens (the first ones)
  std::vector<std::int32_t> shuffle;
  std::vector<std::int32_t> slot_at;  // [pattern row][layer][slot] -> position among K
  std::vector<std::vector<std::int64_t>> runs;
  std::vector<RunStart> starts;
};

// A cursor keeps one tile's experts for all layers (`pattern`, valid for tile `tile`: every run
// start up to it applied) and `next`, the first run start after it.
struct RoutingCursor::State {
  std::shared_ptr<const RoutingLayout> layout;
  std::vector<std::int16_t> pattern;
  std::int64_t tile = -1;
  std::size_t next = 0;

  void seek(std::int64_t to) {
    const RoutingLayout& l = *layout;
    if (tile < 0 || to < tile) {
      l.fill_pattern(to, pattern);
      next = static_cast<std::size_t>(
          std::upper_bound(
              l.starts.begin(), l.starts.end(), to,
              [](std::int64_t t, const RoutingLayout::RunStart& s) { return t < s.tile; }) -
          l.starts.begin());
    } else {
      for (; next < l.starts.size() && l.starts[next].tile <= to; ++next) {
        l.apply(l.starts[next], pattern);
      }
    }
    tile = to;
  }

  // Copies the tokens of `tile` that are real tokens [g0, g1) into `out`, whose first cell is
  // `first_cell`.
  void copy_tile(std::int64_t g0, std::int64_t g1, std::span<std::int16_t> out,
                 std::int64_t first_cell, bool streaming) const {
    const RoutingLayout& l = *layout;
    const std::int64_t begin = l.tile_begin(tile);
    const std::int64_t k_begin = std::max<std::int64_t>(0, g0 - begin);
    const std::int64_t k_end = std::min(l.tile_size(tile), g1 - begin);
    const std::size_t token_bytes = static_cast<std::size_t>(l.per_token) * sizeof(std::int16_t);
    std::int64_t row = (begin + k_begin) / l.length, index = (begin + k_begin) % l.length;
    for (std::int64_t k = k_begin; k < k_end; ++k) {
      const std::int64_t source_row = k < l.small ? l.shuffle[k] : k;
      const std::int64_t cell = row * l.tokens + l.start + index;
      std::int16_t* target = out.data() + (cell - first_cell) * l.per_token;
      const std::int16_t* source = pattern.data() + source_row * l.per_token;
      if (streaming) {
        copy_token_streaming(target, source, token_bytes);
      } else {
        std::memcpy(target, source, token_bytes);
      }
      if (++index == l.length) {
        index = 0;
        ++row;
      }
    }
  }

  // The routing is written once and not read back soon: streaming stores skip reading the
  // destination into the cache first, which is most of the memory traffic of a plain copy.
  static void copy_token_streaming(std::int16_t* target, const std::int16_t* source,
                                   std::size_t bytes) {
#if defined(__SSE2__)
    auto address = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p); };
    if (bytes % 16 == 0 && address(target) % 16 == 0 && address(source) % 16 == 0) {
      auto* to = reinterpret_cast<__m128i*>(target);
      const auto* from = reinterpret_cast<const __m128i*>(source);
      for (std::size_t i = 0; i < bytes / 16; ++i)
        _mm_stream_si128(to + i, _mm_load_si128(from + i));
      return;
    }
#endif
    std::memcpy(target, source, bytes);
  }

  static void finish_streaming_stores() {
#if defined(__SSE2__)
    _mm_sfence();  // streaming stores are weakly ordered: publish them before the thread ends
#endif
  }
};

RoutingCursor::RoutingCursor(std::shared_ptr<const RoutingLayout> layout)
    : state_(std::make_unique<State>()) {
  if (layout == nullptr) fail("internal: a routing cursor without a layout");
  state_->pattern.resize(static_cast<std::size_t>(layout->small + 1) * layout->per_token);
  state_->layout = std::move(layout);
}
RoutingCursor::~RoutingCursor() = default;
RoutingCursor::RoutingCursor(RoutingCursor&&) noexcept = default;
RoutingCursor& RoutingCursor::operator=(RoutingCursor&&) noexcept = default;

void RoutingCursor::write(std::int64_t first_cell, std::span<std::int16_t> out,
                          bool streaming_stores) {
  State& s = *state_;
  const RoutingLayout& l = *s.layout;
  const auto per_token = static_cast<std::size_t>(l.per_token);
  const std::int64_t cells = per_token == 0 ? 0 : static_cast<std::int64_t>(out.size() / per_token);
  if (per_token == 0 || out.size() % per_token != 0 || first_cell < 0 ||
      first_cell > l.rows * l.tokens - cells) {
    fail("internal: routing window of {} slots at cell {} is not whole cells of the {} x {} array",
         out.size(), first_cell, l.rows, l.tokens);
  }
  const std::int64_t end_cell = first_cell + cells;
  // Padding: every cell outside its row's real run is -1 (all bits set in two's complement).
  auto pad = [&](std::int64_t from, std::int64_t to) {
    if (from < to) {
      std::memset(out.data() + (from - first_cell) * l.per_token, 0xff,
                  static_cast<std::size_t>(to - from) * per_token * sizeof(std::int16_t));
    }
  };
  for (std::int64_t cell = first_cell; cell < end_cell;) {
    const std::int64_t row = cell / l.tokens;
    const std::int64_t row_end = std::min(end_cell, (row + 1) * l.tokens);
    if (row >= l.real_rows) {
      pad(cell, row_end);
    } else {
      const std::int64_t real_begin = row * l.tokens + l.start, real_end = real_begin + l.length;
      pad(cell, std::min(row_end, real_begin));
      pad(std::max(cell, real_end), row_end);
    }
    cell = row_end;
  }
  // Real tokens: the tiles that hold real tokens [g0, g1), in order.
  const std::int64_t g0 = l.real_before(first_cell), g1 = l.real_before(end_cell);
  if (g0 < g1) {
    const std::int64_t last = l.tile_of(g1 - 1);
    for (std::int64_t tile = l.tile_of(g0); tile <= last; ++tile) {
      s.seek(tile);
      s.copy_tile(g0, g1, out, first_cell, streaming_stores);
    }
  }
  if (streaming_stores) State::finish_streaming_stores();
}

namespace {

// --- a payload in memory as a byte source
// ----------------------------------------------------------

class SegmentedSource final : public ByteSource {
 public:
  explicit SegmentedSource(std::string name) : name_(std::move(name)) {}
  // Appends `bytes` and returns its offset.
  std::uint64_t append(std::span<const std::byte> bytes) {
    std::uint64_t offset = size_;
    if (!bytes.empty()) segments_.push_back({offset, bytes, bytes.size(), nullptr});
    size_ += bytes.size();
    return offset;
  }
  // Appends routed_experts made on demand from `layout` (`size` bytes) and returns its offset.
  std::uint64_t append_routing(std::uint64_t size, std::shared_ptr<const RoutingLayout> layout) {
    std::uint64_t offset = size_;
    if (size > 0) segments_.push_back({offset, {}, size, std::move(layout)});
    size_ += size;
    return offset;
  }
  std::uint64_t size() const override { return size_; }
  const std::string& name() const override { return name_; }
  void read_at(std::uint64_t offset, std::span<std::byte> out) const override {
    if (offset > size_ || out.size() > size_ - offset) {
      fail_at(name_, 0, "read past the end of the payload");
    }
    auto after =
        std::upper_bound(segments_.begin(), segments_.end(), offset,
                         [](std::uint64_t value, const Segment& s) { return value < s.offset; });
    // Segments are contiguous, so the bytes continue in the following ones.
    for (std::size_t k = static_cast<std::size_t>(after - segments_.begin()) - 1; !out.empty();
         ++k) {
      const Segment& segment = segments_[k];
      std::uint64_t within = offset - segment.offset;
      std::size_t n = std::min<std::uint64_t>(out.size(), segment.size - within);
      if (segment.routing) {
        read_routing(segment.routing, within, out.first(n));
      } else {
        std::memcpy(out.data(), segment.bytes.data() + within, n);
      }
      out = out.subspan(n);
      offset += n;
    }
  }

 private:
  struct Segment {
    std::uint64_t offset;
    std::span<const std::byte> bytes;
    std::uint64_t size;
    std::shared_ptr<const RoutingLayout> routing;  // set: the bytes are made on demand
  };

  // Bytes [within, within + out.size()) of routed_experts: the cells that hold them, made by a
  // cursor of this read's own (a reader that wants speed keeps a cursor, as the checks do).
  static void read_routing(const std::shared_ptr<const RoutingLayout>& layout, std::uint64_t within,
                           std::span<std::byte> out) {
    const std::uint64_t cell_bytes =
        static_cast<std::uint64_t>(layout->per_token) * sizeof(std::int16_t);
    const std::uint64_t first = within / cell_bytes;
    const std::uint64_t end = (within + out.size() + cell_bytes - 1) / cell_bytes;
    std::vector<std::int16_t> cells(static_cast<std::size_t>((end - first) * cell_bytes / 2));
    RoutingCursor(layout).write(static_cast<std::int64_t>(first), cells);
    std::memcpy(out.data(),
                reinterpret_cast<const std::byte*>(cells.data()) + (within - first * cell_bytes),
                out.size());
  }

  std::string name_;
  std::vector<Segment> segments_;
  std::uint64_t size_ = 0;
};

}  // namespace

std::string_view to_string(PadPosition position) {
  return position == PadPosition::kStart ? "start" : "end";
}

std::string_view to_string(AdvantageMode mode) {
  return mode == AdvantageMode::kZero ? "zero" : "random";
}

PadPosition parse_pad_position(std::string_view text) {
  if (text == "end") return PadPosition::kEnd;
  if (text == "start") return PadPosition::kStart;
  fail("pad position '{}' is neither 'end' nor 'start'", text);
}

AdvantageMode parse_advantage_mode(std::string_view text) {
  if (text == "random") return AdvantageMode::kRandom;
  if (text == "zero") return AdvantageMode::kZero;
  fail("advantages '{}' are neither 'random' nor 'zero'", text);
}

std::int64_t default_real_length(std::int64_t tokens) {
  // tokens * 4588 / 65536 rounded half up, as the driver rounds it; at least one real token.
  std::int64_t padding = (tokens * kBenchPadding + kBenchTokens / 2) / kBenchTokens;
  return std::max<std::int64_t>(1, tokens - padding);
}

void check_pad_align(std::int64_t pad_align) {
  if (pad_align < 1 || pad_align % kSegmentAlign != 0) {
    fail("--pad-align must be a positive multiple of the segment alignment {} (got {})",
         kSegmentAlign, pad_align);
  }
}

std::int64_t pad_start_shift(std::int64_t tokens, std::int64_t real_len, std::int64_t pad_align) {
  return (tokens - real_len) / pad_align * pad_align;
}

PayloadOptions resolve_payload_options(PayloadOptions o, std::vector<Diagnostic>* diagnostics) {
  // Token positions and row indices are int32 in the payload (and products below must not
  // overflow int64).
  constexpr std::int64_t kMaxIndex = std::numeric_limits<std::int32_t>::max();
  if (o.rows < 1 || o.rows > kMaxIndex) fail("--rows must be in 1..{} (got {})", kMaxIndex, o.rows);
  if (o.tokens < 1 || o.tokens > kMaxIndex) {
    fail("--tokens must be in 1..{} (got {})", kMaxIndex, o.tokens);
  }
  if (o.layers < 1) fail("--layers must be at least 1 (got {})", o.layers);
  if (o.experts < 1 || o.experts > std::numeric_limits<std::int16_t>::max()) {
    fail("--experts must be in 1..32767 (int16 expert ids; got {})", o.experts);
  }
  if (o.topk < 1 || o.topk > o.experts) {
    fail("--topk must be in 1..{} (the number of experts; got {})", o.experts, o.topk);
  }
  if (o.vocab < 2 || o.vocab > std::numeric_limits<std::int32_t>::max()) {
    fail("--vocab must be in 2..2147483647 (got {})", o.vocab);
  }
  if (o.real_len == -1) o.real_len = default_real_length(o.tokens);
  if (o.real_len < 1 || o.real_len > o.tokens) {
    fail("--real-len must be in 1..{} (the token budget; got {})", o.tokens, o.real_len);
  }
  if (o.segments < 1) fail("--segments must be at least 1 (got {})", o.segments);
  if (o.segments > o.real_len) {
    if (diagnostics) {
      diagnostics->push_back({Severity::kWarning, "",
                              fmt::format("{} segments do not fit in {} real tokens; using {}",
                                          o.segments, o.real_len, o.real_len)});
    }
    o.segments = static_cast<int>(o.real_len);
  }
  if (o.max_prompt_length < 0) {
    fail("--max-prompt-length must be at least 0 (got {})", o.max_prompt_length);
  }
  if (o.final_rows == -1) o.final_rows = o.rows;
  if (o.final_rows < 0 || o.final_rows > o.rows) {
    fail("--final-rows must be in 0..{} (the rows; got {})", o.rows, o.final_rows);
  }
  check_pad_align(o.pad_align);
  if (o.routing_targets.empty()) fail("no routing targets given");
  validate_routing_targets(scale_routing_targets(o.routing_targets, o.routing_scale), o.layers,
                           o.experts, o.topk);
  std::uint64_t slots = static_cast<std::uint64_t>(o.rows) * static_cast<std::uint64_t>(o.tokens);
  if (slots > (std::uint64_t{1} << 62) / (static_cast<std::uint64_t>(o.layers) * o.topk * 2)) {
    fail("the payload of {} x {} x {} x {} is too large", o.rows, o.tokens, o.layers, o.topk);
  }
  if (o.threads <= 0)
    o.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return o;
}

RowLayout row_layout(const PayloadOptions& o, std::int64_t row) {
  RowLayout layout;
  if (row >= o.final_rows) return layout;
  layout.length = o.real_len;
  layout.start = o.pad_position == PadPosition::kStart
                     ? pad_start_shift(o.tokens, o.real_len, o.pad_align)
                     : 0;
  layout.segment_starts = segment_cuts(o.real_len, o.segments, o.seed, row);
  const std::uint64_t prompt_key =
      stream_key(o.seed, Stream::kPromptLengths, static_cast<std::uint64_t>(row));
  const std::size_t segments = layout.segment_starts.size();
  layout.prompt_lengths.assign(segments, 0);
  for (std::size_t s = 0; s < segments; ++s) {
    std::int64_t end = s + 1 < segments ? layout.segment_starts[s + 1] : layout.length;
    std::int64_t length = end - layout.segment_starts[s];
    // A completion keeps at least one token, so the prompt is at most length - 1.
    std::int64_t longest = std::min(o.max_prompt_length, length - 1);
    if (longest >= 1) {
      layout.prompt_lengths[s] =
          1 + static_cast<std::int64_t>(
                  below(random_at(prompt_key, s), static_cast<std::uint64_t>(longest)));
    }
  }
  return layout;
}

std::vector<std::vector<std::int64_t>> plan_expert_loads(const PayloadOptions& o,
                                                         const std::vector<double>& targets,
                                                         std::int64_t real_tokens) {
  std::vector<std::vector<std::int64_t>> loads(o.layers);
  // Layers are independent (a layer's profile is a bisection and a rounding over E experts):
  // split over the threads.
  parallel_ranges(o.threads, o.layers, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t layer = begin; layer < end; ++layer) {
      std::vector<std::int64_t> profile =
          expert_load_profile(real_tokens, o.experts, o.topk, targets[layer]);
      std::vector<std::int32_t> holder = seeded_permutation(
          o.experts, stream_key(o.seed, Stream::kExpertRanks, static_cast<std::uint64_t>(layer)));
      loads[layer].assign(o.experts, 0);
      for (int rank = 0; rank < o.experts; ++rank) loads[layer][holder[rank]] = profile[rank];
    }
  });
  return loads;
}

namespace {

// Writes the whole of routed_experts into `out`, threads taking contiguous ranges of cells.
void write_routing(const std::shared_ptr<const RoutingLayout>& layout, int threads,
                   std::span<std::int16_t> out) {
  const std::int64_t cells = layout->rows * layout->tokens;
  const auto per_token = static_cast<std::size_t>(layout->per_token);
  if (out.size() != static_cast<std::size_t>(cells) * per_token) {
    fail("internal: routing buffer of {} slots, expected {}", out.size(),
         static_cast<std::size_t>(cells) * per_token);
  }
  parallel_ranges(threads, cells, [&](std::int64_t begin, std::int64_t end) {
    RoutingCursor cursor(layout);
    cursor.write(begin,
                 out.subspan(static_cast<std::size_t>(begin) * per_token,
                             static_cast<std::size_t>(end - begin) * per_token),
                 /*streaming_stores=*/true);
  });
}

}  // namespace

void build_routing(const PayloadOptions& o, const std::vector<std::vector<std::int64_t>>& loads,
                   std::span<std::int16_t> out) {
  write_routing(std::make_shared<const RoutingLayout>(o, loads), o.threads, out);
}

std::uint64_t routing_bytes(const PayloadOptions& o) {
  return static_cast<std::uint64_t>(o.rows) * static_cast<std::uint64_t>(o.tokens) *
         static_cast<std::uint64_t>(o.layers) * static_cast<std::uint64_t>(o.topk) *
         sizeof(std::int16_t);
}

Payload build_payload(const PayloadOptions& options, RoutingStorage storage) {
  Payload p;
  p.options = resolve_payload_options(options, &p.diagnostics);
  const PayloadOptions& o = p.options;
  p.targets = scale_routing_targets(o.routing_targets, o.routing_scale);
  const std::size_t cells = static_cast<std::size_t>(o.rows) * o.tokens;
  // The fields' first touch (a page fault per 4 KiB, the most costly part of a small build on a
  // VM) split over the threads, a field each.
  std::vector<std::int32_t>* const int_fields[] = {&p.completion_ids, &p.segment_ids,
                                                   &p.segment_positions};
  std::vector<float>* const float_fields[] = {&p.completion_mask, &p.advantages,
                                              &p.old_per_token_logps};
  const int zeroed_fields = o.old_logps ? 6 : 5;
  parallel_ranges(o.threads, zeroed_fields, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t field = begin; field < end; ++field) {
      if (field < 3) {
        int_fields[field]->assign(cells, 0);
      } else {
        float_fields[field - 3]->assign(cells, 0.0f);
      }
    }
  });

  const std::uint64_t id_key = stream_key(o.seed, Stream::kTokenIds);
  const std::uint64_t logp_key = stream_key(o.seed, Stream::kLogps);
  parallel_ranges(o.threads, o.final_rows, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t row = begin; row < end; ++row) {
      RowLayout layout = row_layout(o, row);
      const std::uint64_t advantage_key = stream_key(o.seed, Stream::kAdvantages, row);
      std::size_t segment = 0;  // 1-based id of the segment of token i
      float advantage = 0;
      for (std::int64_t i = 0; i < layout.length; ++i) {
        if (segment < layout.segment_starts.size() && layout.segment_starts[segment] == i) {
          ++segment;
          if (o.advantages == AdvantageMode::kRandom) {
            // Box-Muller: one standard normal per segment.
            double radius =
                std::sqrt(-2.0 * std::log(open_unit(random_at(advantage_key, 2 * segment))));
            double angle =
                2.0 * std::numbers::pi * open_unit(random_at(advantage_key, 2 * segment + 1));
            advantage = static_cast<float>(radius * std::cos(angle));
          }
        }
        std::size_t cell = static_cast<std::size_t>(row) * o.tokens + layout.start + i;
        std::uint64_t index =
            static_cast<std::uint64_t>(row) * o.tokens + i;  // moves with the token
        const std::int64_t position = i - layout.segment_starts[segment - 1];
        p.completion_ids[cell] = static_cast<std::int32_t>(
            1 + below(random_at(id_key, index), static_cast<std::uint64_t>(o.vocab - 1)));
        p.segment_ids[cell] = static_cast<std::int32_t>(segment);
        p.segment_positions[cell] = static_cast<std::int32_t>(position);
        // The prompt is context only: the loss (mask), advantages and log-probs skip it.
        if (position < layout.prompt_lengths[segment - 1]) continue;
        p.completion_mask[cell] = 1.0f;
        p.advantages[cell] = advantage;
        if (o.old_logps) {
          // Near a random-weight policy's log-prob, -ln(vocab), so the policy / old ratio of a
          // bench on random weights stays near 1; always negative.
          double radius = std::sqrt(-2.0 * std::log(open_unit(random_at(logp_key, 2 * index))));
          double angle = 2.0 * std::numbers::pi * open_unit(random_at(logp_key, 2 * index + 1));
          p.old_per_token_logps[cell] = static_cast<float>(std::min(
              -std::log(static_cast<double>(o.vocab)) + 0.05 * radius * std::cos(angle), -1e-3));
        }
      }
    }
  });

  p.real_tokens = o.final_rows * o.real_len;
  if (p.real_tokens == 0) {
    p.diagnostics.push_back({Severity::kWarning, "", "no real rows: the routing is all padding"});
  }
  p.expert_loads = plan_expert_loads(o, p.targets, p.real_tokens);
  p.routing = std::make_shared<const RoutingLayout>(o, p.expert_loads);
  if (storage == RoutingStorage::kInMemory) {
    p.routed_experts =
        LargeArray<std::int16_t>(cells * o.layers * o.topk, PageAdvice::kPopulateWrite);
    write_routing(p.routing, o.threads, p.routed_experts.span());
  }
  p.settings_json = format_payload_settings(p);
  return p;
}

std::vector<std::string> payload_field_names(bool with_old_logps) {
  std::vector<std::string> names = {"completion_ids", "completion_mask", "segment_ids",
                                    "segment_positions", "advantages"};
  if (with_old_logps) names.push_back("old_per_token_logps");
  for (const char* name : {"routed_experts", "prompt_ids", "prompt_mask", "payload_settings"}) {
    names.push_back(name);
  }
  return names;
}

namespace {

// Calls add(name, dtype, shape, bytes) for every field of the payload, in the written order.
template <typename Add>
void for_each_field(const Payload& p, const Add& add) {
  const PayloadOptions& o = p.options;
  std::vector<std::int64_t> tokens_shape = {o.rows, o.tokens};
  auto bytes = [](const auto& values) { return std::as_bytes(std::span(values)); };
  add("completion_ids", DType::kInt32, tokens_shape, bytes(p.completion_ids));
  add("completion_mask", DType::kFloat32, tokens_shape, bytes(p.completion_mask));
  add("segment_ids", DType::kInt32, tokens_shape, bytes(p.segment_ids));
  add("segment_positions", DType::kInt32, tokens_shape, bytes(p.segment_positions));
  add("advantages", DType::kFloat32, tokens_shape, bytes(p.advantages));
  if (o.old_logps)
    add("old_per_token_logps", DType::kFloat32, tokens_shape, bytes(p.old_per_token_logps));
  add("routed_experts", DType::kInt16, {o.rows, o.tokens, o.layers, o.topk},
      bytes(p.routed_experts.span()));
  add("prompt_ids", DType::kInt32, {o.rows, 0}, std::span<const std::byte>());
  add("prompt_mask", DType::kFloat32, {o.rows, 0}, std::span<const std::byte>());
  add("payload_settings", DType::kUInt8, {static_cast<std::int64_t>(p.settings_json.size())},
      std::as_bytes(std::span(p.settings_json)));
}

}  // namespace

void write_payload(const Payload& payload, const std::string& path) {
  NpzWriter writer(path);
  for_each_field(payload, [&](std::string_view name, DType dtype,
                              const std::vector<std::int64_t>& shape,
                              std::span<const std::byte> data) {
    if (name != "routed_experts" || payload.routed_experts.size() != 0 ||
        payload.routing == nullptr || payload.routing->per_token == 0) {
      writer.add(name, dtype, shape, data);
      return;
    }
    // Made on demand: a cursor writes the array a chunk of whole cells at a time, in order.
    const std::size_t cell_bytes = static_cast<std::size_t>(payload.routing->per_token) * 2;
    const std::size_t chunk_bytes = std::max<std::size_t>(1, (4 << 20) / cell_bytes) * cell_bytes;
    RoutingCursor cursor(payload.routing);
    writer.add_generated(
        name, dtype, shape, chunk_bytes, [&](std::uint64_t offset, std::span<std::byte> out) {
          cursor.write(
              static_cast<std::int64_t>(offset / cell_bytes),
              {reinterpret_cast<std::int16_t*>(out.data()), out.size() / sizeof(std::int16_t)});
        });
  });
  writer.finish();
}

PayloadView view_payload(const Payload& payload) {
  auto source = std::make_unique<SegmentedSource>("<payload in memory>");
  std::vector<ArrayInfo> arrays;
  for_each_field(payload,
                 [&](std::string_view name, DType dtype, const std::vector<std::int64_t>& shape,
                     std::span<const std::byte> data) {
                   ArrayInfo info;
                   info.name = name;
                   info.dtype = dtype;
                   info.shape = shape;
                   info.count = static_cast<std::int64_t>(data.size() / dtype_size(dtype));
                   info.data_bytes = data.size();
                   if (name == "routed_experts" && payload.routed_experts.size() == 0) {
                     // Made on demand: the view makes the bytes each read asks for.
                     info.data_bytes = routing_bytes(payload.options);
                     info.count = static_cast<std::int64_t>(info.data_bytes / sizeof(std::int16_t));
                     info.data_offset = source->append_routing(info.data_bytes, payload.routing);
                   } else {
                     info.data_offset = source->append(data);
                   }
                   arrays.push_back(std::move(info));
                 });
  return {std::move(source), std::move(arrays)};
}

}  // namespace rtb::payload
