#include "rtb/k8s/diff.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <optional>
#include <set>
#include <unordered_map>

#include "rtb/base/enum_names.h"
#include "rtb/base/error.h"
#include "rtb/k8s/flags.h"
#include "rtb/k8s/jobset.h"
#include "rtb/k8s/shell.h"
#include "rtb/k8s/yaml.h"

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
void add_unique(YAML::Node map, std::unordered_map<std::string, int>& seen, const std::string& key,
                const YAML::Node& value) {
  int n = ++seen[key];
  map[n == 1 ? key : fmt::format("{}#{}", key, n)] = value;
}

// A flag list as a mapping: flag key (with its dashes for argv style) -> the item as written.
YAML::Node flags_as_map(const std::vector<std::string>& items, FlagStyle style) {
  YAML::Node map(YAML::NodeType::Map);
  map.SetTag(std::string(kFlagMapTag));  // its entries are addressed as items: [--key]
  std::vector<std::string> keys = flag_item_keys(items, style);
  for (std::size_t i = 0; i < items.size(); ++i) map[keys[i]] = yaml::string_scalar(items[i]);
  return map;
}

YAML::Node expand_variable(std::string_view name, const std::string& value) {
  if (is_flag_string_variable(name))
    return flags_as_map(split_flag_items(value), FlagStyle::kDashDash);
  if (name == "MAXTEXT_EXTRA_FLAGS") {
    // Items that are not key=value stay positional rather than failing the whole comparison.
    return flags_as_map(split_flag_items(value), FlagStyle::kKeyValue);
  }
  return yaml::string_scalar(value);
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

// Replaces a client container's `command` by its structured form.
void expand_client(YAML::Node container, const YAML::Node& script_node) {
  const std::string& script = script_node.Scalar();
  StartupBlock block;
  shell::SimpleCommand startup;
  try {
    block = find_startup_block(script);
    startup =
        shell::parse_command(std::string_view(script).substr(block.begin, block.end - block.begin));
  } catch (const Error&) {
    return;  // not a readable startup block: compared as text
  }
  YAML::Node env(YAML::NodeType::Map), driver(YAML::NodeType::Map);
  std::unordered_map<std::string, int> env_seen, driver_seen;
  bool in_driver = false;
  for (const shell::Assignment& assignment : startup.env) {
    if (assignment.name == kDriverSettingsStart) in_driver = true;
    if (in_driver) {
      std::optional<std::vector<std::string>> words;
      if (assignment.name == "TRAINER_ARGV" || assignment.name == "ORCH_ARGV")
        words = words_of(assignment.value);
      add_unique(driver, driver_seen, assignment.name,
                 words ? flags_as_map(*words, FlagStyle::kDashDash)
                       : yaml::string_scalar(assignment.value));
    } else {
      add_unique(env, env_seen, assignment.name,
                 expand_variable(assignment.name, assignment.value));
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
  YAML::Node trainer_argv = yaml::lookup(driver, "TRAINER_ARGV");
  bool argv_from_driver = trainer_argv.IsDefined() && trainer_argv.IsMap() && argv.empty();
  YAML::Node argv_node =
      argv_from_driver ? YAML::Clone(trainer_argv) : flags_as_map(argv, FlagStyle::kDashDash);
  if (argv_from_driver) driver.remove("TRAINER_ARGV");
  std::string wrapper = script.substr(0, block.begin) + "<startup>" + script.substr(block.end);
  YAML::Node command = yaml::lookup(container, "command");
  // The arguments after the script ($0, then a packed driver's pieces) are compared as lines of
  // the script, where a driver that goes in verbatim would be.
  for (std::size_t i = 3; i < command.size(); ++i) {
    wrapper += fmt::format("\n<argument ${}>\n{}", i - 3, command[i].Scalar());
  }
  YAML::Node expanded(YAML::NodeType::Map);
  YAML::Node startup_node(YAML::NodeType::Map);
  startup_node["env"] = env;
  startup_node["program"] = yaml::string_scalar(shell::join(program));
  startup_node["argv"] = argv_node;
  if (driver.size() > 0) startup_node["driver"] = driver;
  YAML::Node shell_words(YAML::NodeType::Sequence);
  shell_words.push_back(command[0]);
  shell_words.push_back(command[1]);
  // Rebuild the container with `command` replaced in place by command/script/startup.
  YAML::Node rebuilt(YAML::NodeType::Map);
  for (const auto& kv : container) {
    if (kv.first.Scalar() == "command") {
      rebuilt["command"] = shell_words;
      rebuilt["script"] = yaml::string_scalar(wrapper);
      rebuilt["startup"] = startup_node;
    } else {
      rebuilt[kv.first] = kv.second;
    }
  }
  container = rebuilt;
}

void expand_container(YAML::Node& container) {
  YAML::Node args = yaml::lookup(container, "args");
  if (args.IsSequence()) {
    std::vector<std::string> items;
    bool all_scalars = true;
    for (const auto& item : args) {
      if (!item.IsScalar())
        all_scalars = false;
      else
        items.push_back(item.Scalar());
    }
    if (all_scalars) container["args"] = flags_as_map(items, FlagStyle::kDashDash);
  }
  YAML::Node env = yaml::lookup(container, "env");
  if (env.IsSequence()) {
    for (auto entry : env) {
      auto name = yaml::scalar_at(entry, "name");
      YAML::Node value = yaml::lookup(entry, "value");
      if (name && value.IsDefined() && value.IsScalar() &&
          (is_flag_string_variable(*name) || *name == "MAXTEXT_EXTRA_FLAGS")) {
        entry["value"] = expand_variable(*name, value.Scalar());
      }
    }
  }
  if (auto script = bash_script_node(container)) expand_client(container, *script);
}

std::string describe(const YAML::Node& node) {
  if (!node.IsDefined() || node.IsNull()) return "null";
  if (node.IsScalar()) return node.Scalar();
  std::string text = yaml::emit(node);
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

ScalarType scalar_type(const YAML::Node& node) {
  if (node.Tag() == "!") return ScalarType::kString;
  static const std::set<std::string_view> kNulls = {"", "~", "null", "Null", "NULL"};
  static const std::set<std::string_view> kBools = {
      "true", "false", "True", "False", "TRUE", "FALSE", "yes", "no", "Yes", "No", "YES",
      "NO",   "on",    "off",  "On",    "Off",  "ON",    "OFF", "y",  "n",   "Y",  "N"};
  const std::string& text = node.Scalar();
  if (kNulls.count(text)) return ScalarType::kNull;
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

struct Frame {
  YAML::Node a, b;
  PathTree::Id path;
  bool command_item = false;  // an item of a split command line: never split again
};

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
  std::vector<std::string> keys;
  for (std::string_view field : {"name", "containerPort"}) {
    keys.clear();
    std::set<std::string> distinct;
    bool all = true;
    for (const auto& item : sequence) {
      auto value = item.IsMap() ? yaml::scalar_at(item, field) : std::nullopt;
      if (!value || !distinct.insert(*value).second) {
        all = false;
        break;
      }
      keys.push_back(*value);
    }
    if (all && !keys.empty()) return keys;
  }
  keys.clear();
  for (std::size_t i = 0; i < sequence.size(); ++i) keys.push_back(std::to_string(i));
  return keys;
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

YAML::Node expand_for_diff(const YAML::Node& jobset) {
  YAML::Node copy = YAML::Clone(jobset);
  YAML::Node jobs = yaml::lookup(yaml::lookup(copy, "spec"), "replicatedJobs");
  if (!jobs.IsSequence()) return copy;
  for (auto job : jobs) {
    YAML::Node spec = yaml::descend(job, {"template", "spec", "template", "spec"});
    if (!spec.IsMap()) continue;
    for (std::string_view list : {"initContainers", "containers"}) {
      YAML::Node containers = yaml::lookup(spec, list);
      if (!containers.IsSequence()) continue;
      for (auto container : containers) {
        if (container.IsMap()) expand_container(container);
      }
    }
  }
  return copy;
}

std::optional<YAML::Node> command_line_as_flags(std::string_view text) {
  constexpr std::size_t kMaxLength = 1 << 20;  // a command line, not a data blob
  if (text.size() > kMaxLength || text.find('\n') != std::string_view::npos) return std::nullopt;
  std::optional<std::vector<std::string>> words = shell_line_words(text);
  if (!words || words->size() < 2) return std::nullopt;
  YAML::Node map(YAML::NodeType::Map);
  map.SetTag(std::string(kCommandMapTag));
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
    add_unique(map, seen, key, yaml::string_scalar(item));
  }
  if (!any_flag) return std::nullopt;
  return map;
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

std::vector<Difference> diff_trees(const YAML::Node& a, const YAML::Node& b,
                                   const std::string& base_path) {
  std::vector<Difference> out;
  // Explicit stack, pushed in reverse so differences come out in document order.
  PathTree paths(base_path);
  std::vector<Frame> pending{{a, b, paths.root()}};
  while (!pending.empty()) {
    Frame frame = std::move(pending.back());
    pending.pop_back();
    YAML::Node x = frame.a;
    YAML::Node y = frame.b;
    // An empty value (`annotations:` with nothing after it) against a mapping or a list is that
    // collection empty, so its entries are added or removed one by one, not a type change.
    if (x.IsDefined() && x.IsNull() && (y.IsMap() || y.IsSequence())) x = YAML::Node(y.Type());
    if (y.IsDefined() && y.IsNull() && (x.IsMap() || x.IsSequence())) y = YAML::Node(x.Type());
    bool x_present = x.IsDefined(), y_present = y.IsDefined();
    if (!x_present || !y_present) {
      auto subtree = [](const YAML::Node& node) {
        return node.IsMap() || node.IsSequence() ? node : YAML::Node(YAML::NodeType::Undefined);
      };
      if (x_present)
        out.push_back(
            {Difference::Kind::kRemoved, paths.spell(frame.path), describe(x), "", subtree(x)});
      if (y_present)
        out.push_back(
            {Difference::Kind::kAdded, paths.spell(frame.path), "", describe(y), subtree(y)});
      continue;
    }
    if (x.Type() != y.Type()) {
      out.push_back(
          {Difference::Kind::kTypeChanged, paths.spell(frame.path), describe(x), describe(y)});
      continue;
    }
    std::vector<Frame> children;
    if (x.IsScalar()) {
      ScalarType x_type = scalar_type(x), y_type = scalar_type(y);
      if (x_type != y_type) {
        // "4" against 4, 'true' against true: shown with the quotes that make the difference.
        bool x_quoted = x.Tag() == "!", y_quoted = y.Tag() == "!";
        out.push_back({Difference::Kind::kTypeChanged, paths.spell(frame.path),
                       x_quoted ? "\"" + x.Scalar() + "\"" : x.Scalar(),
                       y_quoted ? "\"" + y.Scalar() + "\"" : y.Scalar()});
      } else if (x.Scalar() != y.Scalar()) {
        // A command line in any string (an env value, a `bash -c` script, an args item): flag by
        // flag when both sides read as one.
        if (x_type == ScalarType::kString && !frame.command_item) {
          std::optional<YAML::Node> x_flags = command_line_as_flags(x.Scalar());
          std::optional<YAML::Node> y_flags =
              x_flags ? command_line_as_flags(y.Scalar()) : std::nullopt;
          if (x_flags && y_flags) {
            pending.push_back({*x_flags, *y_flags, frame.path});
            continue;
          }
        }
        out.push_back(
            {Difference::Kind::kChanged, paths.spell(frame.path), x.Scalar(), y.Scalar()});
      }
      continue;
    }
    if (x.IsMap()) {
      std::vector<std::string> keys;
      std::set<std::string> in_x;
      // A key repeated within a mapping is compared once (lookup() gives its last value, the one
      // Kubernetes uses).
      for (const auto& kv : x) {
        if (in_x.insert(kv.first.Scalar()).second) keys.push_back(kv.first.Scalar());
      }
      for (const auto& kv : y) {
        if (in_x.insert(kv.first.Scalar()).second) keys.push_back(kv.first.Scalar());
      }
      bool command_map = x.Tag() == kCommandMapTag;
      bool flag_map = x.Tag() == kFlagMapTag || y.Tag() == kFlagMapTag || command_map;
      for (const std::string& key : keys) {
        children.push_back({yaml::lookup(x, key), yaml::lookup(y, key),
                            flag_map ? paths.item(frame.path, key) : paths.child(frame.path, key),
                            command_map});
      }
    } else if (x.IsSequence()) {
      std::vector<std::string> x_keys = sequence_item_keys(x), y_keys = sequence_item_keys(y);
      std::unordered_map<std::string, std::size_t> y_index;
      for (std::size_t i = 0; i < y_keys.size(); ++i) y_index.emplace(y_keys[i], i);
      std::set<std::string> in_x(x_keys.begin(), x_keys.end());
      for (std::size_t i = 0; i < x_keys.size(); ++i) {
        auto it = y_index.find(x_keys[i]);
        children.push_back(
            {x[i], it == y_index.end() ? YAML::Node(YAML::NodeType::Undefined) : y[it->second],
             paths.item(frame.path, x_keys[i])});
      }
      for (std::size_t i = 0; i < y_keys.size(); ++i) {
        if (!in_x.count(y_keys[i])) {
          children.push_back(
              {YAML::Node(YAML::NodeType::Undefined), y[i], paths.item(frame.path, y_keys[i])});
        }
      }
    }
    for (auto it = children.rbegin(); it != children.rend(); ++it)
      pending.push_back(std::move(*it));
  }
  return out;
}

}  // namespace rtb::k8s
