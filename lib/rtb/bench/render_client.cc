// render-bench: the client script and the driver's environment (render_steps.h).

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <set>

#include "rtb/base/compress.h"
#include "rtb/base/error.h"
#include "rtb/base/secrets.h"
#include "rtb/base/text.h"
#include "rtb/bench/driver_settings.h"
#include "rtb/bench/render_steps.h"
#include "rtb/bench/render_table.h"
#include "rtb/bench/trainer_config.h"
#include "rtb/k8s/diff.h"
#include "rtb/k8s/flags.h"
#include "rtb/k8s/shell.h"
#include "rtb/k8s/yaml.h"
#include "rtb/payload/routing.h"

namespace rtb::bench {
namespace render_steps {

namespace {

// What one rollout JobSet sets for the routed-expert setting, with where: its startup argv's last
// --return_routed_experts (bare: true, argparse's const), --return_routed_experts=V or
// --return_routed_experts V (argparse's nargs="?" takes the next word; taken here when it is a
// boolean word) or --no-return_routed_experts (false); else its startup block's
// RETURN_ROUTED_EXPERTS, else its client container's env list (run_rollout_node's argparse
// default reads the environment). A blank value is unset: no evidence. A rollout whose startup
// block cannot be read gives no evidence, with a warning.
std::optional<std::pair<std::string, std::string>> rollout_routed_experts_of(
    const k8s::Document& rollout, const std::string& source, std::vector<Diagnostic>& diagnostics) {
  k8s::ClientCommand client;
  try {
    client = k8s::JobSetView(rollout).client(source);
  } catch (const Error& e) {
    diagnostics.push_back({Severity::kWarning, "",
                           fmt::format("the rollout's --{} is not read: {}",
                                       kRolloutRoutedExpertsFlag, e.message())});
    return std::nullopt;
  }
  auto evidence = [](std::optional<std::pair<std::string, std::string>> found)
      -> std::optional<std::pair<std::string, std::string>> {
    if (found && trim(found->first).empty()) return std::nullopt;  // blank: unset
    return found;
  };
  std::optional<std::pair<std::string, std::string>> found;
  const std::vector<k8s::shell::Word>& words = client.startup.words;
  for (std::size_t i = 0; i < words.size(); ++i) {
    const std::string& word = words[i].value;
    if (k8s::flag_key(word, k8s::FlagStyle::kDashDash) != kRolloutRoutedExpertsFlag) continue;
    if (k8s::is_negated(word, k8s::FlagStyle::kDashDash)) {
      found.emplace("false", word);
    } else if (auto value = k8s::flag_value(word, k8s::FlagStyle::kDashDash)) {
      found.emplace(std::string(*value), word);
    } else if (i + 1 < words.size() && bool_word(words[i + 1].value)) {
      found.emplace(words[i + 1].value, fmt::format("{} {}", word, words[i + 1].value));
      ++i;
    } else {
      found.emplace("true", word);
    }
  }
  if (found) return evidence(found);
  for (const k8s::shell::Assignment& assignment : client.startup.env) {
    if (assignment.name == kRolloutRoutedExpertsEnv)
      found.emplace(assignment.value, assignment.source);
  }
  if (found) return evidence(found);
  if (auto value = container_env_value(client.container.node, kRolloutRoutedExpertsEnv)) {
    found.emplace(*value, fmt::format("env {}={}", kRolloutRoutedExpertsEnv, *value));
  }
  return evidence(found);
}

}  // namespace

std::optional<std::string> container_env_value(const YAML::Node& container, std::string_view name) {
  std::optional<std::string> value;
  YAML::Node env = k8s::yaml::lookup(container, "env");
  if (!env.IsSequence()) return value;
  for (const YAML::Node& item : env) {
    if (k8s::yaml::scalar_at(item, "name") == std::string(name)) {
      value = k8s::yaml::scalar_at(item, "value");
    }
  }
  return value;
}

std::vector<std::pair<std::string, std::string>> orchestrator_driver_env(
    const k8s::ClientCommand& orchestrator) {
  std::vector<std::pair<std::string, std::string>> found;
  for (std::string_view name : kOrchestratorDriverEnv) {
    std::optional<std::string> value;
    for (const k8s::shell::Assignment& assignment : orchestrator.startup.env) {
      if (assignment.name == name) value = assignment.value;
    }
    if (!value) value = container_env_value(orchestrator.container.node, name);
    if (value) found.emplace_back(std::string(name), *value);
  }
  return found;
}

namespace {

// The wrapper's opening: the header comment, the start line and the SIGTERM forwarding; with
// `several_runs`, SIGTERM also marks the pod as stopping, so that no further run starts.
std::string script_header(std::string_view what, std::string_view tool_version,
                          std::string_view purpose, bool several_runs) {
  std::string title(what);
  if (!title.empty())
    title[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(title[0])));
  return fmt::format(
      "# {} rendered by render-bench {}: {}.\n"
      "# PID 1 wrapper: SIGTERM goes to the driver, whose exit code is the container's.\n"
      "echo \"Program Start: $(date)\"\n"
      "PID=\n"
      "{}"
      "_forward_sigterm() {{ {}if [ -n \"$PID\" ]; then kill -TERM \"$PID\" 2>/dev/null; fi; }}\n"
      "trap _forward_sigterm TERM\n\n",
      title, tool_version, purpose, several_runs ? "STOPPING=\n" : "",
      several_runs ? "STOPPING=1; " : "");
}

// One run of the driver: the startup block (`block`: its lines, without the `(` and `) & PID=$!`
// lines), then the poll that lets bash run the SIGTERM trap promptly, and the wait.
std::string run_and_wait(std::string_view block) {
  return fmt::format(
      "(\n{}\n) & PID=$!\n\n"
      "# Poll, so that bash runs the SIGTERM trap promptly.\n"
      "while kill -0 \"$PID\" 2>/dev/null; do\n"
      "  sleep 5\n"
      "done\n"
      "wait \"$PID\"\n"
      "EXIT_CODE=$?\n",
      block);
}

// The lines that write the driver to kDriverPath, and the command arguments they read: verbatim
// in a quoted heredoc when `budget` bytes hold it (a reader of the manifest sees it as it is, and
// there are no arguments), else gzip-compressed and base64-encoded in pieces of whole lines that
// follow the script in the command ($1, $2, ...), which the pod joins and unpacks with coreutils'
// base64 and gzip. `driver` ends in '\n'.
ScriptCommand driver_writer(std::string_view driver, std::string_view driver_packed,
                            std::size_t budget) {
  if (driver.size() < budget) {  // else the heredoc, longer still, cannot fit either
    std::string terminator = heredoc_terminator(driver);
    std::string verbatim =
        fmt::format("cat > {} <<'{}'\n{}{}\n", kDriverPath, terminator, driver, terminator);
    if (verbatim.size() < budget) return {verbatim, {}};
  }
  ScriptCommand out;
  out.script = fmt::format(
      "# The driver, gzip-compressed and base64-encoded, is this command's arguments after the "
      "script\n# (one argument holds at most 128 KiB). `render-bench --print-driver` prints it as "
      "text.\n"
      "printf '%s' \"$@\" | base64 -d > {0}.gz || {{ echo \"cannot decode the bench driver\" >&2; "
      "exit 1; }}\n"
      "gzip -dc {0}.gz > {0} || {{ echo \"cannot unpack the bench driver\" >&2; exit 1; }}\n"
      "set --\n",
      kDriverPath);
  out.arguments.emplace_back(kScriptName);
  std::string packed_here;
  if (driver_packed.empty()) packed_here = base64_encode(gzip_compress(driver));
  const std::string_view encoded = driver_packed.empty() ? packed_here : driver_packed;
  for (std::size_t begin = 0; begin < encoded.size();) {
    // Whole lines (base64_encode ends each one in '\n'), at most kDriverPieceBytes.
    std::size_t end = std::min(encoded.size(), begin + kDriverPieceBytes);
    if (end < encoded.size()) {
      const std::size_t line_end = encoded.rfind('\n', end - 1);
      if (line_end != std::string::npos && line_end >= begin) end = line_end + 1;
    }
    out.arguments.emplace_back(encoded.substr(begin, end - begin));
    begin = end;
  }
  return out;
}

// The script reaches bash as one execve() argument, which Linux caps at MAX_ARG_STRLEN.
void check_script_size(const std::string& script, std::string_view what) {
  if (script.size() >= kMaxArgumentBytes) {
    fail(
        "the {} script is {} bytes without the driver; Linux passes at most {} bytes in one "
        "command argument: shorten the trainer's environment or the arms",
        what, script.size(), kMaxArgumentBytes - 1);
  }
}

// What one command argument has left for the driver after `script` and `rest`.
std::size_t budget_left(const std::string& script, const std::string& rest) {
  std::size_t used = script.size() + rest.size();
  return used < kMaxArgumentBytes ? kMaxArgumentBytes - used : 0;
}

// `head`, the driver's lines and `rest`, as one script with the driver's arguments.
ScriptCommand assemble(std::string head, const std::string& rest, std::string_view driver,
                       std::string_view driver_packed, std::string_view what) {
  ScriptCommand command = driver_writer(driver, driver_packed, budget_left(head, rest));
  command.script = head + command.script + rest;
  check_script_size(command.script, what);
  return command;
}

// The driver with the last newline the script's heredoc needs, and its packed form. Copied only
// when it lacks that newline (the embedded driver is 280 KB, and has it); then it is not what was
// packed, so the packed form is dropped.
class DriverText {
 public:
  DriverText(std::string_view driver, std::string_view packed) : text_(driver), packed_(packed) {
    if (driver.empty() || driver.back() != '\n') {
      with_newline_ = std::string(driver) + '\n';
      text_ = with_newline_;
      packed_ = {};
    }
  }
  DriverText(const DriverText&) = delete;
  DriverText& operator=(const DriverText&) = delete;
  std::string_view text() const { return text_; }
  std::string_view packed() const { return packed_; }

