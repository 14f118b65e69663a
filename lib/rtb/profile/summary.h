// profile-report's summary of a capture: per device, per step, busy and idle time, time by
// category and the ops by self time.
//
// Devices are the planes named `/device:...`. Their op lines are the line `XLA Ops` when the
// plane has one (TPU), else the lines named `Stream ...` (GPU), else every line; derived lines
// (`XLA Modules`, `Steps`, framework and source lines) are never op lines.
//
// Steps, first found of:
//   1. the device's `Steps` line (XProf's own step line), one step per event;
//   2. the driver's step annotations (jax.profiler.StepTraceAnnotation): events of the same file's
//      host planes with a `step_num` stat, one step per step number (from the first such event's
//      start to the last one's end);
//   3. executions of the module with the most device time (the device's `XLA Modules` line, else
//      runs of the op events' `hlo_module` stat): step i runs from the start of execution i to
//      the start of execution i+1, the last one to its own end.
// An op event belongs to the step its start falls in; events outside every step are counted
// apart (`outside_ps`).
//
// Categories: from the capture's stats where it has them (CategorySource), else op names.
//
// Figures, all in picoseconds:
//   - busy: the union of the op events' intervals within the step (streams running at once count
//     once); idle = the step's length - busy.
//   - by category: the sum of the self times of the step's op events of that category (streams
//     running at once each count, so the categories can add up to more than busy).
//   - self time of an op event: its duration less that of the events nested in it on its line.
// Memory: the metadata, one cursor per op line, and per op one figure per step; never per event.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "rtb/profile/xspace.h"

