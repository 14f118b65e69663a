// What every tool shares: option parsing set-up (--help with examples, --version, -v/-q), the
// options several tools take, logging to stderr, the error line `tool: file:line: message`, and
// the one place where the library's Outcome becomes the exit code of CONTRIBUTING.md.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "rtb/base/outcome.h"
#include "rtb/k8s/jobset.h"

namespace rtb::tool {

struct Spec {
  std::string name;      // e.g. "render-bench"
  std::string summary;   // one paragraph for --help
  std::string examples;  // shown at the end of --help
};

// Fails (one line, exit 2) when more than one of `inputs` is "-": stdin can be read only once.
// `what` names them in the message, e.g. "A and B".
void require_one_stdin(const std::vector<std::string>& inputs, std::string_view what);

// --- options several tools take (each with the tool's own description where it says more) ---

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

// A byte count given to `option`: "1048576", "64MiB", "1.5GiB", "512K" (binary units B, KiB,
// MiB, GiB, TiB, or their first letter). Throws rtb::Error naming the option.
std::int64_t parse_byte_count(const std::string& text, std::string_view option);

class Tool {
 public:
  explicit Tool(Spec spec);

  CLI::App& app() { return app_; }
  const std::string& name() const { return spec_.name; }

  // Parses argv, sets up logging and runs `body`; returns the exit code of its outcome. Every
  // error (options, rtb::Error, anything else thrown) becomes one line on stderr and the exit
  // code of Outcome::kError. Callable more than once in a process (tests run tools in-process).
  int run(int argc, char** argv, const std::function<Outcome()>& body);

 private:
  Spec spec_;
  CLI::App app_;
  int verbosity_ = 0;
  bool quiet_ = false;
};

}  // namespace rtb::tool
