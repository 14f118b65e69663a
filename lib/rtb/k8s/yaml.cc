#include "rtb/k8s/yaml.h"

#include <cstdint>
#include <string>
#include <unordered_map>

#include "rtb/base/error.h"
#include "rtb/base/json.h"
#include "rtb/base/utf8.h"

namespace rtb::k8s::yaml {
namespace {

constexpr std::string_view kIndicators = "-?:,[]{}#&*!|>'\"%@`";

bool is_quoted(const YAML::Node& node) { return node.Tag() == kStringTag; }

// A JSON string is a valid YAML double-quoted scalar (YAML 1.2 reads JSON), and json::quote also
// guarantees the UTF-8 that YAML requires.
std::string double_quoted(std::string_view value) { return json::quote(value); }

// A literal block can hold any text of printable characters, tabs and newlines; carriage returns
// and other control characters would not survive.
bool literal_is_safe(std::string_view value) {
  // A block of nothing but newlines would read back as "" (clip chomping drops them).
  if (value.find('\n') == std::string_view::npos ||
      value.find_first_not_of('\n') == std::string_view::npos) {
    return false;
  }
  for (unsigned char c : value) {
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) return false;
  }
  return true;
}

// Emits `value` as a literal block whose content lines are indented by `indent` spaces.
void emit_literal(std::string& out, std::string_view value, int indent) {
  out += '|';
  // An indentation indicator is needed when the first content line starts with a space (or the
  // text starts with blank lines), since the parser would otherwise guess the indentation.
  std::size_t first = value.find_first_not_of('\n');
  if (first != std::string_view::npos && (value[first] == ' ' || first > 0)) out += '2';
  std::size_t trailing = 0;
  while (trailing < value.size() && value[value.size() - 1 - trailing] == '\n') ++trailing;
  if (trailing == 0) {
    out += '-';
  } else if (trailing > 1) {
    out += '+';
  }
  out += '\n';
  std::string_view body = value.substr(0, value.size() - trailing);
  std::string pad(indent, ' ');
  std::size_t start = 0;
  for (;;) {
    std::size_t end = body.find('\n', start);
    std::string_view line = body.substr(start, end == std::string_view::npos ? end : end - start);
    if (!line.empty()) out += pad;
    out += line;
    out += '\n';
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  // Keep chomping (`|+`): the extra trailing newlines are empty lines.
  for (std::size_t i = 1; i < trailing; ++i) out += '\n';
}

std::string tag_prefix(const YAML::Node& node) {
  const std::string& tag = node.Tag();
  static constexpr std::string_view kCore = "tag:yaml.org,2002:";
  if (tag.rfind(kCore, 0) == 0) return "!!" + tag.substr(kCore.size()) + " ";
  if (tag.empty() || tag == "?" || tag == kStringTag) return {};
  return tag + " ";
}

std::string scalar_inline(const YAML::Node& node, bool in_flow) {
  const std::string& value = node.Scalar();
  std::string prefix = tag_prefix(node);
  if (!is_quoted(node) && plain_is_safe(value, in_flow)) return prefix + value;
  return prefix + double_quoted(value);
}

std::string flow(const YAML::Node& node);

std::string flow_item(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Scalar:
      return scalar_inline(node, true);
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return "null";
    default:
      return flow(node);
  }
}

std::string flow(const YAML::Node& node) {
  std::string out;
  if (node.IsSequence()) {
    out = "[";
    bool first = true;
    for (const auto& item : node) {
      out += first ? "" : ", ";
      out += flow_item(item);
      first = false;
    }
    return out + "]";
  }
  out = "{";
  bool first = true;
  for (const auto& kv : node) {
    out += first ? "" : ", ";
    out += flow_item(kv.first) + ": " + flow_item(kv.second);
    first = false;
  }
  return out + "}";
}

bool emit_as_flow(const YAML::Node& node) {
  return (node.IsSequence() || node.IsMap()) &&
         (node.size() == 0 || node.Style() == YAML::EmitterStyle::Flow);
}

// Emits a block collection (the caller wrote whatever precedes it). Explicit work stack, so deep
// input cannot overflow the call stack.
class BlockEmitter {
 public:
  explicit BlockEmitter(std::string& out) : out_(out) {}

