#include "rtb/bench/arms.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <set>
#include <utility>

#include "rtb/base/enum_names.h"
#include "rtb/base/error.h"
#include "rtb/bench/knobs.h"
#include "rtb/bench/render_steps.h"
#include "rtb/bench/trainer_config.h"
#include "rtb/k8s/diff.h"
#include "rtb/k8s/flags.h"
#include "rtb/k8s/jobset.h"
#include "rtb/k8s/shell.h"
#include "rtb/k8s/yaml.h"

namespace rtb::bench {
namespace {

constexpr std::string_view kArmOption = "--arm";
constexpr std::string_view kAlternative = "give each arm its own JobSet with --arm-mode jobsets";

bool valid_arm_name(std::string_view name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  });
}

// The MaxText key a knob's text sets, for the knobs that set one (MaxText flags, trainer argv).
std::optional<std::string> maxtext_key_of_knob(Knob knob, std::string_view text) {
  if (knob == Knob::kMaxTextFlag || knob == Knob::kMaxTextReplace) {
    std::string_view key = k8s::flag_key(text, k8s::FlagStyle::kKeyValue);
    if (!key.empty()) return std::string(key);
  }
  if (knob == Knob::kTrainerArg || knob == Knob::kTrainerArgRemove) {
    std::string_view flag = k8s::flag_key(text, k8s::FlagStyle::kDashDash);
    if (!flag.empty()) return maxtext_key_of_flag(flag);
  }
  return std::nullopt;
}

// Where a knob of an arm is refused: "--arm b:--steps=0: ...".
[[noreturn]] void refuse_knob(const ArmSpec& arm, std::string_view knob, std::string_view why) {
  fail("{} {}:{}: {}", kArmOption, arm.name, knob, why);
}

// The client command of a bench JobSet (a copy of `root` when it is one).
k8s::ClientCommand client_of(const k8s::Document& doc, const std::string& source) {
  return k8s::JobSetView(doc).client(source);
}

// Every startup block of a client script, in order.
std::vector<k8s::StartupBlock> startup_blocks(std::string_view script) {
  std::vector<k8s::StartupBlock> blocks;
  std::size_t offset = 0, line = 0;
  while (offset < script.size()) {
    std::string_view rest = script.substr(offset);
    k8s::StartupBlock block;
    try {
      block = k8s::find_startup_block(rest);
    } catch (const Error&) {
      break;  // no further block
    }
    std::size_t close = rest.find('\n', block.end + 1);  // the end of the `) & PID=$!` line
    block.begin += offset;
    block.end += offset;
    block.first_line += line;
    blocks.push_back(block);
    std::size_t next = close == std::string_view::npos ? script.size() : offset + close + 1;
    line += static_cast<std::size_t>(
        std::count(script.begin() + static_cast<std::ptrdiff_t>(offset),
                   script.begin() + static_cast<std::ptrdiff_t>(next), '\n'));
    offset = next;
  }
  return blocks;
}

std::string block_text(std::string_view script, const k8s::StartupBlock& block) {
  return std::string(script.substr(block.begin, block.end - block.begin));
}

// `bench` with the first startup block of its client script replaced by `block`.
YAML::Node with_first_block(const k8s::Document& bench, const std::string& source,
                            std::string_view block) {
  k8s::Document copy(YAML::Clone(bench.root), bench.first_line, bench.text);
  k8s::ClientCommand client = client_of(copy, source);
  std::string script = client.script;
  script.replace(client.block.begin, client.block.end - client.block.begin, block);
  k8s::yaml::set_string(client.script_node, script);
  return copy.root;
}

void add_diagnostics(std::vector<Diagnostic>& into, const std::vector<Diagnostic>& from) {
  for (const Diagnostic& d : from) {
    if (std::find(into.begin(), into.end(), d) == into.end()) into.push_back(d);
  }
}

// The knobs of an arm as one text: "--maxtext-flag=a=1 --steps=3", or "(none)".
std::string knobs_text(const ArmSpec& arm) {
  if (arm.knobs.empty()) return "no knobs of its own";
  return fmt::format("{}", fmt::join(arm.knobs, "  "));
}

}  // namespace

