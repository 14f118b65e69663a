// Expert loads of MoE routing: the smooth load profile the payload builder plants, the statistics
// reported per layer and per expert-parallel rank, and their measurement from a routed-experts
// array of a real run (which gives a target table for --routing-targets).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rtb/payload/npy.h"

namespace rtb::payload {

// The load profile (docs/payload-spec.md leaves its shape to the builder; this is ours):
// with N tokens, E experts and K per token (N*K assignments, mean load N*K/E), the r-th most
// loaded expert (r = 0..E-1) gets a load proportional to exp(-beta * r / (E - 1)): an
// exponential decay over the expert ranks, smooth from the hottest to the coldest expert, with
// beta >= 0 chosen so that max/mean equals `target` (beta = 0 is the uniform load). The hottest
// load is round(target * mean), kept within [ceil(mean), N]; the others are the exponential shares
// of the rest, rounded by largest remainder and capped at the hottest, so the loads sum to exactly
// N*K and no expert exceeds N (every token can hold an expert once). Returns the E loads in
// descending order. Throws rtb::Error for a target below 1 or above E/K.
std::vector<std::int64_t> expert_load_profile(std::int64_t tokens, int experts, int topk,
                                              double target);

// The exponent beta of the profile above for `target` with `experts` experts.
double load_profile_exponent(int experts, double target);

// How close a layer's max/mean must come to its target: 1% of the target, or one token of the
// hottest load when the mean load is so small that 1% is finer than a token (tiny test shapes).
double routing_target_tolerance(double target, double mean_load);

// Statistics of one layer's loads.
struct LoadStats {
  int experts = 0;
  std::int64_t tokens = 0;       // tokens routed in the layer
  std::int64_t assignments = 0;  // sum of the loads (tokens * K when every slot is set)
  double mean = 0;               // assignments / experts
  std::int64_t max_load = 0;
  std::int64_t min_load = 0;
  int hottest_expert = -1;
  double max_over_mean = 0;  // 0 when nothing was routed
  double cv = 0;             // coefficient of variation of the expert loads
  // Expert parallelism: experts split into `ep` contiguous groups of experts / ep.
  int ep = 1;
  std::vector<std::int64_t> rank_loads;
  double rank_max_over_mean = 0;
  double rank_cv = 0;
  // A ragged buffer of buffer_factor x the mean rank load (in assignments) per rank; overflow is
  // what the ranks receive beyond it, summed over ranks (assignments that would be dropped).
  double buffer_factor = 0;
  std::int64_t rank_buffer = 0;
  std::int64_t overflow = 0;
};

// `loads` has one entry per expert. ep must divide the number of experts; buffer_factor > 0.
LoadStats summarize_loads(std::span<const std::int64_t> loads, std::int64_t tokens, int ep,
                          double buffer_factor);

// The npz member that holds a payload's routing: every bench payload has it
// (docs/payload-spec.md), and measure reads it unless told another.
inline constexpr std::string_view kRoutedExpertsMember = "routed_experts";

// The array called `member` in `arrays` (read from `source`), or rtb::Error at the file naming
// what it holds instead: "no member '<member>' (members: a, b, c); <consequence>" (at most 16
// names, then how many more; an .npy file has one array and no members). The one refusal of a
// file that lacks the array a command needs: measure's member, verify's routed_experts.
const ArrayInfo& require_member(const ByteSource& source, const std::vector<ArrayInfo>& arrays,
                                std::string_view member, std::string_view consequence);

struct MeasureOptions {
  // npz member to read (an npz with one array: that one)
  std::string member = std::string(kRoutedExpertsMember);
  int experts = 512;
  std::string experts_from;  // where `experts` came from ("option", "file", "default"), reported
  int ep = 1;
  double buffer_factor = 2.75;  // the bench's ragged_buffer_factor
};

struct MeasureReport {
  std::string array;  // the member read, or "" for an .npy
  std::vector<std::int64_t> shape;
  DType dtype = DType::kInt16;
  int layers = 0;
  int topk = 0;
  int experts = 0;
  std::string experts_from;    // as MeasureOptions::experts_from
  std::int64_t positions = 0;  // token positions in the array (R*T or N)
  std::vector<LoadStats> per_layer;
  std::int64_t repeated = 0;  // token-layers that list an expert twice (counted once each time)
  std::vector<double> max_over_mean() const;
};

// Reads a routed-experts array ([R, T, L, K] or [N, L, K], int16 or int32; -1 = no expert) from an
// .npy or .npz in blocks, so memory does not grow with the array, and summarises every layer.
// A token counts in a layer when at least one of its K slots is set. Throws rtb::Error for an
// unreadable file, a wrong shape or dtype, or an expert id outside [-1, experts), naming where.
MeasureReport measure_routing(const ByteSource& source, const MeasureOptions& options);

// Counts loads of routed experts, K slots per layer per token, as verify and measure need them.
class LoadCounter {
 public:
  LoadCounter(int layers, int topk, int experts);
  // One token's L*K slots (layer-major). Slots < 0 are skipped; ids must be < experts (checked
  // by the caller). Returns nothing; see loads().
  template <typename T>
  void add_token(const T* slots) {
    for (int layer = 0; layer < layers_; ++layer) {
      std::int64_t* row = loads_.data() + static_cast<std::size_t>(layer) * experts_;
      bool any = false;
      for (int k = 0; k < topk_; ++k) {
        T expert = slots[layer * topk_ + k];
        if (expert < 0) continue;
        ++row[expert];
        any = true;
      }
      tokens_[layer] += any;
    }
  }
  std::span<const std::int64_t> loads(int layer) const {
    return {loads_.data() + static_cast<std::size_t>(layer) * experts_,
            static_cast<std::size_t>(experts_)};
  }
  std::int64_t tokens(int layer) const { return tokens_[layer]; }
  int layers() const { return layers_; }
  int experts() const { return experts_; }

 private:
  int layers_;
  int topk_;
  int experts_;
  std::vector<std::int64_t> loads_;
  std::vector<std::int64_t> tokens_;
};

}  // namespace rtb::payload
