#include "common/options.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <type_traits>

#include "rtb/base/error.h"

namespace rtb::tool {

void require_one_stdin(const std::vector<std::string>& inputs, std::string_view what) {
  if (std::count(inputs.begin(), inputs.end(), "-") > 1) {
    fail("only one of {} can be - (stdin)", what);
  }
}

CLI::Option* add_one_or_two_inputs(CLI::App& app, std::vector<std::string>& inputs,
                                   const std::string& name, const std::string& description) {
  return app.add_option(name, inputs, description)->required()->expected(1, 2);
}

CLI::Option* add_repeatable_option(CLI::App& app, const std::string& name,
                                   std::vector<std::string>& values,
                                   const std::string& description) {
  // One value per use, none taken after it (CLI11 sets allow_extra_args for a vector, which lets
  // a use go on taking words); every use's value kept (TakeAll: no use is refused or dropped).
  return app.add_option(name, values, description + " " + kRepeatableNote)
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
}

CLI::Option* add_fixed_count_option(CLI::App& app, const std::string& name,
                                    std::vector<std::string>& values, int count,
                                    const std::string& description) {
  // Exactly `count` words, none after them; a second use makes more than `count` values, which
  // CLI11's Throw policy refuses.
  return app.add_option(name, values, description)
      ->expected(count)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::Throw);
}

void add_plain_options(CLI::App& app, std::initializer_list<PlainOption> options) {
  for (const PlainOption& option : options) {
    std::visit(
        [&]<typename Value>(Value* value) {
          if constexpr (std::is_same_v<Value, std::vector<std::string>>) {
            add_repeatable_option(app, option.name, *value, option.description);
          } else {
            app.add_option(option.name, *value, option.description);
          }
        },
        option.value);
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

void add_bootstrap_options(CLI::App& app, rtb::logs::BootstrapOptions& bootstrap) {
  app.add_option("--bootstrap", bootstrap.resamples, "Bootstrap resamples")->capture_default_str();
  app.add_option("--seed", bootstrap.seed, "Bootstrap seed")->capture_default_str();
  app.add_option("--confidence", bootstrap.confidence, "Confidence level of intervals")
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