std::string_view arm_order_name(ArmOrder order) {
  return enum_name<ArmOrder::kBlocks>(order, {"abba", "interleave", "blocks"});
}

std::string_view arm_mode_name(ArmMode mode) {
  return enum_name<ArmMode::kJobSets>(mode, {"pod", "jobsets"});
}

ArmOrder parse_arm_order(std::string_view text) {
  for (ArmOrder order : {ArmOrder::kAbba, ArmOrder::kInterleave, ArmOrder::kBlocks}) {
    if (text == arm_order_name(order)) return order;
  }
  fail("--arm-order {}: must be abba, interleave or blocks", text);
}

ArmMode parse_arm_mode(std::string_view text) {
  for (ArmMode mode : {ArmMode::kPod, ArmMode::kJobSets}) {
    if (text == arm_mode_name(mode)) return mode;
  }
  fail("--arm-mode {}: must be pod or jobsets", text);
}

int parse_arm_repeats(std::string_view text) {
  int repeats = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), repeats);
  if (text.empty() || error != std::errc() || end != text.data() + text.size() || repeats < 1)
    fail("--arm-repeats {}: must be an integer >= 1", text);
  return repeats;
}

std::vector<ArmRun> run_order(std::size_t arms, ArmOrder order, int repeats) {
  if (arms == 0) fail("internal error: a run order of no arms");
  if (repeats < 1) fail("--arm-repeats {}: must be >= 1", repeats);
  std::vector<ArmRun> runs;
  auto count = static_cast<std::size_t>(repeats);
  if (order == ArmOrder::kBlocks) {
    for (std::size_t arm = 0; arm < arms; ++arm) {
      for (int k = 1; k <= repeats; ++k) runs.push_back({arm, k});
    }
    return runs;
  }
  // kAbba: passes alternate forward and reverse; kInterleave: every pass forward. Each pass runs
  // every arm once, so pass k holds each arm's run k + 1.
  for (std::size_t pass = 0; pass < count; ++pass) {
    bool reverse = order == ArmOrder::kAbba && pass % 2 == 1;
    for (std::size_t i = 0; i < arms; ++i) {
      std::size_t arm = reverse ? arms - 1 - i : i;
      runs.push_back({arm, static_cast<int>(pass) + 1});
    }
  }
  return runs;
}

std::vector<ArmSpec> parse_arm_values(const std::vector<std::string>& values) {
  std::vector<ArmSpec> arms;
  for (const std::string& value : values) {
    std::size_t colon = value.find(':');
    std::string name = value.substr(0, colon);
    if (!valid_arm_name(name)) {
      fail(
          "{} {}: the arm name '{}' must be lowercase letters, digits and '-' (NAME or "
          "NAME:KNOB)",
          kArmOption, value, name);
    }
    auto arm =
        std::find_if(arms.begin(), arms.end(), [&](const ArmSpec& a) { return a.name == name; });
    if (arm == arms.end()) {
      arms.push_back({name, {}});
      arm = arms.end() - 1;
    }
    if (colon == std::string::npos) continue;
    std::string knob = value.substr(colon + 1);
    if (knob.rfind("--", 0) != 0)
      fail("{} {}: '{}' is not a render-bench option (NAME:--option=VALUE)", kArmOption, value,
           knob);
    arm->knobs.push_back(std::move(knob));
  }
  return arms;
}

ArmKnob split_arm_knob(std::string_view knob) {
  std::size_t split = knob.find_first_of("= ");
  if (split == std::string_view::npos) return {std::string(knob), ""};
  return {std::string(knob.substr(0, split)), std::string(knob.substr(split + 1))};
}

