// How bench-report writes its figures for people: step lists, seconds, ratios, throughput.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rtb::logs::report {

// Sorted step numbers with runs collapsed: "1-3,5"; "none" when empty.
std::string compress(const std::vector<std::int64_t>& values);
// Seconds for people: 3 decimals from 1 s up (as the seed writes them), 4 significant digits
// below (so test-sized times stay readable); "?" when not finite.
std::string seconds(double value);
// A spread in the precision of the value it qualifies ("83.253 ± 0.112").
std::string spread(double value, double reference);
// Small numbers as the seed writes them: 1.6e-4, 2.0e-3 (0 stays 0).
std::string scientific(double value);
// Integers with thousands separators, as the seed writes throughput: 3,567.
std::string grouped(double value);
// A ratio as a signed percentage change: 0.9 -> "-10.00%".
std::string percent(double ratio);

}  // namespace rtb::logs::report
