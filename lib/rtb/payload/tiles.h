// Attention tiles under load-balanced context parallelism (docs/payload-spec.md, last section).
//
// With context parallelism cp a row of T tokens is cut into 2 cp equal chunks; context rank r
// holds chunks r and 2 cp - 1 - r (MaxText's DUAL_CHUNK_SWAP). Each rank's queries are cut into
// query blocks inside each of its chunks, and meet the whole row's keys in key blocks from
// position 0. A (query block, key block) tile is computed when it is causally needed (key block
// start <= query block end) and the [min, max] segment-id ranges of the two blocks overlap
// (padding is segment 0), which is how Splash skips tiles. Counting the computed tiles per rank
// shows how the pad position balances the ranks.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "rtb/base/diagnostic.h"
#include "rtb/payload/builder.h"
#include "rtb/payload/npy.h"

namespace rtb::payload {

// Computed tiles per context rank for one row's segment ids (T = segment_ids.size(), which must
// be a multiple of 2 cp). Throws rtb::Error for cp < 1, blocks < 1 or an uneven split.
std::vector<std::int64_t> count_attention_tiles(std::span<const std::int32_t> segment_ids, int cp,
                                                std::int64_t block_q, std::int64_t block_kv);

// A row of `tokens` segment ids holding `real` (the segment ids of its real tokens, in order)
// from position 0 (pad position end) or moved right by pad_start_shift (pad position start).
std::vector<std::int32_t> lay_out_row(std::span<const std::int32_t> real, std::int64_t tokens,
                                      PadPosition position, std::int64_t pad_align);

struct TileSettings {
  int cp = 1;
  std::int64_t block_q = 0;   // forward
  std::int64_t block_kv = 0;  // forward
  std::int64_t dkv_block_q = 0;
  std::int64_t dkv_block_kv = 0;
  std::int64_t pad_align = kDefaultPadAlign;
};

// The settings a command line gives made whole: dK/dV blocks of 0 (not given) become the forward
// ones, and pad_align must pass check_pad_align (throws rtb::Error otherwise).
TileSettings resolve_tile_settings(TileSettings settings);

struct PositionTiles {
  std::int64_t row = -1;                   // the row whose busiest rank does the most forward tiles
  std::vector<std::int64_t> fwd;           // per rank, that row
  std::vector<std::int64_t> dkv;           // per rank, that row
  std::vector<std::int64_t> fwd_all_rows;  // per rank, summed over rows
  std::vector<std::int64_t> dkv_all_rows;
};

struct TilesReport {
  TileSettings settings;
  std::int64_t rows = 0;
  std::int64_t tokens = 0;
  PositionTiles end;    // every row laid out with its padding at the end
  PositionTiles start;  // and with its padding first (pad position start)
  // What resolving the layout options warned about (the caller of count_layout_tiles adds them);
  // --json `diagnostics`.
  std::vector<Diagnostic> diagnostics;
};

// Collects rows one at a time (so a payload file is read row by row) and counts their tiles for
// both pad positions, whatever position the rows came in.
class TileCounter {
 public:
  TileCounter(const TileSettings& settings, std::int64_t tokens);
  // One row's segment ids; its real tokens (segment id > 0) are taken in order.
  void add_row(std::span<const std::int32_t> segment_ids);
  const TilesReport& report() const { return report_; }

 private:
  void add(PositionTiles& tiles, std::span<const std::int32_t> laid_out);
  TilesReport report_;
  std::vector<std::int32_t> real_;
};

// Tiles of the rows a payload file holds (its segment_ids field, read row by row).
TilesReport count_payload_tiles(const ByteSource& source, const TileSettings& settings);

// Options that only lay rows out, for count_layout_tiles: the rows, tokens, real length, segments,
// final rows, padding and seed of `layout`, resolved as resolve_payload_options does (warnings
// appended). Its routing fields do not matter: they become one layer, one expert, top-1.
PayloadOptions resolve_layout_options(PayloadOptions layout, std::vector<Diagnostic>* diagnostics);

// Tiles of the rows the builder would lay out for `resolved` options (no routing is built).
TilesReport count_layout_tiles(const PayloadOptions& resolved, const TileSettings& settings);

}  // namespace rtb::payload
