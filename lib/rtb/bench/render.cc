#include "rtb/bench/render.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <functional>
#include <limits>
#include <set>

#include "rtb/base/enum_names.h"
#include "rtb/base/error.h"
#include "rtb/bench/driver_settings.h"
#include "rtb/bench/render_steps.h"
#include "rtb/bench/render_table.h"
#include "rtb/k8s/diff.h"
#include "rtb/k8s/flags.h"
#include "rtb/k8s/shell.h"
#include "rtb/k8s/yaml.h"

namespace rtb::bench {
namespace render_steps {
namespace {

// A plain scalar with this text would not read back as a string (YAML 1.1/1.2 core schemas).
bool resolves_to_non_string(std::string_view value) {
  static const std::set<std::string_view> kWords = {
      "true", "false", "True", "False", "TRUE", "FALSE", "yes",  "no", "Yes",
      "No",   "YES",   "NO",   "on",    "off",  "On",    "Off",  "ON", "OFF",
      "y",    "n",     "Y",    "N",     "null", "Null",  "NULL", "~",  ""};
  if (kWords.count(value)) return true;
  double number;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), number);
  return ec == std::errc() && end == value.data() + value.size();
}

}  // namespace

void assign_string(YAML::Node node, const std::string& value) {
  if (node.Tag() == k8s::yaml::kStringTag || resolves_to_non_string(value)) {
    k8s::yaml::set_string(node, value);
  } else {
    node = value;
  }
}

std::string int_text(long long value) { return std::to_string(value); }

int parse_int(std::string_view text, std::string_view what) {
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size())
    fail("{} '{}' is not an integer", what, text);
  return value;
}

// One step of the paths visit_scalars walks: a mapping key, or a list item's key (diff.h).
struct PathPiece {
  std::size_t parent;  // npos at the root
  std::string segment;
  bool item = false;
};

class ScalarVisit {
 public:
  ScalarVisit(const YAML::Node& skip,
              const std::function<void(YAML::Node, const ScalarPlace&)>& visit)
      : skip_(skip), visit_(visit) {}

  void run(const YAML::Node& root) {
    pieces_.push_back({std::string::npos, "", false});
    std::vector<std::pair<YAML::Node, std::size_t>> pending{{root, 0}};
    while (!pending.empty()) {
      auto [node, piece] = std::move(pending.back());
      pending.pop_back();
      if (skip_.IsDefined() && node.is(skip_)) continue;
      if (node.IsScalar()) {
        visit_(node, ScalarPlace(*this, piece));
      } else if (node.IsMap()) {
        for (const auto& kv : node) {
          std::string text = kv.first.IsScalar() ? kv.first.Scalar() : "";
          pieces_.push_back({piece, std::move(text), false});
          pending.emplace_back(kv.second, pieces_.size() - 1);
        }
      } else if (node.IsSequence()) {
        // Item keys as diff.h compares them; container args flag by flag.
        std::vector<std::string> keys;
        if (key(piece) == "args") {
          std::vector<std::string> items;
          for (const auto& x : node) items.push_back(x.IsScalar() ? x.Scalar() : "");
          keys = flag_item_keys(items, k8s::FlagStyle::kDashDash);
        } else {
          keys = k8s::sequence_item_keys(node);
        }
        for (std::size_t i = 0; i < node.size(); ++i) {
          pieces_.push_back({piece, std::move(keys[i]), true});
          pending.emplace_back(node[i], pieces_.size() - 1);
        }
      }
    }
  }

  // A mapping entry's key; a list item's is its list's.
  const std::string& key(std::size_t piece) const {
    while (pieces_[piece].item) piece = pieces_[piece].parent;
    return pieces_[piece].segment;
  }
  std::string path(std::size_t piece) const {
    std::vector<const PathPiece*> route;
    for (std::size_t at = piece; at != 0; at = pieces_[at].parent) route.push_back(&pieces_[at]);
    std::string out;
    for (auto it = route.rbegin(); it != route.rend(); ++it) {
      out =
          (*it)->item ? k8s::path_item(out, (*it)->segment) : k8s::path_child(out, (*it)->segment);
    }
    return out;
  }

