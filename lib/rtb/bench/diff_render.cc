#include "rtb/bench/diff_render.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <set>
#include <unordered_map>

#include "rtb/base/error.h"
#include "rtb/base/slice.h"
#include "rtb/bench/arms.h"
#include "rtb/bench/render_table.h"
#include "rtb/bench/trainer_config.h"
#include "rtb/k8s/flags.h"
#include "rtb/k8s/server_fields.h"
#include "rtb/k8s/shell.h"
#include "rtb/k8s/yaml.h"

namespace rtb::bench {
namespace {

bool is_word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// True when `path` is `prefix` or lies below it.
bool under(std::string_view path, std::string_view prefix) {
  if (path.size() < prefix.size() || path.compare(0, prefix.size(), prefix) != 0) return false;
  return path.size() == prefix.size() || path[prefix.size()] == '.' || path[prefix.size()] == '[';
}

// The key of the last `[key]` segment of a path, or "" when the path does not end with one.
std::string_view last_item_key(std::string_view path) {
  if (path.empty() || path.back() != ']') return {};
  std::size_t open = path.rfind('[');
  if (open == std::string_view::npos) return {};
  return path.substr(open + 1, path.size() - open - 2);
}

// A flag-map key without its `#N` repeat suffix.
std::string_view base_flag_key(std::string_view key) {
  std::size_t hash = key.rfind('#');
  if (hash == std::string_view::npos || hash == 0) return key;
  std::string_view digits = key.substr(hash + 1);
  if (digits.empty() ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return key;
  }
  return key.substr(0, hash);
}

// The effective (last) item of a flag in an expanded flag map (diff.h), by its key.
std::optional<std::string> effective_item(const YAML::Node& flag_map, std::string_view key) {
  if (!flag_map.IsDefined() || !flag_map.IsMap()) return std::nullopt;
  std::optional<std::string> found;
  for (const auto& kv : flag_map) {
    if (base_flag_key(kv.first.Scalar()) == key && kv.second.IsScalar()) found = kv.second.Scalar();
  }
  return found;
}

// Replaces every scalar of `tree` (not mapping keys) by replace_name(value, from, to), keeping its
// quoting. Iterative: input depth cannot overflow the stack.
void rename_scalars(const YAML::Node& tree, const std::string& from, const std::string& to) {
  std::vector<YAML::Node> pending{tree};
  while (!pending.empty()) {
    YAML::Node node = pending.back();
    pending.pop_back();
    if (node.IsScalar()) {
      if (node.Scalar().find(from) == std::string::npos) continue;
      std::string replaced = replace_name(node.Scalar(), from, to);
      if (replaced == node.Scalar()) continue;
      if (node.Tag() == k8s::yaml::kStringTag) {
        k8s::yaml::set_string(node, replaced);
      } else {
        node = replaced;
      }
    } else if (node.IsMap()) {
      for (const auto& kv : node) pending.push_back(kv.second);
    } else if (node.IsSequence()) {
      for (const auto& item : node) pending.push_back(item);
    }
  }
}

std::string document_label(const std::string& kind, const std::string& name) {
  return kind == "JobSet" ? name : kind + "/" + name;
}

std::string describe_document(const DiffDocument& doc) {
  return fmt::format("{} {} (line {})", doc.kind, doc.name, doc.line);
}

// A container of an expanded JobSet (diff.h) with its diff path.
struct ExpandedContainer {
  std::string job;
  std::string name;
  std::string path;
  YAML::Node node;
};

std::vector<ExpandedContainer> expanded_containers(const YAML::Node& tree) {
  std::vector<ExpandedContainer> out;
  YAML::Node jobs = k8s::yaml::lookup(k8s::yaml::lookup(tree, "spec"), "replicatedJobs");
  if (!jobs.IsSequence()) return out;
  std::vector<std::string> job_keys = k8s::sequence_item_keys(jobs);
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    YAML::Node pod = k8s::yaml::descend(jobs[i], {"template", "spec", "template", "spec"});
    if (!pod.IsMap()) continue;
    std::string pod_path =
        k8s::path_item("spec.replicatedJobs", job_keys[i]) + ".template.spec.template.spec";
    for (std::string_view list : {"initContainers", "containers"}) {
      YAML::Node containers = k8s::yaml::lookup(pod, list);
      if (!containers.IsSequence()) continue;
      std::vector<std::string> keys = k8s::sequence_item_keys(containers);
      for (std::size_t j = 0; j < containers.size(); ++j) {
        out.push_back({job_keys[i], k8s::yaml::scalar_at(containers[j], "name").value_or(""),
                       k8s::path_item(k8s::path_child(pod_path, list), keys[j]), containers[j]});
      }
    }
  }
  return out;
}

// Replaces every `gke-tpu-partition-<TOPOLOGY>-` in `text` by the partition `partition`.
std::string with_partition(std::string text, const std::string& partition) {
  for (std::size_t at = text.find(kPartitionPrefix); at != std::string::npos;
       at = text.find(kPartitionPrefix, at + 1)) {
    std::size_t start = at + kPartitionPrefix.size();
    std::size_t end = start;
    while (end < text.size() && ((text[end] >= '0' && text[end] <= '9') || text[end] == 'x')) ++end;
    if (end == start || end >= text.size() || text[end] != '-') continue;
    text.replace(start, end - start, partition);
  }
  return text;
}

// The differences render-bench may make (render_table.h), re-derived from the bench itself: an
// oracle independent of render.cc's edits.
class BenchClassifier {
 public:
  // `bench`: the bench JobSet as expand_for_diff() gives it; `raw`: as rendered.
  BenchClassifier(const YAML::Node& bench, const k8s::Document& raw, std::string e2e_name,
                  std::string bench_name)
      : bench_(bench), e2e_name_(std::move(e2e_name)), bench_name_(std::move(bench_name)) {
    containers_ = expanded_containers(bench_);
    for (const ExpandedContainer& c : containers_) {
      YAML::Node startup = k8s::yaml::lookup(c.node, "startup");
      // The bench client is the one with driver settings; else any client with a startup block.
      if (startup.IsMap() &&
          (client_path_.empty() || k8s::yaml::lookup(startup, "driver").IsDefined())) {
        client_path_ = c.path;
        client_ = c.node;
      }
      if (c.name == kProxyContainer) proxy_ = c;
      if (c.name == kWorkerContainer) worker_ = c;
    }
    k8s::JobSetView view(raw);
    tpu_jobs_ = tpu_jobs(view);
    read_slice(view);
  }

