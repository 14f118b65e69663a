#include "rtb/logs/gates.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "rtb/base/error.h"

namespace rtb::logs {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const GateSpec& gate_named(const std::vector<GateSpec>& gates, const std::string& name) {
  for (const GateSpec& gate : gates) {
    if (gate.name == name) return gate;
  }
  throw Error("no gate " + name);
}

std::string error_of(void (*apply)(std::vector<GateSpec>&, const std::string&),
                     const std::string& assignment) {
  std::vector<GateSpec> gates = default_gates();
  try {
    apply(gates, assignment);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(GateOptions, LimitSetsEnablesAndTurnsOff) {
  std::vector<GateSpec> gates = default_gates();
  apply_gate_limit(gates, "grad_norm=1e-3");
  EXPECT_EQ(gate_named(gates, "grad_norm").limit, 1e-3);
  EXPECT_TRUE(gate_named(gates, "grad_norm").enabled);
  apply_gate_limit(gates, "loss=off");
  EXPECT_FALSE(gate_named(gates, "loss").enabled);
  apply_gate_limit(gates, "loss=0");  // a limit turns a gate back on
  EXPECT_TRUE(gate_named(gates, "loss").enabled);
  EXPECT_EQ(gate_named(gates, "loss").limit, 0.0);
}

TEST(GateOptions, LimitRejectsBadSyntaxValuesAndGates) {
  EXPECT_EQ(error_of(apply_gate_limit, "loss"), "--limit loss: expected GATE=VALUE");
  EXPECT_EQ(error_of(apply_gate_limit, "=1"), "--limit =1: expected GATE=VALUE");
  EXPECT_EQ(error_of(apply_gate_limit, "loss="), "--limit loss=: expected GATE=VALUE");
  EXPECT_EQ(error_of(apply_gate_limit, "loss=abc"),
            "--limit loss=abc: the limit must be a number >= 0 or 'off'");
  EXPECT_EQ(error_of(apply_gate_limit, "loss=-1"),
            "--limit loss=-1: the limit must be a number >= 0 or 'off'");
  EXPECT_EQ(error_of(apply_gate_limit, "loss=1x"),
            "--limit loss=1x: the limit must be a number >= 0 or 'off'");
  EXPECT_THAT(error_of(apply_gate_limit, "speed=1"),
              HasSubstr("--limit speed=1: no gate named 'speed' (gates: loss, "));
}

TEST(GateOptions, MetricReplacesKeysOrAddsAFiniteOne) {
  std::vector<GateSpec> gates = default_gates();
  apply_gate_metric(gates, "entropy=policy/entropy");
  EXPECT_THAT(gate_named(gates, "entropy").keys, ElementsAre("policy/entropy"));
  std::vector<std::string> finite_keys = gate_named(gates, "finite").keys;
  apply_gate_metric(gates, "finite=kl");
  finite_keys.push_back("kl");
  EXPECT_EQ(gate_named(gates, "finite").keys, finite_keys);
  EXPECT_THAT(error_of(apply_gate_metric, "nope=x"), HasSubstr("--metric nope=x: no gate named"));
  EXPECT_EQ(error_of(apply_gate_metric, "entropy"), "--metric entropy: expected GATE=VALUE");
}

TEST(GateOptions, ListShowsLimitMetricsStateAndReason) {
  std::vector<GateSpec> gates = default_gates();
  apply_gate_limit(gates, "loss=off");
  std::string list = format_gate_list(gates);
  EXPECT_THAT(list, HasSubstr("grad_norm: 0.002 relative (metric: gradient_norm, grad_norm)\n"));
  EXPECT_THAT(list, HasSubstr(") [off]\n    " + gate_named(gates, "loss").reason + "\n"));
  EXPECT_THAT(list, HasSubstr("finite: 0 steps (metric: "));
}

}  // namespace
}  // namespace rtb::logs
