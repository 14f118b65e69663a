#include "rtb/hlo/call_graph.h"

#include <algorithm>

namespace rtb::hlo {

// Whether a computation contains compute, directly or through while/call/conditional.
// Iterative depth-first search, memoised in compute_state (2 = yes, 3 = no).
bool CallGraph::contains_compute(std::uint32_t root) {
  if (records_[root].compute_state >= 2) return records_[root].compute_state == 2;
  if (!callees_built_) build_call_lists();
  struct Frame {
    std::uint32_t node;
    std::span<const std::uint32_t> callees;
    std::size_t next;
    bool found;
  };
  std::vector<Frame> stack{{root, call_lists_.list(root), 0, records_[root].direct_compute}};
  records_[root].compute_state = 1;
  while (!stack.empty()) {
    Frame& frame = stack.back();
    if (!frame.found && frame.next < frame.callees.size()) {
      std::uint32_t child = frame.callees[frame.next++];
      std::uint8_t state = records_[child].compute_state;
      if (state == 2) {
        frame.found = true;
      } else if (state == 0) {
        records_[child].compute_state = 1;
        stack.push_back(Frame{child, call_lists_.list(child), 0, records_[child].direct_compute});
      }
      continue;  // state 1 (a cycle) or 3 (no compute): nothing to learn
    }
    bool found = frame.found;
    records_[frame.node].compute_state = found ? 2 : 3;
    stack.pop_back();
    if (found && !stack.empty()) stack.back().found = true;
  }
  return records_[root].compute_state == 2;
}

void CallGraph::build_call_lists() {
  call_lists_.build(edges_, [](const Edge& edge) {
    return edge.kind == EdgeKind::kBody || edge.kind == EdgeKind::kCondition ||
           edge.kind == EdgeKind::kCall || edge.kind == EdgeKind::kBranch;
  });
  // Callees rather than edge indices.
  for (std::uint32_t& item : call_lists_.items) item = edges_[item].callee;
  callees_built_ = true;
}

// Executions per module execution of the computations in the call graph, in topological order
// from the roots. Only computations with edges take part (a few in a hundred: fused
// computations without collectives get none); every other one runs once.
bool CallGraph::compute_executions() {
  std::vector<std::uint32_t>& nodes = execution_nodes_;
  nodes.clear();
  nodes.reserve(edges_.size() * 2);
  for (const Edge& edge : edges_) {
    nodes.push_back(edge.caller);
    nodes.push_back(edge.callee);
  }
  std::sort(nodes.begin(), nodes.end());
  nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  auto node_of = [&](std::uint32_t record) {
    return static_cast<std::size_t>(std::lower_bound(nodes.begin(), nodes.end(), record) -
                                    nodes.begin());
  };
  std::vector<std::uint32_t> indegree(nodes.size(), 0);
  for (const Edge& edge : edges_) ++indegree[node_of(edge.callee)];
  Adjacency out;
  out.build(edges_, [](const Edge&) { return true; });
  std::vector<std::uint32_t> ready;  // nodes, a queue: `next` is its front
  executions_.assign(nodes.size(), 0);
  for (std::uint32_t n = 0; n < nodes.size(); ++n) {
    if (indegree[n] == 0) {
      executions_[n] = 1;
      ready.push_back(n);
    }
  }
  std::size_t processed = 0;
  for (std::size_t next = 0; next < ready.size(); ++next) {
    std::uint32_t n = ready[next];
    std::uint32_t r = nodes[n];
    ++processed;
    for (std::uint32_t e : out.list(r)) {
      const Edge& edge = edges_[e];
      std::int64_t factor = 1;
      bool known = records_[r].executions_known;
      if (edge.kind == EdgeKind::kBody || edge.kind == EdgeKind::kCondition) {
        if (edge.trip_count < 0) {
          known = false;
        } else {
          factor = edge.kind == EdgeKind::kBody ? edge.trip_count : sat_add(edge.trip_count, 1);
        }
      }
      std::size_t callee_node = node_of(edge.callee);
      ComputationRecord& callee = records_[edge.callee];
      executions_[callee_node] = sat_add(executions_[callee_node], sat_mul(executions_[n], factor));
      callee.executions_known = callee.executions_known && known;
      if (--indegree[callee_node] == 0) ready.push_back(static_cast<std::uint32_t>(callee_node));
    }
  }
  if (processed < nodes.size()) {
    for (std::uint32_t n = 0; n < nodes.size(); ++n) {
      if (indegree[n] != 0) {
        executions_[n] = std::max<std::int64_t>(executions_[n], 1);
        records_[nodes[n]].executions_known = false;
      }
    }
    return false;
  }
  return true;
}

std::int64_t CallGraph::executions_of(std::uint32_t record) const {
  auto it = std::lower_bound(execution_nodes_.begin(), execution_nodes_.end(), record);
  if (it == execution_nodes_.end() || *it != record) return 1;
  return executions_[static_cast<std::size_t>(it - execution_nodes_.begin())];
}

bool CallGraph::calls_compute(std::uint32_t edge_begin, std::uint32_t edge_end) {
  for (std::uint32_t e = edge_begin; e < edge_end; ++e) {
    if (records_[edges_[e].callee].defined && contains_compute(edges_[e].callee)) return true;
  }
  return false;
}

}  // namespace rtb::hlo
