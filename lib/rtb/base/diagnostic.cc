#include "rtb/base/diagnostic.h"

#include <string>

#include "rtb/base/enum_names.h"

namespace rtb {

std::string where_of(std::string_view file, std::int64_t line) {
  if (file.empty()) return {};
  std::string where(file);
  if (line > 0) {
    where += ':';
    where += std::to_string(line);
  }
  return where;
}

std::string_view severity_name(Severity severity) {
  return enum_name<Severity::kWarning>(severity, {"note", "warning"});
}

std::string text_of(const Diagnostic& diagnostic) {
  if (diagnostic.where.empty()) return diagnostic.message;
  return diagnostic.where + ": " + diagnostic.message;
}

namespace {

// `form` of each diagnostic `keep` accepts, in order.
template <typename Keep, typename Form>
std::vector<std::string> strings_of(const std::vector<Diagnostic>& all, Keep keep, Form form) {
  std::vector<std::string> out;
  for (const Diagnostic& diagnostic : all) {
    if (keep(diagnostic)) out.push_back(form(diagnostic));
  }
  return out;
}

std::string message_of(const Diagnostic& diagnostic) { return diagnostic.message; }

}  // namespace

std::vector<std::string> texts_of(const std::vector<Diagnostic>& all) {
  return strings_of(
      all, [](const Diagnostic&) { return true; }, text_of);
}

std::vector<std::string> messages_of(const std::vector<Diagnostic>& all) {
  return strings_of(
      all, [](const Diagnostic&) { return true; }, message_of);
}

std::vector<std::string> texts_of(const std::vector<Diagnostic>& all, Severity severity) {
  return strings_of(
      all, [&](const Diagnostic& d) { return d.severity == severity; }, text_of);
}

std::vector<std::string> messages_of(const std::vector<Diagnostic>& all, Severity severity) {
  return strings_of(
      all, [&](const Diagnostic& d) { return d.severity == severity; }, message_of);
}

void write_json(json::Writer& j, const Diagnostic& diagnostic) {
  j.begin_object(json::Writer::Layout::kOneLine);
  j.field("severity", severity_name(diagnostic.severity));
  j.field("where", json::null_if_empty(diagnostic.where));
  j.field("message", diagnostic.message);
  j.end_object();
}

void write_json(json::Writer& j, std::string_view name, const std::vector<Diagnostic>& all) {
  j.key(name).begin_array();
  for (const Diagnostic& diagnostic : all) write_json(j, diagnostic);
  j.end_array();
}

}  // namespace rtb