 private:
  const YAML::Node& skip_;
  const std::function<void(YAML::Node, const ScalarPlace&)>& visit_;
  std::vector<PathPiece> pieces_;  // [0] is the root
};

const std::string& ScalarPlace::key() const { return visit_.key(piece_); }
std::string ScalarPlace::path() const { return visit_.path(piece_); }

void visit_scalars(const YAML::Node& root, const YAML::Node& skip,
                   const std::function<void(YAML::Node, const ScalarPlace&)>& visit) {
  ScalarVisit(skip, visit).run(root);
}

void validate_dns_label(Knob knob, const std::string& name, bool letter_first) {
  auto bad = [&](std::string_view why) { fail("{} '{}': {}", knob_option(knob), name, why); };
  if (name.empty()) bad("empty");
  if (name.size() > kMaxKubernetesName) bad("longer than 63 characters");
  bool letter = name.front() >= 'a' && name.front() <= 'z';
  bool digit = name.front() >= '0' && name.front() <= '9';
  if (!letter && !(digit && !letter_first)) {
    bad(letter_first ? "must start with a lowercase letter (a DNS label)"
                     : "must start with a lowercase letter or digit (a DNS label)");
  }
  if (name.back() == '-') bad("must end with a letter or digit (a DNS label)");
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) {
      bad("may hold only lowercase letters, digits and '-' (a DNS label)");
    }
  }
}

void Renderer::read_inputs() {
  k8s::Roles roles = select_roles(dryrun_, options_.mains);
  const k8s::Document& trainer = *roles.trainer;
  if (!roles.orchestrator) {
    fail_at(dryrun_.source, 0,
            "no orchestrator JobSet (--process_main={}): the bench driver needs its argv",
            options_.mains.orchestrator);
  }
  // Parse on the original documents first, so errors carry their input lines.
  k8s::ClientCommand e2e_client = k8s::JobSetView(trainer).client(dryrun_.source);
  k8s::ClientCommand orchestrator = k8s::JobSetView(*roles.orchestrator).client(dryrun_.source);
  e2e_exports_ = k8s::wrapper_exports(e2e_client);
  e2e_expanded_ = k8s::expanded_tree(trainer.root);

  if (takeable_) {
    // The trainer itself becomes the bench; the client just parsed is then the bench's.
    auto index = static_cast<std::size_t>(roles.trainer - dryrun_.documents.data());
    bench_ = std::move(takeable_->documents[index]);
    client_ = e2e_client;
  } else {
    bench_ = k8s::Document(YAML::Clone(trainer.root), trainer.first_line, trainer.text);
    client_ = k8s::JobSetView(bench_).client(dryrun_.source);
  }
  k8s::JobSetView view(bench_);
  old_name_ = view.name();
  result_.trainer_name = old_name_;
  env_ = client_.startup.env;
  if (env_assignment(k8s::kDriverSettingsStart)) {
    fail_at(dryrun_.source, static_cast<std::int64_t>(client_.startup_line),
            "the trainer's environment already sets {}, which the bench client uses",
            k8s::kDriverSettingsStart);
  }
  std::vector<std::string> argv;
  for (const k8s::shell::Word& word : client_.startup.words) {
    if (argv.empty() && word.value.rfind("--", 0) != 0) {
      program_.push_back(word.value);
    } else {
      argv.push_back(word.value);
      if (word.expands) {
        result_.diagnostics.push_back(
            {Severity::kWarning,
             where_of(dryrun_.source, static_cast<std::int64_t>(client_.startup_line)),
             fmt::format("trainer argument {} contains a shell expansion; the driver receives it "
                         "literally",
                         word.source)});
      }
    }
  }
  if (program_.empty()) {
    fail_at(dryrun_.source, static_cast<std::int64_t>(client_.startup_line),
            "the trainer's startup command has no program");
  }
  trainer_argv_ = k8s::FlagList(k8s::FlagStyle::kDashDash, argv);
  std::vector<std::string> orch_argv;
  bool in_argv = false;
  for (const k8s::shell::Word& word : orchestrator.startup.words) {
    in_argv = in_argv || word.value.rfind("--", 0) == 0;
    if (in_argv) orch_argv.push_back(word.value);
  }
  orch_argv_ = k8s::FlagList(k8s::FlagStyle::kDashDash, orch_argv);
  orch_argv_path_ = client_path(".startup.driver.ORCH_ARGV");
  orch_driver_env_ = orchestrator_driver_env(orchestrator);
  if (auto routed = rollout_routed_experts(roles.rollouts, dryrun_.source, result_.diagnostics)) {
    rollout_driver_env_.emplace_back(std::string(kRolloutRoutedExpertsSetting), *routed);
  }
}