 private:
  std::string with_newline_;
  std::string_view text_, packed_;
};

}  // namespace

ScriptCommand driver_script(const DriverLaunch& launch, std::string_view driver,
                            std::string_view driver_packed, std::string_view tool_version) {
  const DriverText text(driver, driver_packed);
  std::string script = script_header(launch.what, tool_version, launch.purpose, false);
  std::string block;
  // One assignment per line; the command shares the last line.
  for (const std::string& assignment : launch.assignments) block += "  " + assignment + " \\\n";
  block += "  " + fmt::format("{}", fmt::join(launch.command, " "));
  std::string rest = "\n";
  rest += run_and_wait(block);
  rest +=
      "echo \"Program End: $(date)\"\n"
      "echo \"EXIT_CODE=$EXIT_CODE\"\n"
      "exit $EXIT_CODE\n";
  return assemble(std::move(script), rest, text.text(), text.packed(), launch.what);
}

ScriptCommand arms_script(const std::vector<ArmsScriptArm>& arms,
                          const std::vector<std::pair<std::size_t, int>>& runs,
                          std::string_view purpose, std::string_view driver,
                          std::string_view driver_packed, std::string_view tool_version) {
  const DriverText text(driver, driver_packed);
  std::string script = script_header("bench client", tool_version, purpose, true);
  std::string rest;
  // Each arm's process once, as a function that the runs call: the script holds one startup
  // block per arm, whatever the number of runs.
  for (std::size_t i = 0; i < arms.size(); ++i) {
    rest += fmt::format(
        "\n# Arm {}: one run of the driver in a fresh process, with this arm's settings.\n"
        "bench_arm_{}() {{\n{}PID=\n}}\n",
        k8s::shell::quote(arms[i].arm), i, run_and_wait(arms[i].block));
  }
  rest +=
      "\n# One run: its place in the run order is the driver's BENCH_RUN; a failed run is listed "
      "and\n# the next one starts. $1: the arm's function, $2: the arm, $3: the run.\n"
      "FAILED_RUNS=\n"
      "bench_run() {\n"
      "  if [ -n \"$STOPPING\" ]; then\n"
      "    echo \"SIGTERM: run $3 and those after it do not start\"\n"
      "    exit 143\n"
      "  fi\n"
      "  export BENCH_RUN=\"$3\"\n"
      "  \"$1\"\n"
      "  echo \"BENCH_RUN_END "
      "{\\\"arm\\\":\\\"$2\\\",\\\"run\\\":$3,\\\"exit_code\\\":$EXIT_CODE}\"\n"
      "  if [ \"$EXIT_CODE\" -ne 0 ]; then FAILED_RUNS=\"$FAILED_RUNS $2/$3\"; fi\n"
      "}\n\n";
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto& [arm, number] = runs[i];
    rest += fmt::format("bench_run bench_arm_{} {} {}\n", arm, k8s::shell::quote(arms[arm].arm),
                        number);
  }
  rest +=
      "\necho \"Program End: $(date)\"\n"
      "if [ -n \"$FAILED_RUNS\" ]; then\n"
      "  echo \"EXIT_CODE=1 (failed runs:$FAILED_RUNS)\"\n"
      "  exit 1\n"
      "fi\n"
      "echo \"EXIT_CODE=0\"\n"
      "exit 0\n";
  return assemble(std::move(script), rest, text.text(), text.packed(), "bench client");
}

