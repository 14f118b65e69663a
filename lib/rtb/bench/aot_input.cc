#include "rtb/bench/aot_input.h"

#include <fmt/format.h>

#include <charconv>

#include "rtb/base/error.h"
#include "rtb/base/text.h"
#include "rtb/bench/render_table.h"
#include "rtb/k8s/diff.h"
#include "rtb/k8s/dryrun.h"
#include "rtb/k8s/yaml.h"

namespace rtb::bench {
namespace {

constexpr std::string_view kSource = "the bench render";

}  // namespace

long long parse_integer(std::string_view text, std::string_view what) {
  long long value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty())
    fail("{}={}: not an integer", what, text);
  return value;
}

void check_number(std::string_view text, std::string_view what) {
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty())
    fail("{}={}: not a number", what, text);
}

long long Args::integer(std::string_view key, long long fallback) const {
  auto value = text(key);
  return value ? parse_integer(*value, fmt::format("{} --{}", name_, key)) : fallback;
}

bool Args::boolean(std::string_view key, bool fallback) const {
  auto at = flags_.find(key);
  if (!at) return fallback;
  const std::string& item = flags_.items()[*at];
  if (is_negated(item, k8s::FlagStyle::kDashDash)) return false;
  auto value = flag_value(item, k8s::FlagStyle::kDashDash);
  if (!value) return true;
  auto parsed = parse_str2bool(*value);
  if (!parsed) fail("{} {}: not a boolean", name_, item);
  return *parsed;
}

BenchClient read_bench_client(const YAML::Node& bench) {
  k8s::Document doc{bench, 0};
  k8s::JobSetView view(doc);
  std::string name = view.name();
  k8s::ClientCommand client = view.client(std::string(kSource));
  bool in_driver = false;
  std::vector<k8s::shell::Assignment> trainer_env;
  std::optional<std::string> trainer_argv, orch_argv;
  for (const k8s::shell::Assignment& a : client.startup.env) {
    if (a.name == k8s::kDriverSettingsStart) in_driver = true;
    if (!in_driver) {
      trainer_env.push_back(a);
    } else if (a.name == "TRAINER_ARGV") {
      trainer_argv = a.value;
    } else if (a.name == "ORCH_ARGV") {
      orch_argv = a.value;
    }
  }
  if (!trainer_argv || !orch_argv) {
    fail(
        "{} is not a bench JobSet: its client sets no TRAINER_ARGV and ORCH_ARGV (render it "
        "with the render-bench knobs, not from the e2e trainer)",
        name);
  }
  auto words = [](const std::string& text, std::string_view variable) {
    std::vector<std::string> out;
    try {
      for (const k8s::shell::Word& w : k8s::shell::split(text)) out.push_back(w.value);
    } catch (const Error& e) {
      fail("{}: {}", variable, e.message());
    }
    return out;
  };
  return {std::move(name), std::move(trainer_env),
          Args("trainer argv", words(*trainer_argv, "TRAINER_ARGV")),
          Args("orchestrator argv", words(*orch_argv, "ORCH_ARGV"))};
}

std::string trainer_slice_text(const k8s::JobSetView& view) {
  std::optional<TrainerSlice> found = find_trainer_slice(view);
  if (!found) {
    fail(
        "cannot tell the trainer slice: no pathways-rm --instance_type and no "
        "gke-tpu-accelerator / gke-tpu-topology labels");
  }
  return found->text;
}

}  // namespace rtb::bench