void Renderer::rename() {
  const std::string& name = options_.name;
  YAML::Node metadata = k8s::yaml::lookup(bench_.root, "metadata");
  // Every scalar that is exactly the trainer's name: metadata.name, label-selector values.
  visit_scalars(bench_.root, k8s::yaml::lookup(client_.container.node, "command"),
                [&](YAML::Node node, const ScalarPlace& place) {
                  if (node.Scalar() != old_name_) return;
                  record(Knob::kName, place.path(), old_name_, name);
                  assign_string(node, name);
                });
  // Flags whose value is the trainer's name (--worker_id=...).
  std::vector<std::string> items = trainer_argv_.items();
  for (const std::string& item : items) {
    auto value = flag_value(item, k8s::FlagStyle::kDashDash);
    if (value && *value == old_name_) {
      std::string key(flag_key(item, k8s::FlagStyle::kDashDash));
      edit_flag_list(trainer_argv_, fmt::format("--{}={}", key, name), Knob::kName,
                     client_path(".startup.argv"), true);
    }
  }
  for (const k8s::shell::Assignment& assignment : client_.startup.env) {
    if (assignment.value == old_name_) set_env(assignment.name, name, Knob::kName);
  }
  if (options_.namespace_name) {
    YAML::Node ns = k8s::yaml::lookup(metadata, "namespace");
    std::string old = ns.IsDefined() && ns.IsScalar() ? ns.Scalar() : "";
    if (old != *options_.namespace_name) {
      record(Knob::kNamespace, "metadata.namespace", old, *options_.namespace_name);
      if (ns.IsDefined()) {
        assign_string(ns, *options_.namespace_name);
      } else {
        metadata["namespace"] = *options_.namespace_name;
      }
    }
  }
}

void Renderer::set_scheduling_fields() {
  // The gang-id label: the bench's pods form their own gang, also when the e2e trainer names
  // none (then the JobSet's own labels get one, as the seed's renderer did).
  bool has_gang_id = false;
  visit_scalars(bench_.root, YAML::Node(), [&](YAML::Node node, const ScalarPlace& place) {
    if (place.key() != kGangIdLabel) return;
    has_gang_id = true;
    if (node.Scalar() == options_.name) return;
    record("render", place.path(), node.Scalar(), options_.name);
    k8s::yaml::set_string(node, options_.name);
  });
  if (!has_gang_id) {
    YAML::Node metadata = k8s::yaml::lookup(bench_.root, "metadata");
    YAML::Node labels = k8s::yaml::lookup(metadata, "labels");
    if (!metadata.IsMap() || (labels.IsDefined() && !labels.IsNull() && !labels.IsMap())) {
      fail_at(dryrun_.source, static_cast<std::int64_t>(bench_.first_line),
              "the trainer JobSet's metadata.labels is not a mapping");
    }
    if (!labels.IsDefined() || labels.IsNull()) {
      record("render", "metadata.labels", "", fmt::format("{}: {}", kGangIdLabel, options_.name));
      metadata["labels"] = YAML::Node(YAML::NodeType::Map);
    } else {
      record("render", k8s::path_child("metadata.labels", kGangIdLabel), "", options_.name);
    }
    metadata["labels"][std::string(kGangIdLabel)] = k8s::yaml::string_scalar(options_.name);
  }
  // maxRestarts 0: a failed bench is read and fixed, never restarted.
  YAML::Node spec = k8s::yaml::lookup(bench_.root, "spec");
  if (!spec.IsMap())
    fail_at(dryrun_.source, static_cast<std::int64_t>(bench_.first_line),
            "the trainer JobSet has no spec");
  YAML::Node policy = k8s::yaml::lookup(spec, "failurePolicy");
  if (!policy.IsDefined() || policy.IsNull()) {
    record("render", "spec.failurePolicy", "", "maxRestarts: 0");
    YAML::Node created(YAML::NodeType::Map);
    created["maxRestarts"] = 0;
    spec["failurePolicy"] = created;
  } else {
    YAML::Node restarts = k8s::yaml::lookup(policy, "maxRestarts");
    std::string old = restarts.IsDefined() && restarts.IsScalar() ? restarts.Scalar() : "";
    if (old != "0") {
      record("render", "spec.failurePolicy.maxRestarts", old, "0");
      policy["maxRestarts"] = 0;
    }
  }
  if (options_.image) {
    YAML::Node image = k8s::yaml::lookup(client_.container.node, "image");
    std::string old = image.IsDefined() && image.IsScalar() ? image.Scalar() : "";
    if (old != *options_.image) {
      record(Knob::kImage, client_path(".image"), old, *options_.image);
      client_.container.node["image"] = *options_.image;
    }
  }
}

