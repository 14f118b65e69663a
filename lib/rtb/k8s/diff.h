// Structured comparison of JobSet documents. Two steps:
// 1. expand_for_diff() turns a JobSet into a tree where strings that hold flags become mappings of
//    one entry per flag (the client's startup command: environment, program, argv and the bench
//    driver's settings; MAXTEXT_EXTRA_FLAGS items; LIBTPU_INIT_ARGS / XLA_FLAGS items; container
//    args), so a changed flag is one difference, not a changed 6,000-character line;
// 2. diff_trees() compares two trees, matching list items by key (name, containerPort) where they
//    have one, and reports each difference with a stable path such as
//    spec.replicatedJobs[proc].template.spec.template.spec.containers[main].startup.env.MAXTEXT_EXTRA_FLAGS[ragged_buffer_factor]
#pragma once

#include <yaml-cpp/yaml.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rtb/k8s/flags.h"
#include "rtb/k8s/tree.h"

namespace rtb::k8s {

// Path segments: `.key` for keys made of [A-Za-z0-9_-], `[key]` for any other key or list item key.
std::string path_child(const std::string& parent, std::string_view key);
std::string path_item(const std::string& parent, std::string_view item_key);

// The key by which each item of a sequence is matched: the `name` of mappings when every item has
// a distinct one, else `containerPort` likewise, else the item's index.
std::vector<std::string> sequence_item_keys(const YAML::Node& sequence);

// The key each item of a flag list is compared by: `--key` (argv style) or `key` (key=value
// style), `key#2`, `key#3` for repeats, and `#i` for an item that is not a flag.
std::vector<std::string> flag_item_keys(const std::vector<std::string>& items, FlagStyle style);

// Environment variables whose values are libtpu/XLA flag strings.
bool is_flag_string_variable(std::string_view name);

// The settings that the bench client passes to the driver start at this variable: in a bench
// startup command, it and every assignment after it are driver settings, not trainer environment.
inline constexpr std::string_view kDriverSettingsStart = "BENCH_NAME";

// A copy of a JobSet document with flag-holding strings expanded (see above). A client startup
// block that cannot be parsed is left as a plain string. expanded_tree() is the same as a Tree,
// for diff_trees() below without a round trip through yaml-cpp's nodes.
Tree expanded_tree(const YAML::Node& jobset);
YAML::Node expand_for_diff(const YAML::Node& jobset);

// A string that reads as a line of shell with flags (`--name`, `--name=v`, `--name v` or
// `name=v`), as a mapping compared like the flag lists above: `--name` ->
// the item as written (`--name v` for a separate value word), `name` for `name=v`, `#0`, `#1` for
// the other words in order, operators (`;`, `&&`) by themselves, repeats as `key#2`. nullopt for
// anything else: no long flag nor `name=v` word, fewer than two words, several lines, or text
// that bash would not split (an unterminated quote).
std::optional<YAML::Node> command_line_as_flags(std::string_view text);

struct Difference {
  enum class Kind { kAdded, kRemoved, kChanged, kTypeChanged };
  Kind kind;
  std::string path;
  std::string old_value;  // a scalar, or the emitted YAML of a subtree (empty when added)
  std::string new_value;  // likewise (empty when removed)
  // For an added or removed mapping or list: that subtree (else undefined), so that a report can
  // show its leaves (subtree_leaves) rather than its YAML.
  YAML::Node subtree{YAML::NodeType::Undefined};
};
std::string_view kind_name(Difference::Kind kind);

// A difference's path as segments: `a.b[c].d` -> `a`, `b`, `[c]`, `d` (brackets kept; an unclosed
// bracket runs to the end). The views point into `path`.
std::vector<std::string_view> path_segments(std::string_view path);

// A leaf of a subtree: its path relative to the subtree's (`[0].operator`, `annotations[a/b]`,
// "" for the subtree itself when it is a scalar) and its value on one line: a scalar as written
// (multi-line ones included), `null`, `{}`, `[]`, or a list of scalars in flow style (`[1, 2]`,
// cut after about 100 characters with the item count: `[42, 127, ...] (215 items)`).
struct Leaf {
  std::string path;
  std::string value;
};
struct Leaves {
  std::vector<Leaf> shown;  // the first `limit`, in document order
  std::size_t total = 0;    // all of them
};
Leaves subtree_leaves(const YAML::Node& tree, std::size_t limit);

// Differences between two trees, in the order of `a` (then what only `b` has). Scalars are typed
// as Kubernetes reads them: a quoted scalar is a string, a plain one a null, bool (YAML 1.1 words
// too), number or string. Scalars of different types ("4" against 4, 'true' against true) are a
// type change, whatever their text; a quoted and a plain string of the same text are equal. An
// empty value (null) against a mapping or list is that collection empty: its entries are added or
// removed. Two strings that both read as command lines (command_line_as_flags) are compared flag
// by flag, the flags' paths below the string's (`value[--steps]`).
// The Tree overload compares the trees' roots; the yaml-cpp one converts both (tree_of) first.
// `detail`: kFull fills each difference's values (and subtree); kWhere leaves them empty, for a
// caller that only asks where two trees differ, since spelling the YAML of every added or removed
// subtree (and copying long scalars) was most of a comparison's cost.
enum class DiffDetail { kFull, kWhere };
std::vector<Difference> diff_trees(const Tree& a, const Tree& b, const std::string& base_path = "",
                                   DiffDetail detail = DiffDetail::kFull);
std::vector<Difference> diff_trees(const YAML::Node& a, const YAML::Node& b,
                                   const std::string& base_path = "",
                                   DiffDetail detail = DiffDetail::kFull);

}  // namespace rtb::k8s
