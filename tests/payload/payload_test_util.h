// What the payload tests share (tests/test_util.h holds what every domain's tests share).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "rtb/payload/builder.h"
#include "rtb/payload/tiles.h"

namespace rtb::test {

// Options of a payload of `rows` x `tokens` whose routing sends every token to `topk` of
// `experts` experts, one layer per routing target, with `real_len` real tokens (-1: the default)
// in `segments` segments per row; every other option keeps its default.
inline payload::PayloadOptions payload_options(std::int64_t rows, std::int64_t tokens, int topk,
                                               int experts, std::vector<double> targets,
                                               std::int64_t real_len = -1, int segments = 1) {
  payload::PayloadOptions o;
  o.rows = rows;
  o.tokens = tokens;
  o.real_len = real_len;
  o.segments = segments;
  o.layers = static_cast<int>(targets.size());
  o.topk = topk;
  o.experts = experts;
  o.routing_targets = std::move(targets);
  return o;
}

// The bench's attention blocks at context 4 (forward 1024 x 4096, dK/dV 2048 x 2048), the
// settings the seed quotes tile counts for.
inline payload::TileSettings bench_tile_settings() {
  return {4, 1024, 4096, 2048, 2048, payload::kDefaultPadAlign};
}

}  // namespace rtb::test
