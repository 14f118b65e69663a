// A same-pod A/B (render-bench --arm): several arms run back to back in one bench pod, each run a
// fresh driver process with its arm's MaxText flags, trainer argv and driver settings, against the
// same Pathways proxy and workers, in an order that cancels drift (abba). Or, where one pod cannot
// hold the difference, one JobSet per arm (--arm-mode jobsets).
//
// An arm is a name and render-bench knobs (knobs.h), each parsed by the same code as the top-level
// option. The first arm is the control. What one pod fixes for all its runs (the knob table's
// one_per_pod, and the mesh keys of trainer_config.h) is refused for an arm in a same-pod render.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "rtb/base/diagnostic.h"
#include "rtb/bench/render.h"
#include "rtb/k8s/dryrun.h"

namespace rtb::bench {

// The order of the runs. kAbba: the arm list, then its reverse, and so on (A B B A A B B A): each
// arm's k-th run and the control's k-th run sit symmetrically about a midpoint, so a drift linear
// in time cancels over each forward-reverse pass. kInterleave: the arm list repeated (A B A B).
// kBlocks: every run of one arm, then the next arm's (A A B B).
enum class ArmOrder { kAbba, kInterleave, kBlocks };
// kPod: one JobSet, one pod, runs back to back; kJobSets: one JobSet per arm (<name>-<arm>).
enum class ArmMode { kPod, kJobSets };

std::string_view arm_order_name(ArmOrder order);  // "abba", "interleave", "blocks"
std::string_view arm_mode_name(ArmMode mode);     // "pod", "jobsets"
// --arm-order TEXT, --arm-mode TEXT; throw rtb::Error "--arm-order <text>: ...".
ArmOrder parse_arm_order(std::string_view text);
ArmMode parse_arm_mode(std::string_view text);
// --arm-repeats TEXT: an integer >= 1.
int parse_arm_repeats(std::string_view text);

// One run of the pod: which arm (index into the arm list) and which of that arm's runs (1-based).
struct ArmRun {
  std::size_t arm = 0;
  int repeat = 1;
  bool operator==(const ArmRun&) const = default;
};

// The runs of `arms` arms, `repeats` runs each, in `order`; the position in the result (1-based)
// is the run's BENCH_RUN. Throws rtb::Error for no arm or repeats below 1.
std::vector<ArmRun> run_order(std::size_t arms, ArmOrder order, int repeats);

// One arm as given: its name and its knobs, each `--option=VALUE` (or `--option VALUE`, or a flag
// `--option`) as written after `NAME:`.
struct ArmSpec {
  std::string name;
  std::vector<std::string> knobs;
};

// The --arm values, in order: the first use of a NAME declares the arm (the first declared is the
// control), each `NAME:KNOB` adds one knob to it, split at the first `:` only. Names are
// [a-z0-9-]. Throws rtb::Error "--arm <value>: <reason>".
std::vector<ArmSpec> parse_arm_values(const std::vector<std::string>& values);

// A knob of an arm split into its option and its text: "--maxtext-flag=a=1" -> {"--maxtext-flag",
// "a=1"}; a flag has an empty text.
struct ArmKnob {
  std::string option;
  std::string text;
};
ArmKnob split_arm_knob(std::string_view knob);

struct ArmPlan {
  std::vector<ArmSpec> arms;  // the first is the control
  ArmOrder order = ArmOrder::kAbba;
  int repeats = 2;
  ArmMode mode = ArmMode::kPod;
};

// The render options of each arm: `base` (the top-level knobs) with the arm's knobs applied on top
// through apply_knob, as the top-level option would be. In kPod mode a knob whose value is one for
// the whole pod (the knob table's one_per_pod), or a MaxText flag or trainer argv item that sets a
// mesh key (trainer_config.h is_mesh_key), is refused: "--arm <name>:<knob>: <reason>; give each
// arm its own JobSet with --arm-mode jobsets". Throws rtb::Error.
std::vector<RenderOptions> arm_options(const ArmPlan& plan, const RenderOptions& base);

struct ArmsRender {
  std::vector<RenderResult> runs;  // the render of each arm, in the arms' order
  std::vector<ArmRun> order;       // kPod: the run order
  std::vector<YAML::Node> jobsets;
  std::string yaml;                     // every JobSet, `---` between
  std::vector<Change> changes;          // kPod: the control's, then the arms script's
  std::vector<Diagnostic> diagnostics;  // each once
};

// Renders the plan. kPod: one bench JobSet whose client runs the driver once per run, each run
// the driver with its arm's settings (BENCH_ARM, and BENCH_RUN exported by the wrapper); each
// arm's startup block is the one render_bench makes for that arm, and an arm whose bench would
// differ from the control's anywhere but in the client's startup command is refused (one pod
// serves them all). The script holds each arm's block once, so its size grows with the arms, not
// the runs. Each arm's program in the result is checked against the e2e trainer as render_bench
// checks a bench of one arm. kJobSets: render_bench of each arm, named <name>-<arm>. Throws
// rtb::Error.
ArmsRender render_arms(const k8s::DryRun& dryrun, const ArmPlan& plan, const RenderOptions& base);

// --explain for arms: the mode, each arm with its knobs, and the run order (kPod).
std::string explain_arms(const ArmPlan& plan);

// One arm's program in a same-pod bench: a copy of the bench JobSet whose client script's first
// startup block is that arm's, so that every check of a bench of one arm
// (self-check, diff-renders --expect-bench, aot-check) applies to it as it is.
struct ArmProgram {
  std::string arm;
  YAML::Node bench;
};
// The arms of a bench JobSet, in the script's order; empty when its client script holds one
// startup block (a bench of one arm). Throws rtb::Error when an arm's block does not parse, names
// no BENCH_ARM or repeats an arm.
std::vector<ArmProgram> arm_programs(const k8s::Document& bench, const std::string& source);

}  // namespace rtb::bench
