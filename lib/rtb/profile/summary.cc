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
constexpr std::string_view kHloCategoryStat = "hlo_category";
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

// The integer value of `stat`; `found` says whether it has one.
std::int64_t int_stat_of(const Stat& stat, bool& found) {
  found = false;
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
      EventCursor cursor = capture.events(file, line, {id, -1, -1});
      Event event;
      while (cursor.next(event)) {
        bool found = false;
        std::int64_t step = int_stat_of(event.wanted[0], found);
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
        std::string_view module = plane.stat_string(event.wanted[0]);
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
      [](const Event&, std::size_t, std::int64_t) {}, {id, -1, -1});
  return executions;
}

// The ops of one device as its events close: by event metadata, or by the `hlo_op` stat's name
// (SummaryOptions::hlo_op_names), each with its category (CategorySource).
class OpTable {
 public:
  // Where the summary walk's Event::wanted holds each stat.
  static constexpr std::size_t kHloOp = 0;
  static constexpr std::size_t kHloCategory = 1;
  static constexpr std::size_t kHloModule = 2;

  OpTable(const XSpaceFile& file, const Plane& plane, const SummaryOptions& options,
          std::vector<OpTime>& ops)
      : file_(file), plane_(plane), options_(options), ops_(ops) {
    wanted_ = {plane.stat_id(kHloOpStat), plane.stat_id(kHloCategoryStat), -1};
    std::int64_t most = -1;
    for (const auto& [id, metadata] : plane.event_metadata) most = std::max(most, id);
    // Bounded by the metadata the plane holds (a hostile id far above it goes to the map).
    std::size_t size = static_cast<std::size_t>(most + 1);
    if (most >= 0 && size <= 4 * plane.event_metadata.size() + 1024) {
      dense_.assign(size, SIZE_MAX);
    }
  }
  // The stats the walk decodes; with `module`, the hlo_module stat too.
  WantedStats wanted(bool module) const {
    WantedStats wanted = wanted_;
    if (module) wanted[kHloModule] = plane_.stat_id(kHloModuleStat);
    return wanted;
  }
  // The index in `ops` of the event's op; `inserted` says whether it is new (its step figures
  // are the caller's to size).
  std::size_t op_of(const Event& event, bool& inserted) {
    std::string_view hlo_op =
        options_.hlo_op_names ? plane_.stat_string(event.wanted[kHloOp]) : std::string_view();
    std::size_t index = ops_.size();
    if (hlo_op.empty()) {
      // Metadata ids are small numbers as XProf writes them: a table, else a map.
      std::uint64_t id = static_cast<std::uint64_t>(event.metadata_id);
      if (id < dense_.size()) {
        inserted = dense_[id] == SIZE_MAX;
        if (!inserted) return dense_[id];
        dense_[id] = index;
      } else {
        auto [entry, added] = by_metadata_.try_emplace(event.metadata_id, index);
        index = entry->second;
        inserted = added;
        if (!inserted) return index;
      }
    } else {
      auto [entry, added] = by_name_.try_emplace(std::string(hlo_op), index);
      index = entry->second;
      inserted = added;
    }
    if (!inserted) return index;
    OpTime op;
    op.name = hlo_op.empty() ? std::string(event_name(plane_, event)) : std::string(hlo_op);
    if (op.name.empty()) op.name = fmt::format("#{}", event.metadata_id);
    if (std::string_view category = stat_text(event, kHloCategory); !category.empty()) {
      op.category = category_of_hlo_category(category);
      op.category_source = CategorySource::kHloCategoryStat;
    } else if (std::string_view instruction = stat_text(event, kHloOp); !instruction.empty()) {
      op.category = category_of(instruction);
      op.category_source = CategorySource::kHloOpStat;
    } else {
      op.category = category_of(op.name);
    }
    ops_.push_back(std::move(op));
    return index;
  }

