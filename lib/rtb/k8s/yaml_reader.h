// Reads a YAML document with libyaml into yaml-cpp nodes: the same tree YAML::Load builds (types,
// tags, flow style, repeated keys, aliases as shared nodes, marks), about five times faster.
//
// Why: yaml-cpp's scanner matches each input character against its regular expressions, and
// loading the three documents a render reads was 40% of render-bench (37 M instructions for
// 36 KB; libyaml parses them in about 4 M). The rest of the code keeps yaml-cpp's node API.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

namespace rtb::k8s::yaml {

// A syntax error, at a 0-based line of the text.
class SyntaxError : public std::runtime_error {
 public:
  SyntaxError(std::size_t line, const std::string& message)
      : std::runtime_error(message), line_(line) {}
  std::size_t line() const { return line_; }

 private:
  std::size_t line_;
};

// The first document of `text` (UTF-8), as YAML::Load(text) gives it:
// - a scalar's tag is its explicit tag (`!!str` -> "tag:yaml.org,2002:str"), else "!" when it is
//   quoted or a block scalar and "?" when plain; so are a collection's ("?" when untagged);
// - a plain untagged scalar that is_null_word() (or a missing value) is a null node;
// - collections written in flow style have yaml-cpp's flow style;
// - an alias is the anchored node itself (shared, as yaml-cpp shares it);
// - each node's Mark() is where it starts (0-based line and column, byte offset).
// An empty text (or only comments) gives a null node. Throws SyntaxError.
YAML::Node read_document(std::string_view text);

// A plain scalar that YAML reads as null: "", `~`, `null`, `Null`, `NULL` (yaml-cpp and
// Kubernetes' reader agree on these).
bool is_null_word(std::string_view text);

}  // namespace rtb::k8s::yaml