namespace rtb::profile {

enum class Category { kMatmul, kFusion, kCollective, kCopy };
inline constexpr std::size_t kCategories = 4;
// "matmul", "fusion", "collective", "copy" (the JSON and text names).
const char* category_name(Category category);
// What the category holds, for text output.
const char* category_meaning(Category category);

// The category of an op by its name (an HLO instruction name, or a GPU kernel or memcpy name):
// collectives (all-reduce, all-gather, reduce-scatter, collective-permute, all-to-all, collective-
// broadcast, ragged-all-to-all, NCCL kernels) first, then copies and host transfers (copy,
// Memcpy*, Memset*, infeed, outfeed, send, recv, host), then matmuls (dot, gemm, convolution,
// cuBLAS / cuDNN / CUTLASS kernels), else fusion and other compute. `-` and `_` are the same.
Category category_of(std::string_view name);

// Where an op's category comes from, first found of: the capture's `hlo_category` stat (XProf's
// category of the HLO op, on the event or its metadata: TPU captures), the `hlo_op` stat (the
// HLO instruction a GPU kernel ran: its name, by category_of), else the op's own name.
enum class CategorySource { kHloCategoryStat, kHloOpStat, kOpName };
inline constexpr std::size_t kCategorySources = 3;
// "hlo_category", "hlo_op", "name" (the JSON names).
const char* category_source_name(CategorySource source);

// The category of XProf's hlo_category text ("convolution", "all-gather", "data formatting",
// "loop fusion", ...): category_of the text, except that data formatting (copies, transposes,
// layout changes) is a copy.
Category category_of_hlo_category(std::string_view text);

enum class StepSource { kStepsLine, kStepAnnotations, kModuleExecutions };
const char* step_source_name(StepSource source);

struct Step {
  std::int64_t number = 0;  // step_num, the Steps line's name when numeric, else 0-based index
  std::int64_t start_ps = 0;
  std::int64_t end_ps = 0;
  std::int64_t busy_ps = 0;
  std::array<std::int64_t, kCategories> category_ps{};
  std::int64_t events = 0;
  std::int64_t length_ps() const { return end_ps - start_ps; }
  std::int64_t idle_ps() const { return length_ps() - busy_ps; }
};

struct OpTime {
  std::string name;
  Category category = Category::kFusion;
  CategorySource category_source = CategorySource::kOpName;
  std::int64_t count = 0;                  // events in steps
  std::int64_t self_ps = 0;                // over all steps
  std::vector<std::int64_t> step_self_ps;  // per step
};

struct Device {
  std::string plane;
  std::string file;
  StepSource step_source = StepSource::kModuleExecutions;
  std::string step_module;  // the module whose executions are the steps (kModuleExecutions)
  std::vector<std::string> op_lines;
  std::vector<Step> steps;
  std::vector<OpTime> ops;  // by self time, largest first, then by name (all of them)
  // How many of `ops` took their category from each source (CategorySource order).
  std::array<std::size_t, kCategorySources> category_sources{};
  std::int64_t events = 0;      // op events read
  std::int64_t outside_ps = 0;  // self time of op events outside every step
  int event_walks = 0;          // how often its op events were read: 1, or 2 (module runs first)
};

struct Summary {
  std::vector<std::string> files;
  std::uint64_t bytes = 0;
  std::size_t planes = 0;
  std::vector<Device> devices;
};

// Figures kept per op and step at the most (8 bytes each): a capture whose devices have more ops
// times steps is an rtb::Error, not a heap of gigabytes (a hostile file of a few MB could ask
// for that many).
inline constexpr std::size_t kMaxOpStepFigures = std::size_t{1} << 24;

struct SummaryOptions {
  std::size_t max_op_step_figures = kMaxOpStepFigures;
  // Name ops by their events' `hlo_op` stat when they have one (GPU captures, whose event names
  // are kernel names), else by the event's name: the HLO instruction, for a join with its
  // module (--hlo). Costs a stat lookup per event.
  bool hlo_op_names = false;
  // Steps from runs of the hlo_module stat are found in the same walk that sums the figures
  // (when that is exact; summarize_module_runs_one_walk in summary.cc). false: two walks, runs
  // first (tests and the benchmark compare the two).
  bool module_runs_in_one_walk = true;
};

Summary summarize(const Capture& capture, const SummaryOptions& options = {});

// Walks the events of `lines` (of one file's plane) merged into start order (ties: line order):
// `on_start(const Event&, std::size_t line)` for each event in that order, and
// `on_close(const Event&, std::size_t line, std::int64_t self_ps)` once its self time is known
// (when an event on its line starts at or after its end, or the lines end). Each line's events
// must be in start order, as XProf writes them; one that goes back in time is an rtb::Error
// naming the line. Memory: one cursor and the open nested events per line.
// `wanted`: the stats each event's one walk decodes (Event::wanted).
template <typename OnStart, typename OnClose>
void walk_lines(const Capture& capture, const XSpaceFile& file,
                const std::vector<const Line*>& lines, OnStart&& on_start, OnClose&& on_close,
                const WantedStats& wanted = kNoWantedStats);

// The op lines of a device plane (the rule above).
std::vector<const Line*> op_lines(const Plane& plane);

// ---- implementation of walk_lines ------------------------------------------------------------

namespace detail {
struct OpenEvent {
  Event event;
  std::int64_t end_ps = 0;
  std::int64_t self_ps = 0;
};
// One line's walk. Its events stay in the slot they were read into, from lookahead to close (an
// Event is a few hundred bytes, and a summary walks millions): `next` is the lookahead's slot,
// `open` the slots of the nested events not yet closed (outermost first), `free` the slots to
// reuse; there are at most the deepest nesting plus one.
struct LineWalk {
  EventCursor cursor;
  std::vector<OpenEvent> slots;
  std::vector<std::size_t> open;
  std::vector<std::size_t> free;
  std::size_t next = 0;
  bool has_next = false;
  std::int64_t next_start = 0;  // the lookahead's start
};
// Reads the line's next event into the lookahead slot; throws when it starts before `previous`
// (the start of the event read before it).
void advance(LineWalk& walk, const Line& line, const std::string& file, std::int64_t previous);
}  // namespace detail

template <typename OnStart, typename OnClose>
void walk_lines(const Capture& capture, const XSpaceFile& file,
                const std::vector<const Line*>& lines, OnStart&& on_start, OnClose&& on_close,
                const WantedStats& wanted) {
  std::vector<detail::LineWalk> walks;
  walks.reserve(lines.size());
  for (const Line* line : lines) {
    walks.push_back({capture.events(file, *line, wanted), {}, {}, {}, 0, false, 0});
    walks.back().slots.emplace_back();
    detail::advance(walks.back(), *line, file.name(), INT64_MIN);
  }
  auto close_until = [&](std::size_t index, std::int64_t time) {
    detail::LineWalk& walk = walks[index];
    while (!walk.open.empty() && walk.slots[walk.open.back()].end_ps <= time) {
      const detail::OpenEvent& top = walk.slots[walk.open.back()];
      on_close(top.event, index, top.self_ps);
      walk.free.push_back(walk.open.back());
      walk.open.pop_back();
    }
  };
  for (;;) {
    std::size_t best = walks.size();
    for (std::size_t i = 0; i < walks.size(); ++i) {
      if (walks[i].has_next &&
          (best == walks.size() || walks[i].next_start < walks[best].next_start)) {
        best = i;
      }
    }
    if (best == walks.size()) break;
    detail::LineWalk& walk = walks[best];
    detail::OpenEvent& chosen = walk.slots[walk.next];  // no slot is added before on_start
    std::int64_t start = chosen.event.start_ps;
    close_until(best, start);
    std::int64_t end = start + chosen.event.duration_ps;
    if (!walk.open.empty()) {
      // Nested in the innermost open event: its time is not that event's own.
      detail::OpenEvent& parent = walk.slots[walk.open.back()];
      parent.self_ps -= std::min(end, parent.end_ps) - start;
    }
    chosen.end_ps = end;
    chosen.self_ps = chosen.event.duration_ps;
    walk.open.push_back(walk.next);
    on_start(chosen.event, best);
    if (walk.free.empty()) {
      walk.next = walk.slots.size();
      walk.slots.emplace_back();
    } else {
      walk.next = walk.free.back();
      walk.free.pop_back();
    }
    detail::advance(walk, *lines[best], file.name(), start);
  }
  for (std::size_t i = 0; i < walks.size(); ++i) close_until(i, INT64_MAX);
}

}  // namespace rtb::profile
