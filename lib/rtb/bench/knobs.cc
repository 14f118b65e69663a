#include "rtb/bench/knobs.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <charconv>
#include <cstdint>
#include <limits>
#include <optional>
#include <type_traits>
#include <variant>
#include <vector>

#include "rtb/base/io.h"
#include "rtb/base/json.h"
#include "rtb/base/text.h"
#include "rtb/payload/routing.h"

namespace rtb::bench {
namespace {

// What --help shows for a driver setting's value; a choice as TEXT:{a,b}, the form the bash
// completions read the values from (cmake/bash-completion.cmake).
std::string setting_value_name(const DriverSetting& setting) {
  switch (setting.type) {
    case SettingKind::kInt:
    case SettingKind::kPadAlign:
      return "INT";
    case SettingKind::kFloat:
      return "FLOAT";
    case SettingKind::kChoice:
      return fmt::format("TEXT:{{{}}}", fmt::join(setting.choices, ","));
    case SettingKind::kTargets:
      return "FILE";
    case SettingKind::kWindow:
      return "START:COUNT";
    default:
      return "TEXT";
  }
}

// A driver setting's help: its meaning in the table, and its default when it has one.
std::string setting_help(const DriverSetting& setting) {
  if (setting.default_value == "-") return setting.meaning;
  return fmt::format("{} (default: {})", setting.meaning, setting.default_value);
}

// The row of a driver setting's option. --routing-targets reads its targets from a FILE (the
// driver takes them inline), so its help says so; a bool setting is a flag.
KnobSpec setting_row(const DriverSetting& setting) {
  KnobSpec row{Knob::kSetting,
               setting.option,
               setting_value_name(setting),
               KnobArity::kOnce,
               setting_help(setting),
               &setting,
               {},
               {}};
  if (setting.type == SettingKind::kTargets) {
    row.help =
        "Per-layer max/mean routing targets (file; default: the built-in Qwen3.5-397B table)";
  } else if (setting.type == SettingKind::kBool) {
    row.arity = KnobArity::kFlag;
    row.value_name.clear();
    row.help = setting.meaning;  // a flag's default is "not given"
  }
  return row;
}

// Why a knob's value is one for the whole pod of a same-pod A/B; empty for a knob of one client
// process. Each reason says what else shares the value.
std::string_view one_per_pod(Knob knob) {
  switch (knob) {
    case Knob::kName:
      return "it names the JobSet, which every run shares";
    case Knob::kNamespace:
      return "it places the JobSet, which every run shares";
    case Knob::kImage:
      return "it is the client container's image, one per pod";
    case Knob::kOutputPrefix:
      return "it names the output directory after the JobSet, which every run shares";
    case Knob::kLibtpuFlag:
      return "it also sets the pathways-proxy args and the pathways-worker environment, which "
             "serve every run of the pod without restarting";
    case Knob::kTrainerSlice:
      return "it is the slice the pod runs on";
    case Knob::kDumpHlo:
      return "it sets the pathways-proxy args, which serve every run of the pod";
    case Knob::kWeights:
      return "it edits the client container's environment list (MAXTEXT_CKPT), which every run "
             "shares";
    case Knob::kDriver:
      return "the pod writes one driver file for all its runs";
    default:
      return {};
  }
}

std::vector<KnobSpec> build_table() {
  const DriverSetting& name = driver_setting("BENCH_NAME");
  const DriverSetting& window = driver_setting("PROFILE_WINDOW");
  // A row of a knob that is not a driver setting; `field` when the knob's text goes there as it is.
  auto row_of = [](KnobArity arity) {
    return [arity](Knob knob, std::string option, std::string value, std::string help,
                   KnobField field = {}) {
      return KnobSpec{
          knob, std::move(option), std::move(value), arity, std::move(help), nullptr, field, {}};
    };
  };
  auto once = row_of(KnobArity::kOnce);
  auto repeated = row_of(KnobArity::kRepeated);
  std::vector<KnobSpec> rows = {
      {Knob::kName,
       name.option,
       "NAME",
       KnobArity::kOnce,
       "Name of the bench JobSet (a DNS label)",
       &name,
       &RenderOptions::name,
       {}},
      once(Knob::kNamespace, "--namespace", "NAMESPACE", "Namespace of the bench JobSet",
           &RenderOptions::namespace_name),
      once(Knob::kImage, "--image", "IMAGE", "Image of the client container",
           &RenderOptions::image),
      once(Knob::kOutputPrefix, "--output-prefix", "PREFIX",
           "Set --maxtext_output_directory to <PREFIX>/<NAME>", &RenderOptions::output_prefix),
      repeated(Knob::kMaxTextFlag, "--maxtext-flag", "KEY=VALUE",
               "Append to MAXTEXT_EXTRA_FLAGS (replace where the key stands)",
               &RenderOptions::maxtext_flags),
      repeated(Knob::kMaxTextReplace, "--maxtext-replace", "KEY=VALUE",
               "Replace a MAXTEXT_EXTRA_FLAGS item in place; error if absent",
               &RenderOptions::maxtext_replace),
      repeated(
          Knob::kLibtpuFlag, "--libtpu-flag", "FLAG",
          "--xla_...=V: write to the client's LIBTPU_INIT_ARGS, the pathways-proxy args and the "
          "pathways-worker env (use --libtpu-flag=--xla_...=V)",
          &RenderOptions::libtpu_flags),
      repeated(Knob::kTrainerArg, "--trainer-arg", "FLAG",
               "--k=v, --k or --no-k: set in the trainer argv", &RenderOptions::trainer_args),
      repeated(Knob::kTrainerArgRemove, "--trainer-arg-remove", "FLAG",
               "--k: remove from the trainer argv", &RenderOptions::trainer_args_removed),
      repeated(Knob::kOrchArg, "--orch-arg", "FLAG",
               "--k=v: set in the orchestrator argv the driver reads (ORCH_ARGV)",
               &RenderOptions::orchestrator_args),
      once(Knob::kTrainerSlice, "--trainer-slice", "TYPE:TOPOLOGY",
           "e.g. tpu7x:4x4x4: change every field that encodes the trainer slice; FSDP fills the "
           "devices",
           &RenderOptions::trainer_slice),
      once(Knob::kLogpsChunk, "--logps-chunk", "INT",
           "compute_logps_chunk_size, wherever the e2e passes it"),
      {Knob::kProfileWindow,
       window.option,
       setting_value_name(window),
       KnobArity::kOnce,
       window.meaning,
       &window,
       {},
       {}},
      row_of(KnobArity::kFlag)(
          Knob::kDumpHlo, "--dump-hlo", "",
          "The compiling container (pathways-proxy) writes every XLA module, the scheduled one "
          "included, as HLO text to <PROFILE_DIR>/hlo, next to the trace (profile-report --hlo)"),
      once(Knob::kWeights, "--weights", "TEXT:{random,checkpoint}",
           "random: drop what would load a checkpoint into the trainer (--maxtext_ckpt_path, "
           "load_parameters_path, load_full_state_path, MAXTEXT_CKPT), so MaxText initialises "
           "random weights; checkpoint: keep the e2e's, so the bench loads its checkpoint "
           "(default: random)"),
  };
  for (const DriverSetting& setting : driver_settings()) {
    if (setting.has_option() && &setting != &name && &setting != &window)
      rows.push_back(setting_row(setting));
  }
  rows.push_back(repeated(Knob::kDriverEnv, "--driver-env", "KEY=VALUE",
                          "An extra environment variable for the driver"));
  rows.push_back(once(Knob::kDriver, "--driver", "FILE",
                      "Use this bench_driver.py instead of the embedded one"));
  for (KnobSpec& row : rows) row.one_per_pod = one_per_pod(row.knob);
  return rows;
}

void store(std::string& field, std::string_view text) { field = text; }
void store(std::optional<std::string>& field, std::string_view text) { field = std::string(text); }
void store(std::vector<std::string>& field, std::string_view text) { field.emplace_back(text); }

// Stores `text` in the field of `spec` when it has one; false when it has none.
bool store_in_field(const KnobSpec& spec, std::string_view text, RenderOptions& options) {
  return std::visit(
      [&](auto field) {
        if constexpr (std::is_same_v<decltype(field), std::monostate>) {
          return false;
        } else {
          store(options.*field, text);
          return true;
        }
      },
      spec.field);
}

// Sets the field of `options` that holds a driver setting, given `text` on its option; a blank
// text leaves the default. A setting without a field of its own goes into other_settings.
void apply_setting(const DriverSetting& setting, std::string_view text, RenderOptions& options) {
  DriverSettings& d = options.driver;
  const std::string& name = setting.name;
  constexpr std::int64_t kIntMax = std::numeric_limits<int>::max();
  if (setting.type == SettingKind::kBool) {
    if (name == "ALLOW_FALLBACKS") {
      d.allow_fallbacks = true;
    } else {
      d.other_settings.emplace_back(name, "1");
    }
  } else if (setting.type == SettingKind::kTargets) {
    d.routing_targets = payload::parse_routing_targets(read_file(std::string(text)),
                                                       display_name(std::string(text)));
    d.routing_targets_source = std::string(text);
  } else if (name == "STEPS" || name == "MICRO_STEPS" || name == "PAD_ALIGN") {
    std::optional<std::int64_t> value = int_setting(setting, text, kIntMax);
    if (!value) return;
    int number = static_cast<int>(*value);
    if (name == "STEPS") d.steps = number;
    if (name == "MICRO_STEPS") d.micro_steps = number;
    if (name == "PAD_ALIGN") d.pad_align = number;
  } else if (name == "SEED") {
    if (std::optional<std::int64_t> value = int_setting(setting, text)) d.seed = *value;
  } else if (name == "ROUTING_SCALE") {
    if (std::optional<double> value = float_setting(setting, text)) d.routing_scale = *value;
  } else {
    std::string value = checked_setting(setting, text);
    if (value.empty()) return;
    if (name == "LOGP_GATES") {
      d.logp_gates = value == "on";
    } else if (name == "ADVANTAGES") {
      d.advantages = value;
    } else if (name == "PAD_POSITION") {
      d.pad_position = value;
    } else if (name == "STAGE_BOUNDARY") {
      d.stage_boundary = value;
    } else if (name == "ROUTING") {
      d.routing = value;
    } else if (name == "LOGPS_PASS") {
      d.logps_pass = value;
    } else {
      d.other_settings.emplace_back(name, value);
    }
  }
}

int parse_logps_chunk(std::string_view text) {
  std::string trimmed(trim(text));
  std::int64_t value = 0;
  auto [end, error] = std::from_chars(trimmed.data(), trimmed.data() + trimmed.size(), value);
  if (trimmed.empty() || error != std::errc() || end != trimmed.data() + trimmed.size())
    fail_knob(Knob::kLogpsChunk, text, "not an integer");
  // The renderer refuses a chunk below 1, whoever built the options.
  if (value > std::numeric_limits<int>::max() || value < std::numeric_limits<int>::min())
    fail_knob(Knob::kLogpsChunk, text, "out of range");
  return static_cast<int>(value);
}

}  // namespace

std::span<const KnobSpec> render_knobs() {
  // Built on first use from the embedded driver settings table, then read-only.
  static const std::vector<KnobSpec> table = build_table();
  return table;
}

const KnobSpec& knob_spec(Knob knob) {
  for (const KnobSpec& spec : render_knobs()) {
    if (spec.knob == knob && knob != Knob::kSetting) return spec;
  }
  fail("internal error: no knob row for {}", static_cast<int>(knob));
}

const KnobSpec* find_knob(std::string_view option) {
  for (const KnobSpec& spec : render_knobs()) {
    if (spec.option == option) return &spec;
  }
  return nullptr;
}

std::string_view knob_option(Knob knob) { return knob_spec(knob).option; }

std::string knobs_json() {
  static constexpr std::string_view kArity[] = {"once", "repeated", "flag"};
  json::Writer j;
  j.begin_object().field("schema", "rtb.render-bench.knobs/1").key("knobs").begin_array();
  for (const KnobSpec& spec : render_knobs()) {
    j.begin_object(json::Writer::Layout::kOneLine).field("option", spec.option).key("value");
    if (spec.arity == KnobArity::kFlag) {
      j.null();
    } else {
      j.value(spec.value_name);
    }
    j.field("arity", kArity[static_cast<int>(spec.arity)]).field("help", spec.help).key("setting");
    if (spec.setting) {
      j.value(spec.setting->name);
    } else {
      j.null();
    }
    j.field("one_per_pod", json::null_if_empty(spec.one_per_pod));
    j.end_object();
  }
  j.end_array().end_object();
  return std::move(j).str();
}

Weights parse_weights(std::string_view text) {
  if (text == "random") return Weights::kRandom;
  if (text == "checkpoint") return Weights::kCheckpoint;
  fail_knob(Knob::kWeights, text, "must be random or checkpoint");
}

std::optional<std::pair<int, int>> parse_profile_window(std::string_view text) {
  auto window = window_setting(*knob_spec(Knob::kProfileWindow).setting, text,
                               std::numeric_limits<int>::max());
  if (!window) return std::nullopt;
  return std::make_pair(static_cast<int>(window->first), static_cast<int>(window->second));
}

std::pair<std::string, std::string> parse_driver_env(std::string_view text) {
  std::size_t eq = text.find('=');
  if (eq == std::string_view::npos || eq == 0)
    fail_knob(Knob::kDriverEnv, text, "expected KEY=VALUE");
  return {std::string(text.substr(0, eq)), std::string(text.substr(eq + 1))};
}

void apply_knob(const KnobSpec& spec, std::string_view text, RenderOptions& options) {
  if (store_in_field(spec, text, options)) return;
  switch (spec.knob) {
    case Knob::kLogpsChunk:
      options.logps_chunk = parse_logps_chunk(text);
      return;
    case Knob::kProfileWindow:
      options.profile_window = parse_profile_window(text);
      return;
    case Knob::kDumpHlo:
      options.dump_hlo = true;
      return;
    case Knob::kWeights:
      options.weights = parse_weights(text);
      return;
    case Knob::kSetting:
      apply_setting(*spec.setting, text, options);
      return;
    case Knob::kDriverEnv:
      options.driver.extra_env.push_back(parse_driver_env(text));
      return;
    case Knob::kDriver:
      options.driver_source = read_file(std::string(text));
      if (options.driver_source.empty()) fail_knob(Knob::kDriver, text, "the file is empty");
      return;
    default:
      fail("internal error: knob {} has neither a field nor a parser", spec.option);
  }
}

}  // namespace rtb::bench
