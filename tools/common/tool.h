// What every tool shares: option parsing set-up (--help with examples, --version, -v/-q), logging
// to stderr, the error line `tool: file:line: message`, the one place where the library's
// Outcome becomes the exit code of CONTRIBUTING.md, and where credentials are masked on the way
// out (--show-secrets; docs/secrets.md). The options several tools take: options.h.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/options.h"
#include "rtb/base/diagnostic.h"
#include "rtb/base/outcome.h"
#include "rtb/base/secrets.h"

namespace rtb::tool {

struct Spec {
  std::string name;      // e.g. "render-bench"
  std::string summary;   // one paragraph for --help
  std::string examples;  // shown at the end of --help
};

class Tool {
 public:
  explicit Tool(Spec spec);

  CLI::App& app() { return app_; }
  const std::string& name() const { return spec_.name; }

  // Parses argv, sets up logging and runs `body`; returns the exit code of its outcome. Every
  // error (options, rtb::Error, anything else thrown) becomes one line on stderr and the exit
  // code of Outcome::kError. Callable more than once in a process (tests run tools in-process).
  // Log lines and error lines are scrubbed of credentials (unless --show-secrets).
  int run(int argc, char** argv, const std::function<Outcome()>& body);

  // Within `body`: the run's masker (a fresh key each run; showing with --show-secrets).
  const SecretMasker& masker() const;
  // Writes a report, an explanation or a diff to `path` (- for stdout) with every credential
  // masked. What is written to be run (a JobSet, an AOT script) keeps its values: write_output.
  void write_report(const std::string& path, std::string_view text) const;
  // Prints a report meant for stderr (--explain, --summary), masked as write_report.
  void print_to_stderr(std::string_view text) const;
  // Logs what the library reported without failing, once, in order: warnings at warn level (shown
  // unless -q), notes at info level (shown with -v), each as "tool: level: where: message",
  // masked as every log line.
  void report_diagnostics(const std::vector<Diagnostic>& diagnostics) const;

 private:
  Spec spec_;
  CLI::App app_;
  int verbosity_ = 0;
  bool quiet_ = false;
  bool show_secrets_ = false;
  std::optional<SecretMasker> masker_;
};

}  // namespace rtb::tool
