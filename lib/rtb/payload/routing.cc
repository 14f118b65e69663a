#include "rtb/payload/routing.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <optional>

#include "rtb/base/error.h"
#include "rtb/base/text.h"

// Generated at build time from data/routing/qwen3.5-397b-a17b.txt (cmake/embed.cmake).
namespace rtb::embedded {
std::string_view default_routing_table();
}  // namespace rtb::embedded

namespace rtb::payload {
namespace {

std::vector<std::string_view> split_fields(std::string_view line) {
  std::vector<std::string_view> fields;
  while (true) {
    std::size_t comma = line.find(',');
    fields.push_back(trim(line.substr(0, comma), kLineBlanks));
    if (comma == std::string_view::npos) break;
    line.remove_prefix(comma + 1);
  }
  return fields;
}

// A target: a finite number >= 1.
double parse_target(std::string_view field, const std::string& source, std::int64_t line) {
  if (field.empty()) fail_at(source, line, "empty value (expected a routing target)");
  std::string_view digits = field;
  if (digits.front() == '+') digits.remove_prefix(1);
  double value = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec == std::errc::result_out_of_range) {
    fail_at(source, line, "routing target '{}' is out of range", field);
  }
  if (ec != std::errc() || end != digits.data() + digits.size()) {
    fail_at(source, line, "'{}' is not a number (expected a routing target)", field);
  }
  if (!std::isfinite(value)) {
    fail_at(source, line, "routing target '{}' is not finite", field);
  }
  if (value < 1.0) {
    fail_at(source, line, "routing target {} is below 1 (max/mean load is at least 1)", field);
  }
  return value;
}

std::optional<std::int64_t> parse_layer_index(std::string_view field) {
  std::int64_t value = -1;
  auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), value);
  if (field.empty() || ec != std::errc() || end != field.data() + field.size() || value < 0) {
    return std::nullopt;
  }
  return value;
}

bool is_header(const std::vector<std::string_view>& fields) {
  std::string first(fields.front());
  std::transform(first.begin(), first.end(), first.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return first == "layer";
}

struct ContentLine {
  std::int64_t number;  // 1-based
  std::vector<std::string_view> fields;
};

std::string shortest(double value) {
  char buffer[64];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value);
  (void)ec;  // 64 bytes always hold a double's shortest form
  return std::string(buffer, end);
}

}  // namespace

std::vector<double> parse_routing_targets(std::string_view text, const std::string& source_name) {
  // Collect the lines that carry values, with their numbers, before deciding the form.
  std::vector<ContentLine> lines;
  std::int64_t number = 0;
  while (!text.empty()) {
    ++number;
    std::size_t newline = text.find('\n');
    std::string_view line = text.substr(0, newline);
    text.remove_prefix(newline == std::string_view::npos ? text.size() : newline + 1);
    std::size_t hash = line.find('#');
    if (hash != std::string_view::npos) line = line.substr(0, hash);
    line = trim(line, kLineBlanks);
    if (line.empty()) continue;
    lines.push_back({number, split_fields(line)});
  }
  if (!lines.empty() && lines.front().fields.size() == 2 && is_header(lines.front().fields)) {
    lines.erase(lines.begin());
  }
  if (lines.empty()) fail_at(source_name, 0, "empty routing target table (no values)");

  // One line of several values is the inline form, except `0,x` alone: a one-layer table in
  // `layer,target` form (as inline it would be invalid anyway, since 0 is below 1).
  if (lines.size() == 1 && lines[0].fields.size() >= 2 &&
      !(lines[0].fields.size() == 2 && lines[0].fields[0] == "0")) {
    std::vector<double> targets;
    for (std::string_view field : lines[0].fields) {
      targets.push_back(parse_target(field, source_name, lines[0].number));
    }
    return targets;
  }

  std::size_t width = lines.front().fields.size();
  if (width > 2) {
    fail_at(source_name, lines.front().number,
            "{} comma-separated values on a line of a multi-line table (expected one target, "
            "or `layer,target`; an inline table is a single line)",
            width);
  }
  for (const ContentLine& line : lines) {
    if (line.fields.size() != width) {
      fail_at(source_name, line.number,
              "{} values on this line but {} on line {} (the table mixes `target` and "
              "`layer,target` lines)",
              line.fields.size(), width, lines.front().number);
    }
  }

  std::vector<double> targets;
  if (width == 1) {
    for (const ContentLine& line : lines) {
      targets.push_back(parse_target(line.fields[0], source_name, line.number));
    }
    return targets;
  }

  // `layer,target` lines.
  struct Entry {
    std::int64_t layer;
    std::int64_t line;
    double target;
  };
  std::vector<Entry> entries;
  for (const ContentLine& line : lines) {
    std::optional<std::int64_t> layer = parse_layer_index(line.fields[0]);
    if (!layer) {
      fail_at(source_name, line.number, "'{}' is not a layer index (a 0-based integer)",
              line.fields[0]);
    }
    entries.push_back(
        {*layer, line.number, parse_target(line.fields[1], source_name, line.number)});
  }
  std::stable_sort(entries.begin(), entries.end(),
                   [](const Entry& a, const Entry& b) { return a.layer < b.layer; });
  for (std::size_t i = 1; i < entries.size(); ++i) {
    if (entries[i].layer == entries[i - 1].layer) {
      fail_at(source_name, entries[i].line, "layer {} given twice (first on line {})",
              entries[i].layer, entries[i - 1].line);
    }
  }
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (entries[i].layer != static_cast<std::int64_t>(i)) {
      fail_at(source_name, 0, "layer {} is missing (layers 0..{} must each appear once)", i,
              entries.back().layer);
    }
    targets.push_back(entries[i].target);
  }
  return targets;
}