  void emit_document(const YAML::Node& root) {
    if (root.IsScalar() || root.IsNull() || emit_as_flow(root)) {
      emit_value_after(root, 0, /*after_key=*/false);
      return;
    }
    emit_collection(root, 0);
  }

 private:
  // Writes the value of a key or sequence item that has just been written ("key:" or "- "), with
  // `indent` the indentation of that key or dash.
  void emit_value_after(const YAML::Node& value, int indent, bool after_key) {
    switch (value.Type()) {
      case YAML::NodeType::Null:
      case YAML::NodeType::Undefined:
        out_ += after_key ? " null\n" : "null\n";
        return;
      case YAML::NodeType::Scalar:
        if (is_quoted(value) && literal_is_safe(value.Scalar())) {
          if (after_key) out_ += ' ';
          emit_literal(out_, value.Scalar(), indent + 2);
        } else {
          if (after_key) out_ += ' ';
          out_ += scalar_inline(value, false);
          out_ += '\n';
        }
        return;
      default:
        if (emit_as_flow(value)) {
          if (after_key) out_ += ' ';
          out_ += flow(value);
          out_ += '\n';
          return;
        }
        out_ += '\n';
        emit_collection(value, indent + 2);
    }
  }

  void emit_key(const YAML::Node& key) {
    if (key.IsNull()) {
      out_ += "null:";
      return;
    }
    if (!key.IsScalar()) throw Error("cannot emit a mapping key that is not a scalar");
    out_ += scalar_inline(key, false);
    out_ += ':';
  }

  void emit_collection(const YAML::Node& node, int indent) {
    std::string pad(indent, ' ');
    if (node.IsMap()) {
      for (const auto& kv : node) {
        out_ += pad;
        emit_key(kv.first);
        emit_value_after(kv.second, indent, true);
      }
      return;
    }
    for (const auto& item : node) {
      out_ += pad;
      out_ += "- ";
      if (item.IsMap() && !emit_as_flow(item)) {
        // The first key shares the dash's line; the others align with it.
        bool first = true;
        for (const auto& kv : item) {
          if (!first) out_ += std::string(indent + 2, ' ');
          emit_key(kv.first);
          emit_value_after(kv.second, indent + 2, true);
          first = false;
        }
      } else if (item.IsSequence() && !emit_as_flow(item)) {
        out_ += '\n';
        emit_collection(item, indent + 2);
      } else {
        emit_value_after(item, indent, false);
      }
    }
  }

  std::string& out_;
};

}  // namespace

bool plain_is_safe(std::string_view value, bool in_flow) {
  if (value.empty()) return false;
  if (value.front() == ' ' || value.back() == ' ' || value.front() == '\t' ||
      value.back() == '\t') {
    return false;
  }
  char first = value.front();
  if (kIndicators.find(first) != std::string_view::npos) {
    // `-`, `?` and `:` may start a plain scalar when followed by a non-space character.
    // (In flow collections a leading `?` or `:` is misread, so only `-` may start one there.)
    bool allowed = (first == '-' || (!in_flow && (first == '?' || first == ':'))) &&
                   value.size() > 1 && value[1] != ' ' &&
                   !(in_flow && std::string_view(",[]{}").find(value[1]) != std::string_view::npos);
    if (!allowed) return false;
  }
  // Document markers at the start of a line end the document, whatever follows them.
  if (value.rfind("---", 0) == 0 || value.rfind("...", 0) == 0) return false;
  for (std::size_t i = 0; i < value.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(value[i]);
    if (c < 0x20 || c == 0x7f) return false;
    if (c == ':' && (i + 1 == value.size() || value[i + 1] == ' ' || value[i + 1] == '\t')) {
      return false;
    }
    if (c == '#' && i > 0 && (value[i - 1] == ' ' || value[i - 1] == '\t')) return false;
    // In flow collections yaml-cpp 0.7 also misreads a `?` inside a plain scalar.
    if (in_flow &&
        std::string_view(",[]{}?").find(static_cast<char>(c)) != std::string_view::npos) {
      return false;
    }
  }
  return true;
}

