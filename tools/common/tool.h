// What every tool shares: option parsing set-up (--help with examples, --version, -v/-q), logging
// to stderr, the error line `tool: file:line: message`, and the one place where the library's
// Outcome becomes the exit code of CONTRIBUTING.md. The options several tools take: options.h.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/options.h"
#include "rtb/base/outcome.h"

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
  int run(int argc, char** argv, const std::function<Outcome()>& body);

 private:
  Spec spec_;
  CLI::App app_;
  int verbosity_ = 0;
  bool quiet_ = false;
};

}  // namespace rtb::tool
