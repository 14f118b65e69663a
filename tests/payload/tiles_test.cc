#include "rtb/payload/tiles.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <numeric>

#include "payload/payload_test_util.h"
#include "rtb/base/error.h"
#include "rtb/payload/builder.h"
#include "test_util.h"

namespace rtb::payload {
namespace {

std::vector<std::int32_t> bench_row(PadPosition position) {
  std::vector<std::int32_t> real(60948, 1);  // one segment, as the bench's regular rows
  return lay_out_row(real, 65536, position, 4096);
}

// The counts the seed quotes for the bench's 60,948-token rows at context 4 (forward blocks
// 1024 x 4096, dK/dV blocks 2048 x 2048).
TEST(AttentionTiles, ReproducesTheSeedsCountsForBenchRows) {
  EXPECT_THAT(count_attention_tiles(bench_row(PadPosition::kEnd), 4, 1024, 4096),
              ElementsAre(80, 136, 136, 136));
  EXPECT_THAT(count_attention_tiles(bench_row(PadPosition::kEnd), 4, 2048, 2048),
              ElementsAre(74, 132, 132, 132));
  EXPECT_THAT(count_attention_tiles(bench_row(PadPosition::kStart), 4, 1024, 4096),
              ElementsAre(125, 120, 120, 120));
  EXPECT_THAT(count_attention_tiles(bench_row(PadPosition::kStart), 4, 2048, 2048),
              ElementsAre(122, 116, 116, 116));
}

TEST(AttentionTiles, CausalTilesOfOneSegmentByHand) {
  // 8 tokens, cp 1 (chunks 0 and 1 on rank 0), blocks of 2: query block b meets key blocks 0..b.
  std::vector<std::int32_t> one(8, 1);
  EXPECT_THAT(count_attention_tiles(one, 1, 2, 2), ElementsAre(1 + 2 + 3 + 4));
  // cp 2: chunks of 2; rank 0 holds chunks 0 and 3 (1 + 4 tiles), rank 1 chunks 1 and 2 (2 + 3).
  EXPECT_THAT(count_attention_tiles(one, 2, 2, 2), ElementsAre(5, 5));
  // Key blocks of 4: query blocks 0, 1 see key block 0; 2, 3 see both.
  EXPECT_THAT(count_attention_tiles(one, 1, 2, 4), ElementsAre(1 + 1 + 2 + 2));
}

TEST(AttentionTiles, SkipsTilesWhoseSegmentRangesDoNotOverlap) {
  // Segments 1,1,1,1 | 2,2 | 0,0 (padding): blocks of 2 have ranges [1,1] [1,1] [2,2] [0,0].
  std::vector<std::int32_t> row = {1, 1, 1, 1, 2, 2, 0, 0};
  // q0: k0. q1: k0 k1. q2 [2,2]: k2 only. q3 [0,0]: k3 only.
  EXPECT_THAT(count_attention_tiles(row, 1, 2, 2), ElementsAre(1 + 2 + 1 + 1));
  // A block that straddles segments overlaps both: [1,2] meets [1,1] and [2,2].
  std::vector<std::int32_t> straddle = {1, 1, 1, 2, 2, 2, 2, 2};
  // q0 [1,1]: k0. q1 [1,2]: k0 k1. q2 [2,2]: k1 k2. q3 [2,2]: k1 k2 k3.
  EXPECT_THAT(count_attention_tiles(straddle, 1, 2, 2), ElementsAre(1 + 2 + 2 + 3));
}

TEST(AttentionTiles, RejectsUnevenSplitsAndBadBlocks) {
  std::vector<std::int32_t> row(10, 1);
  EXPECT_THROW(count_attention_tiles(row, 4, 2, 2), Error);
  EXPECT_THROW(count_attention_tiles(row, 0, 2, 2), Error);
  EXPECT_THROW(count_attention_tiles(row, 1, 0, 2), Error);
  EXPECT_THROW(count_attention_tiles({}, 1, 2, 2), Error);
}

TEST(AttentionTiles, LayOutRowMovesByRoundedPadding) {
  std::vector<std::int32_t> real = {1, 1, 2};
  EXPECT_THAT(lay_out_row(real, 8, PadPosition::kEnd, 4), ElementsAre(1, 1, 2, 0, 0, 0, 0, 0));
  EXPECT_THAT(lay_out_row(real, 8, PadPosition::kStart, 4), ElementsAre(0, 0, 0, 0, 1, 1, 2, 0));
  // Less padding than pad_align: the row does not move.
  EXPECT_THAT(lay_out_row(real, 8, PadPosition::kStart, 64), ElementsAre(1, 1, 2, 0, 0, 0, 0, 0));
}

TEST(TileSettings, DkvBlocksDefaultToForwardAndPadAlignIsChecked) {
  TileSettings given = {/*cp=*/2,           /*block_q=*/128,
                        /*block_kv=*/256,   /*dkv_block_q=*/0,
                        /*dkv_block_kv=*/0, /*pad_align=*/64};
  TileSettings s = resolve_tile_settings(given);
  EXPECT_EQ(s.dkv_block_q, 128);
  EXPECT_EQ(s.dkv_block_kv, 256);
  given.dkv_block_q = 512;
  given.dkv_block_kv = 1024;
  s = resolve_tile_settings(given);
  EXPECT_EQ(s.dkv_block_q, 512);
  EXPECT_EQ(s.dkv_block_kv, 1024);
  given.pad_align = 100;  // payload::check_pad_align's message, as build gives it
  EXPECT_EQ(test::error_of([&] { resolve_tile_settings(given); }).message(),
            "--pad-align must be a positive multiple of the segment alignment 64 (got 100)");
}

TEST(TileSettings, LayoutOptionsKeepTheLayoutAndNeedNoRouting) {
  PayloadOptions layout;
  layout.rows = 3;
  layout.tokens = 1024;
  layout.segments = 2000;  // more than the real tokens: clamped, with a warning
  layout.final_rows = 2;
  layout.layers = 7;  // routing options do not matter
  layout.routing_targets = {9.0};
  std::vector<Diagnostic> warnings;
  PayloadOptions resolved = resolve_layout_options(layout, &warnings);
  EXPECT_EQ(resolved.rows, 3);
  EXPECT_EQ(resolved.real_len, default_real_length(1024));
  EXPECT_EQ(resolved.segments, resolved.real_len);
  EXPECT_EQ(resolved.final_rows, 2);
  EXPECT_EQ(resolved.layers, 1);
  EXPECT_EQ(warnings.size(), 1u);
  // Counting adds no diagnostics of its own: the caller hands the resolver's to the report.
  EXPECT_TRUE(count_layout_tiles(resolved, test::bench_tile_settings()).diagnostics.empty());
  layout.tokens = 0;
  EXPECT_THROW(resolve_layout_options(layout, nullptr), Error);
}

PayloadOptions bench_layout(std::int64_t rows, std::int64_t final_rows) {
  PayloadOptions layout;
  layout.rows = rows;
  layout.tokens = kBenchTokens;
  layout.final_rows = final_rows;
  return resolve_layout_options(layout, nullptr);
}

TEST(AttentionTiles, LayoutTilesOfBenchRowsForBothPositions) {
  TilesReport report = count_layout_tiles(bench_layout(2, -1), test::bench_tile_settings());
  EXPECT_EQ(report.rows, 2);
  EXPECT_THAT(report.end.fwd, ElementsAre(80, 136, 136, 136));
  EXPECT_THAT(report.end.dkv, ElementsAre(74, 132, 132, 132));
  EXPECT_THAT(report.start.fwd, ElementsAre(125, 120, 120, 120));
  EXPECT_THAT(report.start.dkv, ElementsAre(122, 116, 116, 116));
  EXPECT_THAT(report.end.fwd_all_rows, ElementsAre(160, 272, 272, 272));
  EXPECT_EQ(report.end.row, 0);
}

TEST(AttentionTiles, PaddingRowsCountButDoNotHideTheBusiestRow) {
  // A padding row (all segment 0) computes every causal tile; it adds to the sums over rows, and
  // the busiest row is reported with its own counts.
  TilesReport report = count_layout_tiles(bench_layout(2, 1), test::bench_tile_settings());
  std::vector<std::int32_t> padding(65536, 0);
  std::vector<std::int64_t> padding_fwd = count_attention_tiles(padding, 4, 1024, 4096);
  EXPECT_EQ(report.end.fwd_all_rows[1], 136 + padding_fwd[1]);
  EXPECT_THAT(report.end.fwd, ElementsAre(80, 136, 136, 136));
}

TEST(AttentionTiles, PayloadFileGivesTheSameCountsAsTheLayout) {
  PayloadOptions o = test::payload_options(/*rows=*/2, /*tokens=*/512, /*topk=*/2,
                                           /*experts=*/8, {1.5, 2.0},
                                           /*real_len=*/300, /*segments=*/3);
  o.pad_position = PadPosition::kStart;
  o.pad_align = 128;
  o.seed = 7;
  Payload payload = build_payload(o);
  test::TempDir dir("rtb_tiles");
  write_payload(payload, dir / "tiles.npz");
  TileSettings s = {/*cp=*/2,
                    /*block_q=*/32,
                    /*block_kv=*/64,
                    /*dkv_block_q=*/64,
                    /*dkv_block_kv=*/64,
                    /*pad_align=*/128};
  TilesReport from_file =
      count_payload_tiles(FileSource(dir / "tiles.npz", FileAccess::kRandom), s);
  TilesReport from_layout = count_layout_tiles(payload.options, s);
  EXPECT_EQ(from_file.end.fwd_all_rows, from_layout.end.fwd_all_rows);
  EXPECT_EQ(from_file.start.dkv_all_rows, from_layout.start.dkv_all_rows);
  EXPECT_EQ(from_file.start.fwd, from_layout.start.fwd);
  // Padding first moves the row by 128 (212 padding tokens rounded down): counts differ.
  EXPECT_NE(from_file.end.fwd, from_file.start.fwd);
}

}  // namespace
}  // namespace rtb::payload
