// Resolved MaxText configs as logs print them, for diff-configs: MaxText logs every key of its
// resolved config, sorted, one line each: `Config param <key>: <value>` after any prefix (glog
// `I0706 ... pyconfig.py:559] `, Python logging `INFO:MaxText.pyconfig:`, Tunix's `<time> -
// [TrainerNode] `). Logs can be gigabytes, so they are streamed, and memory stays bounded by the
// number of keys. A log can hold several dumps (processes, restarts): a dump is a run of config
// lines whose keys increase (other lines may be interleaved); a key that does not sort after the
// previous one starts the next dump.
// Values compare by meaning where MaxText's printing varies (canonical_config_value()); reports
// keep the original text.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rtb/base/literal.h"
#include "rtb/base/secrets.h"

namespace rtb::logs {

inline constexpr std::string_view kConfigParamMarker = "Config param ";

// The key and value of a `Config param <key>: <value>` line (value without a trailing '\r'), or
// nullopt when the line is not one. A line ending in `<key>:` has the empty value.
std::optional<std::pair<std::string_view, std::string_view>> parse_config_param_line(
    std::string_view line);

// One key of a config, with where it comes from.
struct ConfigSetting {
  std::string key;
  std::string value;     // as printed (logs) or written (renders)
  std::size_t line = 0;  // 1-based input line
  std::string origin;    // renders: the item that sets it (`--mesh_fsdp=32`, a MAXTEXT item)
  bool implied = false;  // renders: a default or constant the trainer passes unasked
};

// Each setting's value as `masker` lets it print (by its key: hf_access_token, wandb_api_key),
// and its origin scrubbed: for a report that shows or compares settings. Under one masker equal
// values stay equal.
void mask_settings(std::vector<ConfigSetting>& settings, const SecretMasker& masker);

struct ConfigDumpInfo {
  std::size_t number = 0;  // 1-based, in input order
  std::size_t first_line = 0, last_line = 0;
  std::size_t params = 0;
  std::string first_key, last_key;
  bool complete = false;
  std::string incomplete_reason;  // why it is not complete (empty when it is)
};

struct ConfigLogOptions {
  std::optional<std::size_t> dump;  // 1-based; nullopt: the last complete dump
  bool list_only = false;           // keep no values: for --list-dumps
};

struct ConfigLog {
  std::string source;
  std::vector<ConfigDumpInfo> dumps;
  std::size_t selected = 0;           // number of the dump in `params`; 0: none
  std::vector<ConfigSetting> params;  // the selected dump, in log order
  std::size_t lines = 0;              // lines in the input
};

// Reads a log fed block by block, in order. A dump is complete when the log goes on after it (a
// log that ends right after a config line, or in the middle of one, was cut), and when it starts
// at or before, and ends at or after, the keys every other dump of the log starts and ends at (a
// dump that stops early was cut by a crash or a restart; one that starts late lost its beginning).
class ConfigLogScanner {
 public:
  explicit ConfigLogScanner(ConfigLogOptions options = {});
  void feed(std::string_view block);
  // Ends the input. Throws rtb::Error (naming `source` and the line) only for a damaged log, a
  // setting whose value holds a NUL byte; missing or cut dumps are reported by
  // require_selected_dump().
  ConfigLog finish(std::string source);

 private:
  void process_lines(const char* begin, const char* end);
  void process_line(std::string_view line, std::size_t number);
  void note_other(const char* begin, const char* end);
  void add_param(std::string_view key, std::string_view value, std::size_t number);
  void close_dump(bool at_end, bool cut_line);

  ConfigLogOptions options_;
  std::string carry_;              // the current partial line (its prefix may have been dropped)
  bool carry_text_ = false;        // non-blank text was dropped from the partial line
  std::size_t lines_ = 0;          // complete lines so far
  bool other_text_ = false;        // some non-blank line is not a config line
  bool other_after_last_ = false;  // ... after the last config line
  std::vector<ConfigDumpInfo> dumps_;
  bool open_ = false;
  std::string last_key_;
  std::size_t nul_line_ = 0;  // first kept setting whose value holds a NUL byte (0: none)
  std::string nul_key_;
  std::vector<ConfigSetting> current_, kept_;  // their first current_count_ / kept_count_
  std::size_t current_count_ = 0, kept_count_ = 0;
  std::size_t kept_number_ = 0;
  std::string max_last_key_, min_first_key_;  // over dumps not cut by the end of the input
  bool have_bounds_ = false;
};

// Throws rtb::Error (source and line) unless `log` has the dump `options` asked for, complete: no
// config line at all, no such dump, or it (or, by default, every dump) is truncated.
void require_selected_dump(const ConfigLog& log, const ConfigLogOptions& options);

// Streams a log file (or stdin for "-") through ConfigLogScanner, then require_selected_dump()
// unless options.list_only.
ConfigLog read_config_log(const std::string& path, const ConfigLogOptions& options = {});

// What read_config_log_or_text() read: a log, or the whole text of an input that is not one.
struct ConfigLogOrText {
  ConfigLog log;
  std::optional<std::string> text;
};

// How much of the input read_config_log_or_text() shows `is_text` first.
inline constexpr std::size_t kTextHeadBytes = 1u << 20;

// Streams a log file (or stdin for "-") like read_config_log(), unless its first kTextHeadBytes
// satisfy `is_text` (another kind of input, e.g. a render): then returns the whole text instead.
ConfigLogOrText read_config_log_or_text(const std::string& path, const ConfigLogOptions& options,
                                        const std::function<bool(std::string_view)>& is_text);

// The form in which two printings of one value compare equal: True/true, 1.0/1/1e0, None/null,
// an enum member `RematLocation.REMAT` and the string `remat`, lists and tuples however spaced
// and quoted (`['a', 'b']`, `(a,b)`, `[a, b]`), dicts in any key order. Strings stay
// case-sensitive, and a quoted '1' inside a list differs from 1.
std::string canonical_config_value(std::string_view value);
// The same form of a value already read as a literal with bare words (one item of a list).
std::string canonical_config_literal(const Literal& value);

}  // namespace rtb::logs