  BenchDifference classify(const k8s::Difference& d) const {
    BenchDifference out{d, std::nullopt, ""};
    const std::string& p = d.path;
    using Kind = k8s::Difference::Kind;
    bool changed = d.kind == Kind::kChanged;
    bool added_or_changed = changed || d.kind == Kind::kAdded;
    auto allow = [&](BenchChange change) {
      out.allowed = change;
      return out;
    };
    auto refuse = [&](std::string why) {
      out.why = std::move(why);
      return out;
    };
    if (changed && !e2e_name_.empty() &&
        replace_name(d.old_value, e2e_name_, bench_name_) == d.new_value) {
      return allow(BenchChange::kName);
    }
    std::string_view item = last_item_key(p);
    if (item == kGangIdLabel && added_or_changed) {
      if (d.new_value == bench_name_) return allow(BenchChange::kGangId);
      return refuse(fmt::format("the gang-id label must be the bench's name {}", bench_name_));
    }
    if (p == "metadata.labels" && d.kind == Kind::kAdded) {
      // Labels the e2e trainer did not have: render-bench adds only the gang-id label.
      YAML::Node labels = k8s::yaml::lookup(k8s::yaml::lookup(bench_, "metadata"), "labels");
      if (labels.IsMap() && labels.size() == 1 &&
          k8s::yaml::scalar_at(labels, kGangIdLabel) == bench_name_) {
        return allow(BenchChange::kGangId);
      }
      return refuse(fmt::format("render-bench adds only the gang-id label {}", bench_name_));
    }
    if (p == "spec.failurePolicy.maxRestarts" && added_or_changed) {
      if (d.new_value == "0") return allow(BenchChange::kMaxRestarts);
      return refuse("render-bench sets maxRestarts to 0");
    }
    if (p == "spec.failurePolicy" && d.kind == Kind::kAdded) {
      YAML::Node policy = k8s::yaml::lookup(k8s::yaml::lookup(bench_, "spec"), "failurePolicy");
      if (policy.IsMap() && policy.size() == 1 &&
          k8s::yaml::scalar_at(policy, "maxRestarts") == std::string("0")) {
        return allow(BenchChange::kMaxRestarts);
      }
      return refuse("render-bench adds only maxRestarts: 0");
    }
    if (p == "metadata.namespace" && added_or_changed) return allow(BenchChange::kNamespace);
    if (d.kind == Kind::kTypeChanged) {
      return refuse("render-bench keeps every value's type");
    }
    if (!client_path_.empty()) {
      const std::string& c = client_path_;
      if (p == c + ".image" && added_or_changed) return allow(BenchChange::kImage);
      if (under(p, c + ".script")) return allow(BenchChange::kClientScript);
      if (p == c + ".startup.program") return allow(BenchChange::kClientProgram);
      if (under(p, c + ".startup.driver")) return allow(BenchChange::kDriverSettings);
      std::string env = c + ".startup.env.";
      std::string maxtext = env + std::string(kMaxTextFlagsEnv);
      bool removed = d.kind == Kind::kRemoved;
      // The trainer's profiler may be turned off only where the driver traces instead.
      bool driver_traces =
          k8s::yaml::descend(client_, {"startup", "driver", "PROFILE_WINDOW"}).IsDefined();
      if (under(p, maxtext)) {
        std::string_view key = base_flag_key(item);
        if (removed && is_checkpoint_key(key)) return allow(BenchChange::kWeights);
        if (removed && key == "profiler") {
          if (driver_traces) return allow(BenchChange::kProfiler);
          return refuse(
              "render-bench drops MaxText's profiler only where the driver traces "
              "(PROFILE_WINDOW)");
        }
        if (!added_or_changed)
          return refuse(
              "render-bench removes a MAXTEXT_EXTRA_FLAGS item only to drop a checkpoint or the "
              "trainer's profiler");
        return allow(BenchChange::kMaxTextFlag);
      }
      if (removed && (p == env + std::string(kCheckpointEnv) ||
                      p == k8s::path_item(c + ".env", kCheckpointEnv))) {
        return allow(BenchChange::kWeights);
      }
      if (p == env + std::string(kLogpsChunkEnv) && changed) {
        return allow(BenchChange::kLogpsChunk);
      }
      std::string argv = c + ".startup.argv";
      if (under(p, argv) && p != argv) {
        std::string_view flag = base_flag_key(item);
        if (flag.rfind("--", 0) == 0) flag.remove_prefix(2);
        if (removed && is_checkpoint_flag(flag)) return allow(BenchChange::kWeights);
        if (flag == "profiler_steps" && changed && driver_traces &&
            (d.new_value == "--profiler_steps=0" || d.new_value == "0")) {
          return allow(BenchChange::kProfiler);
        }
        if (item.rfind("--", 0) == 0) return allow(BenchChange::kArgvFlag);
        return refuse("render-bench changes argv flags, not positional words");
      }
    }
    // XLA's dump flags belong where the compile runs, the proxy, and nowhere else (--dump-hlo).
    if (proxy_ && under(p, proxy_->path + ".args") && added_or_changed &&
        (base_flag_key(item) == "--xla_dump_to" || base_flag_key(item) == "--xla_dump_hlo_as_text"))
      return allow(BenchChange::kDumpHlo);
    if (auto libtpu = classify_libtpu(d, p, item)) return *libtpu;
    if (auto slice = classify_slice(d, p, item)) return *slice;
    return refuse("not something render-bench changes");
  }

