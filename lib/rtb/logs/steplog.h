// Parsers of the per-step log lines that bench-report reads: the bench driver's BENCH_STEP and
// BENCH_SUMMARY lines, the orchestrator's (and the driver's) TRAINER_STEP_TIMING line, and the e2e
// orchestrator's `Train step N - loss: ...` and `[StepMetrics step=N] trainer_metrics={...}` lines.
//
// Every marker is found anywhere in a line, so prefixes added on the way (kubectl --prefix and
// --timestamps, glog/absl `I1013 18:51:14.123456 140 file.py:12] `, Python logging's
// `<asctime> - [TrainerNode] `) do not matter, and lines that carry no marker are skipped.
// A marked line that does not parse (malformed JSON, a missing field) is skipped with a warning
// naming the file and line; the caller decides whether what is left is enough.
//
// Formats (see docs/tunix-maxtext-facts.md A.3 and D, and the module docstring of
// tools/render-bench/driver/bench_driver.py):
//   TRAINER_STEP_TIMING step=%d policy_version=%d rtt_s=%.3f timing=<compact JSON, schema v1>
//   TRAINER_STEP_TIMING step=N unavailable: <error>
//   BENCH_STEP {"step":N,"seconds":S,"microbatch_s":[...],"microbatch_timing":"device",
//               "tokens":T,"padded_tokens":P,"update":"fused","staged":B,"profiled":B,...,
//               "metrics":{...}}
//   BENCH_SUMMARY {"name":...,"steps":...,"micro_steps":...,"rows":...,"tokens_per_row":...,
//                  "chips":...,"first_step_s":...,"microbatch_timing":...,
//                  "stage_boundary":{...},"token_dropping":{...},...}
// The bench driver counts steps from 0 (step 0 compiles) since it logs "microbatch_timing";
// older drivers counted from 1. Both read the same: nothing here assumes the first step's number.
//   Train step %d - loss: %s - reward_mean: %.4f - ... - grad_norm: %s - ... - step_time: %.2fs
//   [StepMetrics step=%d] trainer_metrics=<Python dict repr>
// MaxText's own step line (metric_logger; the first form since Tokens/s was added):
//   completed step: N, seconds: S, TFLOP/s/device: X, Tokens/s/device: Y, total_weights: W,
//     loss: L[, lm_loss: ..., perplexity: ..., moe_lb_loss: ...]
//   completed step: N, seconds: S, TFLOP/s/device: X, loss: L
// `seconds` is the host's time between this step's completion and the previous one's as the host
// saw it: with asynchronous dispatch single steps read far off (0.03 s beside 3.3 s) while their
// mean over many steps is the device's pace.
// Tunix's PEFT trainer (tunix/sft/peft_trainer.py; the RL trainer and DPO's derive from it) logs
// losses only, no step time:
//   Train step N training loss: L  - training perplexity: P
//   Train step N eval loss: L - eval perplexity: P
// These two make a run only in a log without any of the lines above (a bench pod may print
// MaxText's lines from other code; they are not the bench's steps). Their prefixes' timestamps
// (glog's `I0706 16:50:26.253525`, Python logging's `2026-03-03 08:41:18[,123]`, an ISO 8601
// `2026-10-13T18:51:14.123Z`) give the pace: step N's seconds are the interval from the first
// appearance of the step before it to its own (LogTimestamps below).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rtb/base/diagnostic.h"
#include "rtb/base/io.h"
#include "rtb/base/literal.h"

