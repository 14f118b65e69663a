// render-bench's knobs as one table: each knob's option, the value it takes, its help, and where
// its value goes in RenderOptions. The tools declare their options from it (tools/common, which
// alone knows CLI11), the renderer records each change under the option of the knob that asked for
// it and refuses a bad value in the knob's own words (`--maxtext-replace k=v: ...`), and the tests
// check docs/render-bench.md and their own knob lists against it (`render-bench --print-knobs`).
// The driver's knobs are the rows of the driver settings table (driver_settings.h) that name an
// option; this table reads them rather than repeating them.
//
// Adding a knob: a row here (and in Knob), the field it fills in RenderOptions, the edit that uses
// it, and its test. `diff-renders --expect-bench` stays an independent oracle: it shares the names
// of what render-bench may change (render_table.h), never the values this table computes.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "rtb/base/error.h"
#include "rtb/bench/driver_settings.h"
#include "rtb/bench/render.h"

namespace rtb::bench {

// The knobs that are not driver settings, in --help's order. A driver setting's knob is kSetting.
enum class Knob {
  kName,
  kNamespace,
  kImage,
  kOutputPrefix,
  kMaxTextFlag,
  kMaxTextReplace,
  kLibtpuFlag,
  kTrainerArg,
  kTrainerArgRemove,
  kOrchArg,
  kTrainerSlice,
  kLogpsChunk,
  kProfileWindow,
  kDumpHlo,
  kWeights,
  kSetting,  // a row of the driver settings table with an option (--steps, --routing-targets, ...)
  kDriverEnv,
  kDriver,
};

// The field of RenderOptions that takes a knob's text as it is: a text (a repeated knob's list
// appends). std::monostate for a knob whose text apply_knob parses or checks first.
using KnobField = std::variant<std::monostate, std::string RenderOptions::*,
                               std::optional<std::string> RenderOptions::*,
                               std::vector<std::string> RenderOptions::*>;

// How often a knob may be given and whether it takes a value.
enum class KnobArity {
  kOnce,      // --knob VALUE, at most once
  kRepeated,  // --knob VALUE ...: every value, in order
  kFlag,      // --knob, no value
};

struct KnobSpec {
  Knob knob = Knob::kName;
  std::string option;      // "--maxtext-flag"
  std::string value_name;  // what --help shows for the value: "KEY=VALUE", "INT", "TEXT:{a,b}"
  KnobArity arity = KnobArity::kOnce;
  std::string help;
  // For kSetting: the driver setting's row; nullptr otherwise.
  const DriverSetting* setting = nullptr;
  KnobField field;
  // Why the knob's value is one for the whole pod (the JobSet, its slice, the proxy and workers
  // every run shares), so a same-pod arm (arms.h) cannot set it; empty: the knob changes only what
  // one client process runs (its MaxText flags, trainer argv, driver settings).
  std::string_view one_per_pod;
};

// The table: every knob, in --help's order (the driver settings in their table's order where
// --weights ends and --driver-env begins). Built once from the driver settings table.
std::span<const KnobSpec> render_knobs();
// The row of `knob` (not kSetting); the row of `option` ("--steps"), nullptr when none.
const KnobSpec& knob_spec(Knob knob);
const KnobSpec* find_knob(std::string_view option);
// The option of `knob`: the name its changes are recorded under and its errors start with.
std::string_view knob_option(Knob knob);

// Sets what `text`, given to `spec`'s option, asks for in `options`: stores it, or parses and
// checks it first. A repeated knob appends; a flag sets (its text is ignored); a knob that names
// a file (--driver, --routing-targets) reads it. Throws rtb::Error "<option> <text>: <reason>",
// the driver's words for a driver setting.
void apply_knob(const KnobSpec& spec, std::string_view text, RenderOptions& options);

// The table as JSON (`render-bench --print-knobs`, schema rtb.render-bench.knobs/1): for each
// knob its option, value name (null for a flag), arity ("once", "repeated", "flag"), help, the
// driver setting it sets (null when none) and why its value is one for the whole pod (one_per_pod;
// null for a knob a same-pod arm may set), so that scripts and the tests read the same list.
std::string knobs_json();

// The knobs whose text is parsed into another type, as apply_knob parses them:
// "random" or "checkpoint" as Weights ("--weights <text>: must be random or checkpoint");
Weights parse_weights(std::string_view text);
// --profile-window START:COUNT (timed steps) as {START, COUNT}, std::nullopt for a blank value
// (no window), refused in the driver's words ("--profile-window <text>: <reason>");
std::optional<std::pair<int, int>> parse_profile_window(std::string_view text);
// --driver-env KEY=VALUE (a non-empty key) as {KEY, VALUE}.
std::pair<std::string, std::string> parse_driver_env(std::string_view text);

// Throws rtb::Error "<option of knob> <value>: <reason>".
template <typename... Args>
[[noreturn]] void fail_knob(Knob knob, std::string_view value, fmt::format_string<Args...> reason,
                            Args&&... args) {
  fail("{} {}: {}", knob_option(knob), value, fmt::format(reason, std::forward<Args>(args)...));
}

}  // namespace rtb::bench