std::vector<RenderOptions> arm_options(const ArmPlan& plan, const RenderOptions& base) {
  if (plan.arms.size() < 2)
    fail("{}: an A/B needs at least two arms (the first is the control)", kArmOption);
  std::vector<RenderOptions> result;
  for (const ArmSpec& arm : plan.arms) {
    RenderOptions options = base;
    std::set<std::string> once;
    for (const std::string& knob : arm.knobs) {
      ArmKnob parts = split_arm_knob(knob);
      const KnobSpec* spec = find_knob(parts.option);
      if (!spec) refuse_knob(arm, knob, fmt::format("{} is not a render-bench knob", parts.option));
      if (spec->arity == KnobArity::kFlag && knob.size() != parts.option.size())
        refuse_knob(arm, knob, fmt::format("{} takes no value", parts.option));
      if (spec->arity != KnobArity::kFlag && knob.size() == parts.option.size())
        refuse_knob(arm, knob,
                    fmt::format("{} needs a value ({}=VALUE)", parts.option, parts.option));
      if (spec->arity != KnobArity::kRepeated && !once.insert(parts.option).second)
        refuse_knob(arm, knob, fmt::format("{} is given twice for the arm", parts.option));
      if (plan.mode == ArmMode::kPod) {
        if (!spec->one_per_pod.empty())
          refuse_knob(arm, knob,
                      fmt::format("{} cannot change inside one pod: {}; {}", parts.option,
                                  spec->one_per_pod, kAlternative));
        if (auto key = maxtext_key_of_knob(spec->knob, parts.text); key && is_mesh_key(*key)) {
          refuse_knob(arm, knob,
                      fmt::format("the mesh key {} cannot change inside one pod: the mesh lays "
                                  "out the slice every run shares; {}",
                                  *key, kAlternative));
        }
      }
      try {
        apply_knob(*spec, parts.text, options);
      } catch (const Error& e) {
        fail("{} {}: {}", kArmOption, arm.name, e.message());
      }
    }
    result.push_back(std::move(options));
  }
  return result;
}

ArmsRender render_arms(const k8s::DryRun& dryrun, const ArmPlan& plan, const RenderOptions& base) {
  std::vector<RenderOptions> options = arm_options(plan, base);
  ArmsRender out;
  if (plan.mode == ArmMode::kJobSets) {
    for (std::size_t i = 0; i < plan.arms.size(); ++i) {
      RenderOptions o = options[i];
      o.name = fmt::format("{}-{}", base.name, plan.arms[i].name);
      o.driver.arm = plan.arms[i].name;
      RenderResult result = render_bench(dryrun, o);
      add_diagnostics(out.diagnostics, result.diagnostics);
      if (!out.yaml.empty()) out.yaml += "---\n";
      out.yaml += result.yaml;
      out.jobsets.push_back(result.bench);
      out.changes.insert(out.changes.end(), result.changes.begin(), result.changes.end());
      out.runs.push_back(std::move(result));
    }
    return out;
  }
  out.order = run_order(plan.arms.size(), plan.order, plan.repeats);
  for (std::size_t i = 0; i < plan.arms.size(); ++i) {
    RenderOptions o = options[i];
    o.driver.arm = plan.arms[i].name;
    out.runs.push_back(render_bench(dryrun, o));
    add_diagnostics(out.diagnostics, out.runs.back().diagnostics);
  }
  // One pod serves every arm: an arm's bench may differ from the control's only in the client's
  // startup command (its script and what expand_for_diff reads from it).
  const std::string& source = dryrun.source;
  k8s::Document first(YAML::Clone(out.runs[0].bench), 1);
  k8s::ClientCommand first_client = client_of(first, source);
  const std::string client_path = first_client.container.path();
  YAML::Node first_tree = k8s::expand_for_diff(first.root);
  std::vector<render_steps::ArmsScriptArm> script_arms;
  for (std::size_t i = 0; i < out.runs.size(); ++i) {
    const std::string& arm = plan.arms[i].name;
    for (const k8s::Difference& d :
         k8s::diff_trees(first_tree, k8s::expand_for_diff(out.runs[i].bench))) {
      bool in_command = d.path.rfind(client_path + ".script", 0) == 0 ||
                        d.path.rfind(client_path + ".startup", 0) == 0;
      if (!in_command) {
        fail("{} {}: its knobs change {} ({} -> {}), which every run of one pod shares; {}",
             kArmOption, arm, d.path, d.old_value.empty() ? "absent" : d.old_value,
             d.new_value.empty() ? "absent" : d.new_value, kAlternative);
      }
    }
    k8s::Document doc(out.runs[i].bench, 1);
    k8s::ClientCommand client = client_of(doc, source);
    script_arms.push_back({arm, block_text(client.script, client.block)});
  }
  std::vector<std::pair<std::size_t, int>> calls;
  std::vector<std::string> labels;
  for (std::size_t i = 0; i < out.order.size(); ++i) {
    calls.emplace_back(out.order[i].arm, static_cast<int>(i) + 1);
    labels.push_back(plan.arms[out.order[i].arm].name);
  }
  std::string purpose = fmt::format(
      "a same-pod A/B of {} arms, {} runs in {} order ({}), each the trainer program under the "
      "bench driver in a fresh process",
      plan.arms.size(), out.order.size(), arm_order_name(plan.order), fmt::join(labels, " "));
  render_steps::set_script_command(
      first_client.container.node,
      render_steps::arms_script(script_arms, calls, purpose, base.driver_source, base.driver_packed,
                                base.tool_version));
  out.changes = out.runs[0].changes;
  Change script_change{std::string(kArmOption), client_path + ".script", "bench wrapper of one run",
                       fmt::format("arms wrapper of {} runs", out.order.size())};
  out.changes.push_back(script_change);
  // The self-check of each arm's program in the pod's JobSet, as render_bench checks one arm.
  const k8s::Document* e2e = k8s::select_roles(dryrun, base.mains).trainer;
  for (std::size_t i = 0; i < out.runs.size(); ++i) {
    std::vector<Change> changes = out.runs[i].changes;
    changes.push_back(script_change);
    check_bench_against_e2e(e2e->root, with_first_block(first, source, script_arms[i].block),
                            changes);
  }
  out.jobsets.push_back(first.root);
  out.yaml = k8s::yaml::emit(first.root);
  return out;
}

