#include "rtb/bench/diff_render.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include "rtb/base/error.h"
#include "rtb/base/slice.h"
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
      if (node.Tag() == "!") {
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
  return fmt::format("{} {} (line {})", doc.kind, doc.name, doc.doc->first_line);
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

// The first scalar found under any of `keys` anywhere in the tree.
std::optional<std::string> find_scalar_under(const YAML::Node& tree,
                                             const std::vector<std::string_view>& keys) {
  std::vector<YAML::Node> pending{tree};
  while (!pending.empty()) {
    YAML::Node node = pending.back();
    pending.pop_back();
    if (node.IsMap()) {
      for (const auto& kv : node) {
        if (kv.second.IsScalar() &&
            std::find(keys.begin(), keys.end(), kv.first.Scalar()) != keys.end()) {
          return kv.second.Scalar();
        }
        pending.push_back(kv.second);
      }
    } else if (node.IsSequence()) {
      for (const auto& item : node) pending.push_back(item);
    }
  }
  return std::nullopt;
}

// Replaces every `gke-tpu-partition-<TOPOLOGY>-` in `text` by the partition `partition`.
std::string with_partition(std::string text, const std::string& partition) {
  static constexpr std::string_view kPrefix = "gke-tpu-partition-";
  for (std::size_t at = text.find(kPrefix); at != std::string::npos;
       at = text.find(kPrefix, at + 1)) {
    std::size_t start = at + kPrefix.size();
    std::size_t end = start;
    while (end < text.size() && ((text[end] >= '0' && text[end] <= '9') || text[end] == 'x')) ++end;
    if (end == start || end >= text.size() || text[end] != '-') continue;
    text.replace(start, end - start, partition);
  }
  return text;
}

class BenchClassifier {
 public:
  BenchClassifier(const YAML::Node& bench, std::string e2e_name, std::string bench_name)
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
      if (c.name == "pathways-proxy") proxy_ = c;
      if (c.name == "pathways-worker") worker_ = c;
      if (c.name == "pathways-rm") rm_ = c;
      YAML::Node resources = k8s::yaml::lookup(c.node, "resources");
      for (std::string_view kind : {"requests", "limits"}) {
        if (k8s::yaml::lookup(k8s::yaml::lookup(resources, kind), "google.com/tpu").IsDefined())
          tpu_jobs_.insert(c.job);
      }
    }
    read_slice();
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
    if (item == "scheduling.x-k8s.io/gang-id" && changed) {
      if (d.new_value == bench_name_) return allow(BenchChange::kGangId);
      return refuse(fmt::format("the gang-id label must be the bench's name {}", bench_name_));
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
      std::string maxtext = c + ".startup.env.MAXTEXT_EXTRA_FLAGS";
      if (under(p, maxtext)) {
        if (!added_or_changed)
          return refuse("render-bench never removes a MAXTEXT_EXTRA_FLAGS item");
        return allow(BenchChange::kMaxTextFlag);
      }
      if (p == c + ".startup.env.COMPUTE_LOGPS_CHUNK_SIZE" && changed) {
        return allow(BenchChange::kLogpsChunk);
      }
      std::string argv = c + ".startup.argv";
      if (under(p, argv) && p != argv) {
        if (item.rfind("--", 0) == 0) return allow(BenchChange::kArgvFlag);
        return refuse("render-bench changes argv flags, not positional words");
      }
    }
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
      places.push_back({"the client's LIBTPU_INIT_ARGS",
                        client_path_ + ".startup.env.LIBTPU_INIT_ARGS",
                        k8s::yaml::descend(client_, {"startup", "env", "LIBTPU_INIT_ARGS"})});
    }
    if (proxy_)
      places.push_back({"the pathways-proxy args", proxy_->path + ".args",
                        k8s::yaml::lookup(proxy_->node, "args")});
    if (worker_) {
      YAML::Node value;
      YAML::Node env = k8s::yaml::lookup(worker_->node, "env");
      if (env.IsSequence()) {
        for (const auto& entry : env) {
          if (k8s::yaml::scalar_at(entry, "name") == std::string("LIBTPU_INIT_ARGS"))
            value.reset(k8s::yaml::lookup(entry, "value"));
        }
      }
      places.push_back({"the pathways-worker's LIBTPU_INIT_ARGS",
                        k8s::path_item(worker_->path + ".env", "LIBTPU_INIT_ARGS") + ".value",
                        value});
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
        worker_ ? k8s::path_item(worker_->path + ".env", "LIBTPU_INIT_ARGS") : std::string();
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
    BenchDifference out{d, std::nullopt, ""};
    if (d.kind == k8s::Difference::Kind::kRemoved) {
      out.why = "render-bench never removes a libtpu flag";
      return out;
    }
    if (whole) {
      // A whole flag string the e2e did not have: each of its flags must be everywhere.
      if (d.kind != k8s::Difference::Kind::kAdded || !place->flags.IsMap()) {
        out.why = "not something render-bench changes";
        return out;
      }
      for (const auto& kv : place->flags) {
        std::string key(base_flag_key(kv.first.Scalar()));
        if (auto why = libtpu_mismatch(key, kv.second.Scalar(), places)) {
          out.why = *why;
          return out;
        }
      }
      out.allowed = BenchChange::kLibtpuFlag;
      return out;
    }
    std::string_view key = base_flag_key(item);
    if (key.rfind("--", 0) != 0) {
      out.why = "render-bench changes libtpu flags, not positional words";
      return out;
    }
    if (auto why = libtpu_mismatch(key, d.new_value, places)) {
      out.why = *why;
      return out;
    }
    out.allowed = BenchChange::kLibtpuFlag;
    return out;
  }

  void read_slice() {
    try {
      if (rm_) {
        if (auto item = effective_item(k8s::yaml::lookup(rm_->node, "args"), "--instance_type")) {
          slice_.emplace(Slice::parse(item->substr(item->find('=') + 1)));
          slice_source_ = "pathways-rm --instance_type";
          return;
        }
      }
      auto accelerator = find_scalar_under(bench_, {"cloud.google.com/gke-tpu-accelerator"});
      auto topology = find_scalar_under(
          bench_, {"cloud.google.com/gke-tpu-slice-topology", "cloud.google.com/gke-tpu-topology"});
      if (accelerator && topology) {
        slice_.emplace(find_tpu_type(*accelerator), Topology::parse(*topology));
        slice_source_ = "the accelerator and topology labels";
      }
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
    if (item == "cloud.google.com/gke-tpu-slice-topology" ||
        item == "cloud.google.com/gke-tpu-topology") {
      slice_field = true;
      if (s) expect(s->topology().str());
    } else if (item == "kueue.x-k8s.io/podset-slice-size") {
      slice_field = true;
      if (s) expect(std::to_string(s->partition_hosts()));
    } else if (item == "cloud.google.com/gke-tpu-accelerator") {
      slice_field = true;
      if (s) expect(s->type().gke_accelerator);
    } else if (item == "google.com/tpu") {
      slice_field = true;
      if (s) expect(std::to_string(s->chips_per_host()));
    } else if (base_flag_key(item) == "--instance_type") {
      slice_field = true;
      if (s) expect("--instance_type=" + s->instance_type());
    } else if (p.rfind("spec.replicatedJobs[", 0) == 0 &&
               (p.ends_with("].template.spec.completions") ||
                p.ends_with("].template.spec.parallelism"))) {
      std::string job = p.substr(20, p.find(']') - 20);
      if (tpu_jobs_.count(job)) {
        slice_field = true;
        if (s) expect(std::to_string(s->hosts()));
      }
    } else if (d.old_value.find("gke-tpu-partition-") != std::string::npos) {
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
  std::optional<ExpandedContainer> proxy_, worker_, rm_;
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

k8s::Role diff_role(const k8s::Document& doc, const k8s::RoleMains& mains) {
  k8s::JobSetView view(doc);
  k8s::Role role = role_of(view, mains);
  if (role != k8s::Role::kUnknown || !view.process_main()) return role;
  try {
    k8s::ClientCommand client = view.client("");
    for (const k8s::shell::Assignment& assignment : client.startup.env) {
      if (assignment.name != "TRAINER_ARGV") continue;
      for (const k8s::shell::Word& word : k8s::shell::split(assignment.value)) {
        if (word.value.rfind("--process_main=", 0) != 0) continue;
        std::string main = word.value.substr(15);
        if (main == mains.trainer) return k8s::Role::kTrainer;
        if (main == mains.orchestrator) return k8s::Role::kOrchestrator;
        if (main == mains.rollout) return k8s::Role::kRollout;
      }
    }
  } catch (const Error&) {
    // Not a readable client: the role stays unknown.
  }
  return k8s::Role::kUnknown;
}

std::vector<DiffDocument> diff_documents(const k8s::DryRun& input, const k8s::RoleMains& mains) {
  std::vector<DiffDocument> out;
  std::vector<std::string> others;
  bool any_jobset = false;
  for (const k8s::Document& doc : input.documents) {
    auto kind = k8s::yaml::scalar_at(doc.root, "kind");
    if (!kind) continue;
    DiffDocument entry{
        &doc, *kind,
        k8s::yaml::scalar_at(k8s::yaml::lookup(doc.root, "metadata"), "name").value_or(""),
        k8s::Role::kUnknown};
    if (*kind == "JobSet") {
      any_jobset = true;
      entry.role = diff_role(doc, mains);
    } else {
      others.push_back(fmt::format("{} '{}' (line {})", entry.kind, entry.name, doc.first_line));
    }
    out.push_back(std::move(entry));
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

RenderDiff diff_renders(const k8s::DryRun& a, const k8s::DryRun& b,
                        const RenderDiffOptions& options) {
  std::vector<DiffDocument> a_docs = diff_documents(a, options.mains);
  std::vector<DiffDocument> b_docs = diff_documents(b, options.mains);
  // Matching keys: the role (by_role) or kind/name, made unique with #N in input order.
  auto keys_of = [&](const std::vector<DiffDocument>& docs, bool is_b) {
    std::vector<std::pair<std::string, std::string>> keys;  // {key, label}
    std::unordered_map<std::string, int> seen;
    for (const DiffDocument& doc : docs) {
      std::string name = doc.name;
      if (is_b) {
        for (const Rename& rename : options.renames) {
          if (name == rename.to) name = rename.from;
        }
      }
      std::string key, label;
      if (options.by_role && doc.kind == "JobSet" && doc.role != k8s::Role::kUnknown) {
        key = label = std::string(role_name(doc.role));
      } else {
        key = doc.kind + "/" + name;
        label = document_label(doc.kind, name);
      }
      int n = ++seen[key];
      if (n > 1) {
        key += fmt::format("#{}", n);
        label += fmt::format("#{}", n);
      }
      keys.emplace_back(key, label);
    }
    return keys;
  };
  auto a_keys = keys_of(a_docs, false);
  auto b_keys = keys_of(b_docs, true);
  std::unordered_map<std::string, std::size_t> b_index;
  for (std::size_t i = 0; i < b_keys.size(); ++i) b_index.emplace(b_keys[i].first, i);
  std::vector<bool> b_matched(b_docs.size(), false);

  RenderDiff out;
  for (std::size_t i = 0; i < a_docs.size(); ++i) {
    const DiffDocument& x = a_docs[i];
    DocumentDiff entry;
    entry.label = a_keys[i].second;
    entry.kind = x.kind;
    entry.a_name = x.name;
    entry.a_line = x.doc->first_line;
    auto it = b_index.find(a_keys[i].first);
    if (it == b_index.end()) {
      entry.differences.push_back({k8s::Difference::Kind::kRemoved, "", describe_document(x), ""});
    } else {
      const DiffDocument& y = b_docs[it->second];
      b_matched[it->second] = true;
      entry.b_name = y.name;
      entry.b_line = y.doc->first_line;
      YAML::Node left = k8s::expand_for_diff(x.doc->root);
      YAML::Node right = k8s::expand_for_diff(y.doc->root);
      for (const Rename& rename : options.renames) rename_scalars(right, rename.to, rename.from);
      if (!options.server_fields) entry.hidden_server_fields = k8s::hide_server_fields(left, right);
      entry.differences = k8s::diff_trees(left, right);
    }
    out.documents.push_back(std::move(entry));
  }
  for (std::size_t i = 0; i < b_docs.size(); ++i) {
    if (b_matched[i]) continue;
    const DiffDocument& y = b_docs[i];
    DocumentDiff entry;
    entry.label = b_keys[i].second;
    entry.kind = y.kind;
    entry.b_name = y.name;
    entry.b_line = y.doc->first_line;
    entry.differences.push_back({k8s::Difference::Kind::kAdded, "", "", describe_document(y)});
    out.documents.push_back(std::move(entry));
  }
  return out;
}

std::string_view bench_change_id(BenchChange change) {
  switch (change) {
    case BenchChange::kName:
      return "name";
    case BenchChange::kGangId:
      return "gang-id";
    case BenchChange::kMaxRestarts:
      return "max-restarts";
    case BenchChange::kNamespace:
      return "namespace";
    case BenchChange::kImage:
      return "image";
    case BenchChange::kClientScript:
      return "client-script";
    case BenchChange::kClientProgram:
      return "client-program";
    case BenchChange::kDriverSettings:
      return "driver-settings";
    case BenchChange::kMaxTextFlag:
      return "maxtext-flag";
    case BenchChange::kLibtpuFlag:
      return "libtpu-flag";
    case BenchChange::kArgvFlag:
      return "argv-flag";
    case BenchChange::kLogpsChunk:
      return "logps-chunk";
    case BenchChange::kTrainerSlice:
      return "trainer-slice";
  }
  return "unknown";
}

std::size_t ExpectBenchResult::unexpected() const {
  return static_cast<std::size_t>(std::count_if(
      differences.begin(), differences.end(), [](const BenchDifference& d) { return !d.allowed; }));
}

ExpectBenchResult check_expect_bench(const k8s::DryRun& e2e, const k8s::DryRun& bench,
                                     const k8s::RoleMains& mains) {
  k8s::Roles roles = select_roles(e2e, mains);
  const k8s::Document& trainer = *roles.trainer;
  std::vector<DiffDocument> bench_docs = diff_documents(bench, mains);
  std::vector<const DiffDocument*> jobsets, trainers;
  for (const DiffDocument& doc : bench_docs) {
    if (doc.kind != "JobSet") continue;
    jobsets.push_back(&doc);
    if (doc.role == k8s::Role::kTrainer) trainers.push_back(&doc);
  }
  const DiffDocument* bench_doc = nullptr;
  if (trainers.size() == 1) {
    bench_doc = trainers.front();
  } else if (trainers.empty() && jobsets.size() == 1) {
    bench_doc = jobsets.front();
  } else {
    std::vector<std::string> names;
    for (const DiffDocument* doc : trainers.empty() ? jobsets : trainers)
      names.push_back(describe_document(*doc));
    fail_at(bench.source, static_cast<std::int64_t>(jobsets.front()->doc->first_line),
            "--expect-bench needs one bench JobSet, found {}", fmt::join(names, ", "));
  }
  ExpectBenchResult result;
  result.e2e_name = k8s::JobSetView(trainer).name();
  result.bench_name = bench_doc->name;
  result.e2e_line = trainer.first_line;
  result.bench_line = bench_doc->doc->first_line;
  YAML::Node left = k8s::expand_for_diff(trainer.root);
  YAML::Node right = k8s::expand_for_diff(bench_doc->doc->root);
  BenchClassifier classifier(right, result.e2e_name, result.bench_name);
  for (const k8s::Difference& d : k8s::diff_trees(left, right))
    result.differences.push_back(classifier.classify(d));
  return result;
}

}  // namespace rtb::bench
