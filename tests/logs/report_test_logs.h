// Bench driver logs with known times, for the tests of bench-report's analysis and writers.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <optional>
#include <string>
#include <vector>

#include "rtb/logs/report.h"
#include "rtb/logs/steplog.h"

namespace rtb::logs::report {

// A bench driver log from known times: step s (1-based) takes step_s[s-1] seconds, and its
// micro-batches mb[s-1]. Every step carries `tokens` tokens; the summary says `chips` chips.
inline steplog::RunLog bench_log(const std::string& name, const std::vector<double>& step_s,
                                 const std::vector<std::vector<double>>& mb, double tokens = 1000,
                                 std::optional<int> chips = 2, bool with_timing = false) {
  std::string text = fmt::format(
      "[TrainerBench] {}: bench driver starting: {} steps x {} "
      "fwd_bwd calls\n",
      name, step_s.size(), mb.empty() ? 0 : mb[0].size());
  for (std::size_t s = 0; s < step_s.size(); ++s) {
    double per_chip = tokens / step_s[s] / chips.value_or(2);
    text += fmt::format(R"(BENCH_STEP {{"step":{},"seconds":{},"microbatch_s":[{}],"tokens":{},)"
                        R"("tokens_per_s_per_chip":{}}})"
                        "\n",
                        s + 1, step_s[s], fmt::join(mb[s], ","), tokens, per_chip);
    if (with_timing) {
      // Back-to-back micro-batches of the given times, dispatched 0.01 s apart from t=0,
      // snapshot at the end of an update of 0.5 s.
      double t = 0, ready = 0;
      std::vector<std::string> entries;
      std::vector<std::array<double, 3>> events;
      for (std::size_t i = 0; i < mb[s].size(); ++i) {
        double begin = 0.01 * static_cast<double>(i), end = begin + 0.005;
        ready = std::max(end, ready) + mb[s][i];
        events.push_back({begin, end, ready});
        t = ready;
      }
      double update_ready = t + 0.5, now = update_ready;
      for (std::size_t i = 0; i < events.size(); ++i) {
        entries.push_back(
            fmt::format(R"({{"i":{},"dispatch_begin_ago_s":{:.3f},"dispatch_end_ago_s":{:.3f},)"
                        R"("ready_ago_s":{:.3f}}})",
                        i, now - events[i][0], now - events[i][1], now - events[i][2]));
      }
      text +=
          fmt::format(R"(TRAINER_STEP_TIMING step={} policy_version={} rtt_s=0.002 timing={{"v":1,)"
                      R"("train_step":{},"mb":[{}],"update":{{"dispatch_begin_ago_s":{:.3f},)"
                      R"("dispatch_end_ago_s":{:.3f},"ready_ago_s":0.0}},"prepare":null}})"
                      "\n",
                      s + 1, s + 1, s + 1, fmt::join(entries, ","), now - 0.1, now - 0.09);
    }
  }
  if (chips) {
    text += fmt::format(R"(BENCH_SUMMARY {{"name":"{}","steps":{},"chips":{}}})"
                        "\n",
                        name, step_s.size(), *chips);
  }
  return steplog::parse_run_log_text(text, name + ".log");
}

inline std::vector<std::vector<double>> microbatches(std::size_t steps, std::vector<double> row) {
  return std::vector<std::vector<double>>(steps, row);
}

// Two bench runs of three steps (the first compiles), the second 10% faster per step: the logs
// and the report built from them.
struct TwoRuns {
  Inputs inputs;
  Report report;
};

inline TwoRuns two_runs() {
  auto mb = microbatches(3, {3, 3, 2, 2});
  TwoRuns two;
  two.inputs.runs.push_back(bench_log("ctl", {40, 10.0, 10.2}, mb, 1000, 2, true));
  two.inputs.runs.push_back(bench_log("var", {40, 9.0, 9.2}, mb, 1000, 2, true));
  two.report = build_report(two.inputs, {});
  return two;
}

// A log of the issue 25 driver from the field contract: steps 0-3 (0 compiles), four
// micro-batches each, the last one short when final_rows < 4.
inline steplog::RunLog setup_log(const std::string& name, bool staged, double step_s = 10,
                                 const std::string& weights = "random", int final_rows = 4,
                                 const std::string& verdict = "none", int replays = 0,
                                 const std::string& metrics = "{}") {
  std::string text;
  for (int step = 0; step < 4; ++step) {
    text +=
        fmt::format(R"(BENCH_STEP {{"step":{},"seconds":{},"microbatch_s":[2,1.5,1,1,1,0.25],)"
                    R"("microbatch_timing":"device","update":"fused","staged":{},"profiled":false,)"
                    R"("replays":{},"train_step_s":{},"boundary_free_step_s":{},"metrics":{}}})"
                    "\n",
                    step, step_s, staged && step > 0, replays, step_s, step_s - 1, metrics);
  }
  text += fmt::format(
      R"(BENCH_SUMMARY {{"name":"{}","steps":4,"rows":4,"tokens_per_row":64,"micro_steps":6,)"
      R"("final_rows":{},"chips":1,"stage_boundary":{{"engaged":{},"staged_steps":{}}},)"
      R"("fence_s":0.001,"update_path":{{"ran":"fused","why":"w"}},)"
      R"("weights":{{"source":"{}","path":null,"why":"w"}},)"
      R"("grad_norm":{{"reported":false,"metric":null,"steps":0,"skip_step_on_spikes":false,)"
      R"("why":"skip_step_on_spikes is off"}},)"
      R"("token_dropping":{{"verdict":"{}","dropped_tokens":0,"counted_steps":4,)"
      R"("replays":{},"replay_counted_steps":4,"retry_when_tokens_dropped":true,"why":"w"}}}})"
      "\n",
      name, final_rows, staged, staged ? 3 : 0, weights, verdict, replays * 4);
  return steplog::parse_run_log_text(text, name + ".log");
}

}  // namespace rtb::logs::report
