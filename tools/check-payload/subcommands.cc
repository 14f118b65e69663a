#include "check-payload/subcommands.h"

#include <cstdio>
#include <filesystem>
#include <system_error>

#include "rtb/base/io.h"
#include "rtb/payload/routing.h"

namespace rtb::tool::check_payload {

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::vector<double> load_targets(const std::string& argument, std::string* source) {
  std::string path;
  // A string that cannot name a file (longer than NAME_MAX, say) is an inline list: the
  // error_code overload says "no file" where the throwing one fails on such a name.
  std::error_code not_a_file;
  if (!argument.empty() && argument[0] == '@') {
    path = argument.substr(1);
  } else if (argument == "-" || std::filesystem::is_regular_file(argument, not_a_file)) {
    path = argument;
  }
  if (path.empty()) {
    *source = "--routing-targets (inline)";
    return payload::parse_routing_targets(argument, "--routing-targets");
  }
  *source = display_name(path);
  return payload::parse_routing_targets(read_file(path), display_name(path));
}

void print_report(const std::string& text, bool to_stderr) {
  if (to_stderr) {
    std::fputs(text.c_str(), stderr);
  } else {
    write_output("-", text);
  }
}

void add_layout_options(CLI::App* cmd, payload::PayloadOptions& o, bool required) {
  cmd->add_option("--rows", o.rows, "Rows of the micro-batch (R)")->required(required);
  cmd->add_option("--tokens", o.tokens, "Token budget per row (T, max_seq_token_per_tpu)")
      ->required(required);
  cmd->add_option("--real-len", o.real_len,
                  "Real tokens per row (default: T minus the bench's share of padding, "
                  "60,948 of 65,536)");
  cmd->add_option("--segments", o.segments, "Segments (packed sequences) per row")
      ->capture_default_str();
  cmd->add_option("--final-rows", o.final_rows,
                  "Build the final micro-batch of a step: only the first F rows are real, the "
                  "rest are padding");
  cmd->add_option("--pad-align", o.pad_align,
                  "Pad position start moves a row by its padding rounded down to this (a "
                  "positive multiple of 64)")
      ->capture_default_str();
  cmd->add_option("--seed", o.seed, "Seed of every random choice")->capture_default_str();
}

}  // namespace rtb::tool::check_payload
