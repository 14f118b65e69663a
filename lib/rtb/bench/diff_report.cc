#include "rtb/bench/diff_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "rtb/base/error.h"
#include "rtb/base/io.h"
#include "rtb/base/json.h"
#include "rtb/base/text.h"
#include "rtb/k8s/line_diff.h"

namespace rtb::bench {
namespace {

constexpr std::string_view kReset = "\033[0m";

// How each kind of difference is shown: its ANSI color and its sign.
struct KindStyle {
  std::string_view color;
  char sign;
};
KindStyle style_of(k8s::Difference::Kind kind) {
  switch (kind) {
    case k8s::Difference::Kind::kAdded:
      return {"\033[32m", '+'};
    case k8s::Difference::Kind::kRemoved:
      return {"\033[31m", '-'};
    case k8s::Difference::Kind::kChanged:
      return {"\033[33m", '~'};
    case k8s::Difference::Kind::kTypeChanged:
      return {"\033[35m", '!'};
  }
  return {"", '~'};
}
std::string_view color_of(k8s::Difference::Kind kind) { return style_of(kind).color; }
char sign_of(k8s::Difference::Kind kind) { return style_of(kind).sign; }

// A value for a one-line report: a multi-line value shows its first line and its line count.
std::string one_line(std::string_view value) {
  std::size_t newline = value.find('\n');
  if (newline == std::string_view::npos) return std::string(value);
  std::size_t lines = static_cast<std::size_t>(std::count(value.begin(), value.end(), '\n'));
  if (!value.empty() && value.back() != '\n') ++lines;
  return fmt::format("{}... ({} lines)", value.substr(0, newline), lines);
}

std::string_view last_item(std::string_view path) {
  if (path.empty() || path.back() != ']') return {};
  std::size_t open = path.rfind('[');
  if (open == std::string_view::npos) return {};
  std::string_view key = path.substr(open + 1, path.size() - open - 2);
  std::size_t hash = key.rfind('#');
  if (hash != std::string_view::npos && hash > 0) key = key.substr(0, hash);
  return key;
}

// What a line says after the path.
std::string detail(const k8s::Difference& d) {
  switch (d.kind) {
    case k8s::Difference::Kind::kAdded:
      return one_line(d.new_value);
    case k8s::Difference::Kind::kRemoved:
      return one_line(d.old_value);
    case k8s::Difference::Kind::kChanged: {
      // A changed flag item: its values, as `--xla_foo: 1 -> 2` reads.
      std::string_view key = last_item(d.path);
      if (!key.empty()) {
        // `--k=v`, `k=v`, and `--k v` (a flag of a command line with its value word).
        for (char separator : {'=', ' '}) {
          std::string prefix = std::string(key) + separator;
          if (d.old_value.rfind(prefix, 0) == 0 && d.new_value.rfind(prefix, 0) == 0) {
            return fmt::format("{} -> {}", one_line(d.old_value.substr(prefix.size())),
                               one_line(d.new_value.substr(prefix.size())));
          }
        }
      }
      return fmt::format("{} -> {}", one_line(d.old_value), one_line(d.new_value));
    }
    case k8s::Difference::Kind::kTypeChanged:
      return fmt::format("{} -> {}", one_line(d.old_value), one_line(d.new_value));
  }
  return "";
}

// --- what goes under a difference's line ------------------------------------------------------

constexpr std::size_t kDetailIndent = 4;
// More leaves of an added or removed subtree than this are counted, not listed.
constexpr std::size_t kMaxLeaves = 40;

struct DetailLine {
  std::string text;
  std::string_view color;  // "" for none
};

std::string paint(const std::string& line, std::string_view color, bool use_color) {
  if (!use_color || color.empty()) return line + "\n";
  return fmt::format("{}{}{}\n", color, line, kReset);
}

std::size_t line_count(std::string_view value) { return split_lines(value).size(); }

bool multi_line(const k8s::Difference& d) {
  return d.kind == k8s::Difference::Kind::kChanged &&
         (d.old_value.find('\n') != std::string::npos ||
          d.new_value.find('\n') != std::string::npos);
}

// The lines shown under a difference: a changed multi-line value as a line diff, an added or
// removed subtree as its leaves, each with its path relative to the difference's.
std::vector<DetailLine> detail_below(const k8s::Difference& d) {
  std::vector<DetailLine> out;
  if (multi_line(d)) {
    for (std::string& text : k8s::format_line_diff(k8s::line_diff(d.old_value, d.new_value))) {
      std::string_view color = text[0] == '+'   ? color_of(k8s::Difference::Kind::kAdded)
                               : text[0] == '-' ? color_of(k8s::Difference::Kind::kRemoved)
                                                : "";
      out.push_back({std::move(text), color});
    }
  } else if (d.subtree.IsDefined() && d.subtree.size() > 0) {
    // (An empty one has no leaf to list: its line shows `{}` or `[]`.)
    k8s::Leaves leaves = k8s::subtree_leaves(d.subtree, kMaxLeaves);
    for (const k8s::Leaf& leaf : leaves.shown)
      out.push_back({fmt::format("{}: {}", leaf.path, one_line(leaf.value)), ""});
    if (leaves.total > leaves.shown.size()) {
      out.push_back({fmt::format("... {} more (--json has the whole value)",
                                 leaves.total - leaves.shown.size()),
                     ""});
    }
  }
  return out;
}

// The last line of the text output when server-populated fields were left out.
std::string server_fields_note(const RenderReport& report) {
  std::size_t n = report.hidden_server_fields.size();
  std::string names;
  for (const std::string& path : report.hidden_server_fields)
    names += (names.empty() ? "" : ", ") + path;
  return fmt::format("({} server-populated field{} not compared, --server-fields shows {}: {})", n,
                     n == 1 ? "" : "s", n == 1 ? "it" : "them", names);
}

// The last line of the text output when defaulted or admission fields were left out.
std::string defaults_note(const RenderReport& report) {
  std::size_t n = report.hidden_defaults.size();
  std::string names;
  for (const RenderReport::HiddenDefault& field : report.hidden_defaults)
    names += (names.empty() ? "" : ", ") + field.document + ":" + field.path;
  return fmt::format(
      "({} field{} the live object has from API defaults or admission not compared, "
      "--server-fields shows {}: {})",
      n, n == 1 ? "" : "s", n == 1 ? "it" : "them", names);
}

// The line that says two documents named apart were paired (Pairing::kOnlyOne).
std::string pairing_note(const RenderReport& report, const ReportedDocument& doc) {
  return fmt::format("(paired {} {} ({}:{}) with {} ({}:{}): the only {}{} on each side)", doc.kind,
                     doc.a_name.value_or(""), report.a_source, doc.a_line, doc.b_name.value_or(""),
                     report.b_source, doc.b_line, doc.role.empty() ? "" : doc.role + " ", doc.kind);
}

// What the line of a difference with lines below it says after the path.
std::string detail_heading(const k8s::Difference& d) {
  if (multi_line(d)) {
    return fmt::format("{} lines -> {} lines", line_count(d.old_value), line_count(d.new_value));
  }
  return "";
}

std::string join_segments(const std::vector<std::string_view>& parts, std::size_t from,
                          std::size_t to) {
  std::string out;
  for (std::size_t i = from; i < to && i < parts.size(); ++i) {
    if (!out.empty() && parts[i].front() != '[') out += '.';
    out += parts[i];
  }
  return out;
}

// --- JSON ----------------------------------------------------------------------------------------

using Layout = json::Writer::Layout;

// A line number, null for 0 (no line).
std::optional<std::size_t> json_line(std::size_t line) {
  return line == 0 ? std::nullopt : std::optional<std::size_t>(line);
}

struct Counts {
  std::size_t added = 0, removed = 0, changed = 0, type_changed = 0;
  void add(k8s::Difference::Kind kind) {
    switch (kind) {
      case k8s::Difference::Kind::kAdded:
        ++added;
        break;
      case k8s::Difference::Kind::kRemoved:
        ++removed;
        break;
      case k8s::Difference::Kind::kChanged:
        ++changed;
        break;
      case k8s::Difference::Kind::kTypeChanged:
        ++type_changed;
        break;
    }
  }
  std::size_t total() const { return added + removed + changed + type_changed; }
};

bool glob_match_prefixes(std::string_view glob, std::string_view text) {
  if (glob_match(glob, text)) return true;
  for (std::size_t i = 1; i < text.size(); ++i) {
    if ((text[i] == '.' || text[i] == '[') && glob_match(glob, text.substr(0, i))) return true;
  }
  return false;
}

bool glob_matches(const std::string& glob, std::string_view document, std::string_view path) {
  std::string full = std::string(document) + ":" + std::string(path);
  return glob_match_prefixes(glob, full) || (!path.empty() && glob_match_prefixes(glob, path));
}

}  // namespace

bool glob_match(std::string_view glob, std::string_view text) {
  // Iterative wildcard matching with one backtrack point (the last `*`): linear-ish, no recursion.
  std::size_t g = 0, t = 0;
  std::size_t star = std::string_view::npos, resume = 0;
  while (t < text.size()) {
    if (g < glob.size() && glob[g] == '*') {
      star = g++;
      resume = t;
      continue;
    }
    if (g < glob.size()) {
      bool escaped = glob[g] == '\\' && g + 1 < glob.size();
      char want = escaped ? glob[g + 1] : glob[g];
      if ((!escaped && want == '?') || want == text[t]) {
        g += escaped ? 2 : 1;
        ++t;
        continue;
      }
    }
    if (star == std::string_view::npos) return false;
    g = star + 1;
    t = ++resume;
  }
  while (g < glob.size() && glob[g] == '*') ++g;
  return g == glob.size();
}

void DiffFilter::ignore_file(const std::string& path) {
  std::string text = read_file(path);
  for (std::string_view line : split_lines(text)) {
    line = trim_back(trim_front(line, " \t"), kLineBlanks);
    if (!line.empty() && line.front() != '#') ignore_.emplace_back(line);
  }
}

bool DiffFilter::keep(std::string_view document, std::string_view path) const {
  for (const std::string& glob : ignore_) {
    if (glob_matches(glob, document, path)) return false;
  }
  if (only_.empty()) return true;
  for (const std::string& glob : only_) {
    if (glob_matches(glob, document, path)) return true;
  }
  return false;
}

std::size_t RenderReport::unexpected() const {
  return static_cast<std::size_t>(
      std::count_if(differences.begin(), differences.end(),
                    [](const ReportedDifference& d) { return !d.allowed.has_value(); }));
}

Outcome RenderReport::outcome() const {
  return outcome_of(expect_bench ? unexpected() > 0 : !differences.empty());
}

RenderReport make_render_report(std::string a_source, std::string b_source, const RenderDiff& diff,
                                const DiffFilter& filter) {
  RenderReport report;
  report.a_source = std::move(a_source);
  report.b_source = std::move(b_source);
  for (const DocumentDiff& doc : diff.documents) {
    ReportedDocument summary{doc.label,  doc.kind, doc.a_name,    doc.b_name, doc.a_line,
                             doc.b_line, 0,        doc.paired_by, doc.role};
    for (const k8s::Difference& d : doc.differences) {
      if (!filter.keep(doc.label, d.path)) {
        ++report.ignored;
        continue;
      }
      report.differences.push_back({doc.label, d, std::nullopt, ""});
      ++summary.differences;
    }
    for (const std::string& path : doc.hidden_server_fields)
      report.hidden_server_fields.push_back(doc.label + ":" + path);
    for (const k8s::DefaultedField& field : doc.hidden_defaults)
      report.hidden_defaults.push_back({doc.label, field.path, field.reason});
    report.documents.push_back(std::move(summary));
  }
  return report;
}

RenderReport make_expect_bench_report(std::string a_source, std::string b_source,
                                      const ExpectBenchResult& result, const DiffFilter& filter) {
  return make_expect_bench_report(std::move(a_source), std::move(b_source),
                                  std::vector<ExpectBenchResult>{result}, filter);
}

RenderReport make_expect_bench_report(std::string a_source, std::string b_source,
                                      const std::vector<ExpectBenchResult>& results,
                                      const DiffFilter& filter) {
  RenderReport report;
  report.a_source = std::move(a_source);
  report.b_source = std::move(b_source);
  report.expect_bench = true;
  for (const ExpectBenchResult& result : results) {
    ReportedDocument summary{
        result.arm.empty() ? "trainer" : fmt::format("trainer[{}]", result.arm),
        "JobSet",
        result.e2e_name,
        result.bench_name,
        result.e2e_line,
        result.bench_line,
        0,
        Pairing::kRole,
        "trainer"};
    for (const BenchDifference& d : result.differences) {
      if (!filter.keep(summary.label, d.difference.path)) {
        ++report.ignored;
        continue;
      }
      report.differences.push_back({summary.label, d.difference, d.allowed, d.why});
      ++summary.differences;
    }
    report.documents.push_back(std::move(summary));
  }
  return report;
}

std::string format_render_text(const RenderReport& report, const TextStyle& style) {
  std::string out;
  for (const ReportedDocument& doc : report.documents) {
    if (doc.paired_by == Pairing::kOnlyOne) out += pairing_note(report, doc) + "\n";
  }
  for (const ReportedDifference& r : report.differences) {
    if (report.expect_bench && r.allowed && !style.show_allowed) continue;
    const k8s::Difference& d = r.difference;
    std::vector<DetailLine> below = d.path.empty() ? std::vector<DetailLine>() : detail_below(d);
    std::string line;
    if (d.path.empty()) {
      // A whole document on one side only.
      bool only_a = d.kind == k8s::Difference::Kind::kRemoved;
      line = fmt::format("{} {}: only in {}: {}", sign_of(d.kind), r.document,
                         only_a ? report.a_source : report.b_source,
                         only_a ? d.old_value : d.new_value);
    } else {
      line = fmt::format("{} {}:{}:", sign_of(d.kind), r.document, d.path);
      std::string summary = detail(d);
      if (!below.empty()) summary = detail_heading(d);
      if (!summary.empty()) line += " " + summary;
    }
    if (report.expect_bench) {
      line += r.allowed ? fmt::format("  [allowed: {}]", bench_change_id(*r.allowed))
                        : fmt::format("  [unexpected: {}]", r.why);
    }
    out += paint(line, color_of(d.kind), style.color);
    for (const DetailLine& more : below)
      out += paint(std::string(kDetailIndent, ' ') + more.text, more.color, style.color);
  }
  if (!report.hidden_server_fields.empty()) out += server_fields_note(report) + "\n";
  if (!report.hidden_defaults.empty()) out += defaults_note(report) + "\n";
  return out;
}

std::string diff_area(std::string_view path) {
  std::vector<std::string_view> parts = k8s::path_segments(path);
  if (parts.empty()) return "(document)";
  if (parts.size() >= 3 && parts[0] == "spec" && parts[1] == "replicatedJobs") {
    std::string job = "replicatedJobs" + std::string(parts[2]);
    std::size_t i = 3;
    // Skip the pod template's nesting: template.spec.template.spec.
    static const std::vector<std::string_view> kNesting = {"template", "spec", "template", "spec"};
    std::size_t n = 0;
    while (i < parts.size() && n < kNesting.size() && parts[i] == kNesting[n]) {
      ++i;
      ++n;
    }
    if (i >= parts.size()) return job;
    if ((parts[i] == "containers" || parts[i] == "initContainers") && i + 1 < parts.size()) {
      std::string container = job + "." + std::string(parts[i]) + std::string(parts[i + 1]);
      std::size_t j = i + 2;
      if (j >= parts.size()) return container;
      if (parts[j] == "startup" && j + 1 < parts.size()) {
        if (parts[j + 1] == "env" && j + 2 < parts.size() && j + 3 < parts.size()) {
          // A flag string inside the environment: MAXTEXT_EXTRA_FLAGS, LIBTPU_INIT_ARGS.
          return container + "." + join_segments(parts, j, j + 3);
        }
        return container + "." + join_segments(parts, j, j + 2);
      }
      if (parts[j] == "env" && j + 1 < parts.size()) {
        // A flag string in an env entry's value keeps its own area.
        if (j + 3 < parts.size()) return container + "." + join_segments(parts, j, j + 2);
        return container + ".env";
      }
      return container + "." + std::string(parts[j]);
    }
    return job + "." + std::string(parts[i]);
  }
  return join_segments(parts, 0, std::min<std::size_t>(2, parts.size()));
}

std::string format_render_stat(const RenderReport& report) {
  // Areas per document in first-seen order.
  std::vector<std::pair<std::string, std::string>> order;
  std::map<std::pair<std::string, std::string>, Counts> counts;
  Counts total;
  for (const ReportedDifference& r : report.differences) {
    if (report.expect_bench && r.allowed) continue;
    std::pair<std::string, std::string> key{r.document, diff_area(r.difference.path)};
    if (!counts.count(key)) order.push_back(key);
    counts[key].add(r.difference.kind);
    total.add(r.difference.kind);
  }
  std::size_t width_doc = 0, width_area = 0;
  for (const auto& [doc, area] : order) {
    width_doc = std::max(width_doc, doc.size());
    width_area = std::max(width_area, area.size());
  }
  std::string out;
  for (const auto& key : order) {
    const Counts& c = counts[key];
    out +=
        fmt::format("{:<{}}  {:<{}}  {:>4}  (+{} -{} ~{} !{})\n", key.first, width_doc, key.second,
                    width_area, c.total(), c.added, c.removed, c.changed, c.type_changed);
  }
  std::size_t documents = 0;
  for (const ReportedDocument& doc : report.documents) documents += doc.differences > 0;
  out += fmt::format("{} {}{} in {} document{}: {} added, {} removed, {} changed, {} type-changed",
                     total.total(), report.expect_bench ? "unexpected " : "",
                     total.total() == 1 ? "difference" : "differences", documents,
                     documents == 1 ? "" : "s", total.added, total.removed, total.changed,
                     total.type_changed);
  if (report.expect_bench) {
    out += fmt::format("; {} allowed", report.differences.size() - report.unexpected());
  }
  if (report.ignored > 0) out += fmt::format("; {} ignored", report.ignored);
  std::size_t only_ones = 0;
  for (const ReportedDocument& doc : report.documents)
    only_ones += doc.paired_by == Pairing::kOnlyOne;
  if (only_ones > 0) {
    out += fmt::format("; {} pair{} of the only document of a kind", only_ones,
                       only_ones == 1 ? "" : "s");
  }
  if (!report.hidden_server_fields.empty())
    out += fmt::format("; {} server-populated hidden", report.hidden_server_fields.size());
  if (!report.hidden_defaults.empty())
    out += fmt::format("; {} defaulted hidden", report.hidden_defaults.size());
  return out + "\n";
}

std::string format_render_json(const RenderReport& report) {
  Counts counts;
  for (const ReportedDifference& r : report.differences) counts.add(r.difference.kind);
  json::Writer j;
  j.begin_object()
      .field("schema", "rtb.diff-renders/1")
      .field("mode", report.expect_bench ? "expect-bench" : "diff")
      .field("a", report.a_source)
      .field("b", report.b_source);
  j.key("documents").begin_array();
  for (const ReportedDocument& d : report.documents) {
    j.begin_object(Layout::kOneLine)
        .field("document", d.label)
        .field("kind", d.kind)
        .field("a_name", d.a_name)
        .field("b_name", d.b_name)
        .field("a_line", json_line(d.a_line))
        .field("b_line", json_line(d.b_line))
        .field("differences", d.differences);
    if (d.paired_by == Pairing::kNone) {
      j.key("paired_by").null();
    } else {
      j.field("paired_by", pairing_id(d.paired_by));
    }
    j.end_object();
  }
  j.end_array().key("differences").begin_array();
  for (const ReportedDifference& r : report.differences) {
    const k8s::Difference& d = r.difference;
    auto side = [](bool present, const std::string& value) {
      return present ? std::optional<std::string>(value) : std::nullopt;
    };
    j.begin_object(Layout::kOneLine)
        .field("document", r.document)
        .field("path", d.path)
        .field("kind", kind_name(d.kind))
        .field("old", side(d.kind != k8s::Difference::Kind::kAdded, d.old_value))
        .field("new", side(d.kind != k8s::Difference::Kind::kRemoved, d.new_value));
    if (report.expect_bench) {
      j.field("allowed", r.allowed.has_value());
      if (r.allowed) {
        j.field("change", bench_change_id(*r.allowed)).key("why").null();
      } else {
        j.key("change").null().field("why", r.why);
      }
    }
    j.end_object();
  }
  j.end_array();
  j.key("summary")
      .begin_object(Layout::kOneLine)
      .field("added", counts.added)
      .field("removed", counts.removed)
      .field("changed", counts.changed)
      .field("type-changed", counts.type_changed)
      .field("total", counts.total())
      .field("ignored", report.ignored)
      .field("server_fields_hidden", static_cast<std::uint64_t>(report.hidden_server_fields.size()))
      .field("defaults_hidden", static_cast<std::uint64_t>(report.hidden_defaults.size()));
  if (report.expect_bench) {
    j.field("allowed", report.differences.size() - report.unexpected())
        .field("unexpected", report.unexpected());
  }
  j.end_object();
  // What was left out, each with why: the server-populated fields (`doc:path`), then the
  // defaulted and admission ones.
  j.key("hidden_fields").begin_array();
  for (const std::string& field : report.hidden_server_fields) {
    std::size_t colon = field.find(':');
    j.begin_object(Layout::kOneLine)
        .field("document", field.substr(0, colon))
        .field("path", field.substr(colon + 1))
        .field("source", "server")
        .key("reason")
        .null()
        .end_object();
  }
  for (const RenderReport::HiddenDefault& field : report.hidden_defaults) {
    j.begin_object(Layout::kOneLine)
        .field("document", field.document)
        .field("path", field.path)
        .field("source", "default")
        .field("reason", field.reason)
        .end_object();
  }
  j.end_array();
  write_json(j, "diagnostics", report.diagnostics);
  bool failed = report.outcome() == Outcome::kFail;
  std::string_view result =
      report.expect_bench ? (failed ? "fail" : "pass") : (failed ? "different" : "same");
  return j.field("result", result).end_object().str();
}

// --- diff-configs
// ----------------------------------------------------------------------------------

namespace {

// A colored (or plain) report line.
std::string report_line(k8s::Difference::Kind kind, const std::string& line,
                        const TextStyle& style) {
  return style.color ? fmt::format("{}{}{}\n", color_of(kind), line, kReset) : line + "\n";
}

// One line per differing item of a changed value: `key[item]: old -> new`, ...
std::string element_lines(const std::string& key, const ElementDiff& elements,
                          const TextStyle& style) {
  std::string out;
  for (const ElementDifference& e : elements.differences) {
    std::string path = fmt::format("{}[{}]", key, e.key);
    std::string moved =
        e.moved ? fmt::format("moved from index {} to {}", *e.old_index, *e.new_index) : "";
    switch (e.kind) {
      case ElementDifference::Kind::kAdded:
        out += report_line(k8s::Difference::Kind::kAdded,
                           fmt::format("+ {}: {}", path, *e.new_value), style);
        break;
      case ElementDifference::Kind::kRemoved:
        out += report_line(k8s::Difference::Kind::kRemoved,
                           fmt::format("- {}: {}", path, *e.old_value), style);
        break;
      case ElementDifference::Kind::kChanged:
        out += report_line(k8s::Difference::Kind::kChanged,
                           fmt::format("~ {}: {} -> {}{}", path, *e.old_value, *e.new_value,
                                       e.moved ? ", " + moved : ""),
                           style);
        break;
      case ElementDifference::Kind::kMoved:
        out += report_line(k8s::Difference::Kind::kChanged,
                           fmt::format("~ {}: {}: {}", path, moved, *e.old_value), style);
        break;
    }
  }
  return out;
}

}  // namespace

std::string format_config_text(const std::vector<ConfigDifference>& differences,
                               const TextStyle& style) {
  std::string out;
  for (const ConfigDifference& d : differences) {
    switch (d.kind) {
      case ConfigDifference::Kind::kAdded:
        out += report_line(k8s::Difference::Kind::kAdded,
                           fmt::format("+ {}: {}", d.key, one_line(d.b->value)), style);
        break;
      case ConfigDifference::Kind::kRemoved:
        out += report_line(k8s::Difference::Kind::kRemoved,
                           fmt::format("- {}: {}", d.key, one_line(d.a->value)), style);
        break;
      case ConfigDifference::Kind::kChanged:
        if (d.elements) {
          out += element_lines(d.key, *d.elements, style);
        } else {
          out += report_line(
              k8s::Difference::Kind::kChanged,
              fmt::format("~ {}: {} -> {}", d.key, one_line(d.a->value), one_line(d.b->value)),
              style);
        }
        break;
    }
  }
  return out;
}

namespace {

// The dump a log side used; null for a render, or a log without one.
std::optional<std::size_t> json_dump(const ConfigSide& side) {
  bool log = side.kind == ConfigSide::Kind::kLog;
  return log && side.dump ? std::optional<std::size_t>(side.dump) : std::nullopt;
}

void json_side(json::Writer& j, std::string_view name, const ConfigSide& side) {
  j.key(name)
      .begin_object(Layout::kOneLine)
      .field("source", side.source)
      .field("kind", side.kind == ConfigSide::Kind::kLog ? "log" : "render")
      .field("dump", json_dump(side))
      .field("keys", side.settings.size())
      .end_object();
}

// "<prefix>", "<prefix>_line" and "<prefix>_origin" of one side's setting.
void json_setting_fields(json::Writer& j, const std::optional<ConfigSetting>& s,
                         const std::string& prefix) {
  std::optional<std::string> value, origin;
  std::optional<std::size_t> line;
  if (s) {
    value = s->value;
    line = json_line(s->line);
    if (!s->origin.empty()) origin = s->origin;
  }
  j.field(prefix, value).field(prefix + "_line", line).field(prefix + "_origin", origin);
}

// "elements": the differing items of a changed container value, or null.
void json_elements(json::Writer& j, const std::optional<ElementDiff>& elements) {
  if (!elements) {
    j.key("elements").null();
    return;
  }
  j.wrap().key("elements").begin_object().field("pairing", pairing_name(elements->pairing));
  j.key("differences").begin_array();
  for (const ElementDifference& e : elements->differences) {
    j.wrap()
        .begin_object()
        .field("key", e.key)
        .field("kind", element_kind_name(e.kind))
        .field("moved", e.moved)
        .field("old", e.old_value)
        .field("old_index", e.old_index)
        .field("new", e.new_value)
        .field("new_index", e.new_index)
        .end_object();
  }
  j.end_array().end_object();
}

}  // namespace

std::string format_config_json(const ConfigSide& a, const ConfigSide& b,
                               const std::vector<ConfigDifference>& differences,
                               const std::optional<std::string>& keys_regex) {
  std::size_t added = 0, removed = 0, changed = 0;
  json::Writer j;
  j.begin_object().field("schema", "rtb.diff-configs/1");
  json_side(j, "a", a);
  json_side(j, "b", b);
  j.field("keys", keys_regex).key("differences").begin_array();
  for (const ConfigDifference& d : differences) {
    added += d.kind == ConfigDifference::Kind::kAdded;
    removed += d.kind == ConfigDifference::Kind::kRemoved;
    changed += d.kind == ConfigDifference::Kind::kChanged;
    j.begin_object(Layout::kOneLine).field("key", d.key).field("kind", config_kind_name(d.kind));
    json_setting_fields(j, d.a, "old");
    json_setting_fields(j, d.b, "new");
    json_elements(j, d.elements);
    j.end_object();
  }
  j.end_array()
      .key("summary")
      .begin_object(Layout::kOneLine)
      .field("added", added)
      .field("removed", removed)
      .field("changed", changed)
      .field("total", differences.size())
      .end_object();
  return j.field("result", differences.empty() ? "same" : "different").end_object().str();
}

std::string format_dump_list(const std::vector<ConfigSide>& sides) {
  std::string out;
  for (const ConfigSide& side : sides) {
    if (side.kind != ConfigSide::Kind::kLog) {
      out += fmt::format("{}: a render ({} MaxText settings), no config dumps\n", side.source,
                         side.settings.size());
      continue;
    }
    for (const ConfigDumpInfo& info : side.dumps) {
      out += fmt::format("{}: dump {}: lines {}-{}, {} keys ({} .. {}), {}{}\n", side.source,
                         info.number, info.first_line, info.last_line, info.params, info.first_key,
                         info.last_key,
                         info.complete ? "complete" : "truncated: " + info.incomplete_reason,
                         info.number == side.dump ? " [default]" : "");
    }
  }
  return out;
}

std::string format_dump_list_json(const std::vector<ConfigSide>& sides) {
  json::Writer j;
  j.begin_object().field("schema", "rtb.diff-configs.dumps/1").key("inputs").begin_array();
  for (const ConfigSide& side : sides) {
    j.begin_object(Layout::kOneLine)
        .field("source", side.source)
        .field("kind", side.kind == ConfigSide::Kind::kLog ? "log" : "render")
        .field("default", json_dump(side))
        .key("dumps")
        .begin_array(Layout::kIndented);
    for (const ConfigDumpInfo& d : side.dumps) {
      std::optional<std::string> reason;
      if (!d.complete) reason = d.incomplete_reason;
      j.begin_object(Layout::kOneLine)
          .field("number", d.number)
          .field("first_line", d.first_line)
          .field("last_line", d.last_line)
          .field("keys", d.params)
          .field("first_key", d.first_key)
          .field("last_key", d.last_key)
          .field("complete", d.complete)
          .field("reason", reason)
          .end_object();
    }
    j.end_array().end_object();
  }
  return j.end_array().end_object().str();
}

}  // namespace rtb::bench