 private:
  struct LibtpuPlace {
    std::string name;  // for messages
    std::string path;  // the flag map's path
    YAML::Node flags;  // the flag map in the bench (may be undefined)
  };

  std::vector<LibtpuPlace> libtpu_places() const {
    std::vector<LibtpuPlace> places;
    if (!client_path_.empty()) {
      places.push_back({fmt::format("the client's {}", kLibtpuEnv),
                        client_path_ + ".startup.env." + std::string(kLibtpuEnv),
                        k8s::yaml::descend(client_, {"startup", "env", kLibtpuEnv})});
    }
    if (proxy_)
      places.push_back({fmt::format("the {} args", kProxyContainer), proxy_->path + ".args",
                        k8s::yaml::lookup(proxy_->node, "args")});
    if (worker_) {
      YAML::Node value;
      YAML::Node env = k8s::yaml::lookup(worker_->node, "env");
      if (env.IsSequence()) {
        for (const auto& entry : env) {
          if (k8s::yaml::scalar_at(entry, "name") == std::string(kLibtpuEnv))
            value.reset(k8s::yaml::lookup(entry, "value"));
        }
      }
      places.push_back({fmt::format("the {}'s {}", kWorkerContainer, kLibtpuEnv),
                        k8s::path_item(worker_->path + ".env", kLibtpuEnv) + ".value", value});
    }
    return places;
  }

