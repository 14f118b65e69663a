#include "rtb/logs/arms.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

#include "rtb/base/error.h"
#include "rtb/base/io.h"
#include "rtb/base/json.h"
#include "rtb/base/literal.h"
#include "rtb/base/text.h"
#include "rtb/logs/report_format.h"

namespace rtb::logs::arms {
namespace {

// The JSON object after `marker` in `line`, as a dict; throws rtb::Error "what is wrong".
Literal marker_object(std::string_view line, std::string_view marker) {
  std::size_t at = line.find(marker);
  std::string_view json = line.substr(at + marker.size() - 1);  // from the `{`
  Literal value = steplog::parse_value(trim(json), LiteralSyntax::kJson);
  if (!value.is_dict()) fail("not a JSON object");
  return value;
}

std::string string_of(const Literal& object, std::string_view key) {
  const Literal* value = object.find(key);
  if (value == nullptr || value->kind != Literal::Kind::kString)
    fail("\"{}\" is not a string", key);
  return value->text;
}

std::int64_t int_of(const Literal& object, std::string_view key) {
  const Literal* value = object.find(key);
  if (value == nullptr || value->kind != Literal::Kind::kInt || !value->exact)
    fail("\"{}\" is not an integer", key);
  return value->integer;
}

std::string run_label(const std::string& arm, std::int64_t run) {
  return fmt::format("{} run {}", arm, run);
}

double mean_of(const std::vector<double>& values) {
  return std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
}

// The verdict of a mean paired difference (arm - control, seconds: below 0 is faster) from its
// interval. The control's A/A range is no noise floor here: it holds the drift across the pod's
// runs, which the pairs of an abba order cancel.
Verdict paired_verdict(const Interval& ci) {
  if (ci.low <= 0 && ci.high >= 0) return Verdict::kNoChange;
  return ci.high < 0 ? Verdict::kFaster : Verdict::kSlower;
}

// `arm`'s runs against `control_runs` by rank, the k-th with the k-th: the pairs (one with a
// failed run, or whose runs time their steps differently, is dropped and says why), the runs left
// without a partner, the mean diff and, from kMinPairs used pairs, its bootstrap interval and
// verdict. The pairs of a pod and the same arm across pods are both this.
ArmVerdict pair_runs(const std::string& arm, const std::vector<const ArmRun*>& control_runs,
                     const std::vector<const ArmRun*>& arm_runs,
                     const BootstrapOptions& bootstrap) {
  ArmVerdict verdict;
  verdict.arm = arm;
  std::size_t n = std::min(arm_runs.size(), control_runs.size());
  std::vector<double> used_controls;
  for (std::size_t k = 0; k < n; ++k) {
    const ArmRun& c = *control_runs[k];
    const ArmRun& v = *arm_runs[k];
    Pair pair;
    pair.rank = static_cast<std::int64_t>(k) + 1;
    pair.control_run = c.run;
    pair.arm_run = v.run;
    if (!c.failed.empty() || !v.failed.empty()) {
      const ArmRun& bad = c.failed.empty() ? v : c;
      pair.dropped = fmt::format("{} failed ({})", run_label(bad.arm, bad.run), bad.failed);
    } else if (c.step_timing != v.step_timing) {
      pair.dropped = fmt::format("the runs time their steps differently ({} vs {})",
                                 c.step_timing ? report::step_timing_name(*c.step_timing) : "none",
                                 v.step_timing ? report::step_timing_name(*v.step_timing) : "none");
    } else {
      pair.diff_s = *v.mean_s - *c.mean_s;
      verdict.diffs.push_back(*pair.diff_s);
      used_controls.push_back(*c.mean_s);
    }
    if (c.analysis && v.analysis) {
      pair.setup = report::compare_setups(run_label(c.arm, c.run), c.analysis->setup,
                                          run_label(v.arm, v.run), v.analysis->setup);
    }
    verdict.pairs.push_back(std::move(pair));
  }
  for (std::size_t k = n; k < arm_runs.size(); ++k)
    verdict.unpaired.push_back(run_label(arm_runs[k]->arm, arm_runs[k]->run));
  for (std::size_t k = n; k < control_runs.size(); ++k)
    verdict.unpaired.push_back(run_label(control_runs[k]->arm, control_runs[k]->run));
  if (!verdict.diffs.empty()) {
    verdict.mean_diff_s = mean_of(verdict.diffs);
    verdict.control_mean_s = mean_of(used_controls);
  }
  if (verdict.diffs.size() >= kMinPairs) {
    verdict.diff_ci = bootstrap_interval(verdict.diffs, Statistic::kMean, bootstrap);
    verdict.verdict = paired_verdict(*verdict.diff_ci);
  }
  return verdict;
}

// The runs of `arm` in `pod`, in run order.
std::vector<const ArmRun*> runs_of(const PodReport& pod, const std::string& arm) {
  std::vector<const ArmRun*> found;
  for (const ArmRun& run : pod.runs) {
    if (run.arm == arm) found.push_back(&run);
  }
  return found;
}

// The text of an interval, or why there is none, in the words of a pod's pairs and of the
// reference across pods.
std::string interval_text(const Interval& ci) {
  return fmt::format("interval [{:+.4f}, {:+.4f}]", ci.low, ci.high);
}
std::string too_few_pairs_text(std::size_t pairs) {
  return fmt::format("too few pairs for an interval ({} of at least {})", pairs, kMinPairs);
}
}  // namespace

void PodLogParser::close_run() {
  if (!parser_) return;
  current_.log = parser_->finish();
  parser_.reset();
  pod_.runs.push_back(std::move(current_));
  current_ = RunLogOfArm{};
}

void PodLogParser::feed(std::string_view line, std::size_t number) {
  bool start = line.find(kArmMarker) != std::string_view::npos;
  bool end = !start && line.find(kRunEndMarker) != std::string_view::npos;
  if (!start && !end) {
    if (parser_) parser_->feed(line, number);
    return;
  }
  Literal object;
  std::string arm;
  std::int64_t run = 0;
  try {
    object = marker_object(line, start ? kArmMarker : kRunEndMarker);
    arm = string_of(object, "arm");
    run = int_of(object, "run");
  } catch (const Error& e) {
    pod_.diagnostics.push_back(
        {Severity::kWarning, where_of(source_, static_cast<std::int64_t>(number)),
         fmt::format("{} line skipped: {}", start ? "BENCH_ARM" : "BENCH_RUN_END", e.message())});
    return;
  }
  if (start) {
    close_run();  // a run that ended without a BENCH_RUN_END (a killed wrapper, an old log)
    current_ = RunLogOfArm{arm, run, {}, true, std::nullopt, number};
    parser_.emplace(fmt::format("{} ({})", source_, run_label(arm, run)));
    return;
  }
  std::optional<int> exit_code;
  if (const Literal* code = object.find("exit_code");
      code != nullptr && code->kind == Literal::Kind::kInt && code->exact) {
    exit_code = static_cast<int>(code->integer);
  }
  if (parser_ && current_.arm == arm && current_.run == run) {
    current_.exit_code = exit_code;
    close_run();
    return;
  }
  // The end of a run that never announced itself: its driver stopped before its first line (a
  // refused setting).
  close_run();
  pod_.runs.push_back(RunLogOfArm{arm, run, {}, false, exit_code, number});
}

PodLog PodLogParser::finish() {
  close_run();
  pod_.source = source_;
  if (pod_.runs.empty())
    fail_at(source_, 0,
            "no BENCH_ARM or BENCH_RUN_END line: not the log of a same-pod A/B (render-bench "
            "--arm)");
  return std::move(pod_);
}

PodLog parse_pod_log(const std::string& path) {
  PodLogParser parser(display_name(path));
  steplog::feed_log_file(parser, path);
  return parser.finish();
}

PodLog parse_pod_log_text(std::string_view text, const std::string& source) {
  PodLogParser parser(source);
  steplog::feed_log_text(parser, text);
  return parser.finish();
}

Outcome PodReport::outcome() const { return failed_runs.empty() ? Outcome::kPass : Outcome::kFail; }

PodReport analyze_pod(const PodLog& pod, const report::Options& options) {
  PodReport out;
  out.source = pod.source;
  out.bootstrap = options.bootstrap;
  out.diagnostics = pod.diagnostics;
  std::vector<const RunLogOfArm*> ordered;
  for (const RunLogOfArm& run : pod.runs) ordered.push_back(&run);
  std::stable_sort(ordered.begin(), ordered.end(),
                   [](const RunLogOfArm* a, const RunLogOfArm* b) { return a->run < b->run; });
  for (const RunLogOfArm* log : ordered) {
    if (std::find(out.arms.begin(), out.arms.end(), log->arm) == out.arms.end())
      out.arms.push_back(log->arm);
    if (out.name.empty() && !log->log.name.empty()) out.name = log->log.name;
    ArmRun run;
    run.arm = log->arm;
    run.run = log->run;
    run.exit_code = log->exit_code;
    if (log->exit_code && *log->exit_code != 0) {
      run.failed = fmt::format("exit {}", *log->exit_code);
    } else if (!log->announced) {
      run.failed = "no BENCH_ARM line (the driver stopped before it)";
    } else if (!log->log.failure.empty()) {
      run.failed = log->log.failure;
    }
    if (log->announced) {
      try {
        report::RunAnalysis analysis = report::analyze_run(log->log, options);
        run.mean_s = analysis.step_mean;
        run.steps_used = analysis.step_s.size();
        run.step_timing = analysis.step_timing;
        if (analysis.first_step) run.first_step_s = analysis.first_step->seconds;
        for (const Diagnostic& d : analysis.diagnostics) {
          if (std::find(out.diagnostics.begin(), out.diagnostics.end(), d) == out.diagnostics.end())
            out.diagnostics.push_back(d);
        }
        run.analysis = std::move(analysis);
      } catch (const Error& e) {
        if (run.failed.empty()) run.failed = e.message();
      }
    }
    if (run.failed.empty() && !run.mean_s) run.failed = "no steady step time";
    if (!run.failed.empty())
      out.failed_runs.push_back(fmt::format("{}: {}", run_label(run.arm, run.run), run.failed));
    out.runs.push_back(std::move(run));
  }
  if (out.arms.empty()) return out;
  const std::string& control = out.arms[0];
  std::vector<const ArmRun*> control_runs = runs_of(out, control);
  std::vector<double> control_means;
  for (const ArmRun* run : control_runs) {
    if (run->failed.empty()) control_means.push_back(*run->mean_s);
  }
  if (control_means.size() >= 2) {
    AaSpread aa;
    aa.means = control_means;
    auto [low, high] = std::minmax_element(control_means.begin(), control_means.end());
    aa.range_s = *high - *low;
    aa.rel = aa.range_s / mean_of(control_means);
    out.aa = aa;
  }
  for (std::size_t a = 1; a < out.arms.size(); ++a)
    out.verdicts.push_back(
        pair_runs(out.arms[a], control_runs, runs_of(out, out.arms[a]), out.bootstrap));
  return out;
}

namespace {

std::string pod_text(const PodReport& r) {
  using report::seconds;
  std::string s = fmt::format("same-pod A/B {}{}: {} arms, {} runs; control {}\n", r.source,
                              r.name.empty() ? "" : " (" + r.name + ")", r.arms.size(),
                              r.runs.size(), r.arms.empty() ? "-" : r.arms[0]);
  s += "runs (in run order):\n";
  for (const ArmRun& run : r.runs) {
    s += fmt::format(
        "  {:>3}  {:<16} {}", run.run, run.arm,
        run.mean_s ? fmt::format("{} s/step over {} steps", seconds(*run.mean_s), run.steps_used)
                   : std::string("-"));
    if (run.first_step_s) s += fmt::format(", first step {} s", seconds(*run.first_step_s));
    if (!run.failed.empty()) s += fmt::format("  FAILED: {}", run.failed);
    s += "\n";
  }
  if (r.aa) {
    std::vector<std::string> means;
    for (double m : r.aa->means) means.push_back(seconds(m));
    s +=
        fmt::format("\nA/A ({} runs of {}): {} s; range {} s ({})\n", r.aa->means.size(), r.arms[0],
                    fmt::join(means, ", "), seconds(r.aa->range_s), report::percent(1 + r.aa->rel));
  }
  for (const ArmVerdict& v : r.verdicts) {
    s += fmt::format("\n{} vs {}:\n", v.arm, r.arms[0]);
    for (const Pair& p : v.pairs) {
      s += fmt::format("  pair {} (runs {} and {}): ", p.rank, p.control_run, p.arm_run);
      s += p.diff_s ? fmt::format("{:+.4f} s", *p.diff_s) : "dropped: " + p.dropped;
      if (p.setup.evaluated && p.setup.text() != "same") s += "  [set-up " + p.setup.text() + "]";
      s += "\n";
    }
    for (const std::string& u : v.unpaired) s += fmt::format("  unpaired: {}\n", u);
    if (!v.mean_diff_s) {
      s += "  verdict: no pair to compare\n";
      continue;
    }
    s += fmt::format("  mean pair diff {:+.4f} s/step ({}) over {} pairs", *v.mean_diff_s,
                     report::percent(1 + *v.mean_diff_s / *v.control_mean_s), v.diffs.size());
    if (v.diff_ci) {
      s +=
          fmt::format(", {}\n  verdict: {}\n", interval_text(*v.diff_ci), verdict_label(v.verdict));
    } else {
      s += fmt::format("\n  verdict: {}\n", too_few_pairs_text(v.diffs.size()));
    }
  }
  if (!r.failed_runs.empty())
    s += fmt::format("\nfailed runs: {}\n", fmt::join(r.failed_runs, "; "));
  return s;
}

void pod_json(json::Writer& j, const PodReport& r) {
  j.begin_object()
      .field("source", r.source)
      .field("name", r.name)
      .key("arms")
      .begin_array(json::Writer::Layout::kOneLine);
  for (const std::string& arm : r.arms) j.value(arm);
  j.end_array().field("control", r.arms.empty() ? std::string() : r.arms[0]);
  j.key("runs").begin_array();
  for (const ArmRun& run : r.runs) {
    j.begin_object(json::Writer::Layout::kOneLine)
        .field("arm", run.arm)
        .field("run", run.run)
        .field("mean_s", run.mean_s)
        .field("steps_used", static_cast<std::int64_t>(run.steps_used))
        .field("first_step_s", run.first_step_s)
        .key("step_timing");
    if (run.step_timing) {
      j.value(report::step_timing_name(*run.step_timing));
    } else {
      j.null();
    }
    j.field("exit_code", run.exit_code).key("failed");
    if (run.failed.empty()) {
      j.null();
    } else {
      j.value(run.failed);
    }
    j.end_object();
  }
  j.end_array().key("aa");
  if (r.aa) {
    j.begin_object(json::Writer::Layout::kOneLine).key("means").begin_array();
    for (double m : r.aa->means) j.value(m);
    j.end_array().field("range_s", r.aa->range_s).field("rel", r.aa->rel).end_object();
  } else {
    j.null();
  }
  j.key("comparisons").begin_array();
  for (const ArmVerdict& v : r.verdicts) {
    j.begin_object().field("arm", v.arm).key("pairs").begin_array();
    for (const Pair& p : v.pairs) {
      j.begin_object(json::Writer::Layout::kOneLine)
          .field("rank", p.rank)
          .field("control_run", p.control_run)
          .field("arm_run", p.arm_run)
          .field("diff_s", p.diff_s)
          .key("dropped");
      if (p.dropped.empty()) {
        j.null();
      } else {
        j.value(p.dropped);
      }
      j.key("setup");
      if (p.setup.evaluated) {
        j.value(p.setup.text());
      } else {
        j.null();
      }
      j.end_object();
    }
    j.end_array().list("unpaired", v.unpaired);
    j.field("pairs_used", static_cast<std::int64_t>(v.diffs.size()))
        .field("mean_diff_s", v.mean_diff_s)
        .field("control_mean_s", v.control_mean_s)
        .key("diff_ci");
    if (v.diff_ci) {
      j.begin_object(json::Writer::Layout::kOneLine)
          .field("low", v.diff_ci->low)
          .field("high", v.diff_ci->high)
          .end_object();
    } else {
      j.null();
    }
    j.field("verdict", verdict_name(v.verdict)).end_object();
  }
  j.end_array().list("failed_runs", r.failed_runs).key("diagnostics").begin_array();
  for (const Diagnostic& d : r.diagnostics) {
    j.begin_object(json::Writer::Layout::kOneLine)
        .field("severity", severity_name(d.severity))
        .field("where", d.where)
        .field("message", d.message)
        .end_object();
  }
  j.end_array().end_object();
}

}  // namespace

Outcome outcome_of(const std::vector<PodReport>& pods) {
  for (const PodReport& pod : pods) {
    if (pod.outcome() == Outcome::kFail) return Outcome::kFail;
  }
  return Outcome::kPass;
}

std::vector<AcrossPods> across_pods(const std::vector<PodReport>& pods) {
  std::vector<AcrossPods> out;
  if (pods.size() < 2) return out;
  for (const std::string& arm : pods[0].arms) {
    AcrossPods a;
    a.arm = arm;
    for (const PodReport& pod : pods) {
      std::vector<double> means;
      for (const ArmRun& run : pod.runs) {
        if (run.arm == arm && run.failed.empty()) means.push_back(*run.mean_s);
      }
      a.means_s.push_back(means.empty() ? std::nullopt : std::optional<double>(mean_of(means)));
    }
    for (const std::optional<double>& mean : a.means_s) {
      a.diff_s.push_back(mean && a.means_s[0] ? std::optional<double>(*mean - *a.means_s[0])
                                              : std::nullopt);
    }
    // Its interval: the arm's k-th run in a pod against its k-th run in the first, paired and
    // drawn as the pairs inside a pod are.
    std::vector<const ArmRun*> first = runs_of(pods[0], arm);
    for (const PodReport& pod : pods) {
      if (&pod == &pods[0]) {
        a.pairs_used.push_back(0);
        a.diff_ci.push_back(std::nullopt);
        continue;
      }
      ArmVerdict paired = pair_runs(arm, first, runs_of(pod, arm), pods[0].bootstrap);
      a.pairs_used.push_back(paired.diffs.size());
      a.diff_ci.push_back(paired.diff_ci);
    }
    out.push_back(std::move(a));
  }
  return out;
}

std::string format_arms_text(const std::vector<PodReport>& pods) {
  std::string s =
      "same-pod A/B figures:\n"
      "  run mean: a run's mean seconds per step over its steady steps (its first step, which "
      "compiles, shown apart)\n"
      "  pair diff: an arm's k-th run minus the control's k-th run (neighbours in run order), "
      "seconds per step; below 0 is faster\n"
      "  interval: seeded bootstrap of the mean pair diff (needs 3 pairs); verdict: from the "
      "interval against 0\n"
      "  across pods: one arm's mean of its run means in each pod minus the first pod's; its "
      "interval pairs the arm's k-th runs in the two pods as above\n"
      "  A/A range: the control's own max - min run mean in this pod (drift included, which the "
      "pairs of an abba order cancel)\n";
  for (const PodReport& pod : pods) s += "\n" + pod_text(pod);
  std::vector<AcrossPods> across = across_pods(pods);
  if (!across.empty()) {
    s += fmt::format(
        "\nacross pods (the reference: one arm's mean of its run means in each pod, minus the "
        "first pod's, {}):\n",
        pods[0].source);
    for (const AcrossPods& a : across) {
      s += fmt::format("  {}:", a.arm);
      for (std::size_t i = 0; i < a.means_s.size(); ++i) {
        s += a.means_s[i] ? fmt::format(" {} s", report::seconds(*a.means_s[i])) : " -";
        if (i == 0 || !a.diff_s[i]) continue;
        s += fmt::format(" ({:+.4f} s", *a.diff_s[i]);
        s += a.diff_ci[i]
                 ? fmt::format(", {} over {} pairs)", interval_text(*a.diff_ci[i]), a.pairs_used[i])
                 : fmt::format("; {})", too_few_pairs_text(a.pairs_used[i]));
      }
      s += "\n";
    }
  }
  return s;
}

std::string format_arms_json(const std::vector<PodReport>& pods) {
  json::Writer j;
  j.begin_object().field("schema", "rtb.bench-report.arms/1").key("pods").begin_array();
  for (const PodReport& pod : pods) pod_json(j, pod);
  j.end_array().key("across_pods").begin_array();
  for (const AcrossPods& a : across_pods(pods)) {
    j.begin_object(json::Writer::Layout::kOneLine).field("arm", a.arm).key("means_s").begin_array();
    for (const std::optional<double>& m : a.means_s) j.value(m);
    j.end_array().key("diff_s").begin_array();
    for (const std::optional<double>& d : a.diff_s) j.value(d);
    j.end_array().key("pairs_used").begin_array();
    for (std::size_t n : a.pairs_used) j.value(static_cast<std::int64_t>(n));
    j.end_array().key("diff_ci").begin_array();
    for (const std::optional<Interval>& ci : a.diff_ci) {
      if (ci) {
        j.begin_object().field("low", ci->low).field("high", ci->high).end_object();
      } else {
        j.null();
      }
    }
    j.end_array().end_object();
  }
  j.end_array().end_object();
  return std::move(j).str();
}

}  // namespace rtb::logs::arms
