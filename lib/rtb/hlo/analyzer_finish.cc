#include <fmt/format.h>

#include <algorithm>

#include "rtb/hlo/analyzer.h"

namespace rtb::hlo {

namespace {
constexpr std::size_t kNoIndex = static_cast<std::size_t>(-1);
}  // namespace

void Analyzer::finalize() {
  for (const Edge& edge : graph_.edges()) {
    if (edge.kind == EdgeKind::kAsync) graph_.record(edge.callee).async_wrapped = true;
  }
  for (std::size_t d = 0; d < drafts_.size(); ++d) {
    const Draft& draft = drafts_[d];
    if (draft.async_callee != kNone) graph_.record(draft.async_callee).async_wrapped = true;
  }
  for (const Edge& edge : graph_.edges()) {
    if (!graph_.record(edge.callee).defined && edge.kind != EdgeKind::kFusion &&
        graph_.record(edge.callee).name_index != kNone && !result_.truncated) {
      warn(0, fmt::format("computation {} is called but never defined",
                          graph_.name(graph_.record(edge.callee).name_index)));
    }
  }
  if (!graph_.compute_executions()) {
    warn(0, "the call graph has a cycle; executions of the computations on it count as 1");
  }
  std::vector<std::int64_t> collective_of(drafts_.size(), -1);
  result_.collectives.reserve(drafts_.size());
  std::vector<std::uint32_t> name_of_collective;  // its computation's name index
  name_of_collective.reserve(drafts_.size());
  std::vector<std::int8_t> name_matches(graph_.name_count(), -1);
  for (std::size_t d = 0; d < drafts_.size(); ++d) {
    Draft& draft = drafts_[d];
    const ComputationRecord& record = graph_.record(draft.record);
    if (record.async_wrapped) continue;  // the wrapped op of an async-start, reported there
    std::int8_t& match = name_matches[draft.computation];
    if (match < 0) match = matches(graph_.name(draft.computation)) ? 1 : 0;
    if (match == 0) continue;
    Collective c;
    if (draft.kind.empty()) {
      c.kind = "async";
      if (draft.async_callee != kNone) {
        const ComputationRecord& callee = graph_.record(draft.async_callee);
        if (callee.defined && callee.wrapped_kind != kNone) c.kind = kinds_[callee.wrapped_kind];
      }
    } else {
      c.kind = draft.kind;
    }
    c.category = category_of(c.kind);
    c.computation = graph_.name(draft.computation);
    c.start = std::move(draft.start);
    c.done = std::move(draft.done);
    c.wrapper = std::move(draft.wrapper);
    c.start_line = draft.start_line;
    c.done_line = draft.done_line;
    c.async = draft.async;
    c.bytes = draft.bytes;
    c.bytes_known = draft.bytes_known;
    c.op_name = std::move(draft.op_name);
    c.executions = graph_.executions_of(draft.record);
    c.executions_known = record.executions_known;
    c.in_truncated_computation = draft.truncated;
    c.status = draft.status;
    if (draft.async && draft.done_seen && draft.status != Status::kUnpairedDone) {
      c.window_instructions = draft.window_instructions;
      c.window_compute = draft.window_compute;
      c.compute_sample = std::move(draft.sample);
      for (std::uint32_t s = draft.callsite_begin; s < draft.callsite_end; ++s) {
        const CallSite& site = callsites_[s];
        if (site.computation != draft.record) continue;
        if (static_cast<std::int64_t>(site.instruction) >= draft.done_instruction) break;
        if (!callsite_has_compute(site)) continue;
        ++c.window_compute;
        if (c.compute_sample.size() < options_.compute_sample)
          c.compute_sample.emplace_back(callsite_names_, site.name_begin, site.name_size);
      }
      c.status = c.window_compute > 0 ? Status::kOverlapped : Status::kExposed;
    }
    collective_of[d] = static_cast<std::int64_t>(result_.collectives.size());
    result_.collectives.push_back(std::move(c));
    name_of_collective.push_back(draft.computation);
  }
  summarize(name_of_collective);
  if (options_.keep_schedule && !best_schedule_.empty()) build_schedule(collective_of);
}

void Analyzer::summarize(const std::vector<std::uint32_t>& name_of_collective) {
  std::vector<std::size_t> computation_index(graph_.name_count(), kNoIndex);
  // Views of the collectives' own strings, which stay put from here on; a dump has a few
  // kinds, mostly in runs, so the last one is tried first.
  std::unordered_map<std::string_view, std::size_t> kind_index;
  std::string_view last_kind;
  std::size_t last_kind_index = kNoIndex;
  for (std::size_t i = 0; i < result_.collectives.size(); ++i) {
    const Collective& c = result_.collectives[i];
    if (last_kind_index == kNoIndex || c.kind != last_kind) {
      auto [k, new_kind] = kind_index.emplace(c.kind, result_.by_kind.size());
      if (new_kind) result_.by_kind.push_back(KindTotals{c.kind, c.category, {}});
      last_kind = c.kind;
      last_kind_index = k->second;
    }
    result_.by_kind[last_kind_index].totals.add(c);
    std::size_t& p = computation_index[name_of_collective[i]];
    if (p == kNoIndex) {
      p = result_.by_computation.size();
      result_.by_computation.push_back(
          ComputationTotals{c.computation, c.executions, c.executions_known, {}});
    }
    result_.by_computation[p].totals.add(c);
    result_.total.add(c);
    if (c.category == Category::kCollective) result_.total_collectives.add(c);
  }
  std::sort(result_.by_kind.begin(), result_.by_kind.end(),
            [](const KindTotals& a, const KindTotals& b) { return a.kind < b.kind; });
}

void Analyzer::build_schedule(const std::vector<std::int64_t>& collective_of) {
  Schedule schedule;
  schedule.computation = best_schedule_name_;
  schedule.instructions = std::move(best_schedule_);
  for (std::size_t i = 0; i < schedule.instructions.size(); ++i) {
    ScheduledInstruction& instruction = schedule.instructions[i];
    if (instruction.role == ScheduledInstruction::Role::kCompute) {
      instruction.compute = true;
    } else if (instruction.role == ScheduledInstruction::Role::kCall &&
               best_schedule_callsites_[i] != kNone) {
      instruction.compute = callsite_has_compute(callsites_[best_schedule_callsites_[i]]);
    }
  }
  for (std::size_t d = best_schedule_drafts_.first; d < best_schedule_drafts_.second; ++d) {
    if (collective_of[d] < 0) continue;
    Schedule::Window window;
    window.collective = static_cast<std::size_t>(collective_of[d]);
    window.start = drafts_[d].start.empty() && drafts_[d].status == Status::kUnpairedDone
                       ? -1
                       : drafts_[d].start_instruction;
    window.done = drafts_[d].done_instruction;
    schedule.windows.push_back(window);
  }
  result_.schedule = std::move(schedule);
}

}  // namespace rtb::hlo
