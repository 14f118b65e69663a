// What every tool shares: option parsing set-up (--help with examples, --version, -v/-q), logging
// to stderr, the error line `tool: file:line: message` and the exit codes of DEVELOPERS.md.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace rtb::tool {

// Exit codes, shared by every tool.
inline constexpr int kExitOk = 0;           // success; diff-like tools: no differences
inline constexpr int kExitDifferent = 1;    // diff-like tools: differences found
inline constexpr int kExitCheckFailed = 1;  // checking tools: a check failed
inline constexpr int kExitError = 2;        // bad input, bad options, or an internal error

struct Spec {
  std::string name;      // e.g. "render-bench"
  std::string summary;   // one paragraph for --help
  std::string examples;  // shown at the end of --help
};

// Fails (one line, exit 2) when more than one of `inputs` is "-": stdin can be read only once.
// `what` names them in the message, e.g. "A and B".
void require_one_stdin(const std::vector<std::string>& inputs, std::string_view what);

// `--color auto|always|never` (default auto) into `when`.
CLI::Option* add_color_option(CLI::App& app, std::string& when);
// Whether to colour stdout: always, never, or (auto) on a terminal unless NO_COLOR is set.
bool use_color(const std::string& when);

class Tool {
 public:
  explicit Tool(Spec spec);

  CLI::App& app() { return app_; }
  const std::string& name() const { return spec_.name; }

  // Parses argv, sets up logging and runs `body`, whose return value is the exit code. Every
  // error (options, rtb::Error, anything else thrown) becomes one line on stderr and exit code 2.
  int run(int argc, char** argv, const std::function<int()>& body);

 private:
  Spec spec_;
  CLI::App app_;
  int verbosity_ = 0;
  bool quiet_ = false;
};

}  // namespace rtb::tool
