// Element-by-element comparison of two config values that parse as Python literal containers, so
// that one changed rule of MaxText's 61-rule `logical_axis_rules` reads as one line, not as two
// 3,500-character values:
// - a rule list (a list or tuple whose items are all lists or tuples of two or more items, the
//   first a string name: logical_axis_rules, data_sharding...) pairs rules by name; a name that
//   repeats (MaxText lists fallbacks for one logical axis in order) is `name#2`, `name#3`, ...;
//   rules in both whose order changed are reported as moved;
// - another sequence pairs items by position after a longest-common-subsequence alignment (an
//   inserted item is one added item, not a shift of every later one); an item removed in one
//   place and added, equal, in another is moved;
// - dicts pair entries by key (order does not matter).
// Items compare by meaning as whole values do (logs::canonical_config_literal()); values are
// reported as Python repr() prints them.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rtb::bench {

struct ElementDifference {
  enum class Kind { kAdded, kRemoved, kChanged, kMoved };
  Kind kind;
  // What goes between the brackets of `key[...]`: a rule's name (`norm`, `embed#2`), a sequence
  // index (A's for removed, changed and moved items, B's for added ones), or a dict key (a string
  // as is, other keys as repr()).
  std::string key;
  std::optional<std::size_t> old_index, new_index;  // sequences: the item's position in A and B
  std::optional<std::string> old_value, new_value;  // null on the side without the item
  // kMoved, or a changed rule that also moved: its order among the items both sides have changed.
  bool moved = false;
};
std::string_view element_kind_name(ElementDifference::Kind kind);  // "added", ..., "moved"

// How the items of two values were paired.
enum class ElementPairing { kByName, kByIndex, kByKey };
std::string_view pairing_name(ElementPairing pairing);  // "name", "index", "key"

struct ElementDiff {
  ElementPairing pairing;
  std::vector<ElementDifference> differences;  // in A's order, then what only B has
};

// The element differences of two printed values, or nullopt when they are not both containers of
// one family (two sequences, or two dicts) that parse as literals, when they agree item by item
// (e.g. a dict with a repeated key), or when a sequence alignment would need more than
// kMaxAlignmentCells cells (the caller then reports the whole values).
std::optional<ElementDiff> diff_elements(std::string_view a, std::string_view b);

inline constexpr std::size_t kMaxAlignmentCells = std::size_t{1} << 22;

}  // namespace rtb::bench
