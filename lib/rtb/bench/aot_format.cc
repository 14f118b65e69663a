// aot-check's outputs of a plan (aot.h): the compile script, the --json plan and --explain.
#include <fmt/format.h>

#include <ctime>

#include "rtb/base/json.h"
#include "rtb/bench/aot.h"
#include "rtb/bench/render.h"
#include "rtb/k8s/shell.h"
#include "rtb/logs/memlog_format.h"

namespace rtb::bench {
namespace {

// Text safe inside a `#` comment line: no line breaks or other control characters.
std::string comment_safe(std::string_view text) {
  std::string out;
  for (char c : text) out += static_cast<unsigned char>(c) < 0x20 || c == 0x7f ? '?' : c;
  return out;
}

std::string mesh_text(const AotPlan& plan) {
  std::string out;
  long long product = 1;
  for (const auto& [axis, value] : plan.mesh) {
    product *= value;
    if (value == 1) continue;
    out += (out.empty() ? "" : " x ") + fmt::format("{} {}", axis, value);
  }
  return fmt::format("{} = {} devices", out.empty() ? "1" : out, product);
}

}  // namespace

std::string_view maxtext_probe_code() {
  return "import importlib.util as u, os, sys; "
         "e = u.find_spec(\"maxtext.training_engine.maxtext_engine_compile\"); "
         "c = u.find_spec(\"maxtext.configs\"); "
         "e and c or sys.exit(1); "
         "print(os.path.join(list(c.submodule_search_locations)[0], \"base.yml\"))";
}

std::string aot_log_path(std::chrono::system_clock::time_point now) {
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm utc{};
  gmtime_r(&t, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &utc);
  return fmt::format("logs/aot-bench-{}.log", stamp);
}

std::string explain_aot_keys(const AotPlan& plan) {
  std::string out;
  for (const AotKey& k : plan.keys) out += fmt::format("{}={}  <- {}\n", k.key, k.value, k.origin);
  for (const auto& [name, value] : plan.env) out += fmt::format("env {}={}\n", name, value);
  return out;
}

std::string aot_script(const AotPlan& plan, const AotOptions& options) {
  std::string s = "#!/usr/bin/env bash\n";
  s += fmt::format(
      "# AOT memory check rendered by aot-check {} from {}: MaxText's trainer-engine compile of\n"
      "# the bench trainer {}, on abstract weights (no TPU needed: a CPU host with MaxText, Tunix\n"
      "# and libtpu installed).\n",
      comment_safe(options.tool_version), comment_safe(options.source), plan.bench_name);
  s += fmt::format("#   trainer slice  {}: compile_topology={}, {} chips, {} devices, 1 slice\n",
                   plan.slice, plan.compile_topology, plan.chips, plan.devices);
  s += fmt::format("#   mesh           {}\n", mesh_text(plan));
  s += fmt::format(
      "#   micro-batch    {} sequences (per_device_batch_size={}) of {} prompt + {} response "
      "tokens\n",
      plan.train_micro_batch_size, plan.per_device_batch_size, plan.max_prompt_length,
      plan.max_response_length);
  if (plan.max_seq_token_per_tpu > 0) {
    s += fmt::format("#   packing        {} rows of {} tokens per micro-batch", plan.packed_rows,
                     plan.max_seq_token_per_tpu);
    if (plan.max_segments_per_packed_row > 0)
      s += fmt::format(", at most {} segments each", plan.max_segments_per_packed_row);
    s += "\n";
  }
  s += plan.logps_chunk > 0
           ? fmt::format("#   log-probs      chunks of {} tokens\n", plan.logps_chunk)
           : "#   log-probs      not chunked (whole-sequence logits)\n";
  s += fmt::format("#   HBM            {} GiB per device ({})\n", plan.hbm_gib_per_device,
                   plan.chip);
  for (const Diagnostic& n : plan.diagnostics) s += "# note: " + comment_safe(n.message) + "\n";
  s += "set -uo pipefail\n\n";
  s += "PYTHON=" + k8s::shell::quote(options.python) + "\n";
  if (options.log) {
    s += "LOG=" + k8s::shell::quote(*options.log) + "\n";
  } else {
    s += "LOG=\"logs/aot-bench-$(date -u +%Y%m%dT%H%M%SZ).log\"\n";
  }
  std::string probe = k8s::shell::quote(maxtext_probe_code());
  std::string missing = fmt::format(
      "  echo \"aot-check: $PYTHON cannot import {} (run this where MaxText, Tunix and libtpu are "
      "installed, or set PYTHON)\" >&2\n  exit {}\n",
      kEngineCompileModule, kAotNoMaxText);
  if (options.base_config) {
    s += "if ! \"$PYTHON\" -c " + probe + " >/dev/null 2>&1; then\n" + missing + "fi\n";
    s += "BASE_CONFIG=" + k8s::shell::quote(*options.base_config) + "\n";
  } else {
    s += "if ! BASE_CONFIG=$(\"$PYTHON\" -c " + probe + " 2>/dev/null); then\n" + missing + "fi\n";
  }
  s += "mkdir -p -- \"$(dirname -- \"$LOG\")\" || exit 2\n";
  s +=
      fmt::format("echo \"aot-check: compiling for {}; log: $LOG\" >&2\n\n", plan.compile_topology);
  std::vector<std::string> lines;
  for (const auto& [name, value] : plan.env) lines.push_back(name + "=" + k8s::shell::quote(value));
  lines.push_back("\"$PYTHON\" -m " + std::string(kEngineCompileModule) + " \"$BASE_CONFIG\"");
  for (const AotKey& k : plan.keys) lines.push_back(k8s::shell::quote(k.key + "=" + k.value));
  for (std::size_t i = 0; i < lines.size(); ++i) {
    s += (i == 0 ? "" : "  ") + lines[i] + " \\\n";
  }
  s += "  2>&1 | tee -- \"$LOG\" >&2\n";
  s += "STATUS=${PIPESTATUS[0]}\n";
  s += fmt::format(
      "echo \"aot-check: the compile exited with status $STATUS; summarize it with: aot-summarize "
      "--chip {} $LOG\" >&2\n",
      plan.chip);
  s += "exit \"$STATUS\"\n";
  return s;
}

namespace {

// The plan's fields after "schema", into the object `j` has open.
void write_plan_fields(json::Writer& j, const AotPlan& plan, const AotOptions& options) {
  using Layout = json::Writer::Layout;
  auto count = [](long long value) { return static_cast<std::int64_t>(value); };
  j.field("bench", plan.bench_name)
      .field("module", kEngineCompileModule)
      .field("python", options.python)
      .field("base_config", options.base_config)
      .field("log", options.log)
      .field("slice", plan.slice)
      .field("chip", plan.chip)
      .field("compile_topology", plan.compile_topology)
      .field("chips", plan.chips)
      .field("devices", plan.devices)
      .field("hbm_gib_per_device", plan.hbm_gib_per_device);
  j.key("mesh").begin_object(Layout::kOneLine);
  for (const auto& [axis, size] : plan.mesh) j.field(axis, count(size));
  j.end_object();
  j.key("micro_batch")
      .begin_object(Layout::kOneLine)
      .field("sequences", count(plan.train_micro_batch_size))
      .field("per_device_batch_size", plan.per_device_batch_size)
      .field("max_prompt_length", count(plan.max_prompt_length))
      .field("max_response_length", count(plan.max_response_length))
      .field("packed_row_tokens", count(plan.max_seq_token_per_tpu))
      .field("packed_rows", count(plan.packed_rows))
      .field("max_segments_per_packed_row", count(plan.max_segments_per_packed_row))
      .end_object();
  j.field("logps_chunk_size", count(plan.logps_chunk)).field("grpo_config", plan.grpo_config);
  j.key("env").begin_array();
  for (const auto& [name, value] : plan.env)
    j.begin_object(Layout::kOneLine).field("name", name).field("value", value).end_object();
  j.end_array().key("keys").begin_array();
  for (const AotKey& k : plan.keys) {
    j.begin_object(Layout::kOneLine)
        .field("key", k.key)
        .field("value", k.value)
        .field("from", k.origin)
        .end_object();
  }
  j.end_array().key("notes").begin_array(Layout::kOneLine);
  for (const Diagnostic& note : plan.diagnostics) j.value(note.message);
  j.end_array();
  write_json(j, "diagnostics", plan.diagnostics);
}

}  // namespace

std::string aot_plan_json(const AotPlan& plan, const AotOptions& options) {
  json::Writer j;
  j.begin_object().field("schema", "rtb.aot-check/1");
  write_plan_fields(j, plan, options);
  return std::move(j.end_object()).str();
}

std::string aot_arms_plan_json(const std::vector<AotArm>& arms) {
  json::Writer j;
  j.begin_object().field("schema", "rtb.aot-check.arms/1").key("arms").begin_array();
  for (const AotArm& arm : arms) {
    j.begin_object().field("arm", arm.name);
    write_plan_fields(j, arm.plan, arm.options);
    j.end_object();
  }
  return std::move(j.end_array().end_object()).str();
}

Outcome aot_arms_outcome(const std::vector<AotArmResult>& results) {
  Outcome worst = Outcome::kPass;
  for (const AotArmResult& result : results) {
    Outcome outcome = result.summary.outcome();
    if (exit_code(outcome) > exit_code(worst)) worst = outcome;
  }
  return worst;
}

std::string aot_arms_run_json(const std::vector<AotArmResult>& results) {
  json::Writer j;
  j.begin_object()
      .field("schema", "rtb.aot-check.arms-run/1")
      .field("exit_code", exit_code(aot_arms_outcome(results)))
      .key("arms")
      .begin_array();
  for (const AotArmResult& result : results) {
    j.begin_object().field("arm", result.name);
    logs::write_summary_fields(j, result.summary);
    j.end_object();
  }
  return std::move(j.end_array().end_object()).str();
}

std::string aot_arms_run_text(const std::vector<AotArmResult>& results) {
  std::string out;
  for (const AotArmResult& result : results) {
    if (!out.empty()) out += '\n';
    out += fmt::format("arm {}:\n", result.name) + logs::format_summary_table(result.summary);
  }
  return out;
}

std::string aot_arms_script(const std::vector<std::pair<std::string, std::string>>& arm_scripts) {
  std::string s = fmt::format(
      "#!/usr/bin/env bash\n"
      "# aot-check: the compiles of {} arms' programs, each by its own bash, in order; the exit "
      "status\n# is the highest of theirs.\n"
      "STATUS=0\n",
      arm_scripts.size());
  for (const auto& [arm, script] : arm_scripts) {
    std::string terminator = heredoc_terminator(script);
    std::string body = script;
    if (body.empty() || body.back() != '\n') body += '\n';
    s += fmt::format(
        "\necho {} >&2\n"
        "ARM_SCRIPT=$(cat <<'{}'\n{}{}\n)\n"
        "bash -c \"$ARM_SCRIPT\" aot-check </dev/null\n"
        "RC=$?\n"
        "if [ \"$RC\" -gt \"$STATUS\" ]; then STATUS=$RC; fi\n",
        k8s::shell::quote("aot-check: arm " + arm), terminator, body, terminator);
  }
  s += "exit \"$STATUS\"\n";
  return s;
}

}  // namespace rtb::bench
