#include "rtb/logs/gates.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "rtb/base/error.h"
#include "test_util.h"

namespace rtb::logs {
namespace {

const GateSpec& gate_named(const std::vector<GateSpec>& gates, const std::string& name) {
  for (const GateSpec& gate : gates) {
    if (gate.name == name) return gate;
  }
  throw Error("no gate " + name);
}

// The message of the rtb::Error that `--limit ASSIGNMENT` (or `--metric`) throws.
std::string limit_error(const std::string& assignment) {
  std::vector<GateSpec> gates = default_gates();
  return test::error_of([&] { apply_gate_limit(gates, assignment); }).what();
}
std::string metric_error(const std::string& assignment) {
  std::vector<GateSpec> gates = default_gates();
  return test::error_of([&] { apply_gate_metric(gates, assignment); }).what();
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
  EXPECT_EQ(limit_error("loss"), "--limit loss: expected GATE=VALUE");
  EXPECT_EQ(limit_error("=1"), "--limit =1: expected GATE=VALUE");
  EXPECT_EQ(limit_error("loss="), "--limit loss=: expected GATE=VALUE");
  EXPECT_EQ(limit_error("loss=abc"), "--limit loss=abc: the limit must be a number >= 0 or 'off'");
  EXPECT_EQ(limit_error("loss=-1"), "--limit loss=-1: the limit must be a number >= 0 or 'off'");
  EXPECT_EQ(limit_error("loss=1x"), "--limit loss=1x: the limit must be a number >= 0 or 'off'");
  EXPECT_THAT(limit_error("speed=1"),
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
  // The keys a run may legitimately not log are the defaults': a --metric name is one the runs
  // must log, so a typo fails instead of making the gate "not evaluated".
  EXPECT_TRUE(gate_named(gates, "grad_norm").may_be_unlogged);
  apply_gate_metric(gates, "grad_norm=grad_nrom");
  EXPECT_FALSE(gate_named(gates, "grad_norm").may_be_unlogged);
  EXPECT_THAT(metric_error("nope=x"), HasSubstr("--metric nope=x: no gate named"));
  EXPECT_EQ(metric_error("entropy"), "--metric entropy: expected GATE=VALUE");
}

TEST(GateOptions, ListShowsLimitMetricsStateAndReason) {
  std::vector<GateSpec> gates = default_gates();
  apply_gate_limit(gates, "loss=off");
  std::string list = format_gate_list(gates);
  EXPECT_THAT(list, HasSubstr("grad_norm: 0.002 relative (metric: gradient_norm, grad_norm; limit "
                              "from: seed)\n"));
  EXPECT_THAT(list, HasSubstr("entropy: 0.0001 relative (metric: entropy; limit from: ours)\n"));
  apply_gate_limit(gates, "entropy=1e-3");
  EXPECT_THAT(format_gate_list(gates),
              HasSubstr("entropy: 0.001 relative (metric: entropy; limit from: --limit)\n"));
  EXPECT_THAT(list, HasSubstr(") [off]\n    " + gate_named(gates, "loss").reason + "\n"));
  EXPECT_THAT(list, HasSubstr("finite: 0 steps (metric: "));
}

}  // namespace
}  // namespace rtb::logs
