#include "rtb/k8s/dryrun.h"

#include <fmt/format.h>

#include <algorithm>

#include "rtb/base/error.h"
#include "rtb/base/text.h"
#include "rtb/base/utf8.h"
#include "rtb/k8s/yaml.h"
#include "rtb/k8s/yaml_reader.h"

namespace rtb::k8s {
namespace {

bool is_separator(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line == "---";
}

// A chunk that looks like a Kubernetes object: its YAML errors are real errors.
bool looks_like_object(std::string_view chunk) {
  const std::vector<std::string_view> lines = split_lines(chunk);
  return std::any_of(lines.begin(), lines.end(), [](std::string_view line) {
    return line.starts_with("kind:") || line.starts_with("apiVersion:");
  });
}

void add_chunk(DryRun& out, std::string_view chunk, std::size_t first_line,
               const ChunkFilter& keep) {
  if (chunk.find_first_not_of(" \t\r\n") == std::string_view::npos) return;
  if (keep && !keep(chunk)) {
    ++out.filtered_chunks;
    return;
  }
  // YAML allows neither NUL nor invalid UTF-8: said here with the line and column of the byte.
  std::size_t bad = chunk.find('\0');
  const char* what = "a NUL byte";
  if (bad == std::string_view::npos) {
    bad = utf8::find_invalid(chunk);
    what = "a byte that is not valid UTF-8";
  }
  if (bad != std::string_view::npos) {
    if (!looks_like_object(chunk)) {  // log output between documents may hold any bytes
      ++out.skipped_chunks;
      return;
    }
    std::string_view before = chunk.substr(0, bad);
    std::size_t line =
        first_line + static_cast<std::size_t>(std::count(before.begin(), before.end(), '\n'));
    std::size_t column = bad - (before.rfind('\n') + 1) + 1;  // npos + 1 == 0
    throw Error(out.source, static_cast<std::int64_t>(line),
                fmt::format("column {}: {} (YAML must be UTF-8 text)", column, what));
  }
  // A YAML mapping needs a ':' (or '?' for a complex key, '{' for a flow mapping). Log text
  // without any is skipped unparsed, at the cost of one scan for three bytes.
  if (chunk.find_first_of(":?{") == std::string_view::npos) {
    ++out.skipped_chunks;
    return;
  }
  YAML::Node root;
  try {
    root = yaml::read_document(chunk);
  } catch (const yaml::SyntaxError& e) {
    if (!looks_like_object(chunk)) {
      ++out.skipped_chunks;
      return;
    }
    throw Error(out.source, static_cast<std::int64_t>(first_line + e.line()),
                fmt::format("invalid YAML: {}", e.what()));
  }
  if (!root.IsMap()) {
    if (looks_like_object(chunk)) {
      throw Error(out.source, static_cast<std::int64_t>(first_line),
                  "document is not a YAML mapping");
    }
    ++out.skipped_chunks;
    return;
  }
  // Before anything walks the tree (duplicate keys, emit, diff): refuse alias bombs and depth.
  yaml::check_limits(root, out.source, first_line);
  Document doc(root, first_line, std::string(chunk));
  for (const auto& [key, line] : yaml::duplicate_keys(root)) {
    out.diagnostics.push_back({Severity::kNote,
                               where_of(out.source, static_cast<std::int64_t>(first_line) +
                                                        static_cast<std::int64_t>(line)),
                               fmt::format("repeated key '{}' (the last one is used)", key)});
  }
  out.documents.push_back(std::move(doc));
}

}  // namespace

std::size_t Document::line_of(const YAML::Node& node) const {
  int line = node.Mark().line;
  return line < 0 ? first_line : first_line + static_cast<std::size_t>(line);
}

std::string_view Document::input_line(std::size_t line) const {
  if (line < first_line) return {};
  std::string_view rest = text;
  for (std::size_t n = first_line; n < line; ++n) {
    std::size_t newline = rest.find('\n');
    if (newline == std::string_view::npos) return {};
    rest.remove_prefix(newline + 1);
  }
  return rest.substr(0, rest.find('\n'));
}

DryRun parse_dryrun(std::string_view text, const std::string& source, const ChunkFilter& keep) {
  DryRun out;
  out.source = source;
  std::size_t chunk_start = 0;  // byte offset of the current chunk
  std::size_t chunk_line = 1;   // its first line
  std::size_t line_number = 1;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    std::size_t next = end == std::string_view::npos ? text.size() : end + 1;
    std::string_view line =
        text.substr(pos, (end == std::string_view::npos ? text.size() : end) - pos);
    if (is_separator(line)) {
      add_chunk(out, text.substr(chunk_start, pos - chunk_start), chunk_line, keep);
      chunk_start = next;
      chunk_line = line_number + 1;
    }
    pos = next;
    ++line_number;
  }
  add_chunk(out, text.substr(chunk_start), chunk_line, keep);
  return out;
}

}  // namespace rtb::k8s
