#include "rtb/logs/report_json.h"

#include <fmt/format.h>

#include "rtb/base/diagnostic.h"
#include "rtb/base/json.h"
#include "rtb/base/stats.h"

namespace rtb::logs::report {
using Json = json::Writer;

// ---- JSON --------------------------------------------------------------------------------------

namespace {

void interval_fields(Json& j, const std::optional<Interval>& ci) {
  j.field("ci_low", ci ? std::optional<double>(ci->low) : std::nullopt);
  j.field("ci_high", ci ? std::optional<double>(ci->high) : std::nullopt);
}

// `not_compared`: the figures were refused (their timings differ), not too few.
void comparison_fields(Json& j, const std::optional<MetricComparison>& metric,
                       bool not_compared = false) {
  if (!metric) {
    j.key("control").null().key("value").null().key("ratio").null();
    j.key("ci_low").null().key("ci_high").null();
    j.key("diff_s").null().key("diff_ci_low").null().key("diff_ci_high").null();
    j.field("verdict", not_compared ? "not_compared" : verdict_name(Verdict::kInsufficient));
    j.key("noise_floor").null();
    return;
  }
  const Comparison& s = metric->stats;
  j.field("control", s.control).field("value", s.variant).field("ratio", s.ratio);
  j.field("ci_low", s.ratio_ci.low).field("ci_high", s.ratio_ci.high);
  j.field("diff_s", s.diff).field("diff_ci_low", s.diff_ci.low);
  j.field("diff_ci_high", s.diff_ci.high);
  j.field("verdict", verdict_name(metric->verdict));
  j.field("noise_floor", metric->noise_floor);
}

// `key`: an object whose members `members` writes, or null when `present` is false.
template <typename Members>
void object_or_null(Json& j, std::string_view key, bool present, Members&& members) {
  j.key(key);
  if (!present) {
    j.null();
    return;
  }
  j.begin_object();
  members();
  j.end_object();
}

void summary_stat(Json& j, std::string_view name, const std::vector<double>& values,
                  std::size_t unknown, bool median) {
  j.key(name).begin_object();
  if (values.empty()) {
    j.key(median ? "median" : "mean").null();
  } else {
    j.field(median ? "median" : "mean", median ? stats::median(values) : stats::mean(values));
  }
  j.field("n", values.size()).field("unknown", unknown);
  j.end_object();
}

// "setup": null when the run's log has no set-up fields; else each item as shown (null: not
// logged) and the figures beside it.
void setup_fields(Json& j, const RunAnalysis& run) {
  object_or_null(j, "setup", run.setup.logged, [&] {
    for (const char* key : kSetupKeys) {
      const SetupItem* entry = run.setup.find(key);
      j.field(key, entry != nullptr ? entry->shown : std::nullopt);
    }
    j.field("replays_total", run.setup.replays);
    j.field("replay_counted_steps", run.setup.replay_counted_steps);
    j.field("train_step_s", run.setup.train_step_s);
    j.field("boundary_free_step_s_estimate", run.setup.boundary_free_step_s);
    j.field("fence_s", run.setup.fence_s);
  });
}

void setup_difference(Json& j, const SetupDifference& difference) {
  object_or_null(j, "setup", difference.evaluated, [&] {
    j.field("same", difference.differs.empty() && difference.unknown.empty());
    j.list("differs", difference.differs);
    j.list("unknown", difference.unknown);
    j.field("text", difference.text());
  });
}

// The issue 25 fields of BENCH_SUMMARY, as logged (null when absent).
void summary_setup_fields(Json& j, const steplog::BenchSummary& s) {
  j.field("final_rows", s.final_rows);
  j.field("boundary_free_step_s", s.boundary_free_step_s);
  j.field("fence_s", s.fence_s);
  j.field("microbatch_timing_why", s.microbatch_timing_why);
  object_or_null(j, "update_path", s.update_path.has_value(),
                 [&] { j.field("ran", s.update_path->ran).field("why", s.update_path->why); });
  object_or_null(j, "weights", s.weights.has_value(), [&] {
    j.field("source", s.weights->source).field("path", s.weights->path);
    j.field("why", s.weights->why);
  });
  object_or_null(j, "profiler", s.profiler.has_value(),
                 [&] { j.field("by", s.profiler->by).field("why", s.profiler->why); });
  object_or_null(j, "grad_norm", s.grad_norm.has_value(), [&] {
    j.field("reported", s.grad_norm->reported).field("metric", s.grad_norm->metric);
    j.field("steps", s.grad_norm->steps);
    j.field("skip_step_on_spikes", s.grad_norm->skip_step_on_spikes);
    j.field("why", s.grad_norm->why);
  });
}

}  // namespace

std::string format_json(const Report& report) {
  const Options& options = report.options;
  Json j;
  j.begin_object();
  j.field("schema", "rtb.bench-report/1");
  j.key("options").begin_object();
  if (options.steps) {
    j.field("steps", options.steps->str());
  } else {
    j.field("steps", "all-but-first");
  }
  j.field("microbatches", options.microbatches.str());
  j.field("resamples", options.bootstrap.resamples);
  j.field("confidence", options.bootstrap.confidence);
  j.field("seed", static_cast<std::int64_t>(options.bootstrap.seed));
  j.field("fail_if_slower_pct", options.fail_if_slower_pct);
  j.field("include_profiled", options.include_profiled);
  j.field("outlier_factor", options.outlier_factor);
  j.field("exclude_outliers", !options.include_outliers);
  j.field("require_no_drops", options.require_no_drops);
  j.field("require_same_setup", options.require_same_setup);
  j.end_object();

  j.key("runs").begin_array();
  for (const RunAnalysis& run : report.runs) {
    j.begin_object();
    j.field("name", run.name).field("source", run.source);
    j.field("format", steplog::log_kind_name(run.kind));
    j.field("partial", run.partial);
    j.key("partial_reason");
    run.partial ? j.value(run.partial_reason) : j.null();
    j.list("steps_logged", run.steps_logged);
    j.list("steps_used", run.steps_used);
    j.key("step_s").begin_object();
    j.field("mean", run.step_mean)
        .field("sd", run.step_mean ? std::optional<double>(run.step_sd) : std::nullopt);
    j.field("n", run.step_s.size());
    interval_fields(j, run.step_ci);
    j.list("values", run.step_s);
    j.end_object();
    j.key("step_timing");
    run.step_timing ? j.value(step_timing_name(*run.step_timing)) : j.null();
    object_or_null(j, "log_timestamps", run.log_timestamps.has_value(), [&] {
      const steplog::LogTimestamps& stamps = *run.log_timestamps;
      j.field("rule",
              "seconds from one step's first log line (its earliest timestamp) to the next "
              "step's; a step without a timestamped line gets an even share of its gap");
      j.field("clock", stamps.clock);
      double per_second = 1.0;
      for (int i = 0; i < stamps.digits; ++i) per_second *= 10;
      j.field("resolution_s", 1.0 / per_second);
      j.field("first_step", stamps.first_step);
      j.list("spread_steps", stamps.spread_steps);
      j.field("repeated_lines", stamps.repeated_lines);
    });
    j.key("microbatch_s").begin_object();
    j.field("median", run.microbatch_median).field("n", run.microbatch_s.size());
    interval_fields(j, run.microbatch_ci);
    j.field("source", json::null_if_empty(run.microbatch_source));
    j.end_object();
    j.key("microbatch_timing");
    run.microbatch_timing ? j.value(microbatch_timing_name(*run.microbatch_timing)) : j.null();
    j.field("microbatch_final_left_out", run.microbatch_final_left_out);
    j.list("profiled_steps_left_out", run.profiled_left_out);
    j.key("outliers").begin_object();
    j.field("rule", fmt::format("seconds above {:g}x the median of the selected steps",
                                run.outliers.factor));
    j.field("factor", run.outliers.factor).field("median_s", run.outliers.median_s);
    j.key("steps").begin_array();
    for (const OutlierStep& step : run.outliers.steps) {
      j.begin_object().field("step", step.step).field("seconds", step.seconds).end_object();
    }
    j.end_array();
    j.field("left_out", run.outliers.left_out);
    j.end_object();
    j.field("tflops_per_device", run.tflops_per_device);
    j.field("tokens_per_s_per_device", run.tokens_per_s_per_device);
    const TokenDroppingStatus& dropping = run.token_dropping;
    j.key("token_dropping").begin_object();
    j.field("verdict", drop_verdict_name(dropping.verdict));
    j.field("dropped_tokens", dropping.dropped_tokens);
    j.field("counted_steps", dropping.counted_steps);
    j.field("replays", dropping.replays);
    j.field("source", json::null_if_empty(dropping.source));
    j.field("why", dropping.why);
    j.field("shows_no_drops", dropping.shows_no_drops());
    j.end_object();
    object_or_null(j, "first_step", run.first_step.has_value(), [&] {
      j.field("step", run.first_step->step).field("seconds", run.first_step->seconds);
    });
    j.field("tokens_per_s_per_chip", run.tokens_per_s_per_chip);
    j.field("real_tokens_per_s_per_chip", run.real_tokens_per_s_per_chip);
    j.field("tokens_per_s_per_chip_unknown",
            json::null_if_empty(run.tokens_per_s_per_chip_unknown));
    const TimelineSummary& t = run.timeline;
    j.key("timeline").begin_object();
    j.field("steps", t.steps).field("microbatches", t.microbatches);
    j.field("ready_known", t.ready_known);
    summary_stat(j, "device_s", t.device_s, t.device_unknown, true);
    summary_stat(j, "idle_s_per_step", t.idle_s, t.idle_unknown, false);
    summary_stat(j, "update_s", t.update_s, t.update_unknown, false);
    j.key("sync_wait_s").begin_object();
    if (t.sync_wait_s.empty()) {
      j.key("mean").null();
    } else {
      j.field("mean", stats::mean(t.sync_wait_s));
    }
    j.field("n", t.sync_wait_s.size()).field("unknown", t.sync_unknown);
    j.field("not_applicable", t.sync_not_applicable);
    j.end_object();
    j.end_object();
    object_or_null(j, "summary", run.summary.has_value(), [&] {
      j.field("mean_step_s", run.summary->mean_step_s);
      j.field("median_microbatch_s", run.summary->median_microbatch_s);
      j.field("tokens_per_s_per_chip", run.summary->tokens_per_s_per_chip);
      j.field("real_tokens_per_s_per_chip", run.summary->real_tokens_per_s_per_chip);
      j.field("chips", run.summary->chips);
      j.field("rows", run.summary->rows);
      j.field("tokens_per_row", run.summary->tokens_per_row);
      j.field("micro_steps", run.summary->micro_steps);
      j.field("first_step_s", run.summary->first_step_s);
      j.field("microbatch_timing", json::null_if_empty(run.summary->microbatch_timing));
      const auto& stage = run.summary->stage_boundary;
      object_or_null(j, "stage_boundary", stage.has_value(), [&] {
        j.field("requested", stage->requested).field("resolved", stage->resolved);
        j.field("engaged", stage->engaged);
        j.list("staged_steps", stage->staged_steps);
        j.field("staged_step_count", stage->staged_step_count);
        j.field("latched_off", stage->latched_off);
      });
      summary_setup_fields(j, *run.summary);
    });
    setup_fields(j, run);
    j.list("warnings", texts_of(run.diagnostics));
    write_json(j, "diagnostics", run.diagnostics);
    j.end_object();
  }
  j.end_array();

  j.key("comparisons").begin_array();
  for (const RunComparison& c : report.comparisons) {
    j.begin_object();
    j.field("run", c.run).field("against", c.control);
    j.field("metric", "step_s");
    comparison_fields(j, c.step, !c.step_not_compared.empty());
    j.field("step_not_compared", json::null_if_empty(c.step_not_compared));
    object_or_null(j, "microbatch", c.microbatch_not_compared.empty(),
                   [&] { comparison_fields(j, c.microbatch); });
    j.field("microbatch_not_compared", json::null_if_empty(c.microbatch_not_compared));
    setup_difference(j, c.setup);
    j.end_object();
  }
  j.end_array();

  object_or_null(j, "noise_floor", report.noise_floor.has_value(), [&] {
    j.field("control_a", report.noise_floor->control_a);
    j.field("control_b", report.noise_floor->control_b);
    j.field("step_rel", report.noise_floor->step_rel);
    j.field("microbatch_rel", report.noise_floor->microbatch_rel);
    setup_difference(j, report.noise_floor->setup);
  });

  object_or_null(j, "numerics", report.numerics.has_value(), [&] {
    const NumericsReport& n = *report.numerics;
    j.field("reference_a", n.reference_a).field("reference_b", n.reference_b);
    j.field("variant", n.variant);
    j.list("steps", n.result.steps);
    j.key("gates").begin_array();
    for (const GateResult& gate : n.result.gates) {
      j.begin_object();
      j.field("name", gate.name);
      j.field("metric", json::null_if_empty(gate.metric));
      j.field("kind", gate_kind_name(gate.kind));
      j.field("limit", gate.limit);
      j.field("limit_from", gate.limit_from);
      j.field("value", gate.deviation);
      j.field("references", gate.reference_noise);
      j.field("worst_step", gate.worst_step);
      j.field("steps", gate.steps);
      j.field("status", gate_status_name(gate.status));
      j.field("detail", json::null_if_empty(gate.detail));
      j.end_object();
    }
    j.end_array();
    j.field("pass", n.result.pass);
  });

  object_or_null(j, "fail_if_slower", options.fail_if_slower_pct.has_value(), [&] {
    j.field("pct", *options.fail_if_slower_pct);
    j.field("tripped", !report.slower_than_allowed.empty());
    j.list("messages", report.slower_than_allowed);
  });
  object_or_null(j, "require_no_drops", options.require_no_drops, [&] {
    j.field("tripped", !report.drops_not_ruled_out.empty());
    j.list("messages", report.drops_not_ruled_out);
  });
  object_or_null(j, "require_same_setup", options.require_same_setup, [&] {
    j.field("tripped", !report.setups_differ.empty());
    j.list("messages", report.setups_differ);
  });
  j.list("warnings", texts_of(report.diagnostics));
  write_json(j, "diagnostics", report.diagnostics);
  j.field("exit_code", exit_code(report.outcome()));
  j.end_object();
  return j.str();
}

}  // namespace rtb::logs::report
