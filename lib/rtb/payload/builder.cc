#include "rtb/payload/builder.h"

#include <algorithm>
#include <cmath>
#include <cstring>
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
#include "rtb/payload/load.h"
#include "rtb/payload/routing.h"
#include "rtb/payload/settings.h"

namespace rtb::payload {
namespace {

// --- seeded randomness
// ------------------------------------------------------------------------------ Counter-based:
// every value is a hash of (seed, stream, index), so it does not depend on the order of computation
// or the number of threads.

constexpr std::uint64_t kGolden = 0x9e3779b97f4a7c15ULL;

std::uint64_t finalize(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

enum Stream : std::uint64_t {
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
  return finalize(finalize(seed + kGolden * (stream + 1)) + kGolden * (sub + 1));
}

std::uint64_t random_at(std::uint64_t key, std::uint64_t index) {
  return finalize(key + kGolden * (index + 1));
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
  std::uint64_t next() { return finalize(state_ += kGolden); }
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

// Runs body(begin, end) over [0, n) split into contiguous ranges, one per thread.
template <typename Body>
void parallel_ranges(int threads, std::int64_t n, const Body& body) {
  threads = static_cast<int>(std::clamp<std::int64_t>(threads, 1, std::max<std::int64_t>(n, 1)));
  if (threads == 1) {
    body(std::int64_t{0}, n);
    return;
  }
  std::vector<std::thread> workers;
  for (int w = 0; w < threads; ++w) {
    std::int64_t begin = n * w / threads, end = n * (w + 1) / threads;
    workers.emplace_back([&body, begin, end] { body(begin, end); });
  }
  for (std::thread& worker : workers) worker.join();
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
  SplitMix random(stream_key(seed, kSegmentCuts, static_cast<std::uint64_t>(row)));
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

// A run of S (see payload.h) starting inside tile `tile`: from there on, slot `slot` of pattern
// row `row` in `layer` holds `expert`.
struct RunStart {
  std::int64_t tile;
  std::int32_t row;
  std::int32_t layer;
  std::int32_t slot;
  std::int32_t expert;
};

class RoutingWriter {
 public:
  RoutingWriter(const PayloadOptions& options, const std::vector<std::vector<std::int64_t>>& loads,
                std::span<std::int16_t> out)
      : o_(options), out_(out) {
    layers_ = o_.layers;
    topk_ = o_.topk;
    experts_ = o_.experts;
    per_token_ = static_cast<std::int64_t>(layers_) * topk_;
    real_rows_ = o_.final_rows;
    length_ = o_.real_len;
    start_ = o_.pad_position == PadPosition::kStart
                 ? pad_start_shift(o_.tokens, o_.real_len, o_.pad_align)
                 : 0;
    n_ = real_rows_ * length_;
    std::size_t expected = static_cast<std::size_t>(o_.rows) * o_.tokens * per_token_;
    if (out.size() != expected) {
      fail("internal: routing buffer of {} slots, expected {}", out.size(), expected);
    }
    if (n_ == 0) return;
    tiles_ = (n_ + kRoutingTileTokens - 1) / kRoutingTileTokens;
    small_ = n_ / tiles_;
    larger_tiles_ = n_ % tiles_;
    shuffle_ = seeded_permutation(small_, stream_key(o_.seed, kTileShuffle));
    // Where slot k of a column goes among the token's K slots: a seeded shuffle per pattern row
    // and layer, so a token's experts are not listed in expert-id order (band k of S holds ids
    // after band k - 1's).
    slot_at_.resize(static_cast<std::size_t>(small_ + 1) * per_token_);
    for (std::int64_t i = 0; i <= small_; ++i) {
      for (int layer = 0; layer < layers_; ++layer) {
        std::size_t base = static_cast<std::size_t>(i) * per_token_ + layer * topk_;
        SplitMix random(stream_key(o_.seed, kSlotOrder, base));
        for (int k = 0; k < topk_; ++k) slot_at_[base + k] = k;
        for (int k = topk_ - 1; k > 0; --k) {
          std::swap(slot_at_[base + k], slot_at_[base + random.below(k + 1)]);
        }
      }
    }
    // Run starts of S per layer (expert-id order), and where each lands among the tiles.
    if (loads.size() != static_cast<std::size_t>(layers_)) fail("internal: loads per layer");
    runs_.assign(layers_, std::vector<std::int64_t>(experts_ + 1, 0));
    for (int layer = 0; layer < layers_; ++layer) {
      std::vector<std::int64_t>& run = runs_[layer];
      for (int e = 0; e < experts_; ++e) {
        if (loads[layer][e] < 0 || loads[layer][e] > n_) {
          fail("internal: expert {} of layer {} has load {} with {} tokens", e, layer,
               loads[layer][e], n_);
        }
        run[e + 1] = run[e] + loads[layer][e];
        if (e == 0) continue;
        std::int64_t begin = run[e];
        if (begin >= n_ * topk_) continue;
        std::int64_t column = begin % n_;
        starts_.push_back({column % tiles_, static_cast<std::int32_t>(column / tiles_), layer,
                           static_cast<std::int32_t>(begin / n_), e});
      }
      if (run[experts_] != n_ * topk_) {
        fail("internal: layer {} loads sum to {}, expected {}", layer, run[experts_], n_ * topk_);
      }
    }
    // Within a tile, changes of one cell must apply in run order (empty runs share a start).
    std::sort(starts_.begin(), starts_.end(), [](const RunStart& a, const RunStart& b) {
      return std::tie(a.tile, a.layer, a.expert) < std::tie(b.tile, b.layer, b.expert);
    });
  }

  void write_padding(std::int64_t row_begin, std::int64_t row_end) {
    const std::size_t token_bytes = static_cast<std::size_t>(per_token_) * sizeof(std::int16_t);
    for (std::int64_t row = row_begin; row < row_end; ++row) {
      std::int16_t* base = out_.data() + static_cast<std::size_t>(row) * o_.tokens * per_token_;
      // -1 is all bits set in two's complement.
      if (row >= real_rows_) {
        std::memset(base, 0xff, token_bytes * o_.tokens);
        continue;
      }
      std::memset(base, 0xff, token_bytes * start_);
      std::int64_t after = start_ + length_;
      std::memset(base + after * per_token_, 0xff, token_bytes * (o_.tokens - after));
    }
  }

  std::int64_t tiles() const { return tiles_; }

  void write_tiles(std::int64_t first, std::int64_t end) {
    if (first >= end) return;
    std::vector<std::int16_t> pattern(static_cast<std::size_t>(small_ + 1) * per_token_);
    fill_pattern(first, pattern);
    auto next =
        std::upper_bound(starts_.begin(), starts_.end(), first,
                         [](std::int64_t tile, const RunStart& s) { return tile < s.tile; });
    for (std::int64_t tile = first; tile < end; ++tile) {
      for (; next != starts_.end() && next->tile == tile; ++next) {
        std::size_t base = static_cast<std::size_t>(next->row) * per_token_ + next->layer * topk_;
        pattern[base + slot_at_[base + next->slot]] = static_cast<std::int16_t>(next->expert);
      }
      copy_tile(tile, pattern);
    }
    finish_stores();
  }

 private:
  std::int64_t tile_size(std::int64_t tile) const { return small_ + (tile < larger_tiles_); }
  std::int64_t tile_begin(std::int64_t tile) const {
    return tile * small_ + std::min(tile, larger_tiles_);
  }

  // The experts of every column of `tile`, computed from scratch.
  void fill_pattern(std::int64_t tile, std::vector<std::int16_t>& pattern) const {
    std::int64_t size = tile_size(tile);
    for (int layer = 0; layer < layers_; ++layer) {
      const std::vector<std::int64_t>& run = runs_[layer];
      for (int slot = 0; slot < topk_; ++slot) {
        std::int64_t position = tile + slot * n_;
        std::int64_t e = std::upper_bound(run.begin(), run.end(), position) - run.begin() - 1;
        for (std::int64_t i = 0; i < size; ++i, position += tiles_) {
          while (run[e + 1] <= position) ++e;
          std::size_t base = static_cast<std::size_t>(i) * per_token_ + layer * topk_;
          pattern[base + slot_at_[base + slot]] = static_cast<std::int16_t>(e);
        }
      }
    }
  }

  void copy_tile(std::int64_t tile, const std::vector<std::int16_t>& pattern) {
    std::int64_t global = tile_begin(tile);
    std::int64_t row = global / length_, index = global % length_;
    const std::size_t token_bytes = static_cast<std::size_t>(per_token_) * sizeof(std::int16_t);
    std::int64_t size = tile_size(tile);
    for (std::int64_t k = 0; k < size; ++k) {
      std::int64_t source_row = k < small_ ? shuffle_[k] : k;
      std::int16_t* target =
          out_.data() + (static_cast<std::size_t>(row) * o_.tokens + start_ + index) * per_token_;
      copy_token(target, pattern.data() + source_row * per_token_, token_bytes);
      if (++index == length_) {
        index = 0;
        ++row;
      }
    }
  }

  // The routing is written once and not read back soon: streaming stores skip reading the
  // destination into the cache first, which is most of the memory traffic of a plain copy.
  static void copy_token(std::int16_t* target, const std::int16_t* source, std::size_t bytes) {
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

  static void finish_stores() {
#if defined(__SSE2__)
    _mm_sfence();  // streaming stores are weakly ordered: publish them before the thread ends
#endif
  }

  const PayloadOptions& o_;
  std::span<std::int16_t> out_;
  int layers_ = 0, topk_ = 0, experts_ = 0;
  std::int64_t per_token_ = 0;
  std::int64_t real_rows_ = 0, length_ = 0, start_ = 0;
  std::int64_t n_ = 0;             // real tokens
  std::int64_t tiles_ = 0;         // m
  std::int64_t small_ = 0;         // tokens in the smaller tiles
  std::int64_t larger_tiles_ = 0;  // tiles with small_ + 1 tokens (the first ones)
  std::vector<std::int32_t> shuffle_;
  std::vector<std::int32_t> slot_at_;  // [pattern row][layer][slot] -> position among K
  std::vector<std::vector<std::int64_t>> runs_;
  std::vector<RunStart> starts_;
};

// --- a payload in memory as a byte source
// ----------------------------------------------------------

class SegmentedSource final : public ByteSource {
 public:
  explicit SegmentedSource(std::string name) : name_(std::move(name)) {}
  // Appends `bytes` and returns its offset.
  std::uint64_t append(std::span<const std::byte> bytes) {
    std::uint64_t offset = size_;
    if (!bytes.empty()) segments_.push_back({offset, bytes});
    size_ += bytes.size();
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
      std::size_t n = std::min<std::uint64_t>(out.size(), segment.bytes.size() - within);
      std::memcpy(out.data(), segment.bytes.data() + within, n);
      out = out.subspan(n);
      offset += n;
    }
  }

 private:
  struct Segment {
    std::uint64_t offset;
    std::span<const std::byte> bytes;
  };
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
      stream_key(o.seed, kPromptLengths, static_cast<std::uint64_t>(row));
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
  for (int layer = 0; layer < o.layers; ++layer) {
    std::vector<std::int64_t> profile =
        expert_load_profile(real_tokens, o.experts, o.topk, targets[layer]);
    std::vector<std::int32_t> holder =
        seeded_permutation(o.experts, stream_key(o.seed, kExpertRanks, layer));
    loads[layer].assign(o.experts, 0);
    for (int rank = 0; rank < o.experts; ++rank) loads[layer][holder[rank]] = profile[rank];
  }
  return loads;
}

void build_routing(const PayloadOptions& o, const std::vector<std::vector<std::int64_t>>& loads,
                   std::span<std::int16_t> out) {
  RoutingWriter writer(o, loads, out);
  parallel_ranges(o.threads, o.rows,
                  [&](std::int64_t begin, std::int64_t end) { writer.write_padding(begin, end); });
  parallel_ranges(o.threads, writer.tiles(),
                  [&](std::int64_t begin, std::int64_t end) { writer.write_tiles(begin, end); });
}

Payload build_payload(const PayloadOptions& options) {
  Payload p;
  p.options = resolve_payload_options(options, &p.diagnostics);
  const PayloadOptions& o = p.options;
  p.targets = scale_routing_targets(o.routing_targets, o.routing_scale);
  const std::size_t cells = static_cast<std::size_t>(o.rows) * o.tokens;
  p.completion_ids.assign(cells, 0);
  p.completion_mask.assign(cells, 0.0f);
  p.segment_ids.assign(cells, 0);
  p.segment_positions.assign(cells, 0);
  p.advantages.assign(cells, 0.0f);
  if (o.old_logps) p.old_per_token_logps.assign(cells, 0.0f);

  const std::uint64_t id_key = stream_key(o.seed, kTokenIds);
  const std::uint64_t logp_key = stream_key(o.seed, kLogps);
  parallel_ranges(o.threads, o.final_rows, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t row = begin; row < end; ++row) {
      RowLayout layout = row_layout(o, row);
      const std::uint64_t advantage_key = stream_key(o.seed, kAdvantages, row);
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
  p.routed_experts =
      LargeArray<std::int16_t>(cells * o.layers * o.topk, PageAdvice::kPopulateWrite);
  build_routing(o, p.expert_loads, p.routed_experts.span());
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
  for_each_field(payload,
                 [&](std::string_view name, DType dtype, const std::vector<std::int64_t>& shape,
                     std::span<const std::byte> data) { writer.add(name, dtype, shape, data); });
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
                   info.data_offset = source->append(data);
                   arrays.push_back(std::move(info));
                 });
  return {std::move(source), std::move(arrays)};
}

}  // namespace rtb::payload