std::string emit(const YAML::Node& root) {
  std::string out;
  BlockEmitter(out).emit_document(root);
  return out;
}

void require_utf8(std::string_view value) {
  std::size_t bad = utf8::find_invalid(value);
  if (bad != std::string_view::npos) {
    fail("value {} is not UTF-8 text (byte 0x{:02x} at offset {}): YAML cannot hold it",
         json::quote(value.substr(0, 60)),
         static_cast<unsigned>(static_cast<unsigned char>(value[bad])), bad);
  }
}

YAML::Node string_scalar(std::string_view value) {
  require_utf8(value);
  YAML::Node node(std::string{value});
  node.SetTag(std::string(kStringTag));
  return node;
}

void set_string(YAML::Node node, std::string_view value) {
  require_utf8(value);
  node = std::string(value);
  node.SetTag(std::string(kStringTag));
}

YAML::Node lookup(const YAML::Node& map, std::string_view key) {
  // Copy-construct (never assign) nodes: assigning a yaml-cpp Node writes through to its data.
  std::optional<YAML::Node> found;
  if (!map.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
  for (const auto& kv : map) {
    if (kv.first.IsScalar() && kv.first.Scalar() == key) found.emplace(kv.second);
  }
  return found ? *found : YAML::Node(YAML::NodeType::Undefined);
}

YAML::Node descend(const YAML::Node& node, std::initializer_list<std::string_view> keys) {
  std::optional<YAML::Node> current(node);
  for (std::string_view key : keys) current.emplace(lookup(*current, key));
  return *current;
}

std::optional<std::string> scalar_at(const YAML::Node& map, std::string_view key) {
  YAML::Node value = lookup(map, key);
  if (!value.IsDefined() || !value.IsScalar()) return std::nullopt;
  return value.Scalar();
}

std::vector<std::pair<std::string, int>> duplicate_keys(const YAML::Node& root) {
  std::vector<std::pair<std::string, int>> found;
  std::vector<YAML::Node> pending{root};
  while (!pending.empty()) {
    YAML::Node node = pending.back();
    pending.pop_back();
    if (node.IsMap()) {
      std::unordered_map<std::string, int> seen;
      for (const auto& kv : node) {
        if (kv.first.IsScalar() && ++seen[kv.first.Scalar()] == 2) {
          found.emplace_back(kv.first.Scalar(), kv.first.Mark().line);
        }
        pending.push_back(kv.second);
      }
    } else if (node.IsSequence()) {
      for (const auto& item : node) pending.push_back(item);
    }
  }
  return found;
}

void check_limits(const YAML::Node& root, const std::string& source, std::size_t first_line,
                  const Limits& limits) {
  auto line_of = [&](const YAML::Node& node) {
    int line = node.Mark().line;
    return static_cast<std::int64_t>(first_line + (line < 0 ? 0 : static_cast<std::size_t>(line)));
  };
  std::vector<std::pair<YAML::Node, int>> pending{{root, 0}};
  std::size_t nodes = 0;
  while (!pending.empty()) {
    auto [node, depth] = pending.back();
    pending.pop_back();
    if (++nodes > limits.max_nodes) {
      fail_at(source, line_of(node),
              "YAML document expands to more than {} nodes (aliases of aliases?); refusing it",
              limits.max_nodes);
    }
    if (!node.IsMap() && !node.IsSequence()) continue;
    if (depth >= limits.max_depth) {
      fail_at(source, line_of(node), "YAML nested more than {} levels deep; refusing it",
              limits.max_depth);
    }
    if (node.IsMap()) {
      for (const auto& kv : node) {
        pending.emplace_back(kv.first, depth + 1);
        pending.emplace_back(kv.second, depth + 1);
      }
    } else {
      for (const auto& item : node) pending.emplace_back(item, depth + 1);
    }
  }
}

}  // namespace rtb::k8s::yaml
