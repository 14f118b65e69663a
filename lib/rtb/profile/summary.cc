#include "rtb/profile/summary.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <unordered_map>
#include <utility>

#include "rtb/base/enum_names.h"
#include "rtb/base/error.h"

namespace rtb::profile {

namespace {

// The stats and lines the summary reads (names as jax.profiler / XProf write them).
constexpr std::string_view kStepNumStat = "step_num";
constexpr std::string_view kHloModuleStat = "hlo_module";
constexpr std::string_view kHloOpStat = "hlo_op";
constexpr std::string_view kXlaOpsLine = "XLA Ops";
constexpr std::string_view kXlaModulesLine = "XLA Modules";
constexpr std::string_view kStepsLine = "Steps";
constexpr std::string_view kStreamLinePrefix = "Stream";

bool contains(std::string_view text, std::string_view word) {
  return text.find(word) != std::string_view::npos;
}

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

// `name` in lower case with '_' as '-'.
std::string normalized(std::string_view name) {
  std::string out(name);
  for (char& c : out) {
    if (c == '_') c = '-';
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

bool any_of_words(std::string_view name, std::initializer_list<std::string_view> words) {
  return std::any_of(words.begin(), words.end(), [&](auto word) { return contains(name, word); });
}

bool is_device(const Plane& plane) { return starts_with(plane.name, "/device:"); }

// A module execution's module name: `jit_step(123)` (XProf's XLA Modules line) is `jit_step`.
std::string_view module_of(std::string_view name) {
  std::size_t paren = name.find('(');
  return paren == std::string_view::npos ? name : name.substr(0, paren);
}

std::string_view event_name(const Plane& plane, const Event& event) {
  const EventMetadata* metadata = plane.event(event.metadata_id);
  if (metadata == nullptr) return {};
  return metadata->display_name.empty() ? std::string_view(metadata->name)
                                        : std::string_view(metadata->display_name);
}

// The string value of stat `id` among `stats` ("" without one).
std::string_view stat_of(const XSpaceFile& file, const Plane& plane, const Stats& stats,
                         std::int64_t id) {
  Stat stat;
  if (id < 0 || !find_stat(file.bytes(), stats, id, stat)) return {};
  return plane.stat_string(stat);
}

// The integer value of stat `id` among `stats`; `found` says whether it has one.
std::int64_t int_stat_of(const XSpaceFile& file, const Stats& stats, std::int64_t id, bool& found) {
  Stat stat;
  found = false;
  if (id < 0 || !find_stat(file.bytes(), stats, id, stat)) return 0;
  if (stat.kind == Stat::Kind::kInt64) {
    found = true;
    return stat.int_value;
  }
  if (stat.kind == Stat::Kind::kUint64) {
    found = true;
    return static_cast<std::int64_t>(stat.uint_value);
  }
  return 0;
}

const Line* line_named(const Plane& plane, std::string_view name) {
  for (const Line& line : plane.lines) {
    if (line.name == name) return &line;
  }
  return nullptr;
}

struct Window {
  std::int64_t number = 0;
  std::int64_t start = 0;
  std::int64_t end = 0;
};

std::vector<Window> steps_line_windows(const Capture& capture, const XSpaceFile& file,
                                       const Plane& plane, const Line& line) {
  std::vector<Window> windows;
  EventCursor cursor = capture.events(file, line);
  Event event;
  while (cursor.next(event)) {
    std::string_view name = event_name(plane, event);
    std::int64_t number = static_cast<std::int64_t>(windows.size());
    std::from_chars(name.data(), name.data() + name.size(), number);
    windows.push_back({number, event.start_ps, event.start_ps + event.duration_ps});
  }
  return windows;
}

// Step annotations on the file's host planes: per step_num, the span of its events.
std::vector<Window> annotation_windows(const Capture& capture, const XSpaceFile& file) {
  std::map<std::int64_t, Window> by_step;
  for (const Plane& plane : file.planes()) {
    if (is_device(plane)) continue;
    std::int64_t id = plane.stat_id(kStepNumStat);
    if (id < 0) continue;
    for (const Line& line : plane.lines) {
      EventCursor cursor = capture.events(file, line);
      Event event;
      while (cursor.next(event)) {
        bool found = false;
        std::int64_t step = int_stat_of(file, event.stats, id, found);
        if (!found) continue;
        std::int64_t end = event.start_ps + event.duration_ps;
        auto [it, inserted] = by_step.try_emplace(step, Window{step, event.start_ps, end});
        if (!inserted) {
          it->second.start = std::min(it->second.start, event.start_ps);
          it->second.end = std::max(it->second.end, end);
        }
      }
    }
  }
  std::vector<Window> windows;
  for (const auto& [step, window] : by_step) windows.push_back(window);
  return windows;
}

// Executions (start, end) by module, in time order.
using Executions = std::map<std::string, std::vector<std::pair<std::int64_t, std::int64_t>>>;

Executions module_executions(const Capture& capture, const XSpaceFile& file, const Plane& plane,
                             const std::vector<const Line*>& lines) {
  Executions executions;
  if (const Line* modules = line_named(plane, kXlaModulesLine)) {
    EventCursor cursor = capture.events(file, *modules);
    Event event;
    while (cursor.next(event)) {
      executions[std::string(module_of(event_name(plane, event)))].emplace_back(
          event.start_ps, event.start_ps + event.duration_ps);
    }
    return executions;
  }
  // Runs of op events of one module in start order.
  std::int64_t id = plane.stat_id(kHloModuleStat);
  if (id < 0) return executions;
  std::string current;
  walk_lines(
      capture, file, lines,
      [&](const Event& event, std::size_t) {
        std::string_view module = stat_of(file, plane, event.stats, id);
        if (module.empty()) return;
        std::int64_t end = event.start_ps + event.duration_ps;
        if (module != current) {
          current = module;
          executions[current].emplace_back(event.start_ps, end);
        } else {
          auto& last = executions[current].back();
          last.second = std::max(last.second, end);
        }
      },
      [](const Event&, std::size_t, std::int64_t) {});
  return executions;
}

}  // namespace

const char* category_name(Category category) {
  return enum_name<Category::kCopy>(category, {"matmul", "fusion", "collective", "copy"});
}

const char* category_meaning(Category category) {
  return enum_name<Category::kCopy>(
      category, {"matmuls and convolutions (dot, gemm, cuBLAS/cuDNN/CUTLASS kernels)",
                 "fusions and other compute", "collectives (all-reduce, all-gather, ...)",
                 "copies and host transfers (copy, memcpy, infeed/outfeed, send/recv)"});
}

const char* step_source_name(StepSource source) {
  return enum_name<StepSource::kModuleExecutions>(
      source, {"steps line", "step annotations", "module executions"});
}

Category category_of(std::string_view raw) {
  std::string name = normalized(raw);
  if (any_of_words(name, {"all-reduce", "all-gather", "reduce-scatter", "collective-permute",
                          "all-to-all", "collective-broadcast", "nccl"})) {
    return Category::kCollective;
  }
  if (starts_with(name, "copy") || starts_with(name, "memcpy") || starts_with(name, "memset") ||
      any_of_words(name, {"infeed", "outfeed", "host"}) || starts_with(name, "send") ||
      starts_with(name, "recv")) {
    return Category::kCopy;
  }
  if (any_of_words(name, {"dot", "gemm", "convolution", "cublas", "cudnn", "cutlass", "matmul"})) {
    return Category::kMatmul;
  }
  return Category::kFusion;
}

std::vector<const Line*> op_lines(const Plane& plane) {
  std::vector<const Line*> lines;
  if (const Line* ops = line_named(plane, kXlaOpsLine)) {
    for (const Line& line : plane.lines) {
      if (line.name == kXlaOpsLine) lines.push_back(&line);
    }
    (void)ops;
    return lines;
  }
  for (const Line& line : plane.lines) {
    if (starts_with(line.name, kStreamLinePrefix)) lines.push_back(&line);
  }
  if (!lines.empty()) return lines;
  for (const Line& line : plane.lines) {
    if (line.name != kXlaModulesLine && line.name != kStepsLine &&
        !contains(line.name, "TensorFlow") && !contains(line.name, "Framework") &&
        !contains(line.name, "Source")) {
      lines.push_back(&line);
    }
  }
  return lines;
}

namespace detail {

void advance(LineWalk& walk, const Line& line, const std::string& file) {
  std::int64_t previous = walk.has_next ? walk.next.start_ps : INT64_MIN;
  walk.has_next = walk.cursor.next(walk.next);
  if (walk.has_next && walk.next.start_ps < previous) {
    fail_at(file, 0,
            "XSpace: line '{}': the event at byte {} starts before the one stored before it "
            "(events of a line must be in time order)",
            line.name, walk.next.offset);
  }
}

}  // namespace detail

Summary summarize(const Capture& capture, const SummaryOptions& options) {
  const std::size_t max_op_step_figures = options.max_op_step_figures;
  Summary summary;
  summary.bytes = capture.bytes();
  for (const auto& file : capture.files()) {
    summary.files.push_back(file->name());
    summary.planes += file->planes().size();
    std::vector<Window> annotations;
    bool annotations_read = false;
    for (const Plane& plane : file->planes()) {
      if (!is_device(plane)) continue;
      Device device;
      device.plane = plane.name;
      device.file = file->name();
      std::vector<const Line*> lines = op_lines(plane);
      for (const Line* line : lines) device.op_lines.push_back(line->name);

      std::vector<Window> windows;
      if (const Line* steps = line_named(plane, kStepsLine)) {
        device.step_source = StepSource::kStepsLine;
        windows = steps_line_windows(capture, *file, plane, *steps);
      }
      if (windows.empty()) {
        if (!annotations_read) annotations = annotation_windows(capture, *file);
        annotations_read = true;
        device.step_source = StepSource::kStepAnnotations;
        windows = annotations;
      }
      if (windows.empty()) {
        device.step_source = StepSource::kModuleExecutions;
        Executions executions = module_executions(capture, *file, plane, lines);
        std::int64_t most = -1;
        for (const auto& [module, runs] : executions) {
          std::int64_t total = 0;
          for (const auto& [start, end] : runs) total += end - start;
          if (total > most) {
            most = total;
            device.step_module = module;
          }
        }
        if (most >= 0) {
          const auto& runs = executions[device.step_module];
          for (std::size_t i = 0; i < runs.size(); ++i) {
            std::int64_t end = i + 1 < runs.size() ? runs[i + 1].first : runs[i].second;
            windows.push_back({static_cast<std::int64_t>(i), runs[i].first, end});
          }
        }
      }
      if (windows.size() > max_op_step_figures) {
        fail_at(file->name(), 0, "XSpace: plane '{}': {} steps, over the {} figures kept",
                plane.name, windows.size(), max_op_step_figures);
      }
      std::sort(windows.begin(), windows.end(),
                [](const Window& a, const Window& b) { return a.start < b.start; });
      for (const Window& window : windows) {
        Step step;
        step.number = window.number;
        step.start_ps = window.start;
        step.end_ps = window.end;
        device.steps.push_back(step);
      }

      // The step an instant falls in (steps may not overlap: a later one cuts an earlier one).
      for (std::size_t i = 0; i + 1 < device.steps.size(); ++i) {
        device.steps[i].end_ps = std::min(device.steps[i].end_ps, device.steps[i + 1].start_ps);
      }
      auto step_at = [&](std::int64_t time) -> Step* {
        auto it = std::upper_bound(device.steps.begin(), device.steps.end(), time,
                                   [](std::int64_t t, const Step& s) { return t < s.start_ps; });
        if (it == device.steps.begin()) return nullptr;
        --it;
        return time < it->end_ps ? &*it : nullptr;
      };

      std::unordered_map<std::int64_t, std::size_t> op_of_metadata;
      std::unordered_map<std::string, std::size_t> op_of_name;  // hlo_op_names
      std::int64_t hlo_op_id = options.hlo_op_names ? plane.stat_id(kHloOpStat) : -1;
      std::int64_t covered_until = INT64_MIN;
      std::size_t steps = device.steps.size();
      walk_lines(
          capture, *file, lines,
          [&](const Event& event, std::size_t) {
            ++device.events;
            // Busy: the part of [start, end) not covered yet, clipped to each step it crosses.
            std::int64_t from = std::max(event.start_ps, covered_until);
            std::int64_t to = event.start_ps + event.duration_ps;
            if (to <= from) return;
            covered_until = to;
            auto it =
                std::upper_bound(device.steps.begin(), device.steps.end(), from,
                                 [](std::int64_t t, const Step& s) { return t < s.start_ps; });
            if (it != device.steps.begin()) --it;
            for (; it != device.steps.end() && it->start_ps < to; ++it) {
              std::int64_t a = std::max(from, it->start_ps);
              std::int64_t b = std::min(to, it->end_ps);
              if (b > a) it->busy_ps += b - a;
            }
          },
          [&](const Event& event, std::size_t, std::int64_t self_ps) {
            std::string_view hlo_op = stat_of(*file, plane, event.stats, hlo_op_id);
            std::size_t index = device.ops.size();
            bool inserted = false;
            if (hlo_op.empty()) {
              auto [entry, added] = op_of_metadata.try_emplace(event.metadata_id, index);
              index = entry->second;
              inserted = added;
            } else {
              auto [entry, added] = op_of_name.try_emplace(std::string(hlo_op), index);
              index = entry->second;
              inserted = added;
            }
            if (inserted) {
              if ((device.ops.size() + 1) * std::max<std::size_t>(steps, 1) > max_op_step_figures) {
                fail_at(file->name(), 0,
                        "XSpace: plane '{}': {} steps and more than {} ops: over the {} figures "
                        "per op and step kept",
                        plane.name, steps, device.ops.size(), max_op_step_figures);
              }
              OpTime op;
              op.name =
                  hlo_op.empty() ? std::string(event_name(plane, event)) : std::string(hlo_op);
              if (op.name.empty()) op.name = fmt::format("#{}", event.metadata_id);
              op.category = category_of(op.name);
              op.step_self_ps.assign(steps, 0);
              device.ops.push_back(std::move(op));
            }
            OpTime& op = device.ops[index];
            Step* step = step_at(event.start_ps);
            if (step == nullptr) {
              device.outside_ps += self_ps;
              return;
            }
            ++step->events;
            step->category_ps[static_cast<std::size_t>(op.category)] += self_ps;
            ++op.count;
            op.self_ps += self_ps;
            op.step_self_ps[static_cast<std::size_t>(step - device.steps.data())] += self_ps;
          });
      std::erase_if(device.ops, [](const OpTime& op) { return op.count == 0; });
      std::sort(device.ops.begin(), device.ops.end(), [](const OpTime& a, const OpTime& b) {
        return a.self_ps != b.self_ps ? a.self_ps > b.self_ps : a.name < b.name;
      });
      summary.devices.push_back(std::move(device));
    }
  }
  return summary;
}

}  // namespace rtb::profile