namespace rtb::logs::steplog {

// A BENCH_STEP line with more micro-batch times than this is refused (skipped with a warning):
// real steps have tens of micro-batches, and every statistic resamples them thousands of times.
inline constexpr std::size_t kMaxMicrobatchesPerStep = 4096;
// parse_value() refuses a longer text (4096 micro-batch times and the metrics fit in ~100 KB).
inline constexpr std::size_t kMaxValueBytes = 1 << 20;

// ---- The lines read: one table ----------------------------------------------------------------
// Each marker the parser looks for, in the order it tries them (one marker per line, the first
// found wins; the machine lines come first), with how bench-report's --help and docs name it.
// The --help, the fuzz dictionary (fuzz/dicts/steplog.dict) and docs/bench-report.md are checked
// against this table.
enum class LineKind {
  kTiming,
  kBenchStep,
  kSummary,
  kStepMetrics,
  kCompletedStep,
  kTrainStep,
  kDriver
};
struct LineFormat {
  LineKind kind;
  std::string_view marker;  // found anywhere in a line
  std::string_view shown;   // how --help names the line
};
inline constexpr LineFormat kLineFormats[] = {
    {LineKind::kTiming, "TRAINER_STEP_TIMING step=", "TRAINER_STEP_TIMING"},
    {LineKind::kBenchStep, "BENCH_STEP {", "BENCH_STEP"},
    {LineKind::kSummary, "BENCH_SUMMARY {", "BENCH_SUMMARY"},
    {LineKind::kStepMetrics, "[StepMetrics step=", "[StepMetrics step=N]"},
    {LineKind::kCompletedStep, "completed step: ", "MaxText's `completed step: N, seconds: S`"},
    {LineKind::kTrainStep, "Train step ",
     "`Train step N - ...`, Tunix's `Train step N training loss:` (timed by its log timestamps)"},
    {LineKind::kDriver, "[TrainerBench] ", "the driver's [TrainerBench] lines"},
    {LineKind::kDriver, "bench_driver: failed: ", "`bench_driver: failed:`"},
};

// The lines of kLineFormats as --help names them, joined by ", ".
std::string line_format_list();

// ---- The JSON and Python-literal payloads of those lines (rtb/base/literal.h) -----------------

// Parses the one value that `text` holds (whitespace around it allowed): JSON as json.dumps writes
// it, or a Python literal as repr() writes it, numbers wrapped in a call such as np.float32(1.5)
// or Array(0.5, dtype=float32) included. Throws rtb::Error "column N: what is wrong", or when
// the text is longer than kMaxValueBytes.
Literal parse_value(std::string_view text, LiteralSyntax syntax);

// Numeric leaves of a dict, flattened with '/' between nested keys ({"a":{"b":1}} -> "a/b").
// Booleans count as 0/1; strings, nulls, lists and entries whose key is not a string are skipped.
std::map<std::string, double> numeric_leaves(const Literal& object);

// ---- What one log holds ------------------------------------------------------------------------

// One event of TRAINER_STEP_TIMING: seconds before the snapshot on the trainer host's monotonic
// clock (larger = earlier); nullopt when the JSON has null (the event was not observed, e.g.
// `ready` on a backend that publishes no readiness tokens) or lacks the field.
using Ago = std::optional<double>;

struct EventTiming {
  Ago dispatch_begin_ago_s;
  Ago dispatch_end_ago_s;
  Ago ready_ago_s;
};

struct MicroBatchTiming : EventTiming {
  std::int64_t index = 0;  // `i`: the RPC order within the step, 0-based
};

struct PrepareTiming {
  Ago recv_ago_s;
  Ago done_ago_s;
};

struct StepTiming {
  std::int64_t step = 0;
  std::optional<std::int64_t> policy_version;
  double rtt_s = 0.0;
  std::optional<std::int64_t> train_step;
  std::vector<MicroBatchTiming> mb;
  std::optional<EventTiming> update;     // null: no update in this step's record
  std::optional<PrepareTiming> prepare;  // null: the step took no weight sync
  std::size_t line = 0;
};

// One optimizer step, merged from the lines that describe it.
struct StepRecord {
  std::int64_t step = 0;
  std::optional<double> seconds;  // BENCH_STEP seconds, else `Train step` step_time, else
                                  // MaxText's `completed step` seconds
  std::string seconds_from;       // "BENCH_STEP", "Train step" or "completed step"
  std::vector<double> microbatch_s;
  // How microbatch_s was measured: "device" (each time runs to the device's completion of that
  // call) or "dispatch" (host dispatch intervals, which lag the device by up to two calls with an
  // asynchronous engine); empty when the line does not say (older drivers).
  std::string microbatch_timing;
  std::string microbatch_timing_source;  // "step_timing", "token", "loss", "dispatch" or empty
  std::optional<double> tokens;          // real (unpadded) tokens of the step
  std::optional<double> padded_tokens;   // rows x tokens_per_row x micro-batches
  std::optional<double> tokens_per_s_per_chip;
  // MaxText's `completed step` figures, per device as MaxText computes them from `seconds`.
  std::optional<double> tflops_per_device;
  std::optional<double> tokens_per_s_per_device;
  std::string update;          // "fused", "explicit", "deferred" or empty (not logged)
  std::optional<bool> staged;  // the step ran with the stage boundary engaged
  bool profiled = false;       // the step ran under the profiler (its times are inflated)
  // BENCH_STEP "dropped_tokens": the tokens the MoE layers dropped in this step, as the trainer's
  // metrics count them (absent when they count none).
  std::optional<double> dropped_tokens;
  // BENCH_STEP "train_step_s": the step's seconds minus its log-prob pass (equal to `seconds`
  // without one).
  std::optional<double> train_step_s;
  // BENCH_STEP "boundary_free_step_s": an ESTIMATE, the step with its first micro-batch replaced
  // by the step's median regular micro-batch; null when it could not be estimated.
  std::optional<double> boundary_free_step_s;
  // BENCH_STEP "replays": MoE dropless replays the trainer counted in this step (each a whole
  // extra forward/backward); nullopt when not counted.
  std::optional<std::int64_t> replays;
  // Numerics: BENCH_STEP `metrics`, `Train step` fields (loss, grad_norm, ...) and StepMetrics'
  // trainer_metrics. A value may be NaN or infinite (the orchestrator prints nan).
  std::map<std::string, double> metrics;
  std::size_t line = 0;
};

// BENCH_SUMMARY "stage_boundary": what was asked for and what the driver did.
struct StageBoundary {
  std::optional<std::string> requested;  // "auto", "on", "off", ...
  std::optional<std::string> resolved;
  std::optional<bool> engaged;
  // "staged_steps": the driver logs a count (older drivers: the list of staged steps, kept here
  // and counted).
  std::vector<std::int64_t> staged_steps;
  std::optional<std::int64_t> staged_step_count;
  // null when it never latched off; else the value as text (a reason or a step number).
  std::optional<std::string> latched_off;
};

// BENCH_SUMMARY "token_dropping": whether the run's MoE layers dropped tokens, as the driver
// judged it (token_dropping() in tools/render-bench/driver/bench_driver.py).
struct TokenDropping {
  std::string verdict;  // "none", "dropped", "replayed", "unknown" or "not-moe" as logged
  std::string why;
  std::optional<double> dropped_tokens;  // summed over the counted steps; nullopt: none counted
  std::optional<std::int64_t> counted_steps;
  std::string metric;  // the trainer's metric(s) counted, joined with ','; empty when none
  std::optional<double> capacity_factor;
  std::optional<double> ragged_buffer_factor;
  // MoE dropless replays summed over replay_counted_steps; nullopt: not counted.
  std::optional<std::int64_t> replays;
  std::optional<std::int64_t> replay_counted_steps;
  std::optional<bool> retry_when_tokens_dropped;  // the trainer config's; nullopt: unknown
};

// BENCH_SUMMARY "update_path": which update path the steps ran and why.
struct UpdatePath {
  std::string ran;  // "fused", "explicit", "deferred" or "mixed"
  std::string why;
};

// BENCH_SUMMARY "grad_norm": whether MaxText reported a gradient norm.
struct GradNormReport {
  bool reported = false;
  std::optional<std::string> metric;
  std::int64_t steps = 0;
  std::optional<bool> skip_step_on_spikes;
  std::string why;
};

// BENCH_SUMMARY "weights": random initialization or a checkpoint.
struct Weights {
  std::string source;  // "random" or "checkpoint"
  std::optional<std::string> path;
  std::string why;
};

// BENCH_SUMMARY "profiler": who made the trace.
struct Profiler {
  std::string by;  // "driver", "trainer" or "none"
  std::string why;
};

// One entry of BENCH_SUMMARY "choices": a resolved setting and where it came from.
struct Choice {
  std::optional<std::string> value;  // a scalar as text ("true", "1024", "x"); nullopt: null
  std::string source;
};

// BENCH_SUMMARY, the fields bench-report uses (absent fields stay nullopt or empty).
struct BenchSummary {
  std::string name;
  std::optional<std::int64_t> steps;
  std::optional<std::int64_t> micro_steps;
  std::optional<std::int64_t> rows;
  std::optional<std::int64_t> tokens_per_row;
  std::optional<std::int64_t> chips;
  std::optional<double> tokens_per_step;
  std::optional<double> first_step_s;
  std::optional<double> mean_step_s;
  std::optional<double> median_microbatch_s;
  std::string microbatch_timing;  // "device", "dispatch", "mixed" or empty (not logged)
  std::optional<double> tokens_per_s_per_chip;
  std::optional<double> real_tokens_per_s_per_chip;
  std::vector<std::int64_t> profiled_steps;
  std::optional<StageBoundary> stage_boundary;
  std::optional<TokenDropping> token_dropping;
  std::optional<std::int64_t> final_rows;  // rows of the step's last micro-batch
  // The fields of issue 25's contract (docs/bench-report.md "Set-up"); a wrong type in any of
  // them is an error, not a skipped line, so that a set-up difference cannot go unseen.
  std::optional<double> boundary_free_step_s;  // an ESTIMATE: mean over the steady steps
  std::optional<double> fence_s;               // the step-end fence on an idle device
  std::optional<UpdatePath> update_path;
  std::optional<GradNormReport> grad_norm;
  std::optional<Weights> weights;
  std::optional<Profiler> profiler;
  std::optional<std::string> microbatch_timing_why;
  std::map<std::string, Choice> choices;  // the scalar-valued entries
  std::size_t line = 0;
};

// ---- Log timestamps --------------------------------------------------------------------------

// A date and time in a line's prefix, as written (one clock and time zone per log is assumed).
struct LogTimestamp {
  bool has_year = false;  // glog's prefix has none
  std::int64_t year = 0;  // the year; for glog, counted from the log's first timestamped line (0)
  int month = 0;          // 1-12
  int day = 0;            // 1-31
  double second_of_day = 0.0;
  int digits = 0;  // digits after the seconds' point (0: to the second)
};

// The leftmost timestamp in `text` (the part of a line before its marker): glog/absl's
// `[IWEF]MMDD HH:MM:SS[.frac]`, or a date `YYYY-MM-DD HH:MM:SS[.,frac]` (Python logging's asctime)
// or `YYYY-MM-DDTHH:MM:SS[.frac]` (ISO 8601, kubectl --timestamps), each at the start of `text` or
// after a character that is no letter or digit. nullopt when there is none.
std::optional<LogTimestamp> find_log_timestamp(std::string_view text);

// How a Tunix trainer log without step durations (LogKind::kTunixPeft) was timed by its
// `Train step N training loss` lines' timestamps: step N's seconds are the interval from the first
// appearance (the earliest timestamp) of the timestamped step before it to its own. That is host
// time, everything between two steps' log lines (input, rollouts, evaluation, checkpoints), not a
// device time.
struct LogTimestamps {
  std::string clock;            // "glog" (no year: it rolls over at New Year) or "date"
  int digits = 0;               // the finest fraction of a second among the steps' timestamps
  std::int64_t first_step = 0;  // the first timestamped step: no interval (its start is unlogged)
  // Steps without a timestamped training line between two that have one: each gets an even share
  // of the gap's interval (which the next timestamped step shares too).
  std::vector<std::int64_t> spread_steps;
  // Training lines of a step already seen (several processes or loggers print each record).
  std::size_t repeated_lines = 0;
};

enum class LogKind {
  kUnknown,       // no step line at all
  kBench,         // bench driver output (BENCH_STEP / BENCH_SUMMARY / [TrainerBench])
  kOrchestrator,  // e2e orchestrator output (Train step / StepMetrics)
  kTimingOnly,    // TRAINER_STEP_TIMING lines only
  kMaxText,       // MaxText's `completed step:` lines (a pre-training or SFT run)
  kTunixPeft,     // Tunix's PEFT trainer `Train step N training loss:` lines (timed, if at all,
                  // by their log timestamps: RunLog::log_timestamps)
};
// "unknown", "bench", "orchestrator", "timing-only", "maxtext", "tunix-peft"
const char* log_kind_name(LogKind kind);

struct RunLog {
  std::string source;  // the name used in messages (display_name of the path)
  std::string name;    // BENCH_SUMMARY name, else the driver's start line, else empty
  LogKind kind = LogKind::kUnknown;
  std::vector<StepRecord> steps;                 // sorted by step, one per step
  std::vector<StepTiming> timings;               // sorted by step, one per step
  std::vector<std::int64_t> timing_unavailable;  // steps logged as `unavailable:`
  std::optional<BenchSummary> summary;
  // A Tunix trainer log whose training lines carry timestamps (kTunixPeft): how it was timed.
  std::optional<LogTimestamps> log_timestamps;
  std::optional<std::int64_t> planned_steps;        // "bench driver starting: N steps x M ..."
  std::optional<std::int64_t> planned_micro_steps;  // (M)
  std::string failure;  // the driver's `bench_driver: failed: ...` text, if any
  bool partial = false;
  std::string partial_reason;
  // Warnings about the log, where "file:line" (a line) or "file" (the whole log). bench-report's
  // --json lists them (`diagnostics`; `warnings`, their text, until rtb.bench-report/2).
  std::vector<Diagnostic> diagnostics;
  std::size_t lines = 0;