  // A flag changed in one libtpu place must be set alike in each place the bench has.
  std::optional<std::string> libtpu_mismatch(std::string_view key, const std::string& item,
                                             const std::vector<LibtpuPlace>& places) const {
    for (const LibtpuPlace& place : places) {
      std::optional<std::string> there = effective_item(place.flags, key);
      if (!there) return fmt::format("{} is not in {}", item, place.name);
      if (*there != item)
        return fmt::format("{} has {} where this has {}", place.name, *there, item);
    }
    return std::nullopt;
  }

  std::optional<BenchDifference> classify_libtpu(const k8s::Difference& d, const std::string& p,
                                                 std::string_view item) const {
    std::vector<LibtpuPlace> places = libtpu_places();
    std::string worker_entry =
        worker_ ? k8s::path_item(worker_->path + ".env", kLibtpuEnv) : std::string();
    const LibtpuPlace* place = nullptr;
    bool whole = false;
    for (const LibtpuPlace& candidate : places) {
      if (under(p, candidate.path)) {
        place = &candidate;
        whole = p == candidate.path;
      }
    }
    if (!place && !worker_entry.empty() && p == worker_entry) {
      place = &places.back();
      whole = true;
    }
    if (!place) return std::nullopt;
    const bool in_workers = worker_ && place == &places.back();
    BenchDifference out{d, std::nullopt, ""};
    if (d.kind == k8s::Difference::Kind::kRemoved) {
      out.why = "render-bench never removes a libtpu flag";
      return out;
    }
    if (whole) {
      // A whole flag string the e2e did not have: each of its flags must be everywhere, or, in
      // the workers, be the client's (the workers run the client's whole set).
      if (d.kind != k8s::Difference::Kind::kAdded || !place->flags.IsMap()) {
        out.why = "not something render-bench changes";
        return out;
      }
      bool everywhere = true;
      for (const auto& kv : place->flags) {
        std::string key(base_flag_key(kv.first.Scalar()));
        if (auto why = libtpu_mismatch(key, kv.second.Scalar(), places)) {
          everywhere = false;
          if (!in_workers) {
            out.why = *why;
            return out;
          }
        }
      }
      if (everywhere) {
        out.allowed = BenchChange::kLibtpuFlag;
        return out;
      }
      if (auto why = workers_differ_from_client(place->flags)) {
        out.why = *why;
        return out;
      }
      out.allowed = BenchChange::kWorkersLibtpu;
      return out;
    }
    std::string_view key = base_flag_key(item);
    if (key.rfind("--", 0) != 0) {
      out.why = "render-bench changes libtpu flags, not positional words";
      return out;
    }
    auto mismatch = libtpu_mismatch(key, d.new_value, places);
    if (!mismatch) {
      out.allowed = BenchChange::kLibtpuFlag;
      return out;
    }
    if (!in_workers) {
      out.why = *mismatch;
      return out;
    }
    // In the workers: a flag the client sets, with the client's value, and nothing else.
    std::optional<std::string> client = effective_item(client_libtpu(), key);
    if (!client) {
      out.why = fmt::format(
          "{} is a worker-only flag (the client does not set it): render-bench keeps the "
          "workers' own flags",
          key);
    } else if (*client != d.new_value) {
      out.why = fmt::format("the workers must run the client's {}: the client has {}", kLibtpuEnv,
                            *client);
    } else {
      out.allowed = BenchChange::kWorkersLibtpu;
    }
    return out;
  }

