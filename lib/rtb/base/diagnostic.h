// One shape for what a parser or a check reports without failing (issue 27, item 6): a severity,
// where it was seen and what it says. Producers collect them in a `diagnostics` vector; the tools
// print them once (tools/common) and list them in --json (`diagnostics`).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "rtb/base/json.h"

namespace rtb {

// kNote: context a user may want (logged at info, so shown with -v). kWarning: a result may be
// wrong or partial (logged at warn, shown by default). There is no kProblem or kError: input that
// cannot be read throws rtb::Error, and memlog's "problems" (a log whose figures cannot be judged)
// are reported and then judged by memlog_verdict, which is a warning a user must see.
enum class Severity { kNote, kWarning };

struct Diagnostic {
  Severity severity = Severity::kWarning;
  std::string where;  // "file:line", "file" or empty
  std::string message;

  bool operator==(const Diagnostic&) const = default;
};

// "file:line" (line > 0) or "file"; empty when `file` is.
std::string where_of(std::string_view file, std::int64_t line = 0);

// "note" or "warning", as in the JSON form.
std::string_view severity_name(Severity severity);

// The one-line text form, as the tools print it after their "tool: level: " prefix:
// "where: message", or the message alone when `where` is empty.
std::string text_of(const Diagnostic& diagnostic);
// The text forms of `all`, in order: what the documents' old `warnings` fields list.
std::vector<std::string> texts_of(const std::vector<Diagnostic>& all);
// The messages alone (no place), in order: what the old `notes` and `problems` fields list.
std::vector<std::string> messages_of(const std::vector<Diagnostic>& all);
// The same of those of one severity (where one list holds what two fields listed).
std::vector<std::string> texts_of(const std::vector<Diagnostic>& all, Severity severity);
std::vector<std::string> messages_of(const std::vector<Diagnostic>& all, Severity severity);

// The JSON form, one line: {"severity": "warning", "where": "f:3", "message": "..."}; `where` is
// null when empty.
void write_json(json::Writer& j, const Diagnostic& diagnostic);
// `name` as an array of the JSON forms (empty array when there are none).
void write_json(json::Writer& j, std::string_view name, const std::vector<Diagnostic>& all);

}  // namespace rtb
