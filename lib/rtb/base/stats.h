// Small statistics over samples, shared by the tools that summarise numbers (expert loads, step
// times). Population formulas (divide by n), as a load profile is the whole population.
#pragma once

#include <span>
#include <vector>

namespace rtb::stats {

// Arithmetic mean; 0 for no values.
double mean(std::span<const double> values);
// Population standard deviation sqrt(mean((x - mean)^2)); 0 for no values.
double stddev(std::span<const double> values);
// Coefficient of variation: stddev / mean; 0 when the mean is 0.
double coefficient_of_variation(std::span<const double> values);
// The q-quantile (0 <= q <= 1) with linear interpolation between order statistics, as
// numpy.quantile's default; throws rtb::Error for no values or q outside [0, 1].
double quantile(std::vector<double> values, double q);
double median(std::vector<double> values);

}  // namespace rtb::stats