  // The bench client's LIBTPU_INIT_ARGS flag map (undefined when it has none).
  YAML::Node client_libtpu() const {
    if (client_path_.empty()) return YAML::Node();
    return k8s::yaml::descend(client_, {"startup", "env", kLibtpuEnv});
  }

  // Why a worker flag map is not the client's whole libtpu set (extras aside); nullopt when it is.
  std::optional<std::string> workers_differ_from_client(const YAML::Node& workers) const {
    YAML::Node client = client_libtpu();
    if (!client.IsMap()) return fmt::format("the client sets no {}", kLibtpuEnv);
    for (const auto& kv : client) {
      std::string key(base_flag_key(kv.first.Scalar()));
      std::optional<std::string> there = effective_item(workers, key);
      if (!there) return fmt::format("the workers lack the client's {}", kv.second.Scalar());
      if (*there != kv.second.Scalar())
        return fmt::format("the workers have {} where the client has {}", *there,
                           kv.second.Scalar());
    }
    for (const auto& kv : workers) {
      std::string key(base_flag_key(kv.first.Scalar()));
      if (!effective_item(client, key))
        return fmt::format("{} is not the client's (a new worker entry holds the client's only)",
                           kv.second.Scalar());
    }
    return std::nullopt;
  }

  void read_slice(const k8s::JobSetView& view) {
    std::optional<TrainerSlice> found = find_trainer_slice(view);
    if (!found) return;
    try {
      slice_.emplace(Slice::parse(found->text));
      slice_source_ = found->source;
    } catch (const Error& e) {
      slice_error_ = e.message();
    }
  }

  std::optional<BenchDifference> classify_slice(const k8s::Difference& d, const std::string& p,
                                                std::string_view item) const {
    std::optional<std::string> expected;  // the bench slice's value of this field
    bool slice_field = false;
    auto expect = [&](std::string value) {
      slice_field = true;
      expected = std::move(value);
    };
    const Slice* s = slice_ ? &*slice_ : nullptr;
    if (std::optional<SliceField> field = bench::slice_field(item)) {
      slice_field = true;
      if (s) expect(slice_field_value(*s, *field));
    } else if (base_flag_key(item) == kInstanceTypeFlag) {
      slice_field = true;
      if (s) expect(fmt::format("{}={}", kInstanceTypeFlag, s->instance_type()));
    } else if (p.rfind("spec.replicatedJobs[", 0) == 0 &&
               (p.ends_with("].template.spec.completions") ||
                p.ends_with("].template.spec.parallelism"))) {
      std::string job = p.substr(20, p.find(']') - 20);
      if (tpu_jobs_.count(job)) {
        slice_field = true;
        if (s) expect(std::to_string(s->hosts()));
      }
    } else if (d.old_value.find(kPartitionPrefix) != std::string::npos) {
      slice_field = true;
      if (s) expect(with_partition(d.old_value, s->partition().str()));
    }
    if (!slice_field) return std::nullopt;
    BenchDifference out{d, std::nullopt, ""};
    if (d.kind != k8s::Difference::Kind::kChanged) {
      out.why = "render-bench changes slice fields in place, never adds or removes them";
    } else if (!s) {
      out.why = fmt::format("the bench's slice cannot be told ({})",
                            slice_error_.empty() ? "no pathways-rm --instance_type, no "
                                                   "accelerator and topology labels"
                                                 : slice_error_);
    } else if (*expected != d.new_value) {
      out.why = fmt::format("the bench slice {} ({}) gives {} here", s->instance_type(),
                            slice_source_, *expected);
    } else {
      out.allowed = BenchChange::kTrainerSlice;
    }
    return out;
  }

  YAML::Node bench_;
  std::string e2e_name_, bench_name_;
  std::vector<ExpandedContainer> containers_;
  std::string client_path_;
  YAML::Node client_;
  std::optional<ExpandedContainer> proxy_, worker_;
  std::set<std::string> tpu_jobs_;
  std::optional<Slice> slice_;
  std::string slice_source_, slice_error_;
};

}  // namespace

