#include "rtb/profile/report.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <vector>

#include "rtb/base/enum_names.h"
#include "rtb/base/error.h"
#include "rtb/base/json.h"
#include "rtb/base/svg.h"
#include "rtb/base/text.h"

namespace rtb::profile {

namespace {

constexpr const char* kReportSchema = "rtb.profile-report/2";
constexpr std::array<Category, kCategories> kAllCategories = {
    Category::kMatmul, Category::kFusion, Category::kCollective, Category::kCopy};

std::string step_source_text(const Device& device) {
  switch (device.step_source) {
    case StepSource::kStepsLine:
      return "events of the device's Steps line";
    case StepSource::kStepAnnotations:
      return "the driver's step annotations (host events with a step_num stat)";
    case StepSource::kModuleExecutions:
      break;
  }
  if (device.step_module.empty()) return "none found (no steps line, annotations or modules)";
  return fmt::format(
      "executions of {}, the module with the most device time (no step annotations; a step "
      "runs to the next execution's start)",
      device.step_module);
}

double mean_of(const std::vector<std::int64_t>& values) {
  if (values.empty()) return 0;
  double total = 0;
  for (auto v : values) total += static_cast<double>(v);
  return total / static_cast<double>(values.size());
}

std::string ms_of(double ps) { return fmt::format("{:.3f}", ps / 1e9); }

// A step's figures by column, for the table and its mean.
std::vector<std::int64_t> columns_of(const Step& step) {
  std::vector<std::int64_t> columns = {step.length_ps(), step.busy_ps, step.idle_ps()};
  for (Category c : kAllCategories)
    columns.push_back(step.category_ps[static_cast<std::size_t>(c)]);
  return columns;
}

const char* colour_of(Category category) {
  return enum_name<Category::kCopy>(category, {"#4c78a8", "#72b7b2", "#e45756", "#f58518"});
}

}  // namespace

std::string ms(std::int64_t ps) { return ms_of(static_cast<double>(ps)); }

namespace {

const char* category_source_meaning(CategorySource source) {
  return enum_name<CategorySource::kOpName>(
      source, {"from the capture's hlo_category stat (XProf's category of the HLO op)",
               "from the capture's hlo_op stat (the name of the HLO instruction the kernel ran)",
               "from the op's name (no category stat in the capture)"});
}

// "from the capture's hlo_op stat (...): 6 ops; from the op's name (...): 1 op".
std::string category_sources_text(const Device& device) {
  std::vector<std::string> parts;
  for (std::size_t i = 0; i < kCategorySources; ++i) {
    std::size_t ops = device.category_sources[i];
    if (ops == 0) continue;
    parts.push_back(fmt::format("{}: {} op{}",
                                category_source_meaning(static_cast<CategorySource>(i)), ops,
                                ops == 1 ? "" : "s"));
  }
  if (parts.empty()) return "no ops";
  return fmt::format("{}", fmt::join(parts, "; "));
}

}  // namespace

std::string format_text(const Summary& summary, const ReportOptions& options,
                        const Overlap* overlap) {
  std::string out;
  out += fmt::format("capture: {} ({} uncompressed, {} planes, {} device(s))\n",
                     fmt::join(summary.files, ", "),
                     human_bytes(static_cast<std::int64_t>(summary.bytes)), summary.planes,
                     summary.devices.size());
  if (summary.devices.empty()) out += "no device plane (/device:...) in the capture\n";
  for (const Device& device : summary.devices) {
    out += fmt::format("\n{} ({})\n", device.plane, device.file);
    out += fmt::format("  op lines: {}\n", fmt::join(device.op_lines, ", "));
    out += fmt::format("  categories: {}\n", category_sources_text(device));
    out += fmt::format("  steps: {} from {}\n", device.steps.size(), step_source_text(device));
    out += fmt::format("  op events read: {}; self time outside every step: {} ms\n", device.events,
                       ms(device.outside_ps));
    if (device.steps.empty()) continue;
    out +=
        "  per step, in ms: length (start to end), busy (time any op ran, streams at once counted "
        "once),\n  idle (length - busy), and per category the self time of its ops (streams at "
        "once each counted):\n";
    out += fmt::format("  {:>8} {:>10} {:>10} {:>10}", "step", "length", "busy", "idle");
    for (Category c : kAllCategories) out += fmt::format(" {:>10}", category_name(c));
    out += fmt::format(" {:>8}\n", "events");
    std::vector<std::vector<std::int64_t>> by_column(3 + kCategories);
    for (const Step& step : device.steps) {
      auto columns = columns_of(step);
      out += fmt::format("  {:>8}", step.number);
      for (std::size_t i = 0; i < columns.size(); ++i) {
        out += fmt::format(" {:>10}", ms(columns[i]));
        by_column[i].push_back(columns[i]);
      }
      out += fmt::format(" {:>8}\n", step.events);
    }
    out += fmt::format("  {:>8}", "mean");
    for (const auto& column : by_column) out += fmt::format(" {:>10}", ms_of(mean_of(column)));
    out += "\n";
    double steps = static_cast<double>(device.steps.size());
    double busy = mean_of(by_column[1]);
    std::size_t shown = std::min(options.top, device.ops.size());
    out += fmt::format(
        "  top {} of {} ops by self time (an op's own time, less ops nested in it), mean per "
        "step:\n",
        shown, device.ops.size());
    out += fmt::format("  {:>10} {:>8} {:>8}  {:<10}  {}\n", "ms/step", "% busy", "n/step",
                       "category", "op");
    for (std::size_t i = 0; i < shown; ++i) {
      const OpTime& op = device.ops[i];
      double per_step = static_cast<double>(op.self_ps) / steps;
      out +=
          fmt::format("  {:>10} {:>7.1f}% {:>8.1f}  {:<10}  {}\n", ms_of(per_step),
                      busy > 0 ? 100.0 * per_step / busy : 0.0,
                      static_cast<double>(op.count) / steps, category_name(op.category), op.name);
    }
  }
  if (overlap != nullptr) out += format_overlap_text(*overlap);
  return out;
}

std::string format_json(const Summary& summary, const ReportOptions& options,
                        const Overlap* overlap) {
  json::Writer j;
  j.begin_object();
  j.field("schema", kReportSchema);
  j.list("files", summary.files);
  j.field("bytes", summary.bytes);
  j.field("planes", static_cast<std::uint64_t>(summary.planes));
  j.key("devices").begin_array();
  for (const Device& device : summary.devices) {
    j.begin_object();
    j.field("plane", device.plane);
    j.field("file", device.file);
    j.field("step_source", step_source_name(device.step_source));
    j.field("step_module", json::null_if_empty(device.step_module));
    j.list("op_lines", device.op_lines);
    j.key("category_sources").begin_object(json::Writer::Layout::kOneLine);
    for (std::size_t i = 0; i < kCategorySources; ++i) {
      j.field(category_source_name(static_cast<CategorySource>(i)),
              static_cast<std::uint64_t>(device.category_sources[i]));
    }
    j.end_object();
    j.field("events", device.events);
    j.field("outside_ps", device.outside_ps);
    j.key("steps").begin_array();
    for (const Step& step : device.steps) {
      j.begin_object(json::Writer::Layout::kOneLine);
      j.field("number", step.number);
      j.field("start_ps", step.start_ps);
      j.field("length_ps", step.length_ps());
      j.field("busy_ps", step.busy_ps);
      j.field("idle_ps", step.idle_ps());
      j.field("events", step.events);
      j.wrap().key("category_ps").begin_object();
      for (Category c : kAllCategories) {
        j.field(category_name(c), step.category_ps[static_cast<std::size_t>(c)]);
      }
      j.end_object();
      j.end_object();
    }
    j.end_array();
    j.field("ops_total", static_cast<std::uint64_t>(device.ops.size()));
    j.key("ops").begin_array();
    std::size_t shown = std::min(options.top, device.ops.size());
    for (std::size_t i = 0; i < shown; ++i) {
      const OpTime& op = device.ops[i];
      j.begin_object(json::Writer::Layout::kOneLine);
      j.field("name", op.name);
      j.field("category", category_name(op.category));
      j.field("category_source", category_source_name(op.category_source));
      j.field("count", op.count);
      j.field("self_ps", op.self_ps);
      j.wrap().list("step_self_ps", op.step_self_ps);
      j.end_object();
    }
    j.end_array();
    j.end_object();
  }
  j.end_array();
  j.key("overlap");
  if (overlap != nullptr) {
    write_overlap_json(j, *overlap);
  } else {
    j.null();
  }
  j.end_object();
  return std::move(j).str();
}

std::string render_timeline_svg(const Capture& capture, const Summary& summary,
                                std::optional<std::size_t> step_index) {
  if (summary.devices.empty() || summary.devices[0].steps.empty()) {
    fail("--svg: the capture has no device with steps to draw");
  }
  const Device& device = summary.devices[0];
  std::size_t index = 0;
  if (step_index) {
    if (*step_index >= device.steps.size()) {
      fail("--svg-step {}: the device has {} steps (0..{})", *step_index, device.steps.size(),
           device.steps.size() - 1);
    }
    index = *step_index;
  } else {
    for (std::size_t i = 1; i < device.steps.size(); ++i) {
      if (device.steps[i].length_ps() > device.steps[index].length_ps()) index = i;
    }
  }
  const Step& step = device.steps[index];
  const XSpaceFile* file = nullptr;
  const Plane* plane = nullptr;
  for (const auto& f : capture.files()) {
    for (const Plane& p : f->planes()) {
      if (f->name() == device.file && p.name == device.plane && plane == nullptr) {
        file = f.get();
        plane = &p;
      }
    }
  }
  if (plane == nullptr) fail("--svg: the device's plane is not in the capture");
  std::vector<const Line*> lines = op_lines(*plane);

  constexpr double kLeft = 220, kWidth = 1000, kRow = 22, kTop = 50;
  double height = kTop + kRow * static_cast<double>(lines.size()) + 60;
  svg::Document doc(kLeft + kWidth + 20, height);
  doc.set_background("white");
  std::string title =
      fmt::format("{} step {}: {} ms long, {} ms busy, {} ms idle", device.plane, step.number,
                  ms(step.length_ps()), ms(step.busy_ps), ms(step.idle_ps()));
  doc.set_title(title);
  doc.text(10, 20, title, svg::Font::sized(14).with_bold());
  double scale = kWidth / static_cast<double>(std::max<std::int64_t>(step.length_ps(), 1));
  for (std::size_t i = 0; i < lines.size(); ++i) {
    double y = kTop + kRow * static_cast<double>(i);
    doc.text(kLeft - 6, y + 15, lines[i]->name,
             svg::Font::sized(11).with_anchor(svg::Anchor::kEnd));
    doc.rect(kLeft, y, kWidth, kRow - 2, svg::Paint::filled("#f2f2f2"));
  }
  std::size_t boxes = 0;
  constexpr std::size_t kMaxBoxes = 20000;  // a readable file, whatever the step holds
  walk_lines(
      capture, *file, lines,
      [&](const Event& event, std::size_t line) {
        std::int64_t start = std::max(event.start_ps, step.start_ps);
        std::int64_t end = std::min(event.start_ps + event.duration_ps, step.end_ps);
        if (end <= start || boxes >= kMaxBoxes) return;
        ++boxes;
        const EventMetadata* metadata = plane->event(event.metadata_id);
        std::string name = metadata != nullptr ? metadata->name : "?";
        double x = kLeft + static_cast<double>(start - step.start_ps) * scale;
        double w = std::max(0.5, static_cast<double>(end - start) * scale);
        doc.rect(x, kTop + kRow * static_cast<double>(line), w, kRow - 2,
                 svg::Paint::filled(colour_of(category_of(name))),
                 fmt::format("{} ({} ms)", name, ms(event.duration_ps)));
      },
      [](const Event&, std::size_t, std::int64_t) {});
  double legend_y = kTop + kRow * static_cast<double>(lines.size()) + 25;
  double x = kLeft;
  for (Category c : kAllCategories) {
    doc.rect(x, legend_y - 10, 12, 12, svg::Paint::filled(colour_of(c)));
    doc.text(x + 16, legend_y, category_name(c), svg::Font::sized(11));
    x += 110;
  }
  doc.text(kLeft + kWidth, legend_y, fmt::format("0 .. {} ms", ms(step.length_ps())),
           svg::Font::sized(11).with_anchor(svg::Anchor::kEnd));
  return doc.str();
}

}  // namespace rtb::profile
