// The steps of render-bench's render (render.h), one class whose members live in the files of
// the step they take:
//   render.cc           the pipeline (run), reading the inputs, names, scheduling fields, the
//                       self-check, and the public functions of render.h;
//   render_edits.cc     the knobs that edit flags and settings: MAXTEXT_EXTRA_FLAGS, libtpu flags
//                       (client, proxy, workers), the trainer argv, the weights;
//   render_slice.cc     the trainer slice (--trainer-slice) and what follows from it;
//   render_client.cc    the client script and the driver's environment;
//   render_preflight.cc the preflight Job.
// Internal to lib/rtb/bench/render*.cc: not part of the library's interface.
#pragma once

#include <yaml-cpp/yaml.h>

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rtb/bench/knobs.h"
#include "rtb/bench/render.h"
#include "rtb/k8s/dryrun.h"
#include "rtb/k8s/flags.h"
#include "rtb/k8s/jobset.h"
#include "rtb/k8s/shell.h"
#include "rtb/k8s/tree.h"

namespace rtb::bench::render_steps {

inline constexpr std::string_view kDriverPath = "/tmp/bench_driver.py";
inline constexpr std::size_t kMaxKubernetesName = 63;
inline constexpr std::size_t kMaxArgumentBytes = 32 * 4096;  // MAX_ARG_STRLEN, including the NUL
// What the container's command may hold in all (its items with their NULs). execve() takes
// arguments and environment together up to a quarter of the stack limit: 2 MiB with the usual
// 8 MiB; half of that leaves the pod's environment the rest.
inline constexpr std::size_t kMaxCommandBytes = 1 << 20;
// The packed driver's pieces, each one command argument: whole base64 lines, well under
// kMaxArgumentBytes.
inline constexpr std::size_t kDriverPieceBytes = 64 << 10;
// $0 of a client script that gets the packed driver as its arguments (bash names it in errors).
inline constexpr std::string_view kScriptName = "bench-client";

// Sets a scalar to a string, keeping its quoting unless plain text would change the type.
void assign_string(YAML::Node node, const std::string& value);
std::string int_text(long long value);
// `text` as an int; throws rtb::Error naming `what`.
int parse_int(std::string_view text, std::string_view what);
// Where visit_scalars found a scalar: the key it is under (a list item's: its list's key), and
// its path (diff.h's scheme), spelled only when asked: most visits look at the value and go on,
// and spelling every path of a JobSet was most of a visit's cost (issue 29).
class ScalarPlace {
 public:
  const std::string& key() const;
  std::string path() const;

 private:
  friend class ScalarVisit;
  ScalarPlace(const class ScalarVisit& visit, std::size_t piece) : visit_(visit), piece_(piece) {}
  const ScalarVisit& visit_;
  std::size_t piece_;
};
// Visits every scalar (values, not keys) of `root`, except those in the subtree `skip` (an
// undefined node skips nothing). Iterative: input depth cannot overflow the stack.
void visit_scalars(const YAML::Node& root, const YAML::Node& skip,
                   const std::function<void(YAML::Node, const ScalarPlace&)>& visit);
// A DNS label, as Kubernetes requires of namespaces (RFC 1123) and JobSet names (RFC 1035: starts
// with a letter).
void validate_dns_label(Knob knob, const std::string& name, bool letter_first);
// A container's env-list value of `name` (the last entry, as Kubernetes uses), or nullopt.
std::optional<std::string> container_env_value(const YAML::Node& container, std::string_view name);
// The kOrchestratorDriverEnv variables the e2e orchestrator sets, from its startup block's
// assignments (the last one wins, as in bash) or else its container's env list.
std::vector<std::pair<std::string, std::string>> orchestrator_driver_env(
    const k8s::ClientCommand& orchestrator);

// What a driver script runs: its startup block's assignments, one per line, then the command.
struct DriverLaunch {
  std::string what;                      // names the script: "bench client"
  std::string purpose;                   // for the header comment
  std::vector<std::string> assignments;  // NAME=value words, values quoted for bash
  std::vector<std::string> command;      // the program and its arguments, quoted for bash
};

// A container's command after `bash -c`: the script and the arguments that follow it ($0 and
// the packed driver, when the driver does not go in the script).
struct ScriptCommand {
  std::string script;
  std::vector<std::string> arguments;
};

// The PID-1 wrapper that writes the driver to kDriverPath and runs `launch` in the background,
// forwarding SIGTERM and keeping its exit code. The driver goes in the script as a quoted heredoc
// (bash expands nothing in it) when it fits in the one command argument the script is; else it
// is gzip-compressed and base64-encoded into the command's next arguments, which the script
// joins and unpacks, so the driver's size is not bound by Linux's 128 KiB per argument. The
// bench client and the preflight Job both run this script, so they run the same driver with the
// same settings. `driver_packed` is `driver` packed (RenderOptions::driver_packed) if known, else
// empty.
ScriptCommand driver_script(const DriverLaunch& launch, std::string_view driver,
                            std::string_view driver_packed, std::string_view tool_version);

// `container`'s command set to `bash -c SCRIPT [ARGUMENTS...]` (its shell word kept); throws
// rtb::Error when the whole command passes kMaxCommandBytes.
void set_script_command(YAML::Node container, const ScriptCommand& command);

// One arm of a same-pod A/B's client script: its name and its startup block's lines (as
// k8s::find_startup_block delimits them in that arm's own render).
struct ArmsScriptArm {
  std::string arm;
  std::string block;
};
// The PID-1 wrapper of a same-pod A/B (arms.h): writes the driver once, holds each arm's block
// once (in a shell function), then makes the `runs` (arm index, run number) in order, each a fresh
// process with BENCH_RUN exported, each followed by a
// `BENCH_RUN_END {"arm":..,"run":N,"exit_code":E}` line; a failed run is listed and the next one
// starts; SIGTERM stops the current run and starts no other. The exit code is 0 when every run
// exited 0, else 1 (143 when stopped).
ScriptCommand arms_script(const std::vector<ArmsScriptArm>& arms,
                          const std::vector<std::pair<std::size_t, int>>& runs,
                          std::string_view purpose, std::string_view driver,
                          std::string_view driver_packed, std::string_view tool_version);

class Renderer {
 public:
  Renderer(const k8s::DryRun& dryrun, const RenderOptions& options)
      : dryrun_(dryrun), options_(options) {}
  // Renders from `dryrun`, taking its trainer document to edit instead of copying it.
  Renderer(k8s::DryRun& dryrun, const RenderOptions& options, k8s::DryRun* takeable)
      : dryrun_(dryrun), options_(options), takeable_(takeable) {}

