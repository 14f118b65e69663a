// libFuzzer target: the routing-target table parser (routing.h). Properties: a parsed table
// written back in table form and in inline form parses to exactly the same doubles; scaling and
// validating a parsed table never fail in any other way than rtb::Error.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "rtb/base/error.h"
#include "rtb/payload/load.h"
#include "rtb/payload/routing.h"

namespace {

[[noreturn]] void violated(const char* what) {
  std::fprintf(stderr, "routing_fuzz: property violated: %s\n", what);
  __builtin_trap();
}

// `text` (a written form of `targets`) must parse back to exactly `targets`.
void expect_round_trip(const std::string& text, const std::vector<double>& targets,
                       const char* form) {
  std::vector<double> parsed;
  try {
    parsed = rtb::payload::parse_routing_targets(text, std::string("<") + form + ">");
  } catch (const rtb::Error& e) {
    std::fprintf(stderr, "%s form: %s\n", form, e.what());
    violated("a written form does not parse");
  }
  if (parsed != targets) violated("a written form parses to other targets");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<double> targets;
  try {
    targets = rtb::payload::parse_routing_targets(text, "<fuzz>");
  } catch (const rtb::Error&) {
    return 0;
  }
  if (targets.empty()) violated("an empty table parsed");
  for (double target : targets) {
    if (!std::isfinite(target) || target < 1.0) violated("a target below 1 or not finite parsed");
  }

  expect_round_trip(rtb::payload::format_routing_targets_table(targets, {"fuzz"}), targets,
                    "table");
  expect_round_trip(rtb::payload::format_routing_targets_inline(targets), targets, "inline");

  const double scale = static_cast<double>(size % 7) / 2.0;
  try {
    (void)rtb::payload::scale_routing_targets(targets, scale);
  } catch (const rtb::Error&) {
  }
  const int experts = 1 + static_cast<int>(size % 512);
  const int topk = 1 + static_cast<int>(size % 8);
  try {
    rtb::payload::validate_routing_targets(targets, static_cast<int>(targets.size()), experts,
                                           topk);
  } catch (const rtb::Error&) {
  }
  // The load profile the payload builder plants for the first target.
  try {
    (void)rtb::payload::expert_load_profile(4096, experts, topk, targets.front());
  } catch (const rtb::Error&) {
  }
  return 0;
}
