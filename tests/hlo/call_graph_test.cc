// Tests of the analyser's call graph (call_graph.h): records by name, edges, compute resolution
// and executions weighted by trip counts, on graphs built directly.
#include "rtb/hlo/call_graph.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace rtb::hlo {
namespace {

struct Graph {
  CallGraph graph;
  std::uint32_t define(const std::string& name, bool compute = false) {
    std::uint32_t r = graph.record_for(name);
    graph.record(r).defined = true;
    graph.record(r).direct_compute = compute;
    return r;
  }
  void edge(std::uint32_t caller, const std::string& callee, EdgeKind kind,
            std::int64_t trips = 0) {
    graph.add_edge(caller, callee, hash_name(callee), kind, trips);
  }
};

TEST(HloCallGraph, RecordsAreFoundByName) {
  CallGraph graph;
  std::uint32_t a = graph.record_for("a");
  std::uint32_t b = graph.record_for("b");
  EXPECT_NE(a, b);
  EXPECT_EQ(graph.record_for("a"), a);
  EXPECT_EQ(graph.record_for(hash_name("b")), b);
  EXPECT_EQ(graph.record(a).name_index, kNone);
  std::uint32_t name = graph.name_record(a, "a");
  EXPECT_EQ(graph.name(name), "a");
  EXPECT_EQ(graph.name_record(a, "other"), name);  // named once
  EXPECT_EQ(graph.name_count(), 1u);
}

TEST(HloCallGraph, ExecutionsMultiplyTripCountsAlongTheCallChain) {
  Graph g;
  std::uint32_t main = g.define("main");
  std::uint32_t outer = g.define("outer");
  std::uint32_t cond = g.define("cond");
  std::uint32_t inner = g.define("inner", /*compute=*/true);
  std::uint32_t unknown = g.define("unknown");
  g.edge(main, "outer", EdgeKind::kBody, 10);
  g.edge(main, "cond", EdgeKind::kCondition, 10);
  g.edge(outer, "inner", EdgeKind::kBody, 4);
  g.edge(main, "inner", EdgeKind::kCall);
  g.edge(main, "unknown", EdgeKind::kBody, -1);
  ASSERT_TRUE(g.graph.compute_executions());
  EXPECT_EQ(g.graph.executions_of(main), 1);
  EXPECT_EQ(g.graph.executions_of(outer), 10);
  EXPECT_EQ(g.graph.executions_of(cond), 11);   // a condition runs trip count + 1 times
  EXPECT_EQ(g.graph.executions_of(inner), 41);  // 10 x 4 + the direct call
  EXPECT_TRUE(g.graph.record(inner).executions_known);
  EXPECT_EQ(g.graph.executions_of(unknown), 1);
  EXPECT_FALSE(g.graph.record(unknown).executions_known);
  EXPECT_EQ(g.graph.executions_of(g.graph.record_for("nobody calls me")), 1);
  // Compute through while bodies, not through a condition without compute.
  EXPECT_TRUE(g.graph.contains_compute(main));
  EXPECT_TRUE(g.graph.contains_compute(outer));
  EXPECT_FALSE(g.graph.contains_compute(cond));
  EXPECT_TRUE(g.graph.calls_compute(2, 3));   // outer -> inner
  EXPECT_FALSE(g.graph.calls_compute(1, 2));  // main -> cond
}

TEST(HloCallGraph, FusionEdgesToComputationsWithoutCollectivesAreNotKept) {
  Graph g;
  std::uint32_t fused = g.define("fused");
  std::uint32_t main = g.define("main");
  g.edge(main, "fused", EdgeKind::kFusion, -1);
  EXPECT_TRUE(g.graph.edges().empty());
  g.graph.record(fused).relevant = true;
  g.edge(main, "fused", EdgeKind::kFusion, -1);
  EXPECT_EQ(g.graph.edges().size(), 1u);
  EXPECT_TRUE(g.graph.record(main).relevant);
  // A callee not defined yet is named (for the "called but never defined" warning).
  g.edge(main, "later", EdgeKind::kCall);
  EXPECT_EQ(g.graph.name(g.graph.record(g.graph.record_for("later")).name_index), "later");
}

TEST(HloCallGraph, CyclesCountOnceAndAreNotKnown) {
  Graph g;
  std::uint32_t a = g.define("a");
  std::uint32_t b = g.define("b");
  g.edge(a, "b", EdgeKind::kCall);
  g.edge(b, "a", EdgeKind::kCall);
  EXPECT_FALSE(g.graph.compute_executions());
  EXPECT_EQ(g.graph.executions_of(a), 1);
  EXPECT_FALSE(g.graph.record(a).executions_known);
  EXPECT_FALSE(g.graph.contains_compute(a));
}

TEST(HloCallGraph, SaturatingCounts) {
  EXPECT_EQ(sat_add(kMaxCount - 1, 5), kMaxCount);
  EXPECT_EQ(sat_mul(kMaxCount / 2, 3), kMaxCount);
  EXPECT_EQ(sat_mul(0, kMaxCount), 0);
  EXPECT_EQ(sat_add(2, 3), 5);
  EXPECT_EQ(sat_mul(4, 5), 20);
}

}  // namespace
}  // namespace rtb::hlo
