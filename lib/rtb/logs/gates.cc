#include "rtb/logs/gates.h"

#include <fmt/format.h>

#include <charconv>
#include <utility>

#include "rtb/base/error.h"

namespace rtb::logs {
namespace {

// "NAME=VALUE" split at the first '='.
std::pair<std::string, std::string> split_assignment(const std::string& text,
                                                     const std::string& option) {
  std::size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) {
    fail("{} {}: expected GATE=VALUE", option, text);
  }
  return {text.substr(0, eq), text.substr(eq + 1)};
}

GateSpec& find_gate(std::vector<GateSpec>& gates, const std::string& name,
                    const std::string& option) {
  std::string names;
  for (GateSpec& gate : gates) {
    if (gate.name == name) return gate;
    names += (names.empty() ? "" : ", ") + gate.name;
  }
  fail("{}: no gate named '{}' (gates: {})", option, name, names);
}

}  // namespace

void apply_gate_limit(std::vector<GateSpec>& gates, const std::string& assignment) {
  auto [name, value] = split_assignment(assignment, "--limit");
  GateSpec& gate = find_gate(gates, name, "--limit " + assignment);
  if (value == "off") {
    gate.enabled = false;
    return;
  }
  double limit = -1;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), limit);
  if (ec != std::errc() || end != value.data() + value.size() || !(limit >= 0)) {
    fail("--limit {}: the limit must be a number >= 0 or 'off'", assignment);
  }
  gate.limit = limit;
  gate.limit_from = "--limit";
  gate.enabled = true;
}

void apply_gate_metric(std::vector<GateSpec>& gates, const std::string& assignment) {
  auto [name, key] = split_assignment(assignment, "--metric");
  GateSpec& gate = find_gate(gates, name, "--metric " + assignment);
  if (gate.kind == GateKind::kFinite) {
    gate.keys.push_back(key);  // one more metric that must stay finite
  } else {
    gate.keys = {key};
    gate.may_be_unlogged = false;  // a key named on the command line must be logged
  }
}

std::string format_gate_list(const std::vector<GateSpec>& gates) {
  std::string out;
  for (const GateSpec& gate : gates) {
    std::string keys;
    for (const std::string& key : gate.keys) keys += (keys.empty() ? "" : ", ") + key;
    if (keys.empty()) keys = "every metric the other gates use";
    std::string limit = gate.kind == GateKind::kFinite
                            ? fmt::format("{:g} steps", gate.limit)
                            : fmt::format("{:g} {}", gate.limit, gate_kind_name(gate.kind));
    out += fmt::format("{}: {} (metric: {}; limit from: {}){}\n    {}\n", gate.name, limit, keys,
                       gate.limit_from, gate.enabled ? "" : " [off]", gate.reason);
  }
  return out;
}

}  // namespace rtb::logs
