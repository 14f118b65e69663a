// yaml-cpp helpers: a type-preserving emitter, string scalars that stay strings, lookups that
// follow Kubernetes' "last duplicate key wins", and line numbers of nodes.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rtb::k8s::yaml {

// Emits `root` as a block-style YAML document (no `---`, ends with a newline). Unlike yaml-cpp's
// own emitter it keeps types and shapes across a load/emit round trip:
// - a scalar that was quoted (yaml-cpp tag "!") is emitted quoted, so "4" and "true" stay strings;
//   a multi-line one is emitted as a literal block (`|`, with chomping and indentation indicators
//   where the text needs them) so a long bash script stays readable;
// - plain scalars stay plain when that reads back the same, else they are double-quoted;
// - sequences and mappings that were written in flow style (`[0, 75]`) stay in flow style;
// - mapping order, and repeated keys, are kept.
// Throws rtb::Error for a node it cannot emit (a non-scalar mapping key).
std::string emit(const YAML::Node& root);

// A scalar node that always reads back as a string (emitted quoted). Throws rtb::Error when
// `value` is not UTF-8 (YAML cannot hold it); the same for set_string().
YAML::Node string_scalar(std::string_view value);

// A copy of `node` (tags, styles and children; not its source marks) that shares nothing with the
// tree it came from, to add to a collection built apart from that tree. Adding the tree's own
// node instead makes yaml-cpp copy the whole tree's node set into the new collection's (every
// node of a 2,000-node JobSet, about 0.4 M instructions each time; issue 29), where a copy of a
// small node costs a few thousand.
inline YAML::Node standalone(const YAML::Node& node) { return YAML::Clone(node); }

// yaml-cpp's tag of a quoted (or block) scalar, which reads as a string whatever its text.
inline constexpr std::string_view kStringTag = "!";

// Throws rtb::Error when `value` is not UTF-8: a YAML document cannot hold it.
void require_utf8(std::string_view value);

// Sets `node` (an existing scalar, or a new one) to a string value that stays a string.
void set_string(YAML::Node node, std::string_view value);

// The value of `key` in a mapping, or an invalid/undefined Node when absent. When a key repeats,
// the LAST occurrence is returned, as Kubernetes (JSON decoding) would use it.
YAML::Node lookup(const YAML::Node& map, std::string_view key);

// Follows `keys` from `node` through mappings (lookup() at each step); undefined when one is
// missing. Note: never reassign a yaml-cpp Node variable to walk a tree (`n = n["k"]`): Node
// assignment writes through into the tree. Use this, or construct a new variable per step.
YAML::Node descend(const YAML::Node& node, std::initializer_list<std::string_view> keys);

// The scalar text of map[key] when present and a scalar.
std::optional<std::string> scalar_at(const YAML::Node& map, std::string_view key);

// Keys that appear more than once in some mapping of `root`, with their 0-based line in the node's
// source text: {key, line}. Walks iteratively (no recursion on input depth).
std::vector<std::pair<std::string, int>> duplicate_keys(const YAML::Node& root);

// Limits that keep a hostile document from exhausting the machine. yaml-cpp shares an aliased
// node instead of copying it, so a few lines of anchors and aliases (a "billion laughs") make a
// graph whose expansion, which every walk over the tree (emit, diff) performs, is exponential.
struct Limits {
  int max_depth = 64;               // nested mappings/sequences; Kubernetes objects use ~15
  std::size_t max_nodes = 200'000;  // nodes counted with aliases expanded
};

// Throws rtb::Error (file `source`, line `first_line` + the node's line) when `root` nests deeper
// than `limits.max_depth` or expands to more than `limits.max_nodes` nodes. Iterative, and stops
// as soon as a limit is passed, so it costs at most max_nodes steps.
void check_limits(const YAML::Node& root, const std::string& source, std::size_t first_line,
                  const Limits& limits = {});

// True when `value` can be emitted as a plain scalar and reads back as the same string of
// characters (it says nothing about the type a plain scalar resolves to).
bool plain_is_safe(std::string_view value, bool in_flow);

}  // namespace rtb::k8s::yaml
