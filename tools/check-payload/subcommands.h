// check-payload's subcommands, one file each (build.cc, verify.cc, measure.cc, tiles.cc), and what
// they share (subcommands.cc).
#pragma once

#include <CLI/CLI.hpp>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "common/tool.h"
#include "rtb/base/outcome.h"
#include "rtb/payload/builder.h"

namespace rtb::tool::check_payload {

// A subcommand added to the app: its options are bound to state that `run` owns.
struct Subcommand {
  CLI::App* command = nullptr;
  std::function<Outcome()> run;
};

Subcommand add_build(CLI::App& app, const Tool& tool);  // tool: logs the warnings
Subcommand add_verify(CLI::App& app, const Tool& tool);
Subcommand add_measure(CLI::App& app);
Subcommand add_tiles(CLI::App& app, const Tool& tool);

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point start);

// --routing-targets: @FILE or an existing file is read; anything else is an inline list.
// `source` receives where the targets came from.
std::vector<double> load_targets(const std::string& argument, std::string* source);

// Where the report goes: stdout, or stderr when stdout carries the payload itself (-o -).
void print_report(const std::string& text, bool to_stderr);

// The options that lay rows out, shared by build and tiles.
void add_layout_options(CLI::App* cmd, payload::PayloadOptions& o, bool required);

}  // namespace rtb::tool::check_payload