void set_script_command(YAML::Node container, const ScriptCommand& command) {
  YAML::Node words = k8s::yaml::lookup(container, "command");
  if (!words.IsSequence() || words.size() < 3) fail("internal: a client command without a script");
  std::size_t total = 0;
  for (std::size_t i = 0; i < 2; ++i) total += words[i].Scalar().size() + 1;
  total += command.script.size() + 1;
  for (const std::string& argument : command.arguments) total += argument.size() + 1;
  if (total > kMaxCommandBytes) {
    fail(
        "the client command is {} bytes with the packed driver; a pod's command may hold {} "
        "here (execve() shares its limit with the environment): shorten the driver (--driver)",
        total, kMaxCommandBytes);
  }
  k8s::yaml::set_string(words[2], command.script);
  while (words.size() > 3) words.remove(words.size() - 1);
  for (const std::string& argument : command.arguments) {
    words.push_back(k8s::yaml::string_scalar(argument));
  }
}

void Renderer::set_driver_and_profiler() {
  const Knob knob = Knob::kProfileWindow;
  // What starts the trainer's own profiler (of repeated items, the last one counts).
  std::vector<std::string> trainer_profiler;
  std::optional<std::size_t> steps_at = trainer_argv_.find("profiler_steps");
  bool argv_profiler = steps_at && starts_trainer_profiler(trainer_argv_.items()[*steps_at]);
  if (argv_profiler) trainer_profiler.push_back(trainer_argv_.items()[*steps_at]);
  k8s::shell::Assignment* maxtext = env_assignment(kMaxTextFlagsEnv);
  k8s::FlagList maxtext_flags =
      k8s::FlagList::parse(maxtext ? maxtext->value : "", k8s::FlagStyle::kKeyValue);
  std::optional<std::size_t> profiler_at = maxtext_flags.find("profiler");
  bool maxtext_profiler =
      profiler_at && starts_maxtext_profiler(maxtext_flags.items()[*profiler_at]);
  if (maxtext_profiler) {
    trainer_profiler.push_back(
        fmt::format("{} {}", kMaxTextFlagsEnv, maxtext_flags.items()[*profiler_at]));
  }
  if (!options_.profile_window) {
    note(
        trainer_profiler.empty()
            ? "profiler: none (no --profile-window, and the e2e trainer's profiler is off)"
            : fmt::format("profiler: the trainer's own, as the e2e sets it ({}); the driver traces "
                          "nothing (no --profile-window)",
                          fmt::join(trainer_profiler, ", ")));
    return;
  }
  auto [start, count] = *options_.profile_window;
  checked_setting(driver_setting("PROFILE_WINDOW"), fmt::format("{}:{}", start, count));
  // One profiler: the driver traces the window (PROFILE_WINDOW), so the trainer's is turned off
  // where the e2e turns it on, and nothing else of the e2e's profiler settings changes.
  if (argv_profiler) {
    edit_flag_list(trainer_argv_, "--profiler_steps=0", knob, client_path(".startup.argv"), false);
  }
  if (maxtext_profiler) {
    std::string path = client_path(".startup.env." + std::string(kMaxTextFlagsEnv));
    std::string old = maxtext_flags.items()[*profiler_at];
    maxtext_flags.remove("profiler");
    record(knob, k8s::path_item(path, "profiler"), old, "");
    maxtext->value = maxtext_flags.str();
    edited_env_.insert(std::string(kMaxTextFlagsEnv));
  }
  note(fmt::format("profiler: the driver's (PROFILE_WINDOW={}:{}, timed steps {}..{}){}", start,
                   count, start, start + count - 1,
                   trainer_profiler.empty()
                       ? "; the e2e trainer's profiler is off"
                       : fmt::format("; the trainer's own is turned off (was {})",
                                     fmt::join(trainer_profiler, ", "))));
}

