#include "rtb/payload/tiles.h"

#include <algorithm>

#include "rtb/base/error.h"

namespace rtb::payload {
namespace {

struct BlockRange {
  std::int32_t min;
  std::int32_t max;
};

BlockRange range_of(std::span<const std::int32_t> ids) {
  auto [low, high] = std::minmax_element(ids.begin(), ids.end());
  return {*low, *high};
}

std::int64_t max_of(const std::vector<std::int64_t>& values) {
  return values.empty() ? 0 : *std::max_element(values.begin(), values.end());
}

}  // namespace

std::vector<std::int64_t> count_attention_tiles(std::span<const std::int32_t> segment_ids, int cp,
                                                std::int64_t block_q, std::int64_t block_kv) {
  if (cp < 1) fail("context parallelism must be at least 1 (got {})", cp);
  if (block_q < 1 || block_kv < 1) {
    fail("attention blocks must be at least 1 token (got {} x {})", block_q, block_kv);
  }
  const std::int64_t tokens = static_cast<std::int64_t>(segment_ids.size());
  const std::int64_t chunks = 2 * static_cast<std::int64_t>(cp);
  if (tokens == 0 || tokens % chunks != 0) {
    fail("a row of {} tokens does not split into 2 x cp = {} equal chunks", tokens, chunks);
  }
  const std::int64_t chunk = tokens / chunks;
  std::vector<BlockRange> keys;
  for (std::int64_t start = 0; start < tokens; start += block_kv) {
    keys.push_back(range_of(segment_ids.subspan(start, std::min(block_kv, tokens - start))));
  }
  std::vector<std::int64_t> per_rank(cp, 0);
  for (int rank = 0; rank < cp; ++rank) {
    for (std::int64_t c : {static_cast<std::int64_t>(rank), chunks - 1 - rank}) {
      const std::int64_t chunk_start = c * chunk, chunk_end = chunk_start + chunk;
      for (std::int64_t q = chunk_start; q < chunk_end; q += block_q) {
        const std::int64_t q_last = std::min(q + block_q, chunk_end) - 1;
        BlockRange query = range_of(segment_ids.subspan(q, q_last - q + 1));
        for (std::size_t k = 0; k < keys.size(); ++k) {
          if (static_cast<std::int64_t>(k) * block_kv > q_last) break;  // causally not needed
          if (keys[k].max >= query.min && keys[k].min <= query.max) ++per_rank[rank];
        }
      }
    }
  }
  return per_rank;
}

std::vector<std::int32_t> lay_out_row(std::span<const std::int32_t> real, std::int64_t tokens,
                                      PadPosition position, std::int64_t pad_align) {
  const std::int64_t length = static_cast<std::int64_t>(real.size());
  if (length > tokens) fail("{} real tokens do not fit in a row of {}", length, tokens);
  if (pad_align < 1) fail("pad_align must be positive (got {})", pad_align);
  std::vector<std::int32_t> row(tokens, 0);
  std::int64_t start = position == PadPosition::kStart && length > 0
                           ? pad_start_shift(tokens, length, pad_align)
                           : 0;
  std::copy(real.begin(), real.end(), row.begin() + start);
  return row;
}

TileSettings resolve_tile_settings(TileSettings settings) {
  if (settings.dkv_block_q == 0) settings.dkv_block_q = settings.block_q;
  if (settings.dkv_block_kv == 0) settings.dkv_block_kv = settings.block_kv;
  check_pad_align(settings.pad_align);
  return settings;
}

TileCounter::TileCounter(const TileSettings& settings, std::int64_t tokens) {
  report_.settings = settings;
  report_.tokens = tokens;
  for (PositionTiles* tiles : {&report_.end, &report_.start}) {
    tiles->fwd_all_rows.assign(settings.cp, 0);
    tiles->dkv_all_rows.assign(settings.cp, 0);
  }
}

void TileCounter::add(PositionTiles& tiles, std::span<const std::int32_t> laid_out) {
  const TileSettings& s = report_.settings;
  std::vector<std::int64_t> fwd = count_attention_tiles(laid_out, s.cp, s.block_q, s.block_kv);
  std::vector<std::int64_t> dkv =
      count_attention_tiles(laid_out, s.cp, s.dkv_block_q, s.dkv_block_kv);
  for (int r = 0; r < s.cp; ++r) {
    tiles.fwd_all_rows[r] += fwd[r];
    tiles.dkv_all_rows[r] += dkv[r];
  }
  if (tiles.row < 0 || max_of(fwd) > max_of(tiles.fwd)) {
    tiles.row = report_.rows;
    tiles.fwd = std::move(fwd);
    tiles.dkv = std::move(dkv);
  }
}

void TileCounter::add_row(std::span<const std::int32_t> segment_ids) {
  if (static_cast<std::int64_t>(segment_ids.size()) != report_.tokens) {
    fail("internal: row of {} tokens, expected {}", segment_ids.size(), report_.tokens);
  }
  real_.clear();
  for (std::int32_t id : segment_ids) {
    if (id > 0) real_.push_back(id);
  }
  const std::int64_t align = report_.settings.pad_align;
  add(report_.end, lay_out_row(real_, report_.tokens, PadPosition::kEnd, align));
  add(report_.start, lay_out_row(real_, report_.tokens, PadPosition::kStart, align));
  ++report_.rows;
}

TilesReport count_payload_tiles(const ByteSource& source, const TileSettings& settings) {
  std::vector<ArrayInfo> arrays = list_arrays(source);
  const ArrayInfo* segments = find_array(arrays, "segment_ids");
  if (segments == nullptr) fail_at(source.name(), 0, "no segment_ids field");
  if (segments->dtype != DType::kInt32 || segments->shape.size() != 2) {
    fail_at(source.name(), 0, "segment_ids is {} of shape {}, expected int32 [rows, tokens]",
            dtype_name(segments->dtype), format_shape(segments->shape));
  }
  const std::int64_t rows = segments->shape[0], tokens = segments->shape[1];
  TileCounter counter(settings, tokens);
  std::vector<std::int32_t> row(tokens);
  for (std::int64_t r = 0; r < rows; ++r) {
    read_elements(source, *segments, r * tokens, std::span(row));
    counter.add_row(row);
  }
  return counter.report();
}

PayloadOptions resolve_layout_options(PayloadOptions layout, std::vector<Diagnostic>* diagnostics) {
  layout.layers = 1;
  layout.topk = 1;
  layout.experts = 1;
  layout.routing_targets = {1.0};
  layout.routing_scale = 1.0;
  return resolve_payload_options(layout, diagnostics);
}

TilesReport count_layout_tiles(const PayloadOptions& resolved, const TileSettings& settings) {
  TileCounter counter(settings, resolved.tokens);
  std::vector<std::int32_t> row(resolved.tokens);
  for (std::int64_t r = 0; r < resolved.rows; ++r) {
    RowLayout layout = row_layout(resolved, r);
    std::fill(row.begin(), row.end(), 0);
    for (std::size_t s = 0; s < layout.segment_starts.size(); ++s) {
      std::int64_t begin = layout.segment_starts[s];
      std::int64_t end =
          s + 1 < layout.segment_starts.size() ? layout.segment_starts[s + 1] : layout.length;
      std::fill(row.begin() + layout.start + begin, row.begin() + layout.start + end,
                static_cast<std::int32_t>(s + 1));
    }
    counter.add_row(row);
  }
  return counter.report();
}

}  // namespace rtb::payload
