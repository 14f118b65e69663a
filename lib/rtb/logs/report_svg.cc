#include "rtb/logs/report_svg.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "rtb/base/error.h"
#include "rtb/base/svg.h"
#include "rtb/logs/report_format.h"

namespace rtb::logs::report {
using steplog::RunLog;

// ---- SVG ---------------------------------------------------------------------------------------

namespace {

double nice_tick(double span) {
  if (!(span > 0)) return 1.0;
  double raw = span / 6.0;
  double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (double factor : {1.0, 2.0, 5.0, 10.0}) {
    if (raw <= factor * magnitude) return factor * magnitude;
  }
  return 10.0 * magnitude;
}

// The record to draw: `step` when given; else the last one among the steps the figures use, else
// the last one after the first (compiling) step, else the last one.
const steplog::StepTiming* pick_timing(const RunLog& log, const RunAnalysis& run,
                                       std::optional<std::int64_t> step) {
  if (step) {
    for (const steplog::StepTiming& timing : log.timings) {
      if (timing.step == *step) return &timing;
    }
    return nullptr;
  }
  auto last_where = [&](auto&& keep) -> const steplog::StepTiming* {
    for (auto it = log.timings.rbegin(); it != log.timings.rend(); ++it) {
      if (keep(*it)) return &*it;
    }
    return nullptr;
  };
  const steplog::StepTiming* chosen = last_where([&](const steplog::StepTiming& timing) {
    return std::find(run.steps_used.begin(), run.steps_used.end(), timing.step) !=
           run.steps_used.end();
  });
  if (chosen == nullptr && !run.steps_logged.empty()) {
    chosen = last_where(
        [&](const steplog::StepTiming& timing) { return timing.step > run.steps_logged.front(); });
  }
  if (chosen == nullptr && !log.timings.empty()) chosen = &log.timings.back();
  return chosen;
}

}  // namespace

std::string timeline_svg(const std::vector<RunLog>& logs, const Report& report,
                         std::optional<std::int64_t> step) {
  if (logs.size() != report.runs.size()) fail("timeline_svg: runs and logs differ in number");
  struct Lane {
    std::string name;
    std::optional<steplog::StepTimeline> line;
    std::string note;
  };
  std::vector<Lane> lanes;
  double span = 0;
  for (std::size_t i = 0; i < logs.size(); ++i) {
    Lane lane;
    lane.name = report.runs[i].name;
    const steplog::StepTiming* timing = pick_timing(logs[i], report.runs[i], step);
    if (timing == nullptr) {
      lane.note = step ? fmt::format("no TRAINER_STEP_TIMING for step {}", *step)
                       : "no TRAINER_STEP_TIMING lines";
    } else {
      lane.line = steplog::step_timeline(*timing);
      span = std::max(span, lane.line->span_end);
      if (lane.line->ready_known == 0 && !lane.line->mb.empty()) {
        lane.note = "ready times not published: device time unknown";
      }
    }
    lanes.push_back(std::move(lane));
  }
  if (span <= 0) span = 1.0;

  const double left = 220, right = 30, top = 58, lane_height = 58, plot_width = 760;
  const double height = top + lane_height * static_cast<double>(lanes.size()) + 70;
  svg::Document doc(left + plot_width + right, height);
  doc.set_title("bench-report: micro-batch timeline");
  doc.set_background("#ffffff");
  auto x = [&](double t) { return left + plot_width * std::clamp(t / span, 0.0, 1.0); };
  auto width = [&](double a, double b) { return std::max(0.5, x(b) - x(a)); };

  doc.text(10, 20,
           step ? fmt::format("Trainer timeline of step {} (TRAINER_STEP_TIMING)", *step)
                : std::string("Trainer timeline of each run's last selected step "
                              "(TRAINER_STEP_TIMING)"),
           svg::Font::sized(14).with_bold());
  // Legend.
  struct Key {
    const char* label;
    const char* colour;
  };
  const Key keys[] = {{"dispatch (host)", "#9d9d9d"},
                      {"device time", "#4c78a8"},
                      {"idle", "#e45756"},
                      {"update", "#8e6bb8"},
                      {"weight-sync wait", "#f2a541"},
                      {"weight sync (prepare)", "#c9a227"},
                      {"ready unknown", "#e8e8e8"}};
  double legend_x = 10;
  for (const Key& key : keys) {
    doc.rect(legend_x, 30, 12, 10, svg::Paint::filled(key.colour).with_stroke("#666", 0.5));
    doc.text(legend_x + 16, 39, key.label, svg::Font::sized(11));
    legend_x += 30 + 6.5 * static_cast<double>(std::string_view(key.label).size());
  }

  for (std::size_t i = 0; i < lanes.size(); ++i) {
    const Lane& lane = lanes[i];
    double y = top + lane_height * static_cast<double>(i);
    doc.line(10, y + lane_height - 4, left + plot_width, y + lane_height - 4,
             svg::Paint::stroked("#dddddd"));
    doc.text(10, y + 22, lane.name, svg::Font::sized(12).with_bold());
    if (lane.line) {
      doc.text(10, y + 38, fmt::format("step {}", lane.line->step), svg::Font::sized(11));
    }
    if (!lane.note.empty()) {
      doc.text(left, y + 52, lane.note, svg::Font::sized(10).with_fill("#a33"));
    }
    if (!lane.line) continue;
    const steplog::StepTimeline& line = *lane.line;
    const double dispatch_y = y + 6, dispatch_h = 7, device_y = y + 16, device_h = 20;
    std::optional<double> previous_ready;
    for (std::size_t m = 0; m < line.mb.size(); ++m) {
      const steplog::MicroBatchSpan& mb = line.mb[m];
      if (mb.at.dispatch_begin && mb.at.dispatch_end) {
        doc.rect(x(*mb.at.dispatch_begin), dispatch_y,
                 width(*mb.at.dispatch_begin, *mb.at.dispatch_end), dispatch_h,
                 svg::Paint::filled("#9d9d9d"),
                 fmt::format("micro-batch {} dispatch: {} s", mb.index + 1,
                             seconds(*mb.at.dispatch_end - *mb.at.dispatch_begin)));
      }
      if (mb.idle_before_s && *mb.idle_before_s > 0 && previous_ready) {
        doc.rect(x(*previous_ready), device_y, width(*previous_ready, *mb.at.dispatch_begin),
                 device_h, svg::Paint::filled("#e45756"),
                 fmt::format("idle before micro-batch {}: {} s", mb.index + 1,
                             seconds(*mb.idle_before_s)));
      }
      if (mb.device_s && mb.at.ready) {
        double start = *mb.at.ready - *mb.device_s;
        doc.rect(
            x(start), device_y, width(start, *mb.at.ready), device_h,
            svg::Paint::filled(m % 2 == 0 ? "#4c78a8" : "#72a0cf").with_stroke("#ffffff", 0.5),
            fmt::format("micro-batch {}: {} s on the device", mb.index + 1, seconds(*mb.device_s)));
      } else if (mb.at.dispatch_end) {
        // Unknown device time: shade from this dispatch to the next event.
        double end = m + 1 < line.mb.size() && line.mb[m + 1].at.dispatch_begin
                         ? *line.mb[m + 1].at.dispatch_begin
                     : line.update && line.update->dispatch_begin ? *line.update->dispatch_begin
                                                                  : *mb.at.dispatch_end;
        doc.rect(x(*mb.at.dispatch_end), device_y, width(*mb.at.dispatch_end, end), device_h,
                 svg::Paint::filled("#e8e8e8").with_stroke("#bbbbbb", 0.5),
                 fmt::format("micro-batch {}: ready time not published", mb.index + 1));
      }
      previous_ready = mb.at.ready;
    }
    if (line.update) {
      const steplog::TimelineEvent& u = *line.update;
      if (u.dispatch_begin && u.dispatch_end) {
        doc.rect(x(*u.dispatch_begin), dispatch_y, width(*u.dispatch_begin, *u.dispatch_end),
                 dispatch_h, svg::Paint::filled("#9d9d9d"), "update dispatch");
      }
      if (line.update_idle_before_s && *line.update_idle_before_s > 0 && previous_ready &&
          u.dispatch_begin) {
        doc.rect(x(*previous_ready), device_y, width(*previous_ready, *u.dispatch_begin), device_h,
                 svg::Paint::filled("#e45756"),
                 fmt::format("idle before the update: {} s", seconds(*line.update_idle_before_s)));
      }
      if (u.ready && line.update_s) {
        double start = *u.ready - *line.update_s;
        doc.rect(x(start), device_y, width(start, *u.ready), device_h,
                 svg::Paint::filled("#8e6bb8"),
                 fmt::format("update: {} s on the device", seconds(*line.update_s)));
      }
    }
    if (line.prepare && line.prepare->dispatch_begin) {
      double recv = *line.prepare->dispatch_begin;
      if (line.sync_wait_s && *line.sync_wait_s > 0 && line.update && line.update->ready) {
        doc.rect(
            x(*line.update->ready), device_y + device_h + 3, width(*line.update->ready, recv), 6,
            svg::Paint::filled("#f2a541"),
            fmt::format("wait for the previous weight sync: {} s", seconds(*line.sync_wait_s)));
      }
      if (line.prepare->ready) {
        doc.rect(x(recv), device_y + device_h + 3, width(recv, *line.prepare->ready), 6,
                 svg::Paint::filled("#c9a227"), "prepare_weight_sync");
      }
    }
  }

  // Time axis.
  double axis_y = top + lane_height * static_cast<double>(lanes.size()) + 6;
  doc.line(left, axis_y, left + plot_width, axis_y, svg::Paint::stroked("#444444"));
  double tick = nice_tick(span);
  for (double t = 0; t <= span * 1.0001; t += tick) {
    doc.line(x(t), axis_y, x(t), axis_y + 5, svg::Paint::stroked("#444444"));
    doc.text(x(t), axis_y + 18, fmt::format("{:g}", t),
             svg::Font::sized(10).with_anchor(svg::Anchor::kMiddle));
  }
  doc.text(left + plot_width / 2, axis_y + 36,
           "seconds after the step's first dispatch (trainer clock)",
           svg::Font::sized(11).with_anchor(svg::Anchor::kMiddle));
  return doc.str();
}

}  // namespace rtb::logs::report