void Renderer::warn_about_wrapper_exports(const std::set<std::string>& bench_env) {
  // The bench's script replaces the e2e wrapper, so what the wrapper exported around its startup
  // block (an HF_TOKEN, a cache path) is not in the bench unless the container's env list or
  // the startup block sets it too. A credential is warned about (without it the trainer cannot
  // reach what the e2e reached: a gated model, W&B); anything else is a note for --explain.
  std::vector<std::string> credentials, others;
  const std::vector<SecretRule> rules = secret_rules();
  for (const k8s::WrapperExport& exported : e2e_exports_) {
    if (bench_env.count(exported.name) ||
        container_env_value(client_.container.node, exported.name).has_value())
      continue;
    std::vector<std::string>& list =
        is_credential_name(exported.name, rules) ? credentials : others;
    std::string item = fmt::format("{} (line {})", exported.name, exported.line);
    if (std::find(list.begin(), list.end(), item) == list.end()) list.push_back(item);
  }
  auto sentence = [](const std::vector<std::string>& dropped) {
    return fmt::format(
        "the e2e wrapper script exports {} outside its startup block; the bench's client script "
        "replaces that wrapper, so the trainer does not get {} (--driver-env NAME=VALUE gives "
        "it one)",
        fmt::join(dropped, ", "), dropped.size() == 1 ? "it" : "them");
  };
  if (!credentials.empty())
    result_.diagnostics.push_back({Severity::kWarning, "", sentence(credentials)});
  if (!others.empty()) note(sentence(others));
}

