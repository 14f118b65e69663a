#include "rtb/logs/run_setup.h"

#include <fmt/format.h>

#include <map>
#include <utility>

#include "rtb/base/stats.h"

namespace rtb::logs::report {
namespace {

using steplog::BenchSummary;
using steplog::RunLog;
using steplog::StepRecord;

std::string on_off(const std::string& value) {
  if (value == "true") return "on";
  if (value == "false") return "off";
  return value;
}

SetupItem item(std::string key, std::optional<std::string> shown,
               std::optional<std::string> compared) {
  return {std::move(key), std::move(shown), std::move(compared)};
}

// Staging over the steps used (BENCH_STEP staged), with the summary's `engaged`; the summary's
// count only when no step used says.
SetupItem staging(const RunLog& log, const std::set<std::int64_t>& used) {
  std::optional<bool> engaged;
  std::optional<std::int64_t> count;
  if (log.summary && log.summary->stage_boundary) {
    engaged = log.summary->stage_boundary->engaged;
    count = log.summary->stage_boundary->staged_step_count;
  }
  std::int64_t staged = 0;
  bool said = false;
  for (const StepRecord& record : log.steps) {
    if (!used.count(record.step) || !record.staged) continue;
    said = true;
    staged += *record.staged ? 1 : 0;
  }
  if (said) {
    if (!engaged) engaged = staged > 0;
    count = staged;
  }
  if (!engaged) return item("staging", std::nullopt, std::nullopt);
  if (!*engaged) return item("staging", "off", "off");
  return item("staging",
              count ? fmt::format("on ({} step{} staged)", *count, *count == 1 ? "" : "s")
                    : std::string("on"),
              "on");
}

SetupItem replays(const RunLog& log, const std::set<std::int64_t>& used, RunSetup& setup) {
  std::int64_t sum = 0, counted = 0;
  for (const StepRecord& record : log.steps) {
    if (!used.count(record.step) || !record.replays) continue;
    sum += *record.replays;
    ++counted;
  }
  std::string scope = fmt::format("the {} step{} used", counted, counted == 1 ? "" : "s");
  const steplog::TokenDropping* dropping =
      log.summary && log.summary->token_dropping ? &*log.summary->token_dropping : nullptr;
  if (counted == 0 && dropping != nullptr && dropping->replay_counted_steps) {
    counted = *dropping->replay_counted_steps;
    sum = dropping->replays.value_or(0);
    scope =
        fmt::format("the {} step{} its BENCH_SUMMARY counted", counted, counted == 1 ? "" : "s");
  }
  if (counted == 0) {
    // Said, but not counted: the log knows it cannot tell.
    if (dropping != nullptr && dropping->replay_counted_steps) {
      return item("replays", "not counted", "not counted");
    }
    return item("replays", std::nullopt, std::nullopt);
  }
  setup.replays = sum;
  setup.replay_counted_steps = counted;
  setup.replay_scope = scope;
  std::string steps = fmt::format("{} step{}", counted, counted == 1 ? "" : "s");
  if (sum == 0) return item("replays", fmt::format("none in {}", steps), "0");
  return item("replays", fmt::format("{} in {}", sum, steps),
              fmt::format("{:.6g} per step", static_cast<double>(sum) / counted));
}

SetupItem weights(const RunLog& log) {
  if (!log.summary || !log.summary->weights) return item("weights", std::nullopt, std::nullopt);
  const steplog::Weights& w = *log.summary->weights;
  std::string shown = w.path ? fmt::format("{} ({})", w.source, *w.path) : w.source;
  return item("weights", shown, w.source + "\n" + w.path.value_or(""));
}

SetupItem update(const RunLog& log, const std::set<std::int64_t>& used) {
  if (log.summary && log.summary->update_path) {
    const std::string& ran = log.summary->update_path->ran;
    return item("update", ran, ran);
  }
  std::set<std::string> seen;
  for (const StepRecord& record : log.steps) {
    if (used.count(record.step) && !record.update.empty()) seen.insert(record.update);
  }
  if (seen.empty()) return item("update", std::nullopt, std::nullopt);
  std::string ran = seen.size() == 1 ? *seen.begin() : "mixed";
  return item("update", ran, ran);
}

SetupItem logps(const RunLog& log) {
  if (!log.summary) return item("logps", std::nullopt, std::nullopt);
  const std::map<std::string, steplog::Choice>& choices = log.summary->choices;
  auto pass = choices.find("logps_pass");
  if (pass == choices.end() || !pass->second.value) {
    return item("logps", std::nullopt, std::nullopt);
  }
  std::string shown = on_off(*pass->second.value);
  std::vector<std::string> sizes;
  for (auto [key, label] : {std::pair{"logps_chunk_size", "chunk"},
                            std::pair{"logps_micro_batch_size", "micro-batch"}}) {
    auto found = choices.find(key);
    if (found != choices.end() && found->second.value) {
      sizes.push_back(fmt::format("{} {}", label, *found->second.value));
    }
  }
  if (!sizes.empty()) shown += fmt::format(" ({})", fmt::join(sizes, ", "));
  return item("logps", shown, shown);
}

SetupItem shape(const RunLog& log) {
  if (!log.summary || !log.summary->rows || !log.summary->tokens_per_row ||
      !log.summary->micro_steps) {
    return item("shape", std::nullopt, std::nullopt);
  }
  const BenchSummary& s = *log.summary;
  std::string shown = fmt::format("{} x {} x {}", *s.rows, *s.tokens_per_row, *s.micro_steps);
  if (s.final_rows && *s.final_rows < *s.rows)
    shown += fmt::format(" (final {} rows)", *s.final_rows);
  return item("shape", shown, shown);
}

bool logs_setup(const RunLog& log) {
  for (const StepRecord& record : log.steps) {
    if (record.train_step_s || record.boundary_free_step_s || record.replays) return true;
  }
  if (!log.summary) return false;
  const BenchSummary& s = *log.summary;
  return s.weights || s.update_path || s.grad_norm || s.profiler || s.fence_s ||
         s.boundary_free_step_s || s.microbatch_timing_why ||
         (s.token_dropping && s.token_dropping->replay_counted_steps);
}

// The mean of `field` over the steps used, when every one of them logs it.
std::optional<double> mean_over(const RunLog& log, const std::set<std::int64_t>& used,
                                std::optional<double> StepRecord::*field) {
  std::vector<double> values;
  for (const StepRecord& record : log.steps) {
    if (!used.count(record.step)) continue;
    if (!(record.*field)) return std::nullopt;
    values.push_back(*(record.*field));
  }
  if (values.empty()) return std::nullopt;
  return stats::mean(values);
}

}  // namespace

const SetupItem* RunSetup::find(const std::string& key) const {
  for (const SetupItem& entry : items) {
    if (entry.key == key) return &entry;
  }
  return nullptr;
}

const char* setup_label(const std::string& key) {
  if (key == "update") return "update path";
  if (key == "logps") return "log-prob pass";
  if (key == "mb_timing") return "micro-batch timing";
  if (key == "staging") return "staging";
  if (key == "replays") return "replays";
  if (key == "weights") return "weights";
  return "shape";
}

RunSetup run_setup(const RunLog& log, const std::set<std::int64_t>& used,
                   const std::string& mb_timing) {
  RunSetup setup;
  setup.logged = logs_setup(log);
  setup.items.push_back(staging(log, used));
  setup.items.push_back(replays(log, used, setup));
  setup.items.push_back(weights(log));
  setup.items.push_back(update(log, used));
  setup.items.push_back(logps(log));
  setup.items.push_back(mb_timing.empty() ? item("mb_timing", std::nullopt, std::nullopt)
                                          : item("mb_timing", mb_timing, mb_timing));
  setup.items.push_back(shape(log));
  setup.boundary_free_step_s = mean_over(log, used, &StepRecord::boundary_free_step_s);
  if (!setup.boundary_free_step_s && log.summary) {
    setup.boundary_free_step_s = log.summary->boundary_free_step_s;
  }
  setup.train_step_s = mean_over(log, used, &StepRecord::train_step_s);
  if (log.summary) setup.fence_s = log.summary->fence_s;
  return setup;
}

std::string SetupDifference::text() const {
  if (!evaluated) return "";
  std::vector<std::string> parts;
  if (!differs.empty()) parts.push_back(fmt::format("differs: {}", fmt::join(differs, ", ")));
  if (!unknown.empty()) parts.push_back(fmt::format("unknown: {}", fmt::join(unknown, ", ")));
  return parts.empty() ? "same" : fmt::format("{}", fmt::join(parts, "; "));
}

SetupDifference compare_setups(const std::string& control_name, const RunSetup& control,
                               const std::string& run_name, const RunSetup& run) {
  SetupDifference out;
  if (!control.logged && !run.logged) return out;
  out.evaluated = true;
  for (const char* key : kSetupKeys) {
    const SetupItem* a = control.find(key);
    const SetupItem* b = run.find(key);
    bool a_says = a != nullptr && a->compared.has_value();
    bool b_says = b != nullptr && b->compared.has_value();
    if (!a_says && !b_says) continue;
    if (!a_says || !b_says) {
      out.unknown.push_back(fmt::format("{} ({} does not log it)", setup_label(key),
                                        a_says ? run_name : control_name));
      continue;
    }
    if (*a->compared != *b->compared) {
      out.differs.push_back(fmt::format("{} {} vs {}", setup_label(key), *a->shown, *b->shown));
    }
  }
  return out;
}

}  // namespace rtb::logs::report
