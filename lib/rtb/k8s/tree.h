// A YAML tree as one flat array of plain nodes, for code that builds, rewrites and compares whole
// trees (expand_for_diff and diff_trees in diff.h).
//
// Why not yaml-cpp's nodes: they share their data through reference-counted pointers, and every
// assignment of a node into a tree merges the two trees' node sets, so building an expanded copy
// of a JobSet and walking two of them was a third of a render (issue 29, docs/architecture.md).
// Here a node is an index; a rewrite appends nodes and repoints one index (what it replaced stays
// unreachable until the tree goes), and nothing is reference-counted or recursive: a tree of any
// depth is copied, walked and destroyed without recursion.
//
// A Tree holds what yaml-cpp's node holds and what the comparison reads: its type, its tag
// (yaml-cpp's "!" for a quoted scalar, "?" for a plain one), its scalar text, its flow style, and
// its children in order: a sequence's items, a mapping's keys and values (repeated keys kept).
// Source marks are not kept: the comparison reports paths, not lines.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rtb::k8s {

class Tree {
 public:
  using Id = std::uint32_t;
  static constexpr Id kNone = UINT32_MAX;  // absent (yaml-cpp's undefined node)

  enum class Type : std::uint8_t { kNull, kScalar, kSequence, kMap };
  struct Node {
    Type type = Type::kNull;
    bool flow = false;  // a collection written in flow style (`[0, 75]`)
    std::string tag;
    std::string scalar;        // a scalar's text ("" for the other types)
    std::vector<Id> children;  // a sequence's items; a mapping's key, value, key, value, ...
  };

  Id root() const { return root_; }
  void set_root(Id id) { root_ = id; }

  const Node& at(Id id) const { return nodes_[id]; }
  Node& at(Id id) { return nodes_[id]; }
  Type type(Id id) const { return nodes_[id].type; }
  bool is_map(Id id) const { return id != kNone && nodes_[id].type == Type::kMap; }
  bool is_sequence(Id id) const { return id != kNone && nodes_[id].type == Type::kSequence; }
  bool is_scalar(Id id) const { return id != kNone && nodes_[id].type == Type::kScalar; }
  const std::string& tag(Id id) const { return nodes_[id].tag; }
  const std::string& scalar(Id id) const { return nodes_[id].scalar; }

  // Entries of a mapping, items of a sequence (0 for anything else).
  std::size_t size(Id id) const;
  Id key(Id map, std::size_t i) const { return nodes_[map].children[2 * i]; }
  Id value(Id map, std::size_t i) const { return nodes_[map].children[2 * i + 1]; }
  Id item(Id sequence, std::size_t i) const { return nodes_[sequence].children[i]; }
  // A key as the comparison names it: its text when it is a scalar, else "" (as yaml-cpp's
  // Scalar() of a non-scalar key).
  const std::string& key_text(Id map, std::size_t i) const { return scalar(key(map, i)); }

  // The value of the LAST entry whose key is the scalar `key` (Kubernetes' "last duplicate key
  // wins", as yaml::lookup), or kNone; kNone when `map` is not a mapping.
  Id find(Id map, std::string_view key) const;
  // Follows `keys` through mappings (find() at each step); kNone when one is missing.
  Id descend(Id id, std::initializer_list<std::string_view> keys) const;

  Id add(Node node);
  Id add_scalar(std::string text, std::string tag = "");
  // A scalar that reads back as a string (tag "!"); throws rtb::Error when `value` is not UTF-8,
  // as yaml::string_scalar.
  Id add_string(std::string_view value);
  Id add_map(std::string tag = "");
  Id add_sequence();

  // Appends an entry (a repeated key too, as a YAML reader keeps it).
  void append(Id map, Id key, Id value);
  void push_back(Id sequence, Id item);
  // Sets the FIRST entry whose key is the scalar `key` to `value`, or appends one with a new
  // plain key: yaml-cpp's `map[key] = value`.
  void set(Id map, std::string_view key, Id value);
  // Removes the first entry whose key is the scalar `key`; false when there is none.
  bool remove(Id map, std::string_view key);

 private:
  // The index in `map`'s children of the first key that is the scalar `key`, or npos.
  std::size_t first_key(Id map, std::string_view key) const;

  std::vector<Node> nodes_;
  Id root_ = kNone;
};

// The tree of a yaml-cpp node (aliases copied, as a walk over yaml-cpp's tree sees them); an
// undefined node gives an empty tree (root kNone). Iterative.
Tree tree_of(const YAML::Node& node);
// The yaml-cpp node of a tree's subtree (an undefined node for kNone), for what still reads
// yaml-cpp (the emitter, reports). Iterative.
YAML::Node yaml_of(const Tree& tree, Tree::Id id);
inline YAML::Node yaml_of(const Tree& tree) { return yaml_of(tree, tree.root()); }

}  // namespace rtb::k8s