Rename parse_rename(std::string_view text) {
  std::size_t eq = text.find('=');
  if (eq == std::string_view::npos || eq == 0 || eq + 1 == text.size() ||
      text.find('=', eq + 1) != std::string_view::npos) {
    fail("--rename {}: expected OLD=NEW (two names)", text);
  }
  return {std::string(text.substr(0, eq)), std::string(text.substr(eq + 1))};
}

std::string replace_name(std::string_view text, std::string_view from, std::string_view to) {
  if (from.empty()) return std::string(text);
  std::string out;
  std::size_t pos = 0;
  for (std::size_t at = text.find(from); at != std::string_view::npos;
       at = text.find(from, at + 1)) {
    if (at < pos) continue;
    bool start_ok = at == 0 || !(is_word_char(text[at - 1]) || text[at - 1] == '-');
    std::size_t end = at + from.size();
    bool end_ok = end == text.size() || !is_word_char(text[end]);
    if (!start_ok || !end_ok) continue;
    out.append(text.substr(pos, at - pos));
    out.append(to);
    pos = end;
  }
  out.append(text.substr(pos));
  return out;
}

std::vector<DiffDocument> diff_documents(const k8s::DryRun& input, const k8s::RoleMains& mains) {
  std::vector<DiffDocument> out;
  std::vector<std::string> others;
  bool any_jobset = false;
  auto add = [&](k8s::Document doc, std::size_t line) {
    auto kind = k8s::yaml::scalar_at(doc.root, "kind");
    if (!kind) return;
    YAML::Node metadata = k8s::yaml::lookup(doc.root, "metadata");
    std::optional<std::string> name = k8s::yaml::scalar_at(metadata, "name");
    if (!name) name = k8s::yaml::scalar_at(metadata, "generateName");
    DiffDocument entry{std::move(doc), line, *kind, name.value_or(""), k8s::Role::kUnknown};
    if (*kind == "JobSet") {
      any_jobset = true;
      entry.role = k8s::role_of(k8s::JobSetView(entry.doc), mains);
    } else {
      others.push_back(fmt::format("{} '{}' (line {})", entry.kind, entry.name, line));
    }
    out.push_back(std::move(entry));
  };
  for (const k8s::Document& doc : input.documents) {
    YAML::Node items = k8s::yaml::lookup(doc.root, "items");
    if (k8s::yaml::scalar_at(doc.root, "kind") == std::string("List") && items.IsSequence() &&
        items.size() > 0) {
      // An item keeps the List's first line and text, which its nodes' marks are relative to.
      for (const auto& item : items) {
        if (item.IsMap()) add(k8s::Document(item, doc.first_line, doc.text), doc.line_of(item));
      }
      continue;
    }
    add(doc, doc.first_line);
  }
  if (!any_jobset) {
    std::size_t line = input.documents.empty() ? 0 : input.documents.front().first_line;
    if (others.empty())
      fail_at(input.source, static_cast<std::int64_t>(line), "no JobSet in the input");
    fail_at(input.source, static_cast<std::int64_t>(line), "not a JobSet: the input holds {}",
            fmt::format("{}", fmt::join(others, ", ")));
  }
  return out;
}

std::size_t RenderDiff::differences() const {
  std::size_t n = 0;
  for (const DocumentDiff& doc : documents) n += doc.differences.size();
  return n;
}

std::string_view pairing_id(Pairing pairing) {
  switch (pairing) {
    case Pairing::kNone:
      break;
    case Pairing::kName:
      return "name";
    case Pairing::kRename:
      return "rename";
    case Pairing::kRole:
      return "role";
    case Pairing::kOnlyOne:
      return "only-one";
  }
  return "";
}