void Renderer::build_client_command() {
  std::string trainer_argv = k8s::shell::join(trainer_argv_.items());
  std::string orch_argv = k8s::shell::join(orch_argv_.items());
  trainer_env_words_.clear();
  for (const k8s::shell::Assignment& assignment : env_) {
    // Unedited assignments are written as the e2e wrote them, so their expansions still happen.
    if (!edited_env_.count(assignment.name) && !assignment.source.empty()) {
      trainer_env_words_.push_back(assignment.source);
    } else {
      trainer_env_words_.push_back(assignment.name + "=" + k8s::shell::quote(assignment.value));
    }
  }
  driver_setting_words_.clear();
  std::set<std::string> bench_env;  // what the bench's trainer process gets by name
  for (const k8s::shell::Assignment& assignment : env_) bench_env.insert(assignment.name);
  for (const auto& [name, value] : driver_environment(options_, trainer_argv, orch_argv,
                                                      orch_driver_env_, rollout_driver_env_)) {
    driver_setting_words_.push_back(name + "=" + k8s::shell::quote(value));
    bench_env.insert(name);
  }
  warn_about_wrapper_exports(bench_env);
  DriverLaunch launch{"bench client",
                      "the trainer program under the bench driver",
                      trainer_env_words_,
                      {"python3", std::string(kDriverPath)}};
  launch.assignments.insert(launch.assignments.end(), driver_setting_words_.begin(),
                            driver_setting_words_.end());
  set_script_command(
      client_.container.node,
      driver_script(launch, options_.driver_source, options_.driver_packed, options_.tool_version));
  std::string old_program = k8s::shell::join(program_);
  record("render", client_path(".script"), "e2e wrapper",
         "bench wrapper writing " + std::string(kDriverPath));
  record("render", client_path(".startup.program"), old_program,
         "python3 " + std::string(kDriverPath));
  record("render", client_path(".startup.driver"), "", "driver settings, TRAINER_ARGV, ORCH_ARGV");
}

}  // namespace render_steps

