// The call graph of a module as the analyser sees it: one small record per computation
// (defined or referenced, found by name hash), the edges of while/call/conditional, fusion and
// async calls, and what is resolved once the whole dump is read: whether a computation contains
// compute (transitively through while/call/conditional) and how often it runs per module
// execution (known_trip_count weighted; see analysis.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rtb/hlo/flat_index.h"

namespace rtb::hlo {

inline constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();

// Counts that stop at the largest int64 instead of overflowing (trip counts multiply).
inline constexpr std::int64_t kMaxCount = std::numeric_limits<std::int64_t>::max();
inline std::int64_t sat_add(std::int64_t a, std::int64_t b) {
  return a > kMaxCount - b ? kMaxCount : a + b;
}
inline std::int64_t sat_mul(std::int64_t a, std::int64_t b) {
  if (a == 0 || b == 0) return 0;
  return a > kMaxCount / b ? kMaxCount : a * b;
}

enum class EdgeKind : std::uint8_t { kBody, kCondition, kCall, kBranch, kAsync, kFusion, kOther };

struct Edge {
  std::uint32_t caller;
  std::uint32_t callee;
  EdgeKind kind;
  std::int64_t trip_count;  // body/condition: -1 = unknown
};

// One per computation (defined or referenced): 20 bytes, as a dump can have very many.
struct ComputationRecord {
  std::uint32_t hash_low = 0;  // the low 32 bits of the name's hash (the name table has the rest)
  bool defined = false;
  bool relevant = false;  // has entries or edges (matters for executions)
  bool direct_compute = false;
  std::uint8_t compute_state = 0;  // resolution: 0 = not yet, 1 = visiting, 2 = yes, 3 = no
  bool async_wrapped = false;
  bool executions_known = true;        // set by compute_executions
  std::uint32_t wrapped_kind = kNone;  // interned kind an async-start of this runs
  std::uint32_t name_index = kNone;    // into the names (computations with entries or callees)
};
static_assert(sizeof(ComputationRecord) <= 20, "one per computation: keep it small");

// Edges grouped by caller in flat arrays (compressed rows over the callers only): a dump has
// hundreds of thousands of computations, most without edges, and arrays per computation cost
// more in fresh memory (page faults) than the rest of the finishing work.
struct Adjacency {
  std::vector<std::uint32_t> callers;  // sorted: the records with at least one kept edge
  std::vector<std::uint32_t> begin;    // per caller: its first item; one more at the end
  std::vector<std::uint32_t> items;    // edge indices (or what the owner replaces them with)

  template <typename Keep>
  void build(const std::vector<Edge>& edges, Keep keep) {
    std::vector<std::pair<std::uint32_t, std::uint32_t>> kept;  // (caller, edge), edge order
    for (std::uint32_t e = 0; e < edges.size(); ++e) {
      if (keep(edges[e])) kept.emplace_back(edges[e].caller, e);
    }
    std::sort(kept.begin(), kept.end());
    callers.clear();
    begin.clear();
    items.clear();
    items.reserve(kept.size());
    for (const auto& [caller, e] : kept) {
      if (callers.empty() || callers.back() != caller) {
        callers.push_back(caller);
        begin.push_back(static_cast<std::uint32_t>(items.size()));
      }
      items.push_back(e);
    }
    begin.push_back(static_cast<std::uint32_t>(items.size()));
  }

  std::span<const std::uint32_t> list(std::uint32_t record) const {
    auto it = std::lower_bound(callers.begin(), callers.end(), record);
    if (it == callers.end() || *it != record) return {};
    std::size_t k = static_cast<std::size_t>(it - callers.begin());
    return std::span<const std::uint32_t>(items).subspan(begin[k], begin[k + 1] - begin[k]);
  }
};

class CallGraph {
 public:
  // The record of the computation whose name hashes to `hash`, created when new.
  std::uint32_t record_for(std::uint64_t hash) {
    bool inserted = false;
    const auto low = static_cast<std::uint32_t>(hash);
    std::uint32_t index = index_.find_or_insert(
        hash, static_cast<std::uint32_t>(records_.size()), inserted,
        [&](std::uint32_t record) { return records_[record].hash_low == low; });
    if (inserted) records_.emplace_back().hash_low = low;
    return index;
  }
  std::uint32_t record_for(std::string_view name) { return record_for(hash_name(name)); }

  // Starts loading the index slot of `hash` (see FlatIndex::prefetch).
  void prefetch(std::uint64_t hash) const { index_.prefetch(hash); }

  ComputationRecord& record(std::uint32_t index) { return records_[index]; }
  const ComputationRecord& record(std::uint32_t index) const { return records_[index]; }

  // The name index of `record`, naming it `name` if it has none yet (only computations with
  // entries or callees are named: most never need it).
  std::uint32_t name_record(std::uint32_t record, std::string_view name) {
    std::uint32_t& index = records_[record].name_index;
    if (index == kNone) {
      index = static_cast<std::uint32_t>(names_.size());
      names_.emplace_back(name);
    }
    return index;
  }
  const std::string& name(std::uint32_t name_index) const { return names_[name_index]; }
  std::size_t name_count() const { return names_.size(); }

  // An edge from `caller` to the computation `callee_name` (whose hash is `hash`). A fusion's
  // edge is kept only while the fused computation may matter: fusion computations normally come
  // first and hold no collectives.
  void add_edge(std::uint32_t caller, std::string_view callee_name, std::uint64_t hash,
                EdgeKind kind, std::int64_t trip_count) {
    std::uint32_t callee = record_for(hash);
    const ComputationRecord& target = records_[callee];
    if (kind == EdgeKind::kFusion && target.defined && !target.relevant) return;
    if (!target.defined && kind != EdgeKind::kFusion) name_record(callee, callee_name);
    edges_.push_back(Edge{caller, callee, kind, trip_count});
    records_[caller].relevant = true;
  }
  const std::vector<Edge>& edges() const { return edges_; }

  // ---- after the last statement ----

  // Whether a computation contains compute, directly or through while/call/conditional.
  bool contains_compute(std::uint32_t record);
  // Whether one of the edges [begin, end) (a call site's) leads to a defined computation that
  // contains compute.
  bool calls_compute(std::uint32_t edge_begin, std::uint32_t edge_end);
  // Resolves executions per module execution. False when the call graph has a cycle (the
  // executions of the computations on it then count as 1, marked not known).
  bool compute_executions();
  // After compute_executions: executions of `record` per module execution.
  std::int64_t executions_of(std::uint32_t record) const;

 private:
  void build_call_lists();

  std::vector<ComputationRecord> records_;
  FlatIndex index_;
  std::vector<std::string> names_;
  std::vector<Edge> edges_;
  Adjacency call_lists_;  // call-like edges: callees per caller
  bool callees_built_ = false;
  std::vector<std::uint32_t> execution_nodes_;  // sorted: the records with edges
  std::vector<std::int64_t> executions_;        // per execution node, from compute_executions
};

}  // namespace rtb::hlo