RenderDiff diff_renders(const k8s::DryRun& a, const k8s::DryRun& b,
                        const RenderDiffOptions& options) {
  std::vector<DiffDocument> a_docs = diff_documents(a, options.mains);
  std::vector<DiffDocument> b_docs = diff_documents(b, options.mains);
  // Matching keys: the role (by_role) or kind/name, made unique with #N in input order.
  struct Key {
    std::string key, label;
    Pairing pairing;  // how a match on this key pairs
  };
  auto keys_of = [&](const std::vector<DiffDocument>& docs, bool is_b) {
    std::vector<Key> keys;
    std::unordered_map<std::string, int> seen;
    for (const DiffDocument& doc : docs) {
      std::string name = doc.name;
      Pairing pairing = Pairing::kName;
      if (is_b) {
        for (const Rename& rename : options.renames) {
          if (name == rename.to) {
            name = rename.from;
            pairing = Pairing::kRename;
          }
        }
      }
      Key key;
      if (options.by_role && doc.kind == "JobSet" && doc.role != k8s::Role::kUnknown) {
        key = {std::string(role_name(doc.role)), std::string(role_name(doc.role)), Pairing::kRole};
      } else {
        key = {doc.kind + "/" + name, document_label(doc.kind, name), pairing};
      }
      int n = ++seen[key.key];
      if (n > 1) {
        key.key += fmt::format("#{}", n);
        key.label += fmt::format("#{}", n);
      }
      keys.push_back(std::move(key));
    }
    return keys;
  };
  std::vector<Key> a_keys = keys_of(a_docs, false);
  std::vector<Key> b_keys = keys_of(b_docs, true);
  std::unordered_map<std::string, std::size_t> b_index;
  for (std::size_t i = 0; i < b_keys.size(); ++i) b_index.emplace(b_keys[i].key, i);

  // A's partner in B for each of A's documents, and how they were paired.
  constexpr std::size_t kNoPartner = static_cast<std::size_t>(-1);
  std::vector<std::size_t> partner(a_docs.size(), kNoPartner);
  std::vector<Pairing> paired_by(a_docs.size(), Pairing::kNone);
  std::vector<bool> b_matched(b_docs.size(), false);
  for (std::size_t i = 0; i < a_docs.size(); ++i) {
    auto it = b_index.find(a_keys[i].key);
    if (it == b_index.end()) continue;
    partner[i] = it->second;
    // A name match of a renamed B document is the rename's doing.
    paired_by[i] =
        a_keys[i].pairing == Pairing::kRole ? Pairing::kRole : b_keys[it->second].pairing;
    b_matched[it->second] = true;
  }
  // What is left: a kind and role that each side holds exactly one document of pairs them.
  auto group_of = [](const DiffDocument& doc) {
    return doc.kind + "\n" + std::string(role_name(doc.role));
  };
  std::unordered_map<std::string, std::vector<std::size_t>> a_groups, b_groups;
  for (std::size_t i = 0; i < a_docs.size(); ++i) a_groups[group_of(a_docs[i])].push_back(i);
  for (std::size_t i = 0; i < b_docs.size(); ++i) b_groups[group_of(b_docs[i])].push_back(i);
  for (std::size_t i = 0; i < a_docs.size(); ++i) {
    if (partner[i] != kNoPartner) continue;
    const std::string group = group_of(a_docs[i]);
    auto it = b_groups.find(group);
    if (a_groups[group].size() != 1 || it == b_groups.end() || it->second.size() != 1) continue;
    std::size_t j = it->second.front();
    if (b_matched[j]) continue;
    partner[i] = j;
    paired_by[i] = Pairing::kOnlyOne;
    b_matched[j] = true;
  }

  // A document of one side (a or b, the other absent), or a matched pair.
  auto document_diff = [](const std::string& label, const DiffDocument* a, const DiffDocument* b) {
    DocumentDiff entry;
    entry.label = label;
    entry.kind = (a ? a : b)->kind;
    k8s::Role role = (a ? a : b)->role;
    if (role != k8s::Role::kUnknown) entry.role = role_name(role);
    if (a) {
      entry.a_name = a->name;
      entry.a_line = a->line;
    }
    if (b) {
      entry.b_name = b->name;
      entry.b_line = b->line;
    }
    if (!b)
      entry.differences.push_back({k8s::Difference::Kind::kRemoved, "", describe_document(*a), ""});
    if (!a)
      entry.differences.push_back({k8s::Difference::Kind::kAdded, "", "", describe_document(*b)});
    return entry;
  };
  RenderDiff out;
  for (std::size_t i = 0; i < a_docs.size(); ++i) {
    if (partner[i] == kNoPartner) {
      out.documents.push_back(document_diff(a_keys[i].label, &a_docs[i], nullptr));
      continue;
    }
    const DiffDocument& y = b_docs[partner[i]];
    DocumentDiff entry = document_diff(a_keys[i].label, &a_docs[i], &y);
    entry.paired_by = paired_by[i];
    YAML::Node left = k8s::expand_for_diff(a_docs[i].doc.root);
    YAML::Node right = k8s::expand_for_diff(y.doc.root);
    for (const Rename& rename : options.renames) rename_scalars(right, rename.to, rename.from);
    if (!options.server_fields) {
      k8s::HiddenFields hidden = k8s::hide_server_fields(left, right);
      entry.hidden_server_fields = std::move(hidden.server);
      entry.hidden_defaults = std::move(hidden.defaulted);
    }
    entry.differences = k8s::diff_trees(left, right);
    out.documents.push_back(std::move(entry));
  }
  for (std::size_t i = 0; i < b_docs.size(); ++i) {
    if (!b_matched[i]) out.documents.push_back(document_diff(b_keys[i].label, nullptr, &b_docs[i]));
  }
  return out;
}

