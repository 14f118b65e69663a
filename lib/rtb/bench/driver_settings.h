// The bench driver's settings as one table: tools/render-bench/driver/settings.tsv, embedded at
// build time. render-bench declares its driver options and checks their values from it; the driver
// generates its environment parser from the same file. The checks here refuse a value in the
// driver's own words, so both sides say the same thing about it: render-bench as
// `--steps 0: must be >= 1`, the driver as `STEPS='0': must be >= 1`.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rtb::bench {

// What a setting's value must be: the `kind` column.
enum class SettingKind {
  kInt,       // `int`, `int>=N`: a base-10 integer (Python's int()), at least N when given
  kFloat,     // `float>=N`: a finite number (Python's float()), at least N
  kChoice,    // `choice:a|b|c`: one of the words, compared lower-cased
  kBool,      // `bool`: 1/true/yes/on/t/y or 0/false/no/off/f/n, compared lower-cased
  kPadAlign,  // `pad_align`: an integer >= 1, a multiple of the segment alignment 64
  kWindow,    // `window`: START:COUNT with START >= 0 and COUNT >= 1
  kArgv,      // `argv`: a shell-quoted argv; not checked here
  kTargets,   // `targets`: routing targets; render-bench reads them from a FILE (payload/routing)
  kText,      // `text`: anything
};

// One row of the table.
struct DriverSetting {
  std::string name;           // the environment variable the driver reads
  std::string kind;           // as written, e.g. "int>=1", "choice:on|off"
  std::string default_value;  // "-": none (the driver resolves it at run time, or it is required)
  // "--steps"; "argv", "orch", "rollout", "arm" (written per run by --arm) or "-" when
  // render-bench has no option.
  std::string option;
  std::string meaning;  // one line

  // The kind, parsed.
  SettingKind type = SettingKind::kText;
  std::optional<std::int64_t> int_minimum;  // kInt with ">=N"
  double float_minimum = 0;                 // kFloat
  std::vector<std::string> choices;         // kChoice, lower-case words
  std::int64_t line = 0;                    // the row's line in settings.tsv

  // Whether render-bench has an option of its own for the setting (`option` is `--...`).
  bool has_option() const { return option.rfind("--", 0) == 0; }
};

// Where the table comes from, as errors about it name it.
inline constexpr std::string_view kDriverSettingsSource = "tools/render-bench/driver/settings.tsv";

// The embedded table, parsed once, in the file's order. A bad table throws the internal error of
// parse_driver_settings.
const std::vector<DriverSetting>& driver_settings();
// The row of `name` ("STEPS") or of `option` ("--steps"); nullptr when there is none.
const DriverSetting* find_driver_setting(std::string_view name);
const DriverSetting* find_driver_setting_by_option(std::string_view option);
// The row of `name`, which the caller knows is in the table; an internal error when it is not.
const DriverSetting& driver_setting(std::string_view name);

// Parses a table in settings.tsv's format (`#` comment lines, the header line, then one row of five
// tab-separated columns per setting). A bad table (columns, kinds, a duplicate name or option, a
// default its own kind refuses) throws rtb::Error at `source`:line, starting "internal error".
std::vector<DriverSetting> parse_driver_settings(std::string_view text, std::string_view source);

// Why the driver refuses `value` for `setting`, in its words ("must be >= 1"); std::nullopt when
// it accepts it. The value is trimmed of white space first; a blank one means "unset" and is
// accepted. argv, targets and text settings are not checked here. Digits and white space are
// ASCII on both sides: the driver refuses other Unicode digits and spaces too (Arabic-Indic
// digits, a no-break space), which Python's int() and float() alone would take.
std::optional<std::string> refusal(const DriverSetting& setting, std::string_view value);

// A bool word as the driver reads a bool setting (true/false, 1/0, yes/no, on/off, t/f, y/n, in
// any case, trimmed of white space); std::nullopt for any other text, a blank one included.
std::optional<bool> bool_word(std::string_view value);

// A value given to the setting's render-bench option, checked: it throws rtb::Error
// "<option> <value>: <reason>" (the value as given) when refusal() refuses it. Returns the text the
// driver reads (trimmed, and lower-cased for the choice and bool kinds); "" for a blank value,
// which leaves the setting unset.
std::string checked_setting(const DriverSetting& setting, std::string_view value);

// The same for the kinds with numbers, parsed; std::nullopt for a blank value. An integer the
// driver would accept but that render-bench cannot hold (above `highest`, or beyond 64 bits) is
// refused as "out of range (at most <highest>)" or "(at least <lowest 64-bit integer>)".
std::optional<std::int64_t> int_setting(
    const DriverSetting& setting, std::string_view value,
    std::int64_t highest = std::numeric_limits<std::int64_t>::max());
std::optional<double> float_setting(const DriverSetting& setting, std::string_view value);
// A window setting as {START, COUNT}, each at most `highest`.
std::optional<std::pair<std::int64_t, std::int64_t>> window_setting(
    const DriverSetting& setting, std::string_view value,
    std::int64_t highest = std::numeric_limits<std::int64_t>::max());

// Why the driver refuses a PROFILE_WINDOW of {START, COUNT} timed steps with STEPS `steps` (a
// window must end within the timed steps), in its words; std::nullopt when it fits.
std::optional<std::string> window_beyond_steps(std::pair<std::int64_t, std::int64_t> window,
                                               std::int64_t steps);

}  // namespace rtb::bench
