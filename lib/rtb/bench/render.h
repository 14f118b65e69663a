// render-bench's core: the e2e trainer JobSet of a DRY_RUN becomes a standalone bench JobSet.
// Only names, maxRestarts and the client command change, plus what the knobs ask for; every change
// is recorded, and the result is checked against the e2e trainer before it is returned.
#pragma once

#include <yaml-cpp/yaml.h>

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rtb/base/diagnostic.h"
#include "rtb/base/secrets.h"
#include "rtb/base/shared_text.h"
#include "rtb/k8s/dryrun.h"
#include "rtb/k8s/jobset.h"
#include "rtb/k8s/tree.h"

namespace rtb::bench {

// Settings the bench driver reads from its environment: the table of bench/driver_settings.h
// (tools/render-bench/driver/settings.tsv), which also checks each value here.
struct DriverSettings {
  int steps = 5;
  int micro_steps = 9;
  long long seed = 0;
  std::vector<double> routing_targets;  // empty: the built-in default table
  std::string routing_targets_source;   // where they came from, for the summary
  double routing_scale = 1.0;
  bool logp_gates = true;
  std::string advantages = "random";  // random | zero
  // Unset: not written, and the driver follows the e2e orchestrator's packing layout.
  std::optional<std::string> pad_position;  // end | start
  std::optional<int> pad_align;             // a positive multiple of 64
  std::string stage_boundary = "auto";      // auto | on | off (the staged step boundary)
  // Unset: not written, and the driver's default (auto) applies.
  std::optional<std::string> routing;     // auto | on | off
  std::optional<std::string> logps_pass;  // auto | on | off
  bool allow_fallbacks = false;           // written as ALLOW_FALLBACKS=1 when set
  // Settings of the table that have a render-bench option but no field above, as given (name,
  // value), in the table's order; written after the fields.
  std::vector<std::pair<std::string, std::string>> other_settings;
  std::vector<std::pair<std::string, std::string>> extra_env;  // --driver-env K=V, in order
  // An arm of a same-pod A/B (arms.h): BENCH_ARM, written after BENCH_NAME (the pod's wrapper
  // exports each run's BENCH_RUN); unset for a bench of one arm.
  std::optional<std::string> arm;
};

// What the bench trainer starts from (--weights): kRandom drops every setting that would make it
// load a checkpoint (trainer_config.h decides which), so MaxText initialises random weights;
// kCheckpoint keeps the e2e's, so the bench loads the production checkpoint as the e2e does.
enum class Weights { kRandom, kCheckpoint };
std::string_view weights_name(Weights weights);

struct RenderOptions {
  std::string name;  // the bench JobSet's name
  std::optional<std::string> namespace_name;
  std::optional<std::string> image;          // the client container's image
  std::optional<std::string> output_prefix;  // --maxtext_output_directory=<prefix>/<name>
  std::vector<std::string> maxtext_flags;    // KEY=VALUE: upsert into MAXTEXT_EXTRA_FLAGS
  std::vector<std::string> maxtext_replace;  // KEY=VALUE: replace in place, must exist
  std::vector<std::string> libtpu_flags;     // --xla_...=V: client, proxy and workers
  std::vector<std::string> trainer_args;     // --k=v / --k / --no-k: upsert into the trainer argv
  std::vector<std::string> trainer_args_removed;      // --k: remove from the trainer argv
  std::vector<std::string> orchestrator_args;         // upsert into the orchestrator argv
  std::optional<std::string> trainer_slice;           // TYPE:TOPOLOGY
  std::optional<int> logps_chunk;                     // compute_logps_chunk_size
  std::optional<std::pair<int, int>> profile_window;  // START:COUNT in timed steps
  bool dump_hlo = false;  // the XLA dump flags on the pathways-proxy, which compiles
  Weights weights = Weights::kRandom;
  DriverSettings driver;
  k8s::RoleMains mains;
  SharedText driver_source;  // bench_driver.py
  // The same driver packed as the client script carries it (gzip, then base64 in 76-column lines
  // ending in newlines: base64_encode(gzip_compress(driver_source))), when it is known ahead:
  // render-bench's embedded driver is packed at build time, so a render spends nothing on it.
  // Empty: the render packs driver_source itself when the script needs the packed form.
  SharedText driver_packed;
  std::string tool_version;  // written into the client script's header comment
};

// One change made to the trainer JobSet: which knob (or "render" for the fixed changes, and
// kWorkersLibtpuKnob for a worker libtpu flag set to the client's without a knob asking), at which
// path (diff.h's path scheme), from what to what.
inline constexpr std::string_view kWorkersLibtpuKnob = "libtpu-workers";
struct Change {
  std::string knob;
  std::string path;
  std::string old_value;  // empty when added
  std::string new_value;  // empty when removed