std::vector<double> scale_routing_targets(const std::vector<double>& targets, double scale) {
  if (!std::isfinite(scale) || scale < 0) {
    fail("routing scale {} is invalid (it must be a finite number >= 0)", scale);
  }
  std::vector<double> scaled;
  scaled.reserve(targets.size());
  for (double target : targets) scaled.push_back(1.0 + scale * (target - 1.0));
  return scaled;
}

std::string format_routing_targets_inline(const std::vector<double>& targets) {
  std::string out;
  for (std::size_t i = 0; i < targets.size(); ++i) {
    if (i > 0) out += ',';
    out += shortest(targets[i]);
  }
  return out;
}

std::string format_routing_targets_table(const std::vector<double>& targets,
                                         const std::vector<std::string>& comment_lines) {
  std::string out;
  for (const std::string& line : comment_lines) {
    out += line.empty() ? "#\n" : "# " + line + "\n";
  }
  out += "# Format: layer,target (0-based layer, max/mean expert load).\n";
  for (std::size_t layer = 0; layer < targets.size(); ++layer) {
    out += fmt::format("{},{}\n", layer, shortest(targets[layer]));
  }
  return out;
}

void validate_routing_targets(const std::vector<double>& targets, int layers, int experts,
                              int topk) {
  if (layers <= 0) fail("the model must have at least one layer (got {})", layers);
  if (experts <= 0) fail("the model must have at least one expert (got {})", experts);
  if (topk <= 0 || topk > experts) {
    fail("top-k {} is invalid with {} experts (it must be 1..{})", topk, experts, experts);
  }
  if (targets.size() != static_cast<std::size_t>(layers)) {
    fail("the routing target table has {} {} but the model has {} layers", targets.size(),
         targets.size() == 1 ? "target" : "targets", layers);
  }
  double reachable = static_cast<double>(experts) / topk;
  for (std::size_t layer = 0; layer < targets.size(); ++layer) {
    double target = targets[layer];
    if (!std::isfinite(target)) fail("layer {}: routing target {} is not finite", layer, target);
    if (target < 1.0) {
      fail("layer {}: routing target {} is below 1 (max/mean load is at least 1)", layer, target);
    }
    if (target > reachable * (1 + 1e-12)) {
      fail(
          "layer {}: routing target {} cannot be reached with {} experts and top-{}: an expert "
          "gets at most every token, so max/mean <= experts/top-k = {}",
          layer, target, experts, topk, shortest(reachable));
    }
  }
}

std::string_view default_routing_table_text() { return embedded::default_routing_table(); }

std::vector<double> default_routing_targets() {
  return parse_routing_targets(default_routing_table_text(), kDefaultRoutingTableName);
}

}  // namespace rtb::payload