void Renderer::check_names_fit() {
  // JobSet names its Jobs <jobset>-<replicatedJob>-<index> and their pods
  // <job>-<pod index>-<5 random characters>; both must stay within 63 characters.
  k8s::JobSetView view(bench_);
  YAML::Node jobs = k8s::yaml::lookup(k8s::yaml::lookup(bench_.root, "spec"), "replicatedJobs");
  if (!jobs.IsSequence()) return;
  for (const auto& job : jobs) {
    std::string job_name = k8s::yaml::scalar_at(job, "name").value_or("");
    auto number = [&](const YAML::Node& map, std::string_view key) {
      auto text = k8s::yaml::scalar_at(map, key);
      long long value = 1;
      if (text) std::from_chars(text->data(), text->data() + text->size(), value);
      return std::max(1LL, value);
    };
    long long replicas = number(job, "replicas");
    YAML::Node job_spec = k8s::yaml::lookup(k8s::yaml::lookup(job, "template"), "spec");
    long long pods = std::max(number(job_spec, "completions"), number(job_spec, "parallelism"));
    std::string longest_job = fmt::format("{}-{}-{}", options_.name, job_name, replicas - 1);
    std::string longest_pod = fmt::format("{}-{}-xxxxx", longest_job, pods - 1);
    if (longest_pod.size() > kMaxKubernetesName) {
      fail_knob(Knob::kName, options_.name,
                "too long: JobSet would name pods like {} ({} characters, at most {})", longest_pod,
                longest_pod.size(), kMaxKubernetesName);
    }
  }
}

RenderResult Renderer::run() {
  validate_jobset_name(options_.name);
  if (options_.namespace_name)
    validate_dns_label(Knob::kNamespace, *options_.namespace_name, false);
  check_weight_knobs();
  read_inputs();
  rename();
  set_scheduling_fields();
  edit_maxtext_flags();
  edit_libtpu_flags();
  edit_argv();
  apply_weights();
  edit_trainer_slice();
  set_driver_and_profiler();
  set_hlo_dump();
  build_client_command();
  check_names_fit();
  check_bench_against_e2e(e2e_expanded_, bench_.root, result_.changes);
  result_.bench = bench_.root;
  result_.yaml = k8s::yaml::emit(bench_.root);
  return std::move(result_);
}

}  // namespace render_steps

namespace {

bool covered(const std::string& path, const std::vector<Change>& changes) {
  for (const Change& change : changes) {
    const std::string& p = change.path;
    if (path == p) return true;
    if (path.size() > p.size() && path.compare(0, p.size(), p) == 0 &&
        (path[p.size()] == '.' || path[p.size()] == '[')) {
      return true;
    }
    // A repeated flag is compared as `key#N`; an edit of it is recorded under `key`.
    if (!p.empty() && p.back() == ']') {
      std::string stem = p.substr(0, p.size() - 1) + "#";
      if (path.compare(0, stem.size(), stem) == 0) return true;
    }
  }
  return false;
}

}  // namespace

using render_steps::Renderer;
using render_steps::validate_dns_label;

void check_bench_against_e2e(const YAML::Node& e2e_trainer, const YAML::Node& bench,
                             const std::vector<Change>& changes) {
  check_bench_against_e2e(k8s::expanded_tree(e2e_trainer), bench, changes);
}

