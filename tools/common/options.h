// The options several tools take, declared once so that the same flag means the same thing in
// every tool (each with the tool's own description where it says more), and the checks that go
// with them.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "rtb/k8s/jobset.h"
#include "rtb/logs/bench_stats.h"

namespace rtb::tool {

// Fails (one line, exit 2) when more than one of `inputs` is "-": stdin can be read only once.
// `what` names them in the message, e.g. "A and B".
void require_one_stdin(const std::vector<std::string>& inputs, std::string_view what);

// The one or two inputs of a tool that reads one file or compares two (A/B): the required
// positional `name` (e.g. "A B"), 1 or 2 values, `-` for stdin (see require_one_stdin).
CLI::Option* add_one_or_two_inputs(CLI::App& app, std::vector<std::string>& inputs,
                                   const std::string& name, const std::string& description);

// Options that take several values. CLI11 2.1.2 gives an option that stores a vector every word
// after it that is no option, positionals included (`--maxtext-flag a=1 dryrun.txt` would take
// dryrun.txt as a second value); these two are the one place that says otherwise, and every tool
// declares such options through them (README.md, "Conventions").
//
// A repeatable option: each use takes one value (`--opt V` or `--opt=V`) and nothing after it;
// the values of every use are kept in order. Its help ends with kRepeatableNote.
inline constexpr const char* kRepeatableNote = "(repeatable)";
CLI::Option* add_repeatable_option(CLI::App& app, const std::string& name,
                                   std::vector<std::string>& values,
                                   const std::string& description);
// An option that takes exactly `count` values (`--control-pair A1 A2`), given once (twice is
// refused); the words after them are positionals. CLI11's help shows `x <count>` after the value.
CLI::Option* add_fixed_count_option(CLI::App& app, const std::string& name,
                                    std::vector<std::string>& values, int count,
                                    const std::string& description);

// An option that only stores its text (no check, no default shown): a table row of
// add_plain_options. A vector is a repeatable option (add_repeatable_option).
struct PlainOption {
  const char* name;
  std::variant<std::string*, std::optional<std::string>*, std::optional<int>*,
               std::vector<std::string>*>
      value;
  const char* description;
};
// Declares each row as a CLI11 option, in order.
void add_plain_options(CLI::App& app, std::initializer_list<PlainOption> options);

// `--color auto|always|never` (default auto) into `when`.
CLI::Option* add_color_option(CLI::App& app, std::string& when);
// Whether to colour stdout: always, never, or (auto) on a terminal unless NO_COLOR is set.
bool use_color(const std::string& when);

// `--json`: machine-readable output.
CLI::Option* add_json_flag(CLI::App& app, bool& json, const std::string& description);

inline constexpr const char* kOutputHelp = "Output file (default: - for stdout)";
// `-o,--output FILE` (- for stdout) into `path`, which holds the default.
CLI::Option* add_output_option(CLI::App& app, std::string& path,
                               const std::string& description = kOutputHelp);

// `--trainer-main`: the --process_main that tells the trainer's JobSet; `note` ends the help.
CLI::Option* add_trainer_main_option(CLI::App& app, rtb::k8s::RoleMains& mains,
                                     std::string_view note = "");
// `--trainer-main`, `--orch-main` and `--rollout-main`: every role's --process_main.
void add_role_main_options(CLI::App& app, rtb::k8s::RoleMains& mains);

// `--bootstrap N`, `--seed N` and `--confidence C`: the bootstrap of intervals and verdicts.
void add_bootstrap_options(CLI::App& app, rtb::logs::BootstrapOptions& bootstrap);

// A byte count given to `option`: "1048576", "64MiB", "1.5GiB", "512K" (binary units B, KiB,
// MiB, GiB, TiB, or their first letter). Throws rtb::Error naming the option.
std::int64_t parse_byte_count(const std::string& text, std::string_view option);

}  // namespace rtb::tool
