#include "rtb/k8s/yaml_reader.h"

#include <fmt/format.h>
#include <yaml.h>  // libyaml

#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "rtb/k8s/yaml.h"

namespace rtb::k8s::yaml {
namespace detail {
struct MarkAccess {};
}  // namespace detail
}  // namespace rtb::k8s::yaml

namespace YAML {
// yaml-cpp has no public way to give a node a source mark: only its own loader (a friend of Node)
// sets them, and the code reports input lines from them (Document::line_of). Node befriends every
// as_if<T, S>; this specialization is that access, used for nothing but detail::node::set_mark.
// A yaml-cpp that renamed the member would fail to compile here, not misbehave.
template <>
struct as_if<rtb::k8s::yaml::detail::MarkAccess, void> {
  static void set_mark(const Node& node, const Mark& mark) { node.m_pNode->set_mark(mark); }
};
}  // namespace YAML

namespace rtb::k8s::yaml {
namespace {

using MarkSetter = YAML::as_if<detail::MarkAccess, void>;

class Parser {
 public:
  explicit Parser(std::string_view text) {
    yaml_parser_initialize(&parser_);
    yaml_parser_set_encoding(&parser_, YAML_UTF8_ENCODING);
    yaml_parser_set_input_string(&parser_, reinterpret_cast<const unsigned char*>(text.data()),
                                 text.size());
  }
  ~Parser() {
    if (has_event_) yaml_event_delete(&event_);
    yaml_parser_delete(&parser_);
  }
  Parser(const Parser&) = delete;
  Parser& operator=(const Parser&) = delete;

  // The next event; throws SyntaxError.
  yaml_event_t& next() {
    if (has_event_) yaml_event_delete(&event_);
    has_event_ = false;
    if (!yaml_parser_parse(&parser_, &event_)) {
      std::string message = parser_.problem ? parser_.problem : "invalid YAML";
      if (parser_.context) message = fmt::format("{} ({})", message, parser_.context);
      throw SyntaxError(parser_.problem_mark.line, message);
    }
    has_event_ = true;
    return event_;
  }

 private:
  yaml_parser_t parser_{};
  yaml_event_t event_{};
  bool has_event_ = false;
};

std::string text_of(const yaml_char_t* text) {
  return text ? std::string(reinterpret_cast<const char*>(text)) : std::string();
}

void set_mark(const YAML::Node& node, const yaml_mark_t& mark) {
  YAML::Mark position;
  position.pos = static_cast<int>(mark.index);
  position.line = static_cast<int>(mark.line);
  position.column = static_cast<int>(mark.column);
  MarkSetter::set_mark(node, position);
}

// A collection being filled: a sequence, or a mapping waiting for a key or for its key's value.
struct Open {
  YAML::Node node;
  bool is_map = false;
  bool has_key = false;
  YAML::Node key;
};

}  // namespace

bool is_null_word(std::string_view text) {
  return text.empty() || text == "~" || text == "null" || text == "Null" || text == "NULL";
}

YAML::Node read_document(std::string_view text) {
  Parser parser(text);
  std::vector<Open> open;
  std::unordered_map<std::string, YAML::Node> anchors;
  std::optional<YAML::Node> root;
  // Links a new node into the collection being filled (or makes it the root). A collection is
  // linked before it is filled: yaml-cpp nodes share their data, so it fills in place.
  auto add = [&](const YAML::Node& node) {
    if (open.empty()) {
      root.emplace(node);
      return;
    }
    Open& parent = open.back();
    if (!parent.is_map) {
      parent.node.push_back(node);
    } else if (!parent.has_key) {
      parent.key.reset(node);
      parent.has_key = true;
    } else {
      parent.node.force_insert(parent.key, node);  // a repeated key stays, as YAML::Load keeps it
      parent.has_key = false;
    }
  };
  auto remember = [&](const yaml_char_t* anchor, const YAML::Node& node) {
    if (anchor) anchors[text_of(anchor)].reset(node);
  };
  for (;;) {
    yaml_event_t& event = parser.next();
    switch (event.type) {
      case YAML_DOCUMENT_END_EVENT:  // YAML::Load reads the first document only
      case YAML_STREAM_END_EVENT:
        return root ? *root : YAML::Node();
      case YAML_ALIAS_EVENT: {
        auto it = anchors.find(text_of(event.data.alias.anchor));
        if (it == anchors.end()) {
          throw SyntaxError(event.start_mark.line,
                            fmt::format("unknown anchor '{}'", text_of(event.data.alias.anchor)));
        }
        add(it->second);
        break;
      }
      case YAML_SCALAR_EVENT: {
        const auto& scalar = event.data.scalar;
        std::string value(reinterpret_cast<const char*>(scalar.value), scalar.length);
        bool plain = scalar.style == YAML_PLAIN_SCALAR_STYLE;
        std::string tag = scalar.tag ? text_of(scalar.tag) : plain ? "?" : std::string(kStringTag);
        YAML::Node node;
        if (plain && tag == "?" && is_null_word(value)) {
          node = YAML::Node(YAML::NodeType::Null);
        } else {
          node = YAML::Node(value);
          node.SetTag(tag);
        }
        set_mark(node, event.start_mark);
        remember(scalar.anchor, node);
        add(node);
        break;
      }
      case YAML_SEQUENCE_START_EVENT:
      case YAML_MAPPING_START_EVENT: {
        bool is_map = event.type == YAML_MAPPING_START_EVENT;
        const yaml_char_t* tag =
            is_map ? event.data.mapping_start.tag : event.data.sequence_start.tag;
        const yaml_char_t* anchor =
            is_map ? event.data.mapping_start.anchor : event.data.sequence_start.anchor;
        bool flow = is_map ? event.data.mapping_start.style == YAML_FLOW_MAPPING_STYLE
                           : event.data.sequence_start.style == YAML_FLOW_SEQUENCE_STYLE;
        YAML::Node node(is_map ? YAML::NodeType::Map : YAML::NodeType::Sequence);
        node.SetTag(tag ? text_of(tag) : "?");
        node.SetStyle(flow ? YAML::EmitterStyle::Flow : YAML::EmitterStyle::Block);
        set_mark(node, event.start_mark);
        remember(anchor, node);
        add(node);
        open.push_back({node, is_map, false, YAML::Node()});
        break;
      }
      case YAML_SEQUENCE_END_EVENT:
      case YAML_MAPPING_END_EVENT:
        open.pop_back();
        break;
      default:
        break;
    }
  }
}

}  // namespace rtb::k8s::yaml
