#include "common/tool.h"

#include <spdlog/details/null_mutex.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <exception>
#include <memory>
#include <stdexcept>
#include <utility>

#include "rtb/base/error.h"
#include "rtb/base/io.h"
#include "rtb/base/text.h"

namespace rtb::tool {
namespace {

void print_error_line(const std::string& tool, const std::string& message,
                      const SecretMasker& masker) {
  // One line: newlines inside a message would break `tool: file:line: what` parsing by scripts.
  // Scrubbed first, so that a private key block spanning lines is still seen whole.
  std::string flat = masker.scrub(message);
  for (char& c : flat) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  std::fprintf(stderr, "%s: %s\n", tool.c_str(), flat.c_str());
}

// stderr, each formatted line scrubbed of credentials: whatever a library message quotes, the
// masking does not depend on how the message reached the log.
class ScrubbingStderrSink final : public spdlog::sinks::base_sink<spdlog::details::null_mutex> {
 public:
  explicit ScrubbingStderrSink(SecretMasker masker) : masker_(std::move(masker)) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& message) override {
    spdlog::memory_buf_t formatted;
    formatter_->format(message, formatted);
    std::string text = masker_.scrub(std::string_view(formatted.data(), formatted.size()));
    std::fwrite(text.data(), 1, text.size(), stderr);
  }
  void flush_() override { std::fflush(stderr); }

 private:
  SecretMasker masker_;
};

void set_up_logging(const std::string& tool, int verbosity, bool quiet,
                    const SecretMasker& masker) {
  // Not registered by name: a second run in the same process replaces the default logger.
  auto logger =
      std::make_shared<spdlog::logger>(tool, std::make_shared<ScrubbingStderrSink>(masker));
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
              "\nExit codes: 0 success, 1 differences or a failed check, 2 error.\n\n" +
              wrap_words(describe_secret_rules(secret_rules()), 100));
  app_.add_flag("-v,--verbose", verbosity_, "Log more on stderr (repeat for debug)");
  app_.add_flag("-q,--quiet", quiet_, "Log only errors");
  app_.add_flag("--show-secrets", show_secrets_,
                "Print credentials in clear in reports, logs and errors (see Secrets below)");
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
    // Whether --show-secrets was given is not known when parsing failed: masked.
    try {
      print_error_line(spec_.name, std::string(e.what()) + " (see --help)",
                       SecretMasker::with_fresh_key());
    } catch (const rtb::Error& masking) {
      std::fprintf(stderr, "%s: bad options (see --help); %s\n", spec_.name.c_str(),
                   masking.what());
    }
    return exit_code(Outcome::kError);
  }
  try {
    masker_.emplace(show_secrets_ ? SecretMasker::showing() : SecretMasker::with_fresh_key());
  } catch (const rtb::Error& e) {
    std::fprintf(stderr, "%s: %s\n", spec_.name.c_str(), e.what());
    return exit_code(Outcome::kError);
  }
  try {
    set_up_logging(spec_.name, verbosity_, quiet_, *masker_);
    return exit_code(body());
  } catch (const rtb::Error& e) {
    print_error_line(spec_.name, e.what(), *masker_);
  } catch (const std::bad_alloc&) {
    print_error_line(spec_.name, "out of memory", *masker_);
  } catch (const std::exception& e) {
    print_error_line(spec_.name, std::string("internal error: ") + e.what(), *masker_);
  }
  return exit_code(Outcome::kError);
}

const SecretMasker& Tool::masker() const {
  if (!masker_) throw std::logic_error("Tool::masker() called outside run()");
  return *masker_;
}

void Tool::write_report(const std::string& path, std::string_view text) const {
  write_output(path, masker().scrub(text));
}

void Tool::print_to_stderr(std::string_view text) const {
  std::string masked = masker().scrub(text);
  std::fwrite(masked.data(), 1, masked.size(), stderr);
}

void Tool::report_diagnostics(const std::vector<Diagnostic>& diagnostics) const {
  for (const Diagnostic& diagnostic : diagnostics) {
    if (diagnostic.severity == Severity::kWarning) {
      spdlog::warn("{}", text_of(diagnostic));
    } else {
      spdlog::info("{}", text_of(diagnostic));
    }
  }
}

}  // namespace rtb::tool
