#include "rtb/k8s/diff.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <deque>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "rtb/base/enum_names.h"
#include "rtb/base/error.h"
#include "rtb/k8s/flags.h"
#include "rtb/k8s/jobset.h"
#include "rtb/k8s/shell.h"
#include "rtb/k8s/yaml.h"
#include "rtb/k8s/yaml_reader.h"

namespace rtb::k8s {
namespace {

// Marks the mappings that expand_for_diff() makes of flag lists.
constexpr std::string_view kFlagMapTag = "!rtb-flags";
// Marks the mappings that diff_trees() makes of command lines; their items are not split again.
constexpr std::string_view kCommandMapTag = "!rtb-command";

bool is_simple_key(std::string_view key) {
  if (key.empty()) return false;
  for (char c : key) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

// Appends `key` to a mapping, making repeated keys unique (`key#2`) so both stay comparable.
void add_unique(Tree& tree, Tree::Id map, std::unordered_map<std::string, int>& seen,
                const std::string& key, Tree::Id value) {
  int n = ++seen[key];
  tree.set(map, n == 1 ? key : fmt::format("{}#{}", key, n), value);
}

// A flag list as a mapping: flag key (with its dashes for argv style) -> the item as written.
Tree::Id flags_as_map(Tree& tree, const std::vector<std::string>& items, FlagStyle style) {
  // Its entries are addressed as items: [--key].
  Tree::Id map = tree.add_map(std::string(kFlagMapTag));
  std::vector<std::string> keys = flag_item_keys(items, style);
  for (std::size_t i = 0; i < items.size(); ++i) tree.set(map, keys[i], tree.add_string(items[i]));
  return map;
}

Tree::Id expand_variable(Tree& tree, std::string_view name, const std::string& value) {
  if (is_flag_string_variable(name))
    return flags_as_map(tree, split_flag_items(value), FlagStyle::kDashDash);
  if (name == "MAXTEXT_EXTRA_FLAGS") {
    // Items that are not key=value stay positional rather than failing the whole comparison.
    return flags_as_map(tree, split_flag_items(value), FlagStyle::kKeyValue);
  }
  return tree.add_string(value);
}

// The words of an argv string as bash reads them (TRAINER_ARGV / ORCH_ARGV).
std::optional<std::vector<std::string>> words_of(const std::string& text) {
  try {
    std::vector<std::string> values;
    for (const shell::Word& word : shell::split(text)) values.push_back(word.value);
    return values;
  } catch (const Error&) {
    return std::nullopt;
  }
}

// The script of a container's `[bash, -c, SCRIPT, ...]` command (bash_script_node's rule), or
// kNone.
Tree::Id script_of(const Tree& tree, Tree::Id container) {
  Tree::Id command = tree.find(container, "command");
  if (!tree.is_sequence(command) || tree.size(command) < 3) return Tree::kNone;
  for (Tree::Id word : tree.at(command).children) {
    if (!tree.is_scalar(word)) return Tree::kNone;
  }
  if (!runs_shell_script(tree.scalar(tree.item(command, 0)), tree.scalar(tree.item(command, 1))))
    return Tree::kNone;
  return tree.item(command, 2);
}

// Replaces a client container's `command` by its structured form. (Strings are copied out of the
// tree before nodes are added: adding moves the tree's storage.)
void expand_client(Tree& tree, Tree::Id container, Tree::Id script_node) {
  const std::string script = tree.scalar(script_node);
  StartupBlock block;
  shell::SimpleCommand startup;
  try {
    block = find_startup_block(script);
    startup =
        shell::parse_command(std::string_view(script).substr(block.begin, block.end - block.begin));
  } catch (const Error&) {
    return;  // not a readable startup block: compared as text
  }
  Tree::Id env = tree.add_map(), driver = tree.add_map();
  std::unordered_map<std::string, int> env_seen, driver_seen;
  bool in_driver = false;
  for (const shell::Assignment& assignment : startup.env) {
    if (assignment.name == kDriverSettingsStart) in_driver = true;
    if (in_driver) {
      std::optional<std::vector<std::string>> words;
      if (assignment.name == "TRAINER_ARGV" || assignment.name == "ORCH_ARGV")
        words = words_of(assignment.value);
      add_unique(tree, driver, driver_seen, assignment.name,
                 words ? flags_as_map(tree, *words, FlagStyle::kDashDash)
                       : tree.add_string(assignment.value));
    } else {
      add_unique(tree, env, env_seen, assignment.name,
                 expand_variable(tree, assignment.name, assignment.value));
    }
  }
  // The program is the words before the first flag; a bench passes the trainer's argv in
  // TRAINER_ARGV, which then stands for the argv.
  std::vector<std::string> program, argv;
  for (const shell::Word& word : startup.words) {
    if (argv.empty() && word.value.rfind("--", 0) != 0) {
      program.push_back(word.value);
    } else {
      argv.push_back(word.value);
    }
  }
  Tree::Id trainer_argv = tree.find(driver, "TRAINER_ARGV");
  bool argv_from_driver = tree.is_map(trainer_argv) && argv.empty();
  Tree::Id argv_node =
      argv_from_driver ? trainer_argv : flags_as_map(tree, argv, FlagStyle::kDashDash);
  if (argv_from_driver) tree.remove(driver, "TRAINER_ARGV");
  std::string wrapper = script.substr(0, block.begin) + "<startup>" + script.substr(block.end);
  Tree::Id command = tree.find(container, "command");
  // The arguments after the script ($0, then a packed driver's pieces) are compared as lines of
  // the script, where a driver that goes in verbatim would be.
  for (std::size_t i = 3; i < tree.size(command); ++i) {
    wrapper += fmt::format("\n<argument ${}>\n{}", i - 3, tree.scalar(tree.item(command, i)));
  }
  Tree::Id startup_node = tree.add_map();
  tree.set(startup_node, "env", env);
  tree.set(startup_node, "program", tree.add_string(shell::join(program)));
  tree.set(startup_node, "argv", argv_node);
  if (tree.size(driver) > 0) tree.set(startup_node, "driver", driver);
  Tree::Id shell_words = tree.add_sequence();
  tree.push_back(shell_words, tree.item(command, 0));
  tree.push_back(shell_words, tree.item(command, 1));
  Tree::Id script_text = tree.add_string(wrapper);
  // Rebuild the container with `command` replaced in place by command/script/startup.
  Tree::Id rebuilt = tree.add_map();
  const std::size_t entries = tree.size(container);
  for (std::size_t i = 0; i < entries; ++i) {
    Tree::Id key = tree.key(container, i);
    if (tree.is_scalar(key) && tree.scalar(key) == "command") {
      tree.set(rebuilt, "command", shell_words);
      tree.set(rebuilt, "script", script_text);
      tree.set(rebuilt, "startup", startup_node);
    } else {
      tree.append(rebuilt, key, tree.value(container, i));
    }
  }
  // In place, as yaml-cpp's assignment to the container's node did: every path to it (an alias)
  // sees the rebuilt one.
  tree.at(container) = std::move(tree.at(rebuilt));
}

std::optional<std::string> scalar_at(const Tree& tree, Tree::Id map, std::string_view key) {
  Tree::Id value = tree.find(map, key);
  if (!tree.is_scalar(value)) return std::nullopt;
  return tree.scalar(value);
}

void expand_container(Tree& tree, Tree::Id container) {
  Tree::Id args = tree.find(container, "args");
  if (tree.is_sequence(args)) {
    std::vector<std::string> items;
    bool all_scalars = true;
    for (Tree::Id item : tree.at(args).children) {
      if (!tree.is_scalar(item))
        all_scalars = false;
      else
        items.push_back(tree.scalar(item));
    }
    if (all_scalars) tree.set(container, "args", flags_as_map(tree, items, FlagStyle::kDashDash));
  }
  Tree::Id env = tree.find(container, "env");
  if (tree.is_sequence(env)) {
    const std::vector<Tree::Id> entries = tree.at(env).children;
    for (Tree::Id entry : entries) {
      std::optional<std::string> name = scalar_at(tree, entry, "name");
      Tree::Id value = tree.find(entry, "value");
      if (name && tree.is_scalar(value) &&
          (is_flag_string_variable(*name) || *name == "MAXTEXT_EXTRA_FLAGS")) {
        const std::string text = tree.scalar(value);
        tree.set(entry, "value", expand_variable(tree, *name, text));
      }
    }
  }
  Tree::Id script = script_of(tree, container);
  if (script != Tree::kNone) expand_client(tree, container, script);
}

void expand_jobset(Tree& tree) {
  Tree::Id jobs = tree.descend(tree.root(), {"spec", "replicatedJobs"});
  if (!tree.is_sequence(jobs)) return;
  const std::vector<Tree::Id> job_ids = tree.at(jobs).children;
  for (Tree::Id job : job_ids) {
    Tree::Id spec = tree.descend(job, {"template", "spec", "template", "spec"});
    if (!tree.is_map(spec)) continue;
    for (std::string_view list : {"initContainers", "containers"}) {
      Tree::Id containers = tree.find(spec, list);
      if (!tree.is_sequence(containers)) continue;
      const std::vector<Tree::Id> container_ids = tree.at(containers).children;
      for (Tree::Id container : container_ids) {
        if (tree.is_map(container)) expand_container(tree, container);
      }
    }
  }
}

std::string describe(const Tree& tree, Tree::Id id) {
  if (id == Tree::kNone || tree.type(id) == Tree::Type::kNull) return "null";
  if (tree.is_scalar(id)) return tree.scalar(id);
  std::string text = yaml::emit(yaml_of(tree, id));
  if (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

// Whether a plain scalar is a number to Kubernetes' YAML 1.1 reader (go-yaml): a decimal
// integer or float (`1`, `-1.5`, `.5`, `1e5`), `0x` hex, or `.inf` / `.nan`. C's float parsing
// alone would also take `inf`, `infinity` and `nan`, which YAML reads as strings.
bool is_yaml_number(std::string_view text) {
  static const std::set<std::string_view> kSpecial = {".inf",  ".Inf",  ".INF",  "+.inf",
                                                      "+.Inf", "+.INF", "-.inf", "-.Inf",
                                                      "-.INF", ".nan",  ".NaN",  ".NAN"};
  if (kSpecial.count(text)) return true;
  std::string_view body = text;
  if (!body.empty() && (body.front() == '+' || body.front() == '-')) body.remove_prefix(1);
  if (body.size() > 2 && body[0] == '0' && (body[1] == 'x' || body[1] == 'X')) {
    return std::all_of(body.begin() + 2, body.end(), [](char c) {
      return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
    });
  }
  if (body.empty() || !((body[0] >= '0' && body[0] <= '9') || body[0] == '.')) return false;
  std::string_view number = text.front() == '+' ? text.substr(1) : text;
  double value = 0;
  auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
  return ec == std::errc() && end == number.data() + number.size();
}

// What a scalar reads as, the way Kubernetes reads YAML (YAML 1.1 words included): a quoted
// scalar is a string whatever its text; `abc` and "abc" are the same string.
enum class ScalarType { kString, kNumber, kBool, kNull };

ScalarType scalar_type(const Tree& tree, Tree::Id id) {
  if (tree.tag(id) == yaml::kStringTag) return ScalarType::kString;
  static const std::set<std::string_view> kBools = {
      "true", "false", "True", "False", "TRUE", "FALSE", "yes", "no", "Yes", "No", "YES",
      "NO",   "on",    "off",  "On",    "Off",  "ON",    "OFF", "y",  "n",   "Y",  "N"};
  const std::string& text = tree.scalar(id);
  if (yaml::is_null_word(text)) return ScalarType::kNull;
  if (kBools.count(text)) return ScalarType::kBool;
  return is_yaml_number(text) ? ScalarType::kNumber : ScalarType::kString;
}

// The segment a key adds to a path (`.key`, or `key` at the start, or `[key]`) and the one a list
// item's key adds (`[key]`): path_child and path_item, and PathTree below, spell paths with these.
std::string segment(char open, std::string_view key, std::string_view close) {
  std::string text;  // appended piece by piece: g++ 12 warns (-Wrestrict) on "[" + key + "]"
  text.reserve(key.size() + 2);
  text += open;
  text += key;
  text += close;
  return text;
}
std::string child_segment(bool parent_empty, std::string_view key) {
  if (!is_simple_key(key)) return segment('[', key, "]");
  return parent_empty ? std::string(key) : segment('.', key, "");
}
std::string item_segment(std::string_view item_key) { return segment('[', item_key, "]"); }

// The paths of the nodes diff_trees visits, as a tree of segments: a child's path is its parent's
// plus one segment, so a path is never copied to make a longer one (down a chain of 100,000 nested
// mappings that copying was quadratic), and it is spelled out only for a difference.
class PathTree {
 public:
  using Id = std::size_t;
  explicit PathTree(const std::string& base) { nodes_.push_back({0, base, base.empty()}); }
  Id root() const { return 0; }
  Id child(Id parent, std::string_view key) {
    return add(parent, child_segment(nodes_[parent].empty, key));
  }
  Id item(Id parent, std::string_view item_key) { return add(parent, item_segment(item_key)); }
  std::string spell(Id id) const {
    std::vector<Id> chain{id};
    while (chain.back() != root()) chain.push_back(nodes_[chain.back()].parent);
    std::string path;
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) path += nodes_[*it].segment;
    return path;
  }

 private:
  struct Node {
    Id parent;
    std::string segment;
    bool empty;  // the whole path is "" (only a root with an empty base can be)
  };
  Id add(Id parent, std::string segment) {
    bool empty = nodes_[parent].empty && segment.empty();
    nodes_.push_back({parent, std::move(segment), empty});
    return nodes_.size() - 1;
  }
  std::vector<Node> nodes_;
};

// A node of one of the two trees (or of a tree the comparison made), kNone when absent.
struct Side {
  const Tree* tree;
  Tree::Id id;
  bool present() const { return id != Tree::kNone; }
  Tree::Type type() const { return tree->type(id); }
  bool is(Tree::Type t) const { return present() && type() == t; }
  const std::string& tag() const { return tree->tag(id); }
  const std::string& scalar() const { return tree->scalar(id); }
};

struct Frame {
  Side a, b;
  PathTree::Id path;
  bool command_item = false;  // an item of a split command line: never split again
};

// The value of each scalar key of a mapping, the last one of a repeated key (Tree::find's rule),
// so that comparing two large mappings is not quadratic.
std::unordered_map<std::string_view, Tree::Id> values_by_key(const Tree& tree, Tree::Id map) {
  std::unordered_map<std::string_view, Tree::Id> out;
  out.reserve(tree.size(map));
  for (std::size_t i = 0; i < tree.size(map); ++i) {
    if (tree.is_scalar(tree.key(map, i))) out[tree.key_text(map, i)] = tree.value(map, i);
  }
  return out;
}

// The key of each item of a sequence (sequence_item_keys' rule); `field_of(i, field)` is the
// scalar at `field` of item i when that item is a mapping.
template <typename FieldOf>
std::vector<std::string> item_keys(std::size_t count, const FieldOf& field_of) {
  std::vector<std::string> keys;
  for (std::string_view field : {"name", "containerPort"}) {
    keys.clear();
    std::set<std::string> distinct;
    bool all = true;
    for (std::size_t i = 0; i < count; ++i) {
      std::optional<std::string> value = field_of(i, field);
      if (!value || !distinct.insert(*value).second) {
        all = false;
        break;
      }
      keys.push_back(std::move(*value));
    }
    if (all && !keys.empty()) return keys;
  }
  keys.clear();
  for (std::size_t i = 0; i < count; ++i) keys.push_back(std::to_string(i));
  return keys;
}

std::vector<std::string> tree_item_keys(const Tree& tree, Tree::Id sequence) {
  return item_keys(tree.size(sequence), [&](std::size_t i, std::string_view field) {
    Tree::Id item = tree.item(sequence, i);
    return tree.is_map(item) ? scalar_at(tree, item, field) : std::nullopt;
  });
}

bool is_shell_operator(char c) {
  return std::string_view(";&|<>()").find(c) != std::string_view::npos;
}

// A word that starts a flag: `-x`, `--name` (not `-`, `--`, nor a negative number).
bool starts_flag(std::string_view word) {
  if (word.size() < 2 || word[0] != '-') return false;
  std::string_view body = word.substr(word[1] == '-' ? 2 : 1);
  return !body.empty() && body[0] != '=' && !(body[0] >= '0' && body[0] <= '9') && body[0] != '.';
}

// `name=value` with an identifier-like name (MaxText's `steps=10`, an assignment `A=1`).
std::string_view assignment_name(std::string_view word) {
  std::size_t equals = word.find('=');
  if (equals == std::string_view::npos || equals == 0) return {};
  std::string_view name = word.substr(0, equals);
  bool first_ok =
      (name[0] >= 'a' && name[0] <= 'z') || (name[0] >= 'A' && name[0] <= 'Z') || name[0] == '_';
  if (!first_ok) return {};
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-';
    if (!ok) return {};
  }
  return name;
}

// The words of one line of shell as bash splits them, where operators (`;`, `&&`, `|`, `>`, ...)
// between simple commands become words of their own. nullopt when the text is not one line of
// shell (unterminated quotes, a newline that ends a command, or too many commands to be one).
std::optional<std::vector<std::string>> shell_line_words(std::string_view text) {
  constexpr std::size_t kMaxCommands = 256;  // bounds the re-parsing below
  std::vector<std::string> words;
  std::size_t start = 0;
  for (std::size_t commands = 0; commands < kMaxCommands; ++commands) {
    std::string_view rest = text.substr(start);
    std::size_t stop = 0;
    try {
      for (const shell::Word& word : shell::split(rest)) words.push_back(word.value);
      return words;
    } catch (const shell::SyntaxError& error) {
      stop = error.offset();
      if (stop >= rest.size() || !is_shell_operator(rest[stop])) return std::nullopt;
    } catch (const Error&) {
      return std::nullopt;
    }
    try {
      for (const shell::Word& word : shell::split(rest.substr(0, stop)))
        words.push_back(word.value);
    } catch (const Error&) {
      return std::nullopt;
    }
    std::size_t end = stop;
    while (end < rest.size() && is_shell_operator(rest[end])) ++end;
    words.emplace_back(rest.substr(stop, end - stop));
    start += end;
  }
  return std::nullopt;
}

}  // namespace

std::string path_child(const std::string& parent, std::string_view key) {
  return parent + child_segment(parent.empty(), key);
}

std::string path_item(const std::string& parent, std::string_view item_key) {
  return parent + item_segment(item_key);
}

std::vector<std::string> sequence_item_keys(const YAML::Node& sequence) {
  return item_keys(sequence.size(), [&](std::size_t i, std::string_view field) {
    YAML::Node item = sequence[i];
    return item.IsMap() ? yaml::scalar_at(item, field) : std::nullopt;
  });
}

std::vector<std::string> flag_item_keys(const std::vector<std::string>& items, FlagStyle style) {
  std::vector<std::string> keys;
  std::unordered_map<std::string, int> seen;
  for (std::size_t i = 0; i < items.size(); ++i) {
    std::string_view key = flag_key(items[i], style);
    std::string name = key.empty() ? fmt::format("#{}", i)
                                   : (style == FlagStyle::kDashDash ? "--" : "") + std::string(key);
    int n = ++seen[name];
    keys.push_back(n == 1 ? name : fmt::format("{}#{}", name, n));
  }
  return keys;
}

bool is_flag_string_variable(std::string_view name) {
  return name == "LIBTPU_INIT_ARGS" || name == "XLA_FLAGS";
}

Tree expanded_tree(const YAML::Node& jobset) {
  Tree tree = tree_of(jobset);
  expand_jobset(tree);
  return tree;
}

YAML::Node expand_for_diff(const YAML::Node& jobset) { return yaml_of(expanded_tree(jobset)); }

namespace {

// command_line_as_flags, built in `tree`: the mapping's id, or kNone.
Tree::Id command_flags(Tree& tree, std::string_view text) {
  constexpr std::size_t kMaxLength = 1 << 20;  // a command line, not a data blob
  if (text.size() > kMaxLength || text.find('\n') != std::string_view::npos) return Tree::kNone;
  std::optional<std::vector<std::string>> words = shell_line_words(text);
  if (!words || words->size() < 2) return Tree::kNone;
  Tree::Id map = tree.add_map(std::string(kCommandMapTag));
  std::unordered_map<std::string, int> seen;
  bool any_flag = false;
  std::size_t positional = 0;
  for (std::size_t i = 0; i < words->size(); ++i) {
    const std::string& word = (*words)[i];
    std::string key, item = word;
    if (starts_flag(word)) {
      bool long_flag = word[1] == '-';
      key = long_flag ? "--" + std::string(flag_key(word, FlagStyle::kDashDash))
                      : word.substr(0, word.find('='));
      any_flag = any_flag || long_flag;
      // `--steps 10`: the value word belongs to its flag, so a changed value is that flag's.
      std::size_t next = i + 1;
      if (word.find('=') == std::string::npos && next < words->size() &&
          !starts_flag((*words)[next]) && !(*words)[next].empty() &&
          !is_shell_operator((*words)[next][0])) {
        item += " " + (*words)[next];
        i = next;
      }
    } else if (std::string_view name = assignment_name(word); !name.empty()) {
      key = std::string(name);
      any_flag = true;
    } else if (!word.empty() && is_shell_operator(word[0])) {
      key = word;
    } else {
      key = fmt::format("#{}", positional++);
    }
    add_unique(tree, map, seen, key, tree.add_string(item));
  }
  return any_flag ? map : Tree::kNone;
}

}  // namespace

std::optional<YAML::Node> command_line_as_flags(std::string_view text) {
  Tree tree;
  Tree::Id map = command_flags(tree, text);
  if (map == Tree::kNone) return std::nullopt;
  return yaml_of(tree, map);
}

Leaves subtree_leaves(const YAML::Node& tree, std::size_t limit) {
  constexpr std::size_t kFlowWidth = 100;
  Leaves out;
  auto add = [&](std::string path, std::string value) {
    if (out.shown.size() < limit) out.shown.push_back({std::move(path), std::move(value)});
    ++out.total;
  };
  // Explicit stack, pushed in reverse so leaves come out in document order.
  std::vector<std::pair<YAML::Node, std::string>> pending{{tree, ""}};
  while (!pending.empty()) {
    auto [node, path] = std::move(pending.back());
    pending.pop_back();
    if (!node.IsDefined() || node.IsNull()) {
      add(path, "null");
    } else if (node.IsScalar()) {
      add(path, node.Scalar());
    } else if (node.size() == 0) {
      add(path, node.IsMap() ? "{}" : "[]");
    } else if (node.IsSequence() &&
               std::all_of(node.begin(), node.end(), [](const YAML::Node& item) {
                 return item.IsScalar() && item.Scalar().find('\n') == std::string::npos;
               })) {
      std::string flow = "[";
      std::size_t shown = 0;
      for (const auto& item : node) {
        if (shown > 0 && flow.size() + item.Scalar().size() > kFlowWidth) break;
        flow += (shown++ ? ", " : "") + item.Scalar();
      }
      flow += shown < node.size() ? fmt::format(", ...] ({} items)", node.size()) : "]";
      add(path, flow);
    } else {
      std::vector<std::pair<YAML::Node, std::string>> children;
      if (node.IsMap()) {
        bool flag_map = node.Tag() == kFlagMapTag || node.Tag() == kCommandMapTag;
        for (const auto& kv : node) {
          const std::string& key = kv.first.Scalar();
          children.emplace_back(kv.second, flag_map ? path_item(path, key) : path_child(path, key));
        }
      } else {
        std::vector<std::string> keys = sequence_item_keys(node);
        for (std::size_t i = 0; i < node.size(); ++i)
          children.emplace_back(node[i], path_item(path, keys[i]));
      }
      for (auto it = children.rbegin(); it != children.rend(); ++it)
        pending.push_back(std::move(*it));
    }
  }
  return out;
}

std::vector<std::string_view> path_segments(std::string_view path) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < path.size()) {
    if (path[i] == '.') {
      ++i;
    } else if (path[i] == '[') {
      std::size_t close = std::min(path.find(']', i), path.size() - 1);
      out.push_back(path.substr(i, close - i + 1));
      i = close + 1;
    } else {
      std::size_t end = std::min(path.find_first_of(".[", i), path.size());
      out.push_back(path.substr(i, end - i));
      i = end;
    }
  }
  return out;
}