std::string_view bench_change_id(BenchChange change) {
  // In BenchChange's order.
  static constexpr std::string_view kIds[] = {
      "name",           "gang-id",        "max-restarts",    "namespace",     "image",
      "client-script",  "client-program", "driver-settings", "maxtext-flag",  "libtpu-flag",
      "libtpu-workers", "argv-flag",      "logps-chunk",     "trainer-slice", "weights",
      "profiler",       "dump-hlo"};
  static_assert(std::size(kIds) == static_cast<std::size_t>(BenchChange::kDumpHlo) + 1);
  auto index = static_cast<std::size_t>(change);
  return index < std::size(kIds) ? kIds[index] : "unknown";
}

std::size_t ExpectBenchResult::unexpected() const {
  return static_cast<std::size_t>(std::count_if(
      differences.begin(), differences.end(), [](const BenchDifference& d) { return !d.allowed; }));
}

namespace {

ExpectBenchResult expect_bench_of(const k8s::Document& trainer, const k8s::Document& bench_doc) {
  ExpectBenchResult result;
  result.e2e_name = k8s::JobSetView(trainer).name();
  result.bench_name = k8s::JobSetView(bench_doc).name();
  result.e2e_line = trainer.first_line;
  result.bench_line = bench_doc.first_line;
  YAML::Node left = k8s::expand_for_diff(trainer.root);
  YAML::Node right = k8s::expand_for_diff(bench_doc.root);
  BenchClassifier classifier(right, bench_doc, result.e2e_name, result.bench_name);
  for (const k8s::Difference& d : k8s::diff_trees(left, right))
    result.differences.push_back(classifier.classify(d));
  return result;
}

}  // namespace

ExpectBenchResult check_expect_bench(const k8s::DryRun& e2e, const k8s::DryRun& bench,
                                     const k8s::RoleMains& mains) {
  const k8s::Document& trainer = *select_roles(e2e, mains).trainer;
  const k8s::Document& bench_doc =
      *k8s::select_roles(bench, mains, {.lone_jobset_is_trainer = true}).trainer;
  return expect_bench_of(trainer, bench_doc);
}

std::vector<ExpectBenchResult> check_expect_bench_arms(const k8s::DryRun& e2e,
                                                       const k8s::DryRun& bench,
                                                       const k8s::RoleMains& mains) {
  const k8s::Document& trainer = *select_roles(e2e, mains).trainer;
  const k8s::Document& bench_doc =
      *k8s::select_roles(bench, mains, {.lone_jobset_is_trainer = true}).trainer;
  std::vector<ArmProgram> programs = arm_programs(bench_doc, bench.source);
  if (programs.empty()) return {expect_bench_of(trainer, bench_doc)};
  std::vector<ExpectBenchResult> results;
  for (const ArmProgram& program : programs) {
    // The arm's program in the bench's own document, so that its lines are the input's.
    k8s::Document doc(program.bench, bench_doc.first_line, bench_doc.text);
    results.push_back(expect_bench_of(trainer, doc));
    results.back().arm = program.arm;
  }
  return results;
}

}  // namespace rtb::bench