 private:
  // A wanted stat of the event, else of its metadata (once per op, not per event); "" without.
  std::string_view stat_text(const Event& event, std::size_t wanted) const {
    std::string_view text = plane_.stat_string(event.wanted[wanted]);
    std::int64_t id = wanted_[wanted];
    if (!text.empty() || id < 0) return text;
    const EventMetadata* metadata = plane_.event(event.metadata_id);
    Stat stat;
    if (metadata == nullptr || !find_stat(file_.bytes(), metadata->stats, id, stat)) return text;
    return plane_.stat_string(stat);
  }

  const XSpaceFile& file_;
  const Plane& plane_;
  const SummaryOptions& options_;
  std::vector<OpTime>& ops_;
  WantedStats wanted_;
  std::vector<std::size_t> dense_;  // by metadata id when the ids are dense (SIZE_MAX: none yet)
  std::unordered_map<std::int64_t, std::size_t> by_metadata_;
  std::unordered_map<std::string, std::size_t> by_name_;
};

[[noreturn]] void fail_figures(const XSpaceFile& file, const Plane& plane, std::size_t steps,
                               std::size_t ops, std::size_t max_figures) {
  fail_at(file.name(), 0,
          "XSpace: plane '{}': {} steps and more than {} ops: over the {} figures per op and step "
          "kept",
          plane.name, steps, ops, max_figures);
}

// The steps from `windows` (sorted by start; each cut at the next one's start).
void set_steps(Device& device, std::vector<Window> windows) {
  std::sort(windows.begin(), windows.end(),
            [](const Window& a, const Window& b) { return a.start < b.start; });
  for (const Window& window : windows) {
    Step step;
    step.number = window.number;
    step.start_ps = window.start;
    step.end_ps = window.end;
    device.steps.push_back(step);
  }
  // Steps may not overlap: a later one cuts an earlier one.
  for (std::size_t i = 0; i + 1 < device.steps.size(); ++i) {
    device.steps[i].end_ps = std::min(device.steps[i].end_ps, device.steps[i + 1].start_ps);
  }
}

