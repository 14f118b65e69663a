// The AOT memory check of a bench render: MaxText's trainer-engine compile
// (`python -m maxtext.training_engine.maxtext_engine_compile <base.yml> key=value...`) run with
// what the bench trainer would run: its MaxText keys (as Tunix's build_maxtext_config derives them
// from the trainer argv and environment, then MAXTEXT_EXTRA_FLAGS, which Tunix appends last), its
// mesh, micro-batch and log-prob chunk, the orchestrator's GRPO options (compile_engine_loss=grpo),
// its libtpu flags, and the trainer slice as compile_topology with one slice.
//
// Modules: aot_input (reading the render), aot_plan (plan_aot), aot_format (script, JSON, explain),
// aot_run (running the compile here and summarizing its log: --run).
// plan_aot() reads a rendered bench JobSet (render.h), so every render-bench knob applies to the
// compile exactly as it applies to the bench. aot_script() writes the plan as a bash script in
// which every value from the render is quoted with k8s::shell::quote.
#pragma once

#include <yaml-cpp/yaml.h>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rtb/base/diagnostic.h"
#include "rtb/base/outcome.h"
#include "rtb/base/process.h"
#include "rtb/logs/memlog_verdict.h"

namespace rtb::bench {

inline constexpr std::string_view kEngineCompileModule =
    "maxtext.training_engine.maxtext_engine_compile";
// The exit status of an AOT script whose Python has no MaxText engine compile.
inline constexpr int kAotNoMaxText = 3;
// The log-prob chunk the compile uses when the render sets none (the seed's aot_check default).
inline constexpr long long kAotDefaultLogpsChunk = 512;

struct AotOptions {
  std::string python = "python3";
  // MaxText's base config; default: the base.yml of the MaxText the Python imports.
  std::optional<std::string> base_config;
  // The compile's log; default: logs/aot-bench-<UTC time>.log, named when the script runs.
  std::optional<std::string> log;
  std::vector<std::string> compile_keys;  // KEY=VALUE, passed last (they win)
  std::string source;                     // the DRY_RUN's name, for the script's header
  std::string tool_version;
  // compute_logps_chunk_size when the render sets it nowhere (argv, environment,
  // MAXTEXT_EXTRA_FLAGS); see aot_logps_chunk_default().
  long long default_logps_chunk = kAotDefaultLogpsChunk;
};

// The default chunk from the AOT_LOGPS_CHUNK_SIZE environment value: unset or empty gives
// kAotDefaultLogpsChunk. Throws rtb::Error for a value that is not an integer >= 0.
long long aot_logps_chunk_default(const char* env_value);

struct AotKey {
  std::string key;
  std::string value;
  std::string origin;  // what it comes from: "--mesh_fsdp", "MAXTEXT_EXTRA_FLAGS", "Tunix", ...
};

struct AotPlan {
  std::string bench_name;
  std::string slice;             // "tpu7x:4x4x8"
  std::string chip;              // "tpu7x"
  std::string compile_topology;  // "tpu7x-256"
  int chips = 0;
  int devices = 0;
  double hbm_gib_per_device = 0;
  // The effective ICI mesh axes (the last value of each ici_<axis>_parallelism key, -1 filled in).
  std::vector<std::pair<std::string, long long>> mesh;
  long long train_micro_batch_size = 0;
  std::string per_device_batch_size;  // as Python prints micro / devices
  long long max_prompt_length = 0;
  long long max_response_length = 0;
  long long max_seq_token_per_tpu = 0;  // 0: rows are not packed
  long long max_segments_per_packed_row = 0;
  long long packed_rows = 0;  // per micro-batch: data x fsdp x fsdp_transpose x expert
  long long logps_chunk = 0;
  std::string grpo_config;                               // a YAML flow mapping
  std::vector<std::pair<std::string, std::string>> env;  // the compile's environment
  std::vector<AotKey> keys;                              // in order; the last of a key wins
  // Notes (no place): what the compile cannot reproduce, and what was left out. The script's
  // "# note:" lines; --json `diagnostics`, and `notes` (the messages) until rtb.aot-check/2.
  std::vector<Diagnostic> diagnostics;
};

// Plans the compile from a bench JobSet that render_bench() wrote. Throws rtb::Error for a JobSet
// without a bench trainer client, a trainer slice that names no known TPU topology, a mesh that
// does not fill the slice's devices, a micro-batch that FSDP does not divide, and malformed flags.
AotPlan plan_aot(const YAML::Node& bench, const AotOptions& options);

// The bash script: checks for MaxText, runs the compile with its output on stderr and in the log,
// and exits with the compile's status (kAotNoMaxText when the Python has no MaxText).
std::string aot_script(const AotPlan& plan, const AotOptions& options);

// The compiles of several arms' programs (a same-pod A/B, arms.h), each arm's aot_script run by
// its own bash in order, from a quoted heredoc; the script exits with the highest status.
std::string aot_arms_script(const std::vector<std::pair<std::string, std::string>>& arm_scripts);

// The plan as JSON, schema "rtb.aot-check/1" (docs/aot-check.md).
std::string aot_plan_json(const AotPlan& plan, const AotOptions& options);

// One arm of a same-pod A/B (arms.h): its name, the plan of its program and the options it was
// planned with (its own log, aot_arm_log_path, whenever a log is named).
struct AotArm {
  std::string name;
  AotPlan plan;
  AotOptions options;
};
// The arms' plans as JSON, schema "rtb.aot-check.arms/1": {"schema", "arms": [{"arm", and the
// fields of aot_plan_json after "schema"}]}.
std::string aot_arms_plan_json(const std::vector<AotArm>& arms);

// The log of one arm's compile under --run: `log` (the --log or the default) with "-<arm>" before
// the file name's extension: logs/aot-bench-20261030T011938Z-base.log.
std::string aot_arm_log_path(std::string_view log, std::string_view arm);

// Throws rtb::Error in one line ("--run needs a Python with MaxText: ...") unless options.python
// can import MaxText's engine compile (maxtext_probe_code), before anything is compiled.
void check_aot_python(const AotOptions& options);

// Runs the plan's compile here (aot_script through run_bash: its output on the tool's stderr and
// in options.log, which must be set), then summarizes that log as aot-summarize does, against
// `hbm_gib` per device, else the plan's chip. Throws rtb::Error when the script ends without
// writing the log (no MaxText: the one line of check_aot_python), or when the log cannot be judged
// (naming the compile's status when it failed). The summary's outcome: kPass every kernel fits,
// kFail a kernel does not fit or the compile ran out of memory.
logs::Summary run_aot(const AotPlan& plan, const AotOptions& options,
                      std::optional<double> hbm_gib);

// The summary of each arm's compile (--run with arms), in the arms' order.
struct AotArmResult {
  std::string name;
  logs::Summary summary;
};
// The worst of the arms' outcomes: kFail when any arm's does not fit.
Outcome aot_arms_outcome(const std::vector<AotArmResult>& results);
// Text: one block per arm, "arm <name>:" and its summary table (format_summary_table), a blank
// line between blocks.
std::string aot_arms_run_text(const std::vector<AotArmResult>& results);
// JSON, schema "rtb.aot-check.arms-run/1": {"schema", "exit_code" (aot_arms_outcome's), "arms":
// [{"arm", and the fields of the rtb.aot-summarize/1 document after "schema"}]}.
std::string aot_arms_run_json(const std::vector<AotArmResult>& results);

// The keys with where each comes from, one per line, for --explain.
std::string explain_aot_keys(const AotPlan& plan);

// logs/aot-bench-20261030T011938Z.log for that moment (UTC).
std::string aot_log_path(std::chrono::system_clock::time_point now);

// Python code that exits 0 and prints MaxText's base.yml when the interpreter has MaxText's engine
// compile, and fails otherwise.
std::string_view maxtext_probe_code();

// Python's str() of a float (0.25, 1.0, 1e-05).
std::string python_float(double value);

// Runs `bash -c script` (its $0 "aot-check") with the tool's stdin, stdout and stderr; returns its
// exit status (128 + N when a signal N ended it). Throws rtb::Error when bash cannot be started.
inline int run_bash(const std::string& script) {
  return run_process({"bash", "-c", script, "aot-check"});
}
// Runs a program found on PATH with stdout and stderr discarded (base/process.h).
using rtb::run_quiet;

}  // namespace rtb::bench
