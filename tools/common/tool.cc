#include "common/tool.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdio>
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

}  // namespace rtb::tool