// The figures of a device whose steps are known before its op events are read: one walk.
void summarize_known_steps(const Capture& capture, const XSpaceFile& file, const Plane& plane,
                           const std::vector<const Line*>& lines, const SummaryOptions& options,
                           Device& device) {
  auto step_at = [&](std::int64_t time) -> Step* {
    auto it = std::upper_bound(device.steps.begin(), device.steps.end(), time,
                               [](std::int64_t t, const Step& s) { return t < s.start_ps; });
    if (it == device.steps.begin()) return nullptr;
    --it;
    return time < it->end_ps ? &*it : nullptr;
  };
  OpTable table(file, plane, options, device.ops);
  std::int64_t covered_until = INT64_MIN;
  std::size_t steps = device.steps.size();
  walk_lines(
      capture, file, lines,
      [&](const Event& event, std::size_t) {
        ++device.events;
        // Busy: the part of [start, end) not covered yet, clipped to each step it crosses.
        std::int64_t from = std::max(event.start_ps, covered_until);
        std::int64_t to = event.start_ps + event.duration_ps;
        if (to <= from) return;
        covered_until = to;
        auto it = std::upper_bound(device.steps.begin(), device.steps.end(), from,
                                   [](std::int64_t t, const Step& s) { return t < s.start_ps; });
        if (it != device.steps.begin()) --it;
        for (; it != device.steps.end() && it->start_ps < to; ++it) {
          std::int64_t a = std::max(from, it->start_ps);
          std::int64_t b = std::min(to, it->end_ps);
          if (b > a) it->busy_ps += b - a;
        }
      },
      [&](const Event& event, std::size_t, std::int64_t self_ps) {
        bool inserted = false;
        std::size_t index = table.op_of(event, inserted);
        if (inserted) {
          if (device.ops.size() * std::max<std::size_t>(steps, 1) > options.max_op_step_figures) {
            fail_figures(file, plane, steps, device.ops.size() - 1, options.max_op_step_figures);
          }
          device.ops[index].step_self_ps.assign(steps, 0);
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
      },
      table.wanted(false));
}

// The figures of a device whose steps are executions of the module with the most device time,
// found from runs of its op events' hlo_module stat, in the same one walk over the events. The
// walk keeps its figures per run of any module: a bucket from the run's first event to the next
// run's, in two parts, what starts before the run's end (its last event's end) and what starts
// after it (a host transfer between two executions); a step is then the buckets from one
// execution of the chosen module to the next, and the last step the part of its bucket before
// that execution's end. While a run lasts its end can still grow: what started after the end so
// far is kept apart (`pending`) and joins the run's part when the end passes it. Busy time is
// kept per part the same way: the covered time from a point on up to where it ends is covered
// whole (every event so far started before that point), so what crosses a boundary moves as one
// length.
// The figures are those of two walks (runs first) unless a boundary is in doubt: an event at the
// very instant a run of the chosen module starts but read before it; a zero-length event ending
// a run exactly where an event after the end starts; a later run starting before the chosen
// module's last execution ended. false then, and the caller reads the events twice. Memory: two
// parts per run, and per op one figure per part it ran in (at most max_op_step_figures, else
// false).
bool summarize_module_runs_one_walk(const Capture& capture, const XSpaceFile& file,
                                    const Plane& plane, const std::vector<const Line*>& lines,
                                    const SummaryOptions& options, Device& device) {
  // What the events closed in one part add up to.
  struct Part {
    std::size_t bucket = 0;
    bool tail = false;  // starts at or after the run's end
    std::int64_t events = 0;
    std::int64_t self_ps = 0;
    std::array<std::int64_t, kCategories> category_ps{};
  };
  struct Bucket {
    std::int64_t start = INT64_MIN;         // the run's first event (bucket 0: before every run)
    std::int64_t end = INT64_MAX;           // the run's end (bucket 0: none)
    std::size_t run_part = 0;               // parts of events before the end
    std::size_t pending_part = 0;           // and at or after it
    std::int64_t run_busy_ps = 0;           // covered time in [start, end) up to the next bucket
    std::int64_t tail_busy_ps = 0;          // covered time from end on, up to the next bucket
    std::int64_t pending_from = INT64_MIN;  // the last start read at or after the end
    bool tie = false;       // an event at its start instant was read before its run's first
    bool doubtful = false;  // a pending event could not be placed (zero-length end)
  };
  struct OpFigure {
    std::size_t part = 0;
    std::size_t op = 0;
    std::int64_t count = 0;
    std::int64_t self_ps = 0;
  };
  OpTable table(file, plane, options, device.ops);
  std::vector<std::string> modules;
  std::unordered_map<std::string, std::size_t> module_index;
  std::vector<std::size_t> run_module;  // run r is bucket r + 1
  std::vector<Part> parts;
  std::vector<Bucket> buckets;
  std::vector<OpFigure> figures;
  std::vector<std::size_t> last_figure;  // per op: its latest entry in figures
  std::int64_t covered_until = INT64_MIN;
  std::int64_t last_start = INT64_MIN;
  bool any = false;
  bool overflow = false;
  // The figures from here on are the only ones that can name the current pending part.
  std::size_t pending_figures_from = 0;
  std::uint64_t run_ref = UINT64_MAX;     // a ref naming the current run's module
  std::uint64_t module_ref = UINT64_MAX;  // the last event's hlo_module ref, and its text
  std::string_view module_text;
  auto new_part = [&](std::size_t bucket, bool tail) {
    parts.push_back({bucket, tail, 0, 0, {}});
    return parts.size() - 1;
  };
  auto new_bucket = [&](std::int64_t start, std::int64_t end) {
    Bucket bucket;
    bucket.start = start;
    bucket.end = end;
    bucket.run_part = new_part(buckets.size(), false);
    bucket.pending_part = new_part(buckets.size(), true);
    buckets.push_back(bucket);
    pending_figures_from = figures.size();
  };
  // Covered time in [from, to) (from >= the last start read: covered whole up to covered_until).
  auto covered = [&](std::int64_t from, std::int64_t to) -> std::int64_t {
    std::int64_t until = std::min(to, covered_until);
    return until > from ? until - from : 0;
  };
  new_bucket(INT64_MIN, INT64_MAX);
  auto bucket_at = [&](std::int64_t time) {
    if (time >= buckets.back().start) return buckets.size() - 1;  // most events: the last run's
    auto it = std::upper_bound(buckets.begin() + 1, buckets.end(), time,
                               [](std::int64_t t, const Bucket& b) { return t < b.start; });
    return static_cast<std::size_t>(it - buckets.begin()) - 1;
  };
  walk_lines(
      capture, file, lines,
      [&](const Event& event, std::size_t) {
        ++device.events;
        std::int64_t start = event.start_ps;
        std::int64_t end = start + event.duration_ps;
        const Stat& module_stat = event.wanted[OpTable::kHloModule];
        // A ref names its stat metadata: most events repeat the previous one's.
        if (module_stat.kind != Stat::Kind::kRef || module_stat.uint_value != module_ref) {
          module_text = plane.stat_string(module_stat);
          module_ref = module_stat.kind == Stat::Kind::kRef ? module_stat.uint_value : UINT64_MAX;
        }
        std::string_view module = module_text;
        std::uint64_t ref =
            module_stat.kind == Stat::Kind::kRef ? module_stat.uint_value : UINT64_MAX;
        // The current run's module named by the same ref: no need to compare the names.
        bool same_run = ref != UINT64_MAX && ref == run_ref;
        if (!module.empty()) {
          run_ref = ref;  // the run this event starts or extends is its module's
          if (!same_run && (run_module.empty() || modules[run_module.back()] != module)) {
            auto [known, added] = module_index.try_emplace(std::string(module), modules.size());
            if (added) modules.emplace_back(module);
            run_module.push_back(known->second);
            // The covered time from here on moves to the new bucket.
            Bucket& previous = buckets.back();
            std::int64_t moved_run = covered(start, previous.end);
            std::int64_t moved_tail = covered(std::max(start, previous.end), INT64_MAX);
            previous.run_busy_ps -= moved_run;
            previous.tail_busy_ps -= moved_tail;
            bool tie = any && last_start == start;
            new_bucket(start, end);
            Bucket& next = buckets.back();
            next.tie = tie;
            next.run_busy_ps = covered(start, end);
            next.tail_busy_ps = covered(std::max(start, end), INT64_MAX);
          } else if (Bucket& bucket = buckets.back(); end > bucket.end) {
            // The run's end grows to `end`: the covered time up to it joins the run's part, and
            // so do the events read after the old end (all started at or before `start`, so
            // before `end` unless the event is zero-length).
            std::int64_t joining = bucket.tail_busy_ps - covered(end, INT64_MAX);
            bucket.run_busy_ps += joining;
            bucket.tail_busy_ps -= joining;
            if (bucket.pending_from != INT64_MIN) {
              if (bucket.pending_from >= end) {
                bucket.doubtful = true;
              } else {
                // The pending part's figures join the run's; the part starts again empty (so
                // parts stay two per run, whatever the number of events between ends).
                Part& run = parts[bucket.run_part];
                Part& pending = parts[bucket.pending_part];
                run.events += pending.events;
                run.self_ps += pending.self_ps;
                for (std::size_t c = 0; c < kCategories; ++c) {
                  run.category_ps[c] += pending.category_ps[c];
                }
                pending = {pending.bucket, true, 0, 0, {}};
                for (std::size_t i = pending_figures_from; i < figures.size(); ++i) {
                  if (figures[i].part == bucket.pending_part) figures[i].part = bucket.run_part;
                }
                pending_figures_from = figures.size();
                bucket.pending_from = INT64_MIN;
              }
            }
            bucket.end = end;
          }
        }
        any = true;
        last_start = start;
        Bucket& bucket = buckets.back();
        if (start >= bucket.end) bucket.pending_from = start;
        std::int64_t from = std::max(start, covered_until);
        if (end > from) {
          bucket.run_busy_ps += std::max<std::int64_t>(0, std::min(end, bucket.end) - from);
          bucket.tail_busy_ps += end - std::max(from, std::min(end, bucket.end));
          covered_until = end;
        }
      },
      [&](const Event& event, std::size_t, std::int64_t self_ps) {
        bool inserted = false;
        std::size_t op = table.op_of(event, inserted);
        if (inserted) last_figure.push_back(SIZE_MAX);
        const Bucket& bucket = buckets[bucket_at(event.start_ps)];
        std::size_t at = event.start_ps < bucket.end ? bucket.run_part : bucket.pending_part;
        Part& part = parts[at];
        ++part.events;
        part.self_ps += self_ps;
        part.category_ps[static_cast<std::size_t>(device.ops[op].category)] += self_ps;
        std::size_t& last = last_figure[op];
        if (last == SIZE_MAX || figures[last].part != at) {
          if (figures.size() >= options.max_op_step_figures) {
            overflow = true;
            return;
          }
          last = figures.size();
          figures.push_back({at, op, 0, 0});
        }
        ++figures[last].count;
        figures[last].self_ps += self_ps;
      },
      table.wanted(true));
  if (overflow) return false;

  // The steps: the chosen module's runs.
  std::vector<std::size_t> starts;  // buckets of the chosen module's runs
  std::vector<std::int64_t> total(modules.size(), 0);
  for (std::size_t r = 0; r < run_module.size(); ++r) {
    total[run_module[r]] += buckets[r + 1].end - buckets[r + 1].start;
  }
  std::int64_t chosen = -1;
  for (std::size_t i = 0; i < modules.size(); ++i) {
    std::size_t best = static_cast<std::size_t>(chosen);
    if (chosen < 0 || total[i] > total[best] ||
        (total[i] == total[best] && modules[i] < modules[best])) {
      chosen = static_cast<std::int64_t>(i);
    }
  }
  // Per bucket its step (SIZE_MAX: outside); the last step's bucket counts its run part only.
  std::vector<std::size_t> step_of_bucket(buckets.size(), SIZE_MAX);
  std::size_t last = 0;
  std::vector<Window> windows;
  if (chosen >= 0) {
    for (std::size_t r = 0; r < run_module.size(); ++r) {
      if (run_module[r] == static_cast<std::size_t>(chosen)) starts.push_back(r + 1);
    }
    for (std::size_t b : starts) {
      if (buckets[b].tie) return false;
    }
    last = starts.back();
    if (buckets[last].doubtful ||
        (last + 1 < buckets.size() && buckets[last + 1].start < buckets[last].end)) {
      return false;
    }
    for (std::size_t i = 0; i < starts.size(); ++i) {
      std::size_t to = i + 1 < starts.size() ? starts[i + 1] : starts[i] + 1;
      for (std::size_t b = starts[i]; b < to; ++b) step_of_bucket[b] = i;
      std::int64_t end = i + 1 < starts.size() ? buckets[starts[i + 1]].start : buckets[last].end;
      windows.push_back({static_cast<std::int64_t>(i), buckets[starts[i]].start, end});
    }
    device.step_module = modules[static_cast<std::size_t>(chosen)];
  }
  if (windows.size() > options.max_op_step_figures) {
    fail_at(file.name(), 0, "XSpace: plane '{}': {} steps, over the {} figures kept", plane.name,
            windows.size(), options.max_op_step_figures);
  }
  set_steps(device, std::move(windows));
  std::size_t steps = device.steps.size();
  std::size_t most_ops = options.max_op_step_figures / std::max<std::size_t>(steps, 1);
  if (device.ops.size() > most_ops) {
    fail_figures(file, plane, steps, most_ops, options.max_op_step_figures);
  }
  // The step of each part (SIZE_MAX: outside).
  auto step_of_part = [&](std::size_t p) {
    const Part& part = parts[p];
    if (chosen >= 0 && part.bucket == last && part.tail) return SIZE_MAX;
    return step_of_bucket[part.bucket];
  };
  for (std::size_t b = 0; b < buckets.size(); ++b) {
    if (step_of_bucket[b] == SIZE_MAX) continue;
    Step& step = device.steps[step_of_bucket[b]];
    step.busy_ps += buckets[b].run_busy_ps;
    if (chosen < 0 || b != last) step.busy_ps += buckets[b].tail_busy_ps;
  }
  for (std::size_t p = 0; p < parts.size(); ++p) {
    std::size_t at = step_of_part(p);
    if (at == SIZE_MAX) {
      device.outside_ps += parts[p].self_ps;
      continue;
    }
    Step& step = device.steps[at];
    step.events += parts[p].events;
    for (std::size_t c = 0; c < kCategories; ++c) step.category_ps[c] += parts[p].category_ps[c];
  }
  for (OpTime& op : device.ops) op.step_self_ps.assign(steps, 0);
  for (const OpFigure& figure : figures) {
    std::size_t at = step_of_part(figure.part);
    if (at == SIZE_MAX) continue;
    OpTime& op = device.ops[figure.op];
    op.count += figure.count;
    op.self_ps += figure.self_ps;
    op.step_self_ps[at] += figure.self_ps;
  }
  return true;
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

const char* category_source_name(CategorySource source) {
  return enum_name<CategorySource::kOpName>(source, {"hlo_category", "hlo_op", "name"});
}

Category category_of_hlo_category(std::string_view text) {
  if (normalized(text).find("data formatting") != std::string::npos) return Category::kCopy;
  return category_of(text);
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

void advance(LineWalk& walk, const Line& line, const std::string& file, std::int64_t previous) {
  Event& next = walk.slots[walk.next].event;
  walk.has_next = walk.cursor.next(next);
  walk.next_start = next.start_ps;
  if (walk.has_next && next.start_ps < previous) {
    fail_at(file, 0,
            "XSpace: line '{}': the event at byte {} starts before the one stored before it "
            "(events of a line must be in time order)",
            line.name, next.offset);
  }
}

}  // namespace detail

Summary summarize(const Capture& capture, const SummaryOptions& options) {
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
      bool summarized = false;
      if (windows.empty()) {
        device.step_source = StepSource::kModuleExecutions;
        if (options.module_runs_in_one_walk && line_named(plane, kXlaModulesLine) == nullptr &&
            plane.stat_id(kHloModuleStat) >= 0) {
          // The steps come from the op events themselves: one walk when it can be exact.
          Device attempt = device;
          attempt.event_walks = 1;
          if (summarize_module_runs_one_walk(capture, *file, plane, lines, options, attempt)) {
            device = std::move(attempt);
            summarized = true;
          }
        }
      }
      if (!summarized) {
        device.event_walks = 1;
        if (windows.empty()) {
          Executions executions = module_executions(capture, *file, plane, lines);
          if (line_named(plane, kXlaModulesLine) == nullptr && plane.stat_id(kHloModuleStat) >= 0) {
            device.event_walks = 2;
          }
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
        if (windows.size() > options.max_op_step_figures) {
          fail_at(file->name(), 0, "XSpace: plane '{}': {} steps, over the {} figures kept",
                  plane.name, windows.size(), options.max_op_step_figures);
        }
        set_steps(device, std::move(windows));
        summarize_known_steps(capture, *file, plane, lines, options, device);
      }
      std::erase_if(device.ops, [](const OpTime& op) { return op.count == 0; });
      for (const OpTime& op : device.ops) {
        ++device.category_sources[static_cast<std::size_t>(op.category_source)];
      }
      std::sort(device.ops.begin(), device.ops.end(), [](const OpTime& a, const OpTime& b) {
        return a.self_ps != b.self_ps ? a.self_ps > b.self_ps : a.name < b.name;
      });
      summary.devices.push_back(std::move(device));
    }
  }
  return summary;
}

}  // namespace rtb::profile