  bool operator==(const Change&) const = default;
};

struct RenderResult {
  YAML::Node bench;  // the bench JobSet
  std::string yaml;  // its text
  std::string trainer_name;
  std::vector<Change> changes;
  // Warnings (kWarning, "file:line" or "file" where the DRY_RUN shows the cause) for the tool to
  // log; notes (kNote, no place): what the render decided without changing the JobSet (the weights
  // and profiler it keeps), one sentence each, for --explain (and -v).
  std::vector<Diagnostic> diagnostics;
};

// One line: "abtest-train -> abtest-bench: 7 changes: render 4, --name 2, --libtpu-flag 3".
std::string summarize_changes(const RenderResult& result);

// --explain: one line per change, "knob: path: old -> new", then "note: ..." per note, with each
// value as `masker` lets it print: by the setting its path ends in (env[HF_TOKEN].value,
// argv[--hf_token]), or scrubbed.
std::string explain_changes(const RenderResult& result, const SecretMasker& masker);

// Validates a JobSet name: a DNS label short enough for the pod names JobSet derives from it.
void validate_jobset_name(const std::string& name);

// The environment variable the seed's scripts read the launcher's DRY_RUN file from.
inline constexpr const char* kLaunchRenderEnv = "LAUNCH_RENDER";
// The DRY_RUN file render-bench and aot-check read: the DRYRUN argument `given` when there is one
// ("-": stdin), else `launch_render` (LAUNCH_RENDER's value; nullptr when unset) unless `demo`
// (--demo) asks for the embedded example or it is empty; "" when neither names a file.
std::string dryrun_input(std::string_view given, bool demo, const char* launch_render);

// Renders the bench JobSet. Throws rtb::Error for bad input or options; a difference from the e2e
// trainer that no option asked for is an internal error (rtb::Error starting "internal error").
RenderResult render_bench(const k8s::DryRun& dryrun, const RenderOptions& options);
// The same from a DryRun the caller no longer needs: its trainer document becomes the bench in
// place instead of being copied (the copy was 6% of render-bench's instructions, issue 29).
RenderResult render_bench(k8s::DryRun&& dryrun, const RenderOptions& options);

// The preflight: a one-pod CPU Job (batch/v1) named <bench name>-preflight that runs
// `python3 /tmp/bench_driver.py --preflight` in the bench client's image, namespace and service
// account, with the client container's env list, JAX_PLATFORMS=cpu, and the script and driver
// settings the bench client gets; no TPU resources, node selectors or tolerations.
struct PreflightResult {
  RenderResult bench;  // the bench whose client the Job stands in for (its changes, warnings)
  YAML::Node job;
  std::string yaml;  // the Job's text
};

inline constexpr std::string_view kPreflightSuffix = "-preflight";
inline constexpr std::string_view kNumericsSuffix = "-numerics";

// What the preflight Job runs: the pod's set-up checks (`--preflight`, Job <name>-preflight), or
// those and then one fwd_bwd + update of a miniature model of the same family through the image's
// own worker and engine, checking that the numerics knobs do what they claim (`--preflight
// --numerics`, Job <name>-numerics, more memory: the miniature keeps the e2e vocabulary).
enum class PreflightChecks { kSetUp, kNumerics };

// Renders the bench (with every check render_bench makes) and the preflight Job of its client.
// Throws rtb::Error as render_bench does.
PreflightResult render_preflight(const k8s::DryRun& dryrun, const RenderOptions& options,
                                 PreflightChecks checks = PreflightChecks::kSetUp);

// Compares the e2e trainer with a bench JobSet flag by flag (diff.h) and throws rtb::Error
// ("internal error: self-check: ...") for the first difference that no recorded change covers: a
// change covers its own path and everything below it.
// The Tree overload takes the e2e trainer already expanded (k8s::expanded_tree), as the renderer
// does before it edits the trainer.
void check_bench_against_e2e(const k8s::Tree& e2e_expanded, const YAML::Node& bench,
                             const std::vector<Change>& changes);
void check_bench_against_e2e(const YAML::Node& e2e_trainer, const YAML::Node& bench,
                             const std::vector<Change>& changes);

// The orchestrator environment variables the driver follows where its own setting is auto or
// unset: the staged step boundary (STAGE_BOUNDARY), the packing layout (PAD_POSITION, PAD_ALIGN)
// and routed-expert replay (ROUTING). render-bench copies each one the orchestrator sets as
// ORCH_<name> into the driver settings.
inline constexpr std::string_view kOrchestratorDriverEnv[] = {
    "PIPELINE_STEP_BOUNDARY", "STAGE_NEXT_MICROBATCH", "PACK_PAD_POSITION", "PACK_PAD_ALIGN",
    "RETURN_ROUTED_EXPERTS"};

// The rollout JobSet's setting the driver follows where ROUTING is auto and the orchestrator sets
// no RETURN_ROUTED_EXPERTS: whether the rollout engines return routed experts. run_rollout_node
// reads its --return_routed_experts flag (a bare flag is true), which defaults to its environment's
// RETURN_ROUTED_EXPERTS. render-bench copies it into this driver setting.
inline constexpr std::string_view kRolloutRoutedExpertsSetting = "ROLLOUT_RETURN_ROUTED_EXPERTS";
inline constexpr std::string_view kRolloutRoutedExpertsFlag = "return_routed_experts";
inline constexpr std::string_view kRolloutRoutedExpertsEnv = "RETURN_ROUTED_EXPERTS";

// The value the rollout JobSets set for the routed-expert setting (its flag's, else its
// environment's, from the startup block or the client container's env list), as written; nullopt
// when none sets it. A rollout whose startup block cannot be read adds a warning to `diagnostics`.
// Throws rtb::Error when two rollout JobSets set different values, or a value is not a boolean
// (the driver table's words).
std::optional<std::string> rollout_routed_experts(const std::vector<const k8s::Document*>& rollouts,
                                                  const std::string& source,
                                                  std::vector<Diagnostic>& diagnostics);

// The driver settings as the environment assignments of the client command, in order, starting
// with k8s::kDriverSettingsStart. `orch_env`: the kOrchestratorDriverEnv values the e2e
// orchestrator sets (name, value). Every value of a setting in the driver settings table is checked
// there and refused as its option (`--steps 0: must be >= 1`) or as `--driver-env K=V: <reason>`;
// --driver-env refuses a setting that has its own option or that the render writes.
// `rollout_env`: settings copied from the rollout JobSet (name, value), written as they are.
std::vector<std::pair<std::string, std::string>> driver_environment(
    const RenderOptions& options, const std::string& trainer_argv, const std::string& orch_argv,
    const std::vector<std::pair<std::string, std::string>>& orch_env = {},
    const std::vector<std::pair<std::string, std::string>>& rollout_env = {});

// A heredoc terminator that does not occur as a line of `text`.
std::string heredoc_terminator(std::string_view text);

}  // namespace rtb::bench