using render_steps::rollout_routed_experts_of;

std::string heredoc_terminator(std::string_view text) {
  const std::vector<std::string_view> lines = split_lines(text);
  auto occurs = [&](const std::string& word) {
    return std::find(lines.begin(), lines.end(), word) != lines.end();
  };
  std::string word = "BENCH_DRIVER_EOF";
  for (int n = 1; occurs(word); ++n) word = fmt::format("BENCH_DRIVER_EOF_{}", n);
  return word;
}

std::optional<std::string> rollout_routed_experts(const std::vector<const k8s::Document*>& rollouts,
                                                  const std::string& source,
                                                  std::vector<Diagnostic>& diagnostics) {
  std::optional<std::pair<std::string, std::string>> first;
  std::string first_name;
  for (const k8s::Document* rollout : rollouts) {
    auto found = rollout_routed_experts_of(*rollout, source, diagnostics);
    if (!found) continue;
    std::string name = k8s::JobSetView(*rollout).name();
    if (std::optional<std::string> why =
            refusal(driver_setting(kRolloutRoutedExpertsSetting), found->first)) {
      fail_at(source, static_cast<std::int64_t>(rollout->first_line), "rollout JobSet '{}': {}: {}",
              name, found->second, *why);
    }
    if (!first) {
      first = found;
      first_name = name;
    } else if (bool_word(found->first) != bool_word(first->first)) {
      fail_at(source, static_cast<std::int64_t>(rollout->first_line),
              "the rollout JobSets disagree on routed experts: '{}' has {}, '{}' has {}",
              first_name, first->second, name, found->second);
    }
  }
  if (!first) return std::nullopt;
  return std::string(trim(first->first));
}

