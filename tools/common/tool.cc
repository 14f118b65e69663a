#include "common/tool.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>

#include "rtb/base/error.h"

namespace rtb::tool {
namespace {

void print_error_line(const std::string& tool, const std::string& message) {
  // One line: newlines inside a message would break `tool: file:line: what` parsing by scripts.
  std::string flat = message;
  for (char& c : flat) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  std::fprintf(stderr, "%s: %s\n", tool.c_str(), flat.c_str());
}

void set_up_logging(const std::string& tool, int verbosity, bool quiet) {
  // Not registered by name: a second run in the same process replaces the default logger.
  auto logger =
      std::make_shared<spdlog::logger>(tool, std::make_shared<spdlog::sinks::stderr_sink_st>());
  logger->set_pattern("%n: %l: %v");
  if (quiet) {
    logger->set_level(spdlog::level::err);
  } else if (verbosity >= 2) {
    logger->set_level(spdlog::level::debug);
  } else if (verbosity == 1) {
    logger->set_level(spdlog::level::info);
  } else {
    logger->set_level(spdlog::level::warn);
  }
  spdlog::set_default_logger(logger);
}

}  // namespace

Tool::Tool(Spec spec) : spec_(std::move(spec)), app_(spec_.summary, spec_.name) {
  app_.set_version_flag("--version", spec_.name + " (rl-trainer-bench) " RTB_VERSION);
  app_.footer("Examples:\n" + spec_.examples +
              "\nExit codes: 0 success, 1 differences or a failed check, 2 error.");
  app_.add_flag("-v,--verbose", verbosity_, "Log more on stderr (repeat for debug)");
  app_.add_flag("-q,--quiet", quiet_, "Log only errors");
  app_.get_formatter()->column_width(34);
}

int Tool::run(int argc, char** argv, const std::function<Outcome()>& body) {
  try {
    app_.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app_.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app_.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app_.exit(e);
  } catch (const CLI::ParseError& e) {
    print_error_line(spec_.name, std::string(e.what()) + " (see --help)");
    return exit_code(Outcome::kError);
  }
  try {
    set_up_logging(spec_.name, verbosity_, quiet_);
    return exit_code(body());
  } catch (const rtb::Error& e) {
    print_error_line(spec_.name, e.what());
  } catch (const std::bad_alloc&) {
    print_error_line(spec_.name, "out of memory");
  } catch (const std::exception& e) {
    print_error_line(spec_.name, std::string("internal error: ") + e.what());
  }
  return exit_code(Outcome::kError);
}

void require_one_stdin(const std::vector<std::string>& inputs, std::string_view what) {
  if (std::count(inputs.begin(), inputs.end(), "-") > 1) {
    fail("only one of {} can be - (stdin)", what);
  }
}

CLI::Option* add_color_option(CLI::App& app, std::string& when) {
  return app
      .add_option("--color", when, "auto|always|never (auto: on a terminal, unless NO_COLOR)")
      ->check(CLI::IsMember({"auto", "always", "never"}))
      ->capture_default_str();
}

CLI::Option* add_json_flag(CLI::App& app, bool& json, const std::string& description) {
  return app.add_flag("--json", json, description);
}

CLI::Option* add_output_option(CLI::App& app, std::string& path, const std::string& description) {
  return app.add_option("-o,--output", path, description);
}

CLI::Option* add_trainer_main_option(CLI::App& app, rtb::k8s::RoleMains& mains,
                                     std::string_view note) {
  return app
      .add_option("--trainer-main", mains.trainer,
                  fmt::format("--process_main of the trainer{}", note))
      ->capture_default_str();
}

void add_role_main_options(CLI::App& app, rtb::k8s::RoleMains& mains) {
  add_trainer_main_option(app, mains);
  app.add_option("--orch-main", mains.orchestrator, "--process_main of the orchestrator")
      ->capture_default_str();
  app.add_option("--rollout-main", mains.rollout, "--process_main of the rollouts")
      ->capture_default_str();
}

std::int64_t parse_byte_count(const std::string& text, std::string_view option) {
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || value < 0) {
    fail("{} {}: expected a byte count such as 1048576 or 64MiB", option, text);
  }
  std::string unit(end, text.data() + text.size());
  double scale = 0;
  if (unit.empty() || unit == "B") scale = 1;
  if (unit == "KiB" || unit == "K") scale = 1024.0;
  if (unit == "MiB" || unit == "M") scale = 1024.0 * 1024;
  if (unit == "GiB" || unit == "G") scale = 1024.0 * 1024 * 1024;
  if (unit == "TiB" || unit == "T") scale = 1024.0 * 1024 * 1024 * 1024;
  if (scale == 0) fail("{} {}: unknown unit '{}' (B, KiB, MiB, GiB, TiB)", option, text, unit);
  double bytes = value * scale;
  // Converting a double beyond int64's range is undefined behaviour: refuse it first.
  if (!(bytes < 0x1p63)) fail("{} {}: too large", option, text);
  return static_cast<std::int64_t>(bytes);
}

bool use_color(const std::string& when) {
  if (when == "always") return true;
  if (when == "never") return false;
  const char* no_color = std::getenv("NO_COLOR");
  if (no_color != nullptr && no_color[0] != '\0') return false;
  return ::isatty(STDOUT_FILENO) == 1;
}

}  // namespace rtb::tool