  RenderResult run();
  // The preflight Job of the bench that run() rendered.
  YAML::Node preflight_job(PreflightChecks checks) const;

 private:
  // A change under `source`: "render" for the fixed changes, kWorkersLibtpuKnob; a knob's
  // changes are recorded under its option (knobs.h).
  void record(std::string source, std::string path, std::string old_value, std::string new_value) {
    result_.changes.push_back(
        {std::move(source), std::move(path), std::move(old_value), std::move(new_value)});
  }
  void record(Knob knob, std::string path, std::string old_value, std::string new_value) {
    record(std::string(knob_option(knob)), std::move(path), std::move(old_value),
           std::move(new_value));
  }
  std::string client_path(std::string_view suffix) const {
    return client_.container.path() + std::string(suffix);
  }

  void read_inputs();
  void rename();
  void set_scheduling_fields();
  void edit_maxtext_flags();
  void edit_libtpu_flags();
  void sync_worker_libtpu(k8s::ContainerRef& worker);
  // Sets `items` (--xla_... flags) in the pathways-proxy's args, new ones after the last --xla.
  void edit_proxy_args(k8s::ContainerRef& proxy, const std::vector<std::string>& items, Knob knob);
  // --dump-hlo: the XLA dump flags on the proxy, which compiles, next to the driver's trace.
  void set_hlo_dump();
  void edit_argv();
  void edit_trainer_slice();
  void check_weight_knobs() const;
  void apply_weights();
  // Removes the client container's env-list entries `name`; true when there was one.
  bool remove_container_env(std::string_view name, Knob knob);
  void set_driver_and_profiler();
  void build_client_command();
  // Warns about what the e2e wrapper exports outside the startup block that `bench_env` (the
  // names the bench's client sets) does not hold.
  void warn_about_wrapper_exports(const std::set<std::string>& bench_env);
  void check_names_fit();
  // A note for --explain (no place), and a warning about the DRY_RUN as a whole.
  void note(std::string message) {
    result_.diagnostics.push_back({Severity::kNote, "", std::move(message)});
  }
  void warn_about_dryrun(std::string message) {
    result_.diagnostics.push_back(
        {Severity::kWarning, where_of(dryrun_.source), std::move(message)});
  }

  // The trainer's environment assignment `name`, or nullptr.
  k8s::shell::Assignment* env_assignment(std::string_view name);
  void set_env(std::string_view name, const std::string& value, Knob knob);
  void edit_flag_list(k8s::FlagList& list, const std::string& item, Knob knob,
                      const std::string& path, bool must_exist,
                      std::optional<std::size_t> append_at = std::nullopt);

  const k8s::DryRun& dryrun_;
  const RenderOptions& options_;
  k8s::DryRun* takeable_ = nullptr;  // dryrun_ itself, when its trainer may become bench_
  RenderResult result_;
  // The e2e trainer as the self-check compares it, and what its wrapper exports (both read
  // before any edit: bench_ may be that very document).
  k8s::Tree e2e_expanded_;
  std::vector<k8s::WrapperExport> e2e_exports_;
  k8s::Document bench_;
  std::string old_name_;
  k8s::ClientCommand client_;  // of the bench document (a copy of the trainer's)
  std::vector<k8s::shell::Assignment> env_;
  std::set<std::string> edited_env_;  // names whose value the bench changes
  std::vector<std::string> program_;
  k8s::FlagList trainer_argv_{k8s::FlagStyle::kDashDash, {}};
  k8s::FlagList orch_argv_{k8s::FlagStyle::kDashDash, {}};
  std::string orch_argv_path_;
  std::vector<std::pair<std::string, std::string>> orch_driver_env_;
  std::vector<std::pair<std::string, std::string>> rollout_driver_env_;
  std::vector<std::string> trainer_env_words_;     // the client's own assignments, for bash
  std::vector<std::string> driver_setting_words_;  // the driver settings, for bash
};

}  // namespace rtb::bench::render_steps
