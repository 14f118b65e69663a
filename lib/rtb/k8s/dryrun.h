// A launcher's DRY_RUN output: YAML documents separated by lines that are exactly `---`,
// interleaved with launcher echoes (`kubectl delete ...`) that are not YAML.
#pragma once

#include <yaml-cpp/yaml.h>

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "rtb/base/diagnostic.h"

namespace rtb::k8s {

struct Document {
  YAML::Node root;           // a mapping
  std::size_t first_line{};  // 1-based line of the document's first line in the input
  std::string text;          // the document's text, for positions yaml-cpp does not keep

  Document() = default;
  Document(YAML::Node root_node, std::size_t first, std::string source_text = {})
      : root(std::move(root_node)), first_line(first), text(std::move(source_text)) {}
  Document(const Document&) = default;
  // yaml-cpp's Node::operator= writes through into the tree a node belongs to; rebind instead.
  Document& operator=(const Document& other) {
    root.reset(other.root);
    first_line = other.first_line;
    text = other.text;
    return *this;
  }

  // 1-based input line of a node of this document (yaml-cpp marks are 0-based per document).
  std::size_t line_of(const YAML::Node& node) const;
  // The text of a 1-based input line of this document ("" outside it).
  std::string_view input_line(std::size_t line) const;
};

struct DryRun {
  std::string source;               // the input's name for messages ("<stdin>", a path)
  std::vector<Document> documents;  // the chunks that parse as YAML mappings, in input order
  std::size_t skipped_chunks{};     // chunks that are not YAML mappings (launcher echoes)
  std::size_t filtered_chunks{};    // chunks the caller's filter did not want parsed
  // Repeated keys (the last one is used), each a note at "file:line" for the tool to log (-v).
  std::vector<Diagnostic> diagnostics;
};

// Splits and parses a DRY_RUN text. A chunk that does not parse as YAML, or parses as something
// other than a mapping, is skipped as launcher output, unless it starts like a Kubernetes object
// (a line `kind:` or `apiVersion:` at column 0): then the YAML error is reported (rtb::Error with
// the file and line). Repeated mapping keys are accepted with a warning.
// `keep`, when given, sees each chunk's text first and decides whether to parse it: a tool that
// needs only some documents (render-bench: the trainer and the orchestrator) skips the YAML parse
// of the rest, which dominates the cost on large DRY_RUN files.
using ChunkFilter = std::function<bool(std::string_view chunk)>;
DryRun parse_dryrun(std::string_view text, const std::string& source,
                    const ChunkFilter& keep = nullptr);

}  // namespace rtb::k8s
