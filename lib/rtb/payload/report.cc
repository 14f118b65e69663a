#include "rtb/payload/report.h"

#include <algorithm>
#include <cmath>

#include "rtb/base/error.h"
#include "rtb/base/json.h"
#include "rtb/base/svg.h"
#include "rtb/base/text.h"
#include "rtb/payload/routing.h"

namespace rtb::payload {
namespace {

using Json = json::Writer;

// A check-payload JSON document: an object that starts with the subcommand that wrote it.
Json document(const char* command) {
  Json j;
  j.begin_object();
  j.field("command", command);
  return j;
}

void layer_json(Json& j, int layer, const LoadStats& s, const std::vector<double>& targets) {
  const bool has_target = static_cast<std::size_t>(layer) < targets.size();
  j.begin_object();
  j.field("layer", layer).field("experts", s.experts);
  j.field("target", has_target ? std::optional(targets[layer]) : std::nullopt);
  j.field("max_over_mean", s.max_over_mean);
  j.field("tokens", s.tokens).field("assignments", s.assignments).field("mean_load", s.mean);
  j.field("max_load", s.max_load).field("min_load", s.min_load);
  j.field("hottest_expert", s.hottest_expert).field("cv", s.cv);
  // Expert-parallel ranks and the ragged buffer.
  j.field("ep", s.ep).list("rank_loads", s.rank_loads);
  j.field("rank_max_over_mean", s.rank_max_over_mean).field("rank_cv", s.rank_cv);
  j.field("buffer_factor", s.buffer_factor).field("rank_buffer", s.rank_buffer);
  j.field("overflow", s.overflow);
  j.end_object();
}

void layers_json(Json& j, const std::vector<LoadStats>& layers,
                 const std::vector<double>& targets) {
  j.key("layers").begin_array();
  for (std::size_t l = 0; l < layers.size(); ++l) {
    layer_json(j, static_cast<int>(l), layers[l], targets);
  }
  j.end_array();
}

void checks_json(Json& j, const VerifyReport& report) {
  j.key("checks").begin_array();
  for (const CheckResult& c : report.checks) {
    j.begin_object();
    j.field("name", c.name);
    j.field("passed", c.passed());
    j.field("skipped", c.skipped);
    if (c.skipped) j.field("skip_reason", c.skip_reason);
    j.field("failures", c.failures);
    j.list("examples", c.examples);
    j.field("what", c.what);
    j.end_object();
  }
  j.end_array();
  j.field("passed", report.passed());
}

// What closes build's and verify's documents: the per-layer loads against `targets`, then the
// checks.
std::string close_with_results(Json& j, const VerifyReport& report,
                               const std::vector<double>& targets) {
  layers_json(j, report.per_layer, targets);
  checks_json(j, report);
  j.end_object();
  return j.str();
}

// The per-layer table shared by build, verify and measure.
std::string layer_table(const std::vector<LoadStats>& layers, const std::vector<double>& targets) {
  if (layers.empty()) return "";
  int ep = layers[0].ep;
  std::string out = fmt::format(
      "{:>5}  {:>8}  {:>8}  {:>7}  {:>10}  {:>10}  {:>6}  {:>9}  {:>10}\n", "layer", "target",
      "max/mean", "error", "max load", "mean load", "cv", fmt::format("ep{} max", ep), "overflow");
  for (std::size_t l = 0; l < layers.size(); ++l) {
    const LoadStats& s = layers[l];
    bool has_target = l < targets.size();
    std::string target = has_target ? fmt::format("{:.4f}", targets[l]) : "-";
    std::string error = has_target && targets[l] > 0
                            ? fmt::format("{:+.2f}%", 100.0 * (s.max_over_mean / targets[l] - 1))
                            : "-";
    out += fmt::format(
        "{:>5}  {:>8}  {:>8.4f}  {:>7}  {:>10}  {:>10.1f}  {:>6.3f}  {:>9.4f}  {:>10}\n", l, target,
        s.max_over_mean, error, s.max_load, s.mean, s.cv, s.rank_max_over_mean, s.overflow);
  }
  const LoadStats& first = layers[0];
  out += fmt::format(
      "(max/mean over {} experts; ep{} max: the busiest of {} expert-parallel ranks over the mean "
      "rank; overflow: assignments beyond a ragged buffer of {} x the mean rank load, summed over "
      "ranks)\n",
      first.experts, ep, ep, first.buffer_factor);
  return out;
}

std::string checks_text(const VerifyReport& report) {
  std::string out;
  int passed = 0, failed = 0, skipped = 0;
  for (const CheckResult& c : report.checks) {
    if (c.skipped && c.passed()) {
      ++skipped;
      out += fmt::format("  {:<16} skipped: {}\n", c.name, c.skip_reason);
      continue;
    }
    if (c.passed()) {
      ++passed;
      out += fmt::format("  {:<16} ok\n", c.name);
      continue;
    }
    ++failed;
    out += fmt::format("  {:<16} FAILED ({} {}): {}\n", c.name, c.failures,
                       c.failures == 1 ? "failure" : "failures", c.what);
    for (const std::string& example : c.examples) out += fmt::format("      {}\n", example);
    if (c.failures > static_cast<std::int64_t>(c.examples.size())) {
      out += fmt::format("      ... and {} more\n", c.failures - c.examples.size());
    }
  }
  return fmt::format("checks: {} passed, {} failed, {} skipped\n", passed, failed, skipped) + out;
}

// "settings from the file: a 1, b 2; from options: c 3; ..." in the order of `from`.
std::string settings_text(const std::vector<SettingSource>& settings) {
  std::string out;
  for (const char* from : {"file", "option", "inferred", "default"}) {
    std::string line;
    for (const SettingSource& s : settings) {
      if (s.from == from) line += fmt::format("{}{} {}", line.empty() ? "" : ", ", s.name, s.value);
    }
    if (line.empty()) continue;
    const char* label = std::string_view(from) == "file"       ? "from the file (payload_settings)"
                        : std::string_view(from) == "option"   ? "from options"
                        : std::string_view(from) == "inferred" ? "inferred from the arrays"
                                                               : "defaults";
    out += fmt::format("settings {}: {}\n", label, line);
  }
  return out;
}

}  // namespace

std::string format_build_text(const Payload& p, const VerifyReport& checks,
                              const std::string& output) {
  const PayloadOptions& o = p.options;
  std::string out = fmt::format(
      "payload: {} rows x {} tokens, {} layers, top-{} of {} experts, vocab {}, seed {}\n", o.rows,
      o.tokens, o.layers, o.topk, o.experts, o.vocab, o.seed);
  out += fmt::format(
      "real rows: {} of {} ({} real tokens each, {} {}), {} real tokens; pad {} (pad_align {}); "
      "advantages {}; old_per_token_logps {}\n",
      o.final_rows, o.rows, o.real_len, o.segments, o.segments == 1 ? "segment" : "segments",
      p.real_tokens, to_string(o.pad_position), o.pad_align, to_string(o.advantages),
      o.old_logps ? "yes" : "no");
  if (o.max_prompt_length > 0) {
    out += fmt::format("prompts: 1..{} tokens at the start of each segment (mask 0 there)\n",
                       o.max_prompt_length);
  }
  if (o.routing_scale != 1.0) out += fmt::format("routing scale: {}\n", o.routing_scale);
  std::string bytes =
      human_bytes(static_cast<std::int64_t>(routing_bytes(o) +
                                            p.completion_ids.size() * (o.old_logps ? 24 : 20)),
                  ByteUnits::kDecimal);
  out += output.empty() ? fmt::format("not written (give -o FILE.npz); arrays {}\n", bytes)
                        : fmt::format("written: {} ({})\n", output, bytes);
  for (const Diagnostic& w : p.diagnostics) out += fmt::format("warning: {}\n", text_of(w));
  out += fmt::format("\n{}\n{}", layer_table(checks.per_layer, p.targets), checks_text(checks));
  return out;
}

std::string format_build_json(const Payload& p, const VerifyReport& checks,
                              const std::string& output) {
  const PayloadOptions& o = p.options;
  Json j = document("build");
  j.key("options").begin_object();
  j.field("rows", o.rows).field("tokens", o.tokens).field("layers", o.layers);
  j.field("topk", o.topk).field("experts", o.experts).field("vocab", o.vocab);
  j.field("real_len", o.real_len).field("segments", o.segments);
  j.field("max_prompt_length", o.max_prompt_length);
  j.field("final_rows", o.final_rows);
  j.field("pad_position", std::string(to_string(o.pad_position)));
  j.field("pad_align", o.pad_align);
  j.field("routing_scale", o.routing_scale);
  j.field("advantages", std::string(to_string(o.advantages)));
  j.field("old_logps", o.old_logps);
  j.field("seed", static_cast<std::int64_t>(o.seed));
  j.end_object();
  j.field("output", json::null_if_empty(output));
  j.field("real_tokens", p.real_tokens);
  j.key("warnings").begin_array();
  for (const Diagnostic& w : p.diagnostics) j.value(text_of(w));
  j.end_array();
  write_json(j, "diagnostics", p.diagnostics);
  j.list("targets", p.targets);
  return close_with_results(j, checks, p.targets);
}

std::string format_verify_text(const std::string& file, const VerifyReport& r,
                               const std::string& targets_source) {
  std::string out = fmt::format("{}: {} rows x {} tokens", file, r.rows, r.tokens);
  if (r.layers > 0)
    out += fmt::format(", {} layers, top-{} of {} experts", r.layers, r.topk, r.experts);
  out += "\n";
  if (r.real_rows > 0) {
    std::string lengths = r.min_real_len == r.max_real_len
                              ? fmt::format("{}", r.min_real_len)
                              : fmt::format("{}..{}", r.min_real_len, r.max_real_len);
    out += fmt::format(
        "real rows: {} ({} real tokens each), padding rows: {}, real tokens: {}; "
        "pad position: {}\n",
        r.real_rows, lengths, r.padding_rows, r.real_tokens, r.pad_position);
  } else {
    out += fmt::format("no real rows ({} padding rows)\n", r.padding_rows);
  }
  out += targets_source.empty() ? "targets: none checked\n"
                                : fmt::format("targets: {}\n", targets_source);
  out += settings_text(r.settings);
  for (const Diagnostic& note : r.diagnostics) out += fmt::format("note: {}\n", text_of(note));
  out += fmt::format("\n{}", checks_text(r));
  if (!r.per_layer.empty()) out += fmt::format("\n{}", layer_table(r.per_layer, r.targets));
  return out;
}

std::string format_verify_json(const std::string& file, const VerifyReport& r,
                               const std::string& targets_source) {
  Json j = document("verify");
  j.field("file", file);
  j.field("rows", r.rows).field("tokens", r.tokens).field("layer_count", r.layers);
  j.field("topk", r.topk).field("experts", r.experts);
  j.field("has_old_logps", r.has_old_logps);
  j.field("real_rows", r.real_rows).field("padding_rows", r.padding_rows);
  j.field("real_tokens", r.real_tokens);
  j.field("min_real_len", r.min_real_len).field("max_real_len", r.max_real_len);
  j.field("pad_position", r.pad_position);
  j.field("targets_source", json::null_if_empty(targets_source));
  j.list("targets", r.targets);
  j.list("notes", messages_of(r.diagnostics));
  write_json(j, "diagnostics", r.diagnostics);
  j.key("settings").begin_object();
  for (const SettingSource& s : r.settings) {
    j.key(s.name).begin_object().field("value", s.value).field("from", s.from).end_object();
  }
  j.end_object();
  return close_with_results(j, r, r.targets);
}

std::string format_measure_text(const std::string& file, const MeasureReport& r,
                                const std::string& table) {
  std::string array = r.array.empty() ? "" : fmt::format(" member {}", r.array);
  std::string out = fmt::format("{}{}: {} {} ({} token positions, {} layers, top-{}, {} experts)\n",
                                file, array, dtype_name(r.dtype), format_shape(r.shape),
                                r.positions, r.layers, r.topk, r.experts);
  if (r.experts_from == "file") {
    out += fmt::format("experts: {}, recorded in the file's payload_settings\n", r.experts);
  }
  if (r.repeated > 0) {
    out += fmt::format("warning: {} token-layers list an expert more than once\n", r.repeated);
  }
  out += fmt::format("\n{}", layer_table(r.per_layer, {}));
  if (!table.empty()) out += fmt::format("\ntarget table written to {}\n", table);
  return out;
}

std::string format_measure_json(const std::string& file, const MeasureReport& r,
                                const std::string& table) {
  Json j = document("measure");
  j.field("file", file);
  j.field("array", r.array);
  j.list("shape", r.shape);
  j.field("dtype", std::string(dtype_name(r.dtype)));
  j.field("layer_count", r.layers).field("topk", r.topk).field("experts", r.experts);
  j.field("experts_from", json::null_if_empty(r.experts_from));
  j.field("positions", r.positions);
  j.field("repeated", r.repeated);
  j.list("targets", r.max_over_mean());
  j.field("table", json::null_if_empty(table));
  layers_json(j, r.per_layer, {});
  j.end_object();
  return j.str();
}

std::string format_measured_table(const std::string& file, const MeasureReport& r) {
  // Built with fmt rather than `"..." + r.array`: GCC 12 -O3 reports a false -Wrestrict there.
  std::string member = r.array.empty() ? std::string() : fmt::format(" (member {})", r.array);
  std::vector<std::string> comments = {
      "Routing targets (max expert load / mean expert load per layer), measured by",
      fmt::format("check-payload measure from {}{}", file, member),
      fmt::format("{} {} routed experts: {} token positions, {} layers, top-{} of {} experts.",
                  dtype_name(r.dtype), format_shape(r.shape), r.positions, r.layers, r.topk,
                  r.experts),
      "Mean load = routed assignments / experts; every token present in a layer counts.",
  };
  return format_routing_targets_table(r.max_over_mean(), comments);
}

std::string format_tiles_text(const std::string& source, const TilesReport& r) {
  const TileSettings& s = r.settings;
  std::string out = fmt::format(
      "{}: {} rows x {} tokens; cp {}; forward blocks {} x {}, dK/dV blocks {} x {}; pad_align "
      "{}\n",
      source, r.rows, r.tokens, s.cp, s.block_q, s.block_kv, s.dkv_block_q, s.dkv_block_kv,
      s.pad_align);
  out += fmt::format("{:<6} {:<4}", "pad", "pass");
  for (int rank = 0; rank < s.cp; ++rank)
    out += fmt::format(" {:>8}", fmt::format("rank {}", rank));
  out += fmt::format(" {:>8}\n", "busiest");
  auto line = [&](const char* position, const char* pass, const std::vector<std::int64_t>& counts) {
    out += fmt::format("{:<6} {:<4}", position, pass);
    for (std::int64_t c : counts) out += fmt::format(" {:>8}", c);
    out += fmt::format(" {:>8}\n",
                       counts.empty() ? 0 : *std::max_element(counts.begin(), counts.end()));
  };
  line("end", "fwd", r.end.fwd);
  line("end", "dkv", r.end.dkv);
  line("start", "fwd", r.start.fwd);
  line("start", "dkv", r.start.dkv);
  auto change = [](const std::vector<std::int64_t>& from, const std::vector<std::int64_t>& to) {
    std::int64_t a = from.empty() ? 0 : *std::max_element(from.begin(), from.end());
    std::int64_t b = to.empty() ? 0 : *std::max_element(to.begin(), to.end());
    return a == 0 ? fmt::format("{} -> {}", a, b)
                  : fmt::format("{} -> {} ({:+.1f}%)", a, b, 100.0 * (b - a) / a);
  };
  out += fmt::format("busiest rank, end -> start: fwd {}, dkv {}\n", change(r.end.fwd, r.start.fwd),
                     change(r.end.dkv, r.start.dkv));
  if (r.rows > 1) {
    out += fmt::format(
        "(per-rank counts of row {} for end and row {} for start, the rows whose "
        "busiest rank does the most forward tiles)\n",
        r.end.row, r.start.row);
  }
  return out;
}

std::string format_tiles_json(const std::string& source, const TilesReport& r) {
  const TileSettings& s = r.settings;
  Json j = document("tiles");
  j.field("source", source);
  j.field("rows", r.rows).field("tokens", r.tokens).field("cp", s.cp);
  j.field("block_q", s.block_q).field("block_kv", s.block_kv);
  j.field("dkv_block_q", s.dkv_block_q).field("dkv_block_kv", s.dkv_block_kv);
  j.field("pad_align", s.pad_align);
  for (const auto& [name, tiles] :
       {std::pair<const char*, const PositionTiles*>{"end", &r.end}, {"start", &r.start}}) {
    j.key(name).begin_object();
    j.list("fwd", tiles->fwd);
    j.list("dkv", tiles->dkv);
    j.field("row", tiles->row);
    j.list("fwd_all_rows", tiles->fwd_all_rows);
    j.list("dkv_all_rows", tiles->dkv_all_rows);
    j.end_object();
  }
  write_json(j, "diagnostics", r.diagnostics);
  j.end_object();
  return j.str();
}

std::string routing_load_svg(const std::string& title, const std::vector<LoadStats>& layers,
                             const std::vector<double>& targets) {
  const double left = 60, right = 20, top = 40, panel = 220, gap = 70;
  const double width = std::max(640.0, left + right + 14.0 * static_cast<double>(layers.size()));
  const double plot = width - left - right;
  svg::Document doc(width, top + 2 * panel + gap + 60);
  doc.set_title(title);
  doc.set_background("#ffffff");
  doc.text(left, 22, title, svg::Font::sized(14).with_bold());
  if (layers.empty()) {
    doc.text(left, top + 20, "no layers");
    return doc.str();
  }
  const double step = plot / static_cast<double>(layers.size());
  auto x_of = [&](std::size_t layer) { return left + step * (static_cast<double>(layer) + 0.5); };
  auto axes = [&](double y0, double y_max, const std::string& label, double y_min) {
    doc.line(left, y0, left, y0 + panel, svg::Paint::stroked("#444"));
    doc.line(left, y0 + panel, left + plot, y0 + panel, svg::Paint::stroked("#444"));
    doc.text(16, y0 + panel / 2, label,
             svg::Font::sized(11).with_rotate(-90).with_anchor(svg::Anchor::kMiddle));
    for (int tick = 0; tick <= 4; ++tick) {
      double value = y_min + (y_max - y_min) * tick / 4.0;
      double y = y0 + panel - panel * tick / 4.0;
      doc.line(left - 4, y, left + plot, y, svg::Paint::stroked(tick ? "#e6e6e6" : "#444"));
      doc.text(left - 6, y + 4, fmt::format("{:.2g}", value),
               svg::Font::sized(10).with_anchor(svg::Anchor::kEnd));
    }
    for (std::size_t l = 0; l < layers.size(); l += std::max<std::size_t>(1, layers.size() / 15)) {
      doc.text(x_of(l), y0 + panel + 14, std::to_string(l),
               svg::Font::sized(10).with_anchor(svg::Anchor::kMiddle));
    }
    doc.text(left + plot / 2, y0 + panel + 30, "layer",
             svg::Font::sized(11).with_anchor(svg::Anchor::kMiddle));
  };

  // Panel 1: max/mean per layer, target (grey bar) and achieved (dot).
  double y_max = 1.0;
  for (const LoadStats& s : layers) y_max = std::max(y_max, s.max_over_mean);
  for (double t : targets) y_max = std::max(y_max, t);
  y_max = std::ceil(y_max * 1.1);
  const double y0 = top;
  axes(y0, y_max, "max / mean expert load", 0);
  auto y_ratio = [&](double v) { return y0 + panel - panel * v / y_max; };
  for (std::size_t l = 0; l < layers.size(); ++l) {
    if (l < targets.size()) {
      doc.rect(x_of(l) - step * 0.35, y_ratio(targets[l]), step * 0.7,
               y0 + panel - y_ratio(targets[l]), svg::Paint::filled("#c7d3e3"),
               fmt::format("layer {}: target {:.4f}", l, targets[l]));
    }
    doc.circle(x_of(l), y_ratio(layers[l].max_over_mean), std::min(4.0, step * 0.3),
               svg::Paint::filled("#e45756"),
               fmt::format("layer {}: max/mean {:.4f} (expert {}, load {})", l,
                           layers[l].max_over_mean, layers[l].hottest_expert, layers[l].max_load));
  }
  doc.rect(left + plot - 210, y0 + 4, 10, 10, svg::Paint::filled("#c7d3e3"));
  doc.text(left + plot - 196, y0 + 13, "target", svg::Font::sized(10));
  doc.circle(left + plot - 135, y0 + 9, 4, svg::Paint::filled("#e45756"));
  doc.text(left + plot - 127, y0 + 13, "achieved / measured", svg::Font::sized(10));

  // Panel 2: each expert-parallel rank's load over the mean rank load, and the ragged buffer.
  const double y1 = top + panel + gap;
  const int ep = layers[0].ep;
  const double buffer = layers[0].buffer_factor;
  double r_max = buffer;
  for (const LoadStats& s : layers) r_max = std::max(r_max, s.rank_max_over_mean);
  r_max = std::ceil(r_max * 1.1 * 4) / 4;
  axes(y1, r_max, fmt::format("rank load / mean (ep {})", ep), 0);
  auto y_rank = [&](double v) { return y1 + panel - panel * v / r_max; };
  const char* colours[] = {"#4c78a8", "#f58518", "#54a24b", "#b279a2", "#9d755d", "#72b7b2"};
  for (std::size_t l = 0; l < layers.size(); ++l) {
    const LoadStats& s = layers[l];
    double mean = s.ep > 0 ? static_cast<double>(s.assignments) / s.ep : 0;
    double bar = step * 0.8 / std::max(1, s.ep);
    for (int r = 0; r < s.ep && mean > 0; ++r) {
      double v = static_cast<double>(s.rank_loads[r]) / mean;
      doc.rect(x_of(l) - step * 0.4 + bar * r, y_rank(v), bar, y1 + panel - y_rank(v),
               svg::Paint::filled(colours[r % 6]),
               fmt::format("layer {}, rank {}: {} assignments, {:.3f} x mean", l, r,
                           s.rank_loads[r], v));
    }
  }
  doc.line(left, y_rank(buffer), left + plot, y_rank(buffer),
           svg::Paint::stroked("#e45756", 1.5).with_dash("6 3"),
           fmt::format("ragged buffer: {} x mean rank load", buffer));
  doc.text(left + plot - 4, y_rank(buffer) - 4, fmt::format("buffer {} x mean", buffer),
           svg::Font::sized(10).with_anchor(svg::Anchor::kEnd).with_fill("#e45756"));
  return doc.str();
}

}  // namespace rtb::payload