  bool has_step_lines() const { return !steps.empty() || !timings.empty(); }
};

// Streams a log line by line. Feed every line, then finish() once.
class RunLogParser {
 public:
  explicit RunLogParser(std::string source);
  void feed(std::string_view line, std::size_t number);
  // Sorts, merges duplicates (the last line of a step wins, with a warning), notes missing steps
  // and decides whether the run is partial.
  RunLog finish();

 private:
  void parse_timing(std::string_view rest, std::size_t number);
  void parse_bench_step(std::string_view json, std::size_t number);
  void parse_summary(std::string_view json, std::size_t number);
  // `prefix`: the line before the marker (where a timestamp would be).
  void parse_train_step(std::string_view rest, std::string_view prefix, std::size_t number);
  void parse_step_metrics(std::string_view rest, std::size_t number);
  void parse_completed_step(std::string_view rest, std::size_t number);
  // `rest` follows "Train step N " when the next word is "training" or "eval".
  void parse_peft_step(std::int64_t step, std::string_view rest, std::string_view prefix,
                       std::size_t number);
  // A training line's timestamp: the step's first appearance is its earliest.
  void stamp_peft_step(std::int64_t step, std::string_view prefix, std::size_t number);
  // The PEFT steps' seconds from their timestamps (when they make the run).
  void time_peft_steps();
  void parse_driver_line(std::string_view line);
  void warn(std::size_t number, const std::string& message);
  // A warning about the whole log (no line), never capped.
  void warn_log(std::string message);
  StepRecord& record(std::int64_t step, std::size_t number);