std::string_view kind_name(Difference::Kind kind) {
  return enum_name<Difference::Kind::kTypeChanged>(kind,
                                                   {"added", "removed", "changed", "type-changed"});
}

std::vector<Difference> diff_trees(const Tree& a, const Tree& b, const std::string& base_path,
                                   DiffDetail detail) {
  const bool full = detail == DiffDetail::kFull;
  std::vector<Difference> out;
  // The mappings of command lines split below (a deque: adding one moves none of the others).
  std::deque<Tree> made;
  // An empty value (`annotations:` with nothing after it) against a mapping or a list is that
  // collection empty, so its entries are added or removed one by one, not a type change.
  Tree& empties = made.emplace_back();
  const Side empty_map{&empties, empties.add_map()};
  const Side empty_sequence{&empties, empties.add_sequence()};
  auto as_collection = [&](Side null, const Side& other) {
    if (!null.is(Tree::Type::kNull)) return null;
    if (other.is(Tree::Type::kMap)) return empty_map;
    if (other.is(Tree::Type::kSequence)) return empty_sequence;
    return null;
  };
  auto subtree = [full](const Side& side) {
    return full && (side.is(Tree::Type::kMap) || side.is(Tree::Type::kSequence))
               ? yaml_of(*side.tree, side.id)
               : YAML::Node(YAML::NodeType::Undefined);
  };
  auto describe_side = [full](const Side& side) {
    return full ? describe(*side.tree, side.id) : std::string();
  };
  auto scalar_text = [full](const Side& side, bool quoted) {
    if (!full) return std::string();
    return quoted ? "\"" + side.scalar() + "\"" : side.scalar();
  };
  // Explicit stack, pushed in reverse so differences come out in document order.
  PathTree paths(base_path);
  std::vector<Frame> pending{{{&a, a.root()}, {&b, b.root()}, paths.root()}};
  while (!pending.empty()) {
    Frame frame = pending.back();
    pending.pop_back();
    Side x = as_collection(frame.a, frame.b);
    Side y = as_collection(frame.b, x);
    if (!x.present() || !y.present()) {
      if (x.present())
        out.push_back({Difference::Kind::kRemoved, paths.spell(frame.path), describe_side(x), "",
                       subtree(x)});
      if (y.present())
        out.push_back(
            {Difference::Kind::kAdded, paths.spell(frame.path), "", describe_side(y), subtree(y)});
      continue;
    }
    if (x.type() != y.type()) {
      out.push_back({Difference::Kind::kTypeChanged, paths.spell(frame.path), describe_side(x),
                     describe_side(y)});
      continue;
    }
    std::vector<Frame> children;
    if (x.type() == Tree::Type::kScalar) {
      ScalarType x_type = scalar_type(*x.tree, x.id), y_type = scalar_type(*y.tree, y.id);
      if (x_type != y_type) {
        // "4" against 4, 'true' against true: shown with the quotes that make the difference.
        bool x_quoted = x.tag() == yaml::kStringTag, y_quoted = y.tag() == yaml::kStringTag;
        out.push_back({Difference::Kind::kTypeChanged, paths.spell(frame.path),
                       scalar_text(x, x_quoted), scalar_text(y, y_quoted)});
      } else if (x.scalar() != y.scalar()) {
        // A command line in any string (an env value, a `bash -c` script, an args item): flag by
        // flag when both sides read as one.
        if (x_type == ScalarType::kString && !frame.command_item) {
          Tree& x_made = made.emplace_back();
          Tree::Id x_flags = command_flags(x_made, x.scalar());
          if (x_flags != Tree::kNone) {
            Tree& y_made = made.emplace_back();
            Tree::Id y_flags = command_flags(y_made, y.scalar());
            if (y_flags != Tree::kNone) {
              pending.push_back({{&x_made, x_flags}, {&y_made, y_flags}, frame.path});
              continue;
            }
          }
        }
        out.push_back({Difference::Kind::kChanged, paths.spell(frame.path), scalar_text(x, false),
                       scalar_text(y, false)});
      }
      continue;
    }
    const Tree& xt = *x.tree;
    const Tree& yt = *y.tree;
    if (x.type() == Tree::Type::kMap) {
      // A key repeated within a mapping is compared once, at its last value (the one Kubernetes
      // uses); keys in the order of `a`, then those only `b` has.
      std::unordered_map<std::string_view, Tree::Id> x_values = values_by_key(xt, x.id);
      std::unordered_map<std::string_view, Tree::Id> y_values = values_by_key(yt, y.id);
      std::vector<std::string_view> keys;
      std::unordered_set<std::string_view> seen;
      for (std::size_t i = 0; i < xt.size(x.id); ++i) {
        if (seen.insert(xt.key_text(x.id, i)).second) keys.push_back(xt.key_text(x.id, i));
      }
      for (std::size_t i = 0; i < yt.size(y.id); ++i) {
        if (seen.insert(yt.key_text(y.id, i)).second) keys.push_back(yt.key_text(y.id, i));
      }
      auto value_of = [](const std::unordered_map<std::string_view, Tree::Id>& values,
                         std::string_view key) {
        auto it = values.find(key);
        return it == values.end() ? Tree::kNone : it->second;
      };
      bool command_map = x.tag() == kCommandMapTag;
      bool flag_map = x.tag() == kFlagMapTag || y.tag() == kFlagMapTag || command_map;
      for (std::string_view key : keys) {
        children.push_back({{&xt, value_of(x_values, key)},
                            {&yt, value_of(y_values, key)},
                            flag_map ? paths.item(frame.path, key) : paths.child(frame.path, key),
                            command_map});
      }
    } else if (x.type() == Tree::Type::kSequence) {
      std::vector<std::string> x_keys = tree_item_keys(xt, x.id), y_keys = tree_item_keys(yt, y.id);
      std::unordered_map<std::string, std::size_t> y_index;
      for (std::size_t i = 0; i < y_keys.size(); ++i) y_index.emplace(y_keys[i], i);
      std::set<std::string> in_x(x_keys.begin(), x_keys.end());
      for (std::size_t i = 0; i < x_keys.size(); ++i) {
        auto it = y_index.find(x_keys[i]);
        children.push_back({{&xt, xt.item(x.id, i)},
                            {&yt, it == y_index.end() ? Tree::kNone : yt.item(y.id, it->second)},
                            paths.item(frame.path, x_keys[i])});
      }
      for (std::size_t i = 0; i < y_keys.size(); ++i) {
        if (!in_x.count(y_keys[i])) {
          children.push_back(
              {{&xt, Tree::kNone}, {&yt, yt.item(y.id, i)}, paths.item(frame.path, y_keys[i])});
        }
      }
    }
    for (auto it = children.rbegin(); it != children.rend(); ++it) pending.push_back(*it);
  }
  return out;
}

std::vector<Difference> diff_trees(const YAML::Node& a, const YAML::Node& b,
                                   const std::string& base_path, DiffDetail detail) {
  return diff_trees(tree_of(a), tree_of(b), base_path, detail);
}

}  // namespace rtb::k8s
