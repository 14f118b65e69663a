#include "rtb/base/stats.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>

#include "rtb/base/error.h"

namespace rtb::stats {
namespace {

Eigen::Map<const Eigen::ArrayXd> as_array(std::span<const double> values) {
  return {values.data(), static_cast<Eigen::Index>(values.size())};
}

}  // namespace

double mean(std::span<const double> values) {
  if (values.empty()) return 0.0;
  return as_array(values).mean();
}

double stddev(std::span<const double> values) {
  if (values.empty()) return 0.0;
  auto array = as_array(values);
  return std::sqrt((array - array.mean()).square().mean());
}

double coefficient_of_variation(std::span<const double> values) {
  double average = mean(values);
  return average == 0.0 ? 0.0 : stddev(values) / average;
}

double quantile(std::vector<double> values, double q) {
  if (values.empty()) fail("quantile of no values");
  if (!(q >= 0.0 && q <= 1.0)) fail("quantile {} is outside [0, 1]", q);
  double position = q * static_cast<double>(values.size() - 1);
  auto lower = static_cast<std::size_t>(std::floor(position));
  std::size_t upper = std::min(lower + 1, values.size() - 1);
  std::nth_element(values.begin(), values.begin() + lower, values.end());
  double low = values[lower];
  if (upper == lower) return low;
  double high = *std::min_element(values.begin() + lower + 1, values.end());
  return low + (position - static_cast<double>(lower)) * (high - low);
}

double median(std::vector<double> values) { return quantile(std::move(values), 0.5); }

}  // namespace rtb::stats