  static constexpr std::size_t kMaxLineWarnings = 100;

  RunLog log_;
  std::size_t line_warnings_ = 0;
  std::size_t dropped_warnings_ = 0;
  std::map<std::int64_t, StepRecord> steps_;
  std::map<std::int64_t, StepTiming> timings_;
  std::map<std::int64_t, std::size_t> bench_step_lines_;
  std::map<std::int64_t, std::size_t> train_step_lines_;
  std::map<std::int64_t, std::size_t> completed_step_lines_;
  std::map<std::int64_t, StepRecord> maxtext_steps_;  // used by finish() when nothing else is
  std::map<std::int64_t, StepRecord> peft_steps_;
  // Each PEFT step's first appearance: its earliest timestamp of the log's clock, and that line.
  struct StepStamp {
    LogTimestamp at;
    std::size_t line = 0;
  };
  std::map<std::int64_t, StepStamp> peft_stamps_;
  std::map<std::int64_t, std::size_t> peft_training_lines_;  // per step, its training lines
  std::optional<LogTimestamp> previous_glog_;  // the last glog timestamp read, with its year
  std::vector<std::int64_t> glog_leap_years_;  // glog years (from 0) that have a February 29
  std::string stamp_clock_;                    // "glog" or "date": the first timestamp's
  int stamp_digits_ = 0;
  // Warnings about MaxText's lines, said by finish() only when those lines make the run.
  void maxtext_warning(std::size_t number, std::string message);
  std::vector<std::pair<std::size_t, std::string>> maxtext_warnings_;
  std::size_t maxtext_warnings_dropped_ = 0;
  bool saw_bench_ = false;
  bool saw_orchestrator_ = false;
  bool saw_maxtext_ = false;
  bool saw_peft_ = false;
  bool finished_ = false;
};

// Feeds every line of a log file (or "-" for stdin) to `parser` (anything with feed(line,
// number), 1-based numbers) with bounded memory (rtb::for_each_line); the same over text in memory.
template <typename Parser>
void feed_log_file(Parser& parser, const std::string& path) {
  for_each_line(path, [&](std::string_view line, std::size_t number) {
    parser.feed(line, number);
    return true;
  });
}
template <typename Parser>
void feed_log_text(Parser& parser, std::string_view text) {
  std::size_t number = 0;
  while (!text.empty()) {
    std::size_t end = text.find('\n');
    parser.feed(text.substr(0, end), ++number);
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
}

// Reads a log file (or "-" for stdin) with bounded memory (rtb::for_each_line).
RunLog parse_run_log(const std::string& path);
// The same over text already in memory (tests); `source` names it in warnings.
RunLog parse_run_log_text(std::string_view text, const std::string& source);

// The run logs of one report, each distinct path parsed once (a log may be a run, half of the
// control pair and a numerics reference at once). "-" (stdin) can be read only once: a second
// get("-") throws rtb::Error.
class RunLogCache {
 public:
  RunLog get(const std::string& path);

 private:
  std::map<std::string, RunLog> cache_;
  bool stdin_used_ = false;
};

// ---- The timeline of one TRAINER_STEP_TIMING record -------------------------------------------

// Times in seconds after the step's first dispatch (the earliest dispatch_begin), on the
// trainer's clock. nullopt = not observed.
struct TimelineEvent {
  std::optional<double> dispatch_begin;
  std::optional<double> dispatch_end;
  std::optional<double> ready;
};

struct MicroBatchSpan {
  std::int64_t index = 0;  // 0-based RPC order
  TimelineEvent at;
  // ready - max(dispatch_end, previous ready): the device time of this micro-batch (the device
  // runs them back to back). Unknown when ready (or the previous ready) is missing.
  std::optional<double> device_s;
  // max(0, dispatch_begin - previous ready): the device sat idle waiting for this call.
  // Unknown for the first micro-batch and when the previous ready is missing.
  std::optional<double> idle_before_s;
};

struct StepTimeline {
  std::int64_t step = 0;
  std::vector<MicroBatchSpan> mb;
  std::optional<TimelineEvent> update;
  std::optional<double> update_idle_before_s;  // max(0, update.dispatch_begin - last mb ready)
  // update.ready - max(update.dispatch_end, last mb ready): the update's device time.
  std::optional<double> update_s;
  std::optional<TimelineEvent> prepare;  // dispatch_begin = recv, ready = done
  bool has_prepare = false;              // false: the step took no weight sync
  std::optional<double> sync_wait_s;     // prepare.recv - update.ready
  std::size_t ready_known = 0;           // micro-batches with a ready time
  // Sum of the idle gaps (micro-batches and the update); unknown when any gap is unknown.
  std::optional<double> idle_s;
  double span_end = 0.0;  // the latest known instant (for drawing)
};

StepTimeline step_timeline(const StepTiming& timing);

}  // namespace rtb::logs::steplog