void check_bench_against_e2e(const k8s::Tree& e2e_tree, const YAML::Node& bench,
                             const std::vector<Change>& changes) {
  const k8s::Tree bench_tree = k8s::expanded_tree(bench);
  // Where they differ first; the values only when a difference is not covered (the message).
  bool all_covered = true;
  for (const k8s::Difference& difference :
       k8s::diff_trees(e2e_tree, bench_tree, "", k8s::DiffDetail::kWhere)) {
    all_covered = all_covered && covered(difference.path, changes);
  }
  if (all_covered) return;
  for (const k8s::Difference& difference : k8s::diff_trees(e2e_tree, bench_tree)) {
    if (!covered(difference.path, changes)) {
      fail(
          "internal error: self-check: the bench differs from the e2e trainer at {} ({} -> {}), "
          "which no option asked for; nothing was written",
          difference.path, difference.old_value.empty() ? "absent" : difference.old_value,
          difference.new_value.empty() ? "absent" : difference.new_value);
    }
  }
}

namespace {

// The setting a change's path ends in: HF_TOKEN for `...env[HF_TOKEN].value`, --hf_token for
// `...argv[--hf_token]`, maxRestarts for `spec.failurePolicy.maxRestarts`.
std::string_view setting_of_path(std::string_view path) {
  if (path.ends_with("].value")) path.remove_suffix(std::string_view(".value").size());
  if (path.ends_with(']')) {
    std::size_t open = path.rfind('[');
    if (open != std::string_view::npos) return path.substr(open + 1, path.size() - open - 2);
  }
  std::size_t dot = path.rfind('.');
  return dot == std::string_view::npos ? path : path.substr(dot + 1);
}

}  // namespace

std::string explain_changes(const RenderResult& result, const SecretMasker& masker) {
  std::string out;
  for (const Change& change : result.changes) {
    std::string_view setting = setting_of_path(change.path);
    auto shown = [&](const std::string& value, const char* none) {
      return value.empty() ? std::string(none) : masker.value(setting, value);
    };
    out += fmt::format("{}: {}: {} -> {}\n", change.knob, change.path,
                       shown(change.old_value, "(absent)"), shown(change.new_value, "(removed)"));
  }
  for (const std::string& note : messages_of(result.diagnostics, Severity::kNote))
    out += "note: " + masker.scrub(note) + "\n";
  return out;
}

std::string summarize_changes(const RenderResult& result) {
  std::vector<std::pair<std::string, int>> counts;  // knobs in first-use order
  for (const Change& change : result.changes) {
    auto it = std::find_if(counts.begin(), counts.end(),
                           [&](const auto& c) { return c.first == change.knob; });
    if (it == counts.end())
      counts.emplace_back(change.knob, 1);
    else
      ++it->second;
  }
  std::string out = fmt::format(
      "{} -> {}: {} changes:", result.trainer_name,
      k8s::yaml::scalar_at(k8s::yaml::lookup(result.bench, "metadata"), "name").value_or(""),
      result.changes.size());
  for (std::size_t i = 0; i < counts.size(); ++i) {
    out += fmt::format("{} {} {}", i == 0 ? "" : ",", counts[i].first, counts[i].second);
  }
  return out;
}

void validate_jobset_name(const std::string& name) { validate_dns_label(Knob::kName, name, true); }

std::string dryrun_input(std::string_view given, bool demo, const char* launch_render) {
  if (!given.empty()) return std::string(given);
  if (demo || launch_render == nullptr) return "";
  return launch_render;
}

std::string_view weights_name(Weights weights) {
  return enum_name<Weights::kCheckpoint>(weights, {"random", "checkpoint"});
}

RenderResult render_bench(const k8s::DryRun& dryrun, const RenderOptions& options) {
  return Renderer(dryrun, options).run();
}

RenderResult render_bench(k8s::DryRun&& dryrun, const RenderOptions& options) {
  return Renderer(dryrun, options, &dryrun).run();
}

PreflightResult render_preflight(const k8s::DryRun& dryrun, const RenderOptions& options,
                                 PreflightChecks checks) {
  Renderer renderer(dryrun, options);
  PreflightResult result;
  result.bench = renderer.run();
  result.job = renderer.preflight_job(checks);
  result.yaml = k8s::yaml::emit(result.job);
  return result;
}

}  // namespace rtb::bench