std::string explain_arms(const ArmPlan& plan) {
  std::string s = fmt::format(
      "arms: {} ({}), {} runs each{}:\n", plan.arms.size(),
      plan.mode == ArmMode::kPod ? "one pod, runs back to back" : "one JobSet per arm",
      plan.mode == ArmMode::kPod ? plan.repeats : 1,
      plan.mode == ArmMode::kPod ? fmt::format(" in {} order", arm_order_name(plan.order)) : "");
  for (std::size_t i = 0; i < plan.arms.size(); ++i) {
    s += fmt::format("  {}{}: {}\n", plan.arms[i].name, i == 0 ? " (control)" : "",
                     knobs_text(plan.arms[i]));
  }
  if (plan.mode == ArmMode::kPod) {
    std::vector<std::string> runs;
    std::vector<ArmRun> order = run_order(plan.arms.size(), plan.order, plan.repeats);
    for (std::size_t i = 0; i < order.size(); ++i)
      runs.push_back(fmt::format("{}:{}", i + 1, plan.arms[order[i].arm].name));
    s += fmt::format("run order (BENCH_RUN:arm): {}\n", fmt::join(runs, " "));
  }
  return s;
}

std::vector<ArmProgram> arm_programs(const k8s::Document& bench, const std::string& source) {
  k8s::ClientCommand client = client_of(bench, source);
  std::vector<k8s::StartupBlock> blocks = startup_blocks(client.script);
  std::vector<ArmProgram> programs;
  if (blocks.size() < 2) return programs;
  std::set<std::string> seen;
  std::size_t script_line = client.startup_line - client.block.first_line;
  for (const k8s::StartupBlock& block : blocks) {
    std::string text = block_text(client.script, block);
    std::int64_t line = static_cast<std::int64_t>(script_line + block.first_line);
    k8s::shell::SimpleCommand command;
    try {
      command = k8s::shell::parse_command(text);
    } catch (const k8s::shell::SyntaxError& e) {
      fail_at(source, line, "an arm of the arms script does not parse: {}", e.what());
    }
    std::optional<std::string> arm;
    for (const k8s::shell::Assignment& a : command.env) {
      if (a.name == "BENCH_ARM") arm = a.value;
    }
    if (!arm) fail_at(source, line, "an arm of the arms script sets no BENCH_ARM");
    if (!seen.insert(*arm).second)
      fail_at(source, line, "the arms script holds arm '{}' twice", *arm);
    programs.push_back({*arm, with_first_block(bench, source, text)});
  }
  return programs;
}

}  // namespace rtb::bench