std::vector<std::pair<std::string, std::string>> driver_environment(
    const RenderOptions& options, const std::string& trainer_argv, const std::string& orch_argv,
    const std::vector<std::pair<std::string, std::string>>& orch_env,
    const std::vector<std::pair<std::string, std::string>>& rollout_env) {
  const DriverSettings& d = options.driver;
  // The text the driver reads, checked by the table in the words of the setting's option.
  auto value = [](std::string_view name, const std::string& text) {
    return checked_setting(driver_setting(name), text);
  };
  std::vector<double> targets =
      d.routing_targets.empty() ? payload::default_routing_targets() : d.routing_targets;
  std::vector<std::pair<std::string, std::string>> env = {
      {std::string(k8s::kDriverSettingsStart), options.name},
      {"STEPS", value("STEPS", std::to_string(d.steps))},
      {"MICRO_STEPS", value("MICRO_STEPS", std::to_string(d.micro_steps))},
      {"SEED", value("SEED", std::to_string(d.seed))},
      {"ROUTING_TARGETS", payload::format_routing_targets_inline(targets)},
      {"ROUTING_SCALE", value("ROUTING_SCALE", fmt::format("{}", d.routing_scale))},
      {"LOGP_GATES", d.logp_gates ? "on" : "off"},
      {"ADVANTAGES", value("ADVANTAGES", d.advantages)},
  };
  if (d.arm) env.insert(env.begin() + 1, {"BENCH_ARM", value("BENCH_ARM", *d.arm)});
  // Written only when asked for: unset, the driver applies its own default.
  if (d.pad_position) env.emplace_back("PAD_POSITION", value("PAD_POSITION", *d.pad_position));
  if (d.pad_align) env.emplace_back("PAD_ALIGN", value("PAD_ALIGN", std::to_string(*d.pad_align)));
  env.emplace_back("STAGE_BOUNDARY", value("STAGE_BOUNDARY", d.stage_boundary));
  if (d.routing) env.emplace_back("ROUTING", value("ROUTING", *d.routing));
  if (d.allow_fallbacks) env.emplace_back("ALLOW_FALLBACKS", "1");
  if (d.logps_pass) env.emplace_back("LOGPS_PASS", value("LOGPS_PASS", *d.logps_pass));
  for (const auto& [name, text] : d.other_settings) {
    const DriverSetting& setting = driver_setting(name);
    if (!setting.has_option()) fail("internal error: {} has no option of its own", name);
    env.emplace_back(name, checked_setting(setting, text));
  }
  for (const auto& [name, text] : orch_env) env.emplace_back("ORCH_" + name, text);
  for (const auto& [name, text] : rollout_env) env.emplace_back(name, text);
  if (options.profile_window) {
    std::string window =
        fmt::format("{}:{}", options.profile_window->first, options.profile_window->second);
    env.emplace_back("PROFILE_WINDOW", value("PROFILE_WINDOW", window));
    // The window counts timed steps: as the driver, refuse one beyond STEPS.
    if (auto why = window_beyond_steps(*options.profile_window, d.steps))
      fail_knob(Knob::kProfileWindow, window, "{}", *why);
  }
  // Settings that have their own option are refused in --driver-env even when that option is
  // absent, so a render never depends on which of the two set them; so are those the render
  // writes itself. The other settings of the table are checked as the driver will check them.
  std::set<std::string, std::less<>> written;
  for (const auto& [name, text] : env) written.insert(name);
  for (const auto& [name, text] : d.extra_env) {
    bool valid = !name.empty() && !(name[0] >= '0' && name[0] <= '9');
    for (char c : name) valid = valid && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
    if (!valid)
      fail_knob(Knob::kDriverEnv, name + "=" + text, "'{}' is not an environment variable name",
                name);
    const DriverSetting* setting = find_driver_setting(name);
    bool own_option =
        setting && (setting->has_option() || setting->option == "argv" || setting->option == "arm");
    // A bad value of a setting without an option is refused as such, also when the render writes
    // that setting itself (a copy from the orchestrator or the rollout).
    if (setting && !own_option) {
      if (std::optional<std::string> why = refusal(*setting, text))
        fail_knob(Knob::kDriverEnv, name + "=" + text, "{}", *why);
    }
    if (written.count(name) || own_option)
      fail_knob(Knob::kDriverEnv, name, "set it with its own option, not {}",
                knob_option(Knob::kDriverEnv));
    env.emplace_back(name, text);
  }
  env.emplace_back("TRAINER_ARGV", trainer_argv);
  env.emplace_back("ORCH_ARGV", orch_argv);
  return env;
}

}  // namespace rtb::bench
