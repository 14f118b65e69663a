#include "rtb/payload/load.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "rtb/base/error.h"
#include "rtb/base/stats.h"

namespace rtb::payload {
namespace {

// max/mean of the continuous profile exp(-beta * r / (E - 1)), r = 0..E-1.
double profile_ratio(int experts, double beta) {
  if (beta <= 0) return 1.0;
  double step = beta / (experts - 1);
  // Sum of the geometric series, written with expm1 so small betas keep their precision.
  double sum = std::expm1(-step * experts) / std::expm1(-step);
  return experts / sum;
}

}  // namespace

double load_profile_exponent(int experts, double target) {
  if (experts <= 1 || target <= 1.0) return 0.0;
  if (target >= experts) fail("load profile target {} needs more than {} experts", target, experts);
  double low = 0.0, high = 1.0;
  while (profile_ratio(experts, high) < target) high *= 2;
  for (int i = 0; i < 200 && high - low > 1e-13 * high; ++i) {
    double middle = 0.5 * (low + high);
    (profile_ratio(experts, middle) < target ? low : high) = middle;
  }
  return 0.5 * (low + high);
}

std::vector<std::int64_t> expert_load_profile(std::int64_t tokens, int experts, int topk,
                                              double target) {
  if (tokens < 0) fail("negative token count {}", tokens);
  if (experts < 1) fail("at least one expert is needed (got {})", experts);
  if (topk < 1 || topk > experts) fail("top-k {} is invalid with {} experts", topk, experts);
  double reachable = static_cast<double>(experts) / topk;
  if (!std::isfinite(target) || target < 1.0 || target > reachable * (1 + 1e-12)) {
    fail("routing target {} is outside [1, experts/top-k = {}]", target, reachable);
  }
  std::vector<std::int64_t> loads(experts, 0);
  if (tokens == 0) return loads;
  std::int64_t total = tokens * topk;
  double mean = static_cast<double>(total) / experts;
  std::int64_t lowest_max = (total + experts - 1) / experts;
  std::int64_t hottest = std::clamp<std::int64_t>(std::llround(target * mean), lowest_max, tokens);
  loads[0] = hottest;
  if (experts == 1) return loads;

  // The rest, shared by exponential weights, rounded by largest remainder and capped at `hottest`.
  double beta = load_profile_exponent(experts, target);
  std::vector<double> weight(experts, 0.0);
  for (int r = 1; r < experts; ++r) weight[r] = std::exp(-beta * r / (experts - 1));
  std::vector<bool> capped(experts, false);
  capped[0] = true;
  std::int64_t rest = total - hottest;
  while (true) {
    double weight_sum = 0;
    for (int r = 1; r < experts; ++r) {
      if (!capped[r]) weight_sum += weight[r];
    }
    std::int64_t assigned = 0;
    std::vector<std::pair<double, int>> remainders;
    for (int r = 1; r < experts; ++r) {
      if (capped[r]) continue;
      double ideal = static_cast<double>(rest) * weight[r] / weight_sum;
      loads[r] = static_cast<std::int64_t>(std::floor(ideal));
      assigned += loads[r];
      remainders.emplace_back(ideal - static_cast<double>(loads[r]), r);
    }
    if (remainders.empty()) break;
    // Floating-point sums can leave the floors a little over or under; settle it exactly.
    std::stable_sort(remainders.begin(), remainders.end(),
                     [](const auto& a, const auto& b) { return a.first > b.first; });
    for (std::size_t i = 0; assigned < rest; i = (i + 1) % remainders.size()) {
      ++loads[remainders[i].second];
      ++assigned;
    }
    for (std::size_t i = remainders.size(); assigned > rest;) {
      i = (i + remainders.size() - 1) % remainders.size();
      if (loads[remainders[i].second] > 0) {
        --loads[remainders[i].second];
        --assigned;
      }
    }
    bool over = false;
    for (int r = 1; r < experts; ++r) {
      if (!capped[r] && loads[r] > hottest) {
        loads[r] = hottest;
        capped[r] = true;
        rest -= hottest;
        over = true;
      }
    }
    if (!over) break;
  }
  std::sort(loads.begin(), loads.end(), std::greater<>());
  return loads;
}

double routing_target_tolerance(double target, double mean_load) {
  double one_token = mean_load > 0 ? 1.0 / mean_load : target;
  return std::max(0.01 * target, one_token);
}

LoadStats summarize_loads(std::span<const std::int64_t> loads, std::int64_t tokens, int ep,
                          double buffer_factor) {
  int experts = static_cast<int>(loads.size());
  if (experts == 0) fail("no experts to summarise");
  if (ep < 1 || experts % ep != 0) {
    fail("expert parallelism {} does not divide {} experts into equal groups", ep, experts);
  }
  if (!(buffer_factor > 0) || !std::isfinite(buffer_factor)) {
    fail("buffer factor {} must be a positive number", buffer_factor);
  }
  LoadStats s;
  s.experts = experts;
  s.tokens = tokens;
  s.assignments = std::accumulate(loads.begin(), loads.end(), std::int64_t{0});
  s.mean = static_cast<double>(s.assignments) / experts;
  auto hottest = std::max_element(loads.begin(), loads.end());
  s.max_load = *hottest;
  s.min_load = *std::min_element(loads.begin(), loads.end());
  s.hottest_expert = static_cast<int>(hottest - loads.begin());
  std::vector<double> as_double(loads.begin(), loads.end());
  s.max_over_mean = s.mean > 0 ? static_cast<double>(s.max_load) / s.mean : 0.0;
  s.cv = stats::coefficient_of_variation(as_double);

  s.ep = ep;
  int per_rank = experts / ep;
  s.rank_loads.assign(ep, 0);
  for (int e = 0; e < experts; ++e) s.rank_loads[e / per_rank] += loads[e];
  std::vector<double> ranks(s.rank_loads.begin(), s.rank_loads.end());
  double rank_mean = static_cast<double>(s.assignments) / ep;
  std::int64_t rank_max = *std::max_element(s.rank_loads.begin(), s.rank_loads.end());
  s.rank_max_over_mean = rank_mean > 0 ? static_cast<double>(rank_max) / rank_mean : 0.0;
  s.rank_cv = stats::coefficient_of_variation(ranks);
  s.buffer_factor = buffer_factor;
  s.rank_buffer = static_cast<std::int64_t>(std::floor(buffer_factor * rank_mean));
  for (std::int64_t load : s.rank_loads)
    s.overflow += std::max<std::int64_t>(0, load - s.rank_buffer);
  return s;
}

std::vector<double> MeasureReport::max_over_mean() const {
  std::vector<double> out;
  for (const LoadStats& layer : per_layer) out.push_back(layer.max_over_mean);
  return out;
}

LoadCounter::LoadCounter(int layers, int topk, int experts)
    : layers_(layers),
      topk_(topk),
      experts_(experts),
      loads_(static_cast<std::size_t>(layers) * experts, 0),
      tokens_(layers, 0) {}

namespace {

template <typename T>
void measure_blocks(const ByteSource& source, const ArrayInfo& info, MeasureReport& report,
                    LoadCounter& counter) {
  const int layers = report.layers, topk = report.topk, experts = report.experts;
  const std::int64_t per_token = static_cast<std::int64_t>(layers) * topk;
  const std::int64_t block = std::max<std::int64_t>(1, (std::int64_t{1} << 22) / per_token);
  std::vector<T> buffer(static_cast<std::size_t>(block * per_token));
  std::vector<std::int64_t> seen(experts, -1);  // stamp of the last token-layer that used e
  std::int64_t stamp = 0;
  for (std::int64_t first = 0; first < report.positions; first += block) {
    std::int64_t count = std::min(block, report.positions - first);
    std::span<T> slots(buffer.data(), static_cast<std::size_t>(count * per_token));
    read_elements(source, info, first * per_token, slots);
    for (std::int64_t t = 0; t < count; ++t) {
      const T* token = slots.data() + t * per_token;
      for (int layer = 0; layer < layers; ++layer) {
        ++stamp;
        bool repeated = false;
        for (int k = 0; k < topk; ++k) {
          T expert = token[layer * topk + k];
          if (expert == -1) continue;
          if (expert < -1 || expert >= experts) {
            std::int64_t position = first + t;
            std::string where = report.shape.size() == 4
                                    ? fmt::format("row {}, token {}", position / report.shape[1],
                                                  position % report.shape[1])
                                    : fmt::format("token {}", position);
            fail_at(source.name(), 0,
                    "{}[{}, layer {}, slot {}] = {} is not an expert id in [0, {}) or -1 "
                    "(set --experts to the model's expert count)",
                    report.array.empty() ? "array" : report.array, where, layer, k,
                    static_cast<std::int64_t>(expert), experts);
          }
          if (seen[expert] == stamp) repeated = true;
          seen[expert] = stamp;
        }
        report.repeated += repeated;
      }
      counter.add_token(token);
    }
  }
}

}  // namespace

const ArrayInfo& require_member(const ByteSource& source, const std::vector<ArrayInfo>& arrays,
                                std::string_view member, std::string_view consequence) {
  if (const ArrayInfo* info = find_array(arrays, member)) return *info;
  // A long list is cut, so that the error stays one readable line.
  constexpr std::size_t kNamesShown = 16;
  std::string held;
  if (arrays.size() == 1 && arrays[0].name.empty()) {
    held = "an .npy file: one array, no members";
  } else {
    std::vector<std::string_view> names;
    for (std::size_t i = 0; i < arrays.size() && i < kNamesShown; ++i) {
      names.push_back(arrays[i].name);
    }
    held = "members: " +
           (names.empty() ? std::string("none") : fmt::format("{}", fmt::join(names, ", ")));
    if (arrays.size() > kNamesShown)
      held += fmt::format(" and {} more", arrays.size() - kNamesShown);
  }
  fail_at(source.name(), 0, "no member '{}' ({}); {}", member, held, consequence);
}

MeasureReport measure_routing(const ByteSource& source, const MeasureOptions& options) {
  if (options.experts < 1) fail("--experts must be at least 1 (got {})", options.experts);
  if (options.ep < 1 || options.experts % options.ep != 0) {
    fail("expert parallelism {} does not divide {} experts into equal groups", options.ep,
         options.experts);
  }
  if (!(options.buffer_factor > 0) || !std::isfinite(options.buffer_factor)) {
    fail("buffer factor {} must be a positive number", options.buffer_factor);
  }
  std::vector<ArrayInfo> arrays = list_arrays(source);
  const ArrayInfo* info = arrays.size() == 1
                              ? &arrays[0]
                              : &require_member(source, arrays, options.member,
                                                "name the routed-experts array with --member");
  MeasureReport report;
  report.array = info->name;
  report.shape = info->shape;
  report.dtype = info->dtype;
  report.experts = options.experts;
  report.experts_from = options.experts_from;
  std::string what = info->name.empty() ? "the array" : "'" + info->name + "'";
  if (info->dtype != DType::kInt16 && info->dtype != DType::kInt32) {
    fail_at(source.name(), 0, "{} is {}; routed experts are int16 or int32", what,
            dtype_name(info->dtype));
  }
  if (info->shape.size() != 3 && info->shape.size() != 4) {
    fail_at(source.name(), 0, "{} has shape {}; routed experts are [R, T, L, K] or [N, L, K]", what,
            format_shape(info->shape));
  }
  std::size_t rank = info->shape.size();
  report.layers = static_cast<int>(info->shape[rank - 2]);
  report.topk = static_cast<int>(info->shape[rank - 1]);
  if (info->shape[rank - 2] < 1 || info->shape[rank - 1] < 1 || info->shape[rank - 2] > 100000 ||
      info->shape[rank - 1] > options.experts) {
    fail_at(source.name(), 0,
            "{} has shape {}: L = {} layers and K = {} experts per token with {} "
            "experts is not a routing array",
            what, format_shape(info->shape), info->shape[rank - 2], info->shape[rank - 1],
            options.experts);
  }
  report.positions = info->count / (static_cast<std::int64_t>(report.layers) * report.topk);
  LoadCounter counter(report.layers, report.topk, report.experts);
  if (info->dtype == DType::kInt16) {
    measure_blocks<std::int16_t>(source, *info, report, counter);
  } else {
    measure_blocks<std::int32_t>(source, *info, report, counter);
  }
  for (int layer = 0; layer < report.layers; ++layer) {
    report.per_layer.push_back(summarize_loads(counter.loads(layer), counter.tokens(layer),
                                               options.ep, options.buffer_factor));
  }
  return report;
}

}  // namespace rtb::payload
