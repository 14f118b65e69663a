#include "rtb/k8s/server_fields.h"

#include <algorithm>
#include <optional>
#include <set>
#include <utility>

#include "rtb/k8s/diff.h"
#include "rtb/k8s/yaml.h"

namespace rtb::k8s {
namespace {

// --- what the JobSet API and Kueue fill in -------------------------------------------------------
//
// Read at kubernetes-sigs/jobset 08dfbdfd682714a9ab929633eca8dc95315187e7 (2026-08-18):
// pkg/webhooks/jobset_webhook.go, jobSetWebhook.Default() (last changed at 89e3ee22), and the
// `default:` values of config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml
// (api/jobset/v1alpha2/jobset_types.go's +kubebuilder:default markers). And at
// kubernetes-sigs/kueue ff69552e79ad21652c36caa97038382e55625cf7 (2026-08-23):
// pkg/controller/jobs/jobset/ jobset_webhook.go Default() and
// pkg/controller/jobframework/defaults.go (suspend, the default LocalQueue, managedBy), and what
// admission writes into each pod template: pkg/controller/jobs/jobset/jobset_controller.go
// RunWithPodSetsInfo (suspend: false, podset.Merge), pkg/controller/jobframework/reconciler.go
// getPodSetsInfoFromStatus (the podset label, the workload annotation) and pkg/podset/podset.go
// FromAssignment (the flavor's node labels and tolerations, topology-aware scheduling's annotation
// and scheduling gate).

// What the live value must be.
enum class Want {
  kText,      // the scalar `text`
  kAny,       // anything
  kEmptyMap,  // {}
  kJobName,   // the name of the replicated job it is in
  kRuleName,  // "failurePolicyRule<i>", i the item's position
};

// When the rule applies, besides the render lacking the field.
enum class When {
  kAlways,
  kKueueManaged,   // the live JobSet carries Kueue's queue label
  kKueueAdmitted,  // Kueue admitted the replicated job's pod template: the live one carries
                   // Kueue's podset label naming the job, and the render's does not (a label the
                   // user wrote leaves no sign of admission, so nothing is folded there)
};

struct Rule {
  DefaultedFieldRule doc;
  Want want;
  std::string_view text;
  When when;
};

constexpr std::string_view kPodSetLabel = "kueue.x-k8s.io/podset";
constexpr std::string_view kQueueLabel = "kueue.x-k8s.io/queue-name";
constexpr std::string_view kCrdDefault = "JobSet CRD default";
constexpr std::string_view kEmptyMeta = "the API writes a template's empty metadata as {}";

// docs/diff-renders.md has this table; a test holds the two together.
const Rule kRules[] = {
    {{"spec.successPolicy.operator", "`All`",
      "JobSet webhook: without a successPolicy a JobSet succeeds when all its jobs do"},
     Want::kText,
     "All",
     When::kAlways},
    {{"spec.startupPolicy.startupPolicyOrder", "`AnyOrder`",
      "JobSet webhook: without a startupPolicy all jobs start at once"},
     Want::kText,
     "AnyOrder",
     When::kAlways},
    {{"spec.replicatedJobs[*].template.spec.completionMode", "`Indexed`",
      "JobSet webhook: child jobs are Indexed unless the template says otherwise"},
     Want::kText,
     "Indexed",
     When::kAlways},
    {{"spec.replicatedJobs[*].template.spec.template.spec.restartPolicy", "`OnFailure`",
      "JobSet webhook: the pods' restart policy when the template sets none"},
     Want::kText,
     "OnFailure",
     When::kAlways},
    {{"spec.network.enableDNSHostnames", "`true`",
      "JobSet webhook: pods get DNS hostnames unless turned off"},
     Want::kText,
     "true",
     When::kAlways},
    {{"spec.network.publishNotReadyAddresses", "`true`",
      "JobSet webhook: the headless service lists pods before they are ready"},
     Want::kText,
     "true",
     When::kAlways},
    {{"spec.failurePolicy.rules[#].name", "`failurePolicyRule<i>`, *i* its position",
      "JobSet webhook: a failure policy rule without a name is named by its position"},
     Want::kRuleName,
     "",
     When::kAlways},
    {{"spec.volumeClaimPolicies[#].retentionPolicy.whenDeleted", "`Delete`",
      "JobSet webhook and CRD: claims are deleted with the JobSet unless kept"},
     Want::kText,
     "Delete",
     When::kAlways},
    {{"spec.failurePolicy.restartStrategy", "`Recreate`", kCrdDefault},
     Want::kText,
     "Recreate",
     When::kAlways},
    {{"spec.replicatedJobs[*].groupName", "`default`", kCrdDefault},
     Want::kText,
     "default",
     When::kAlways},
    {{"spec.replicatedJobs[*].replicas", "`1`", kCrdDefault}, Want::kText, "1", When::kAlways},
    {{"spec.replicatedJobs[*].template.spec.template.spec.containers[*].ports[*].protocol", "`TCP`",
      "JobSet CRD default (the pod API's)"},
     Want::kText,
     "TCP",
     When::kAlways},
    {{"spec.replicatedJobs[*].template.spec.template.spec.initContainers[*].ports[*].protocol",
      "`TCP`", "JobSet CRD default (the pod API's)"},
     Want::kText,
     "TCP",
     When::kAlways},
    {{"spec.replicatedJobs[*].template.metadata", "`{}`", kEmptyMeta},
     Want::kEmptyMap,
     "",
     When::kAlways},
    {{"spec.replicatedJobs[*].template.spec.template.metadata", "`{}`", kEmptyMeta},
     Want::kEmptyMap,
     "",
     When::kAlways},
    {{"spec.suspend", "`false`",
      "what an unset suspend means; Kueue writes it when it admits a JobSet"},
     Want::kText,
     "false",
     When::kAlways},
    {{"spec.suspend", "`true`, with Kueue's queue label live",
      "Kueue's webhook suspends a JobSet it manages until it admits it"},
     Want::kText,
     "true",
     When::kKueueManaged},
    {{"spec.managedBy", "`kueue.x-k8s.io/multikueue`, with Kueue's queue label live",
      "Kueue's webhook hands a JobSet of a MultiKueue queue to MultiKueue"},
     Want::kText,
     "kueue.x-k8s.io/multikueue",
     When::kKueueManaged},
    {{"metadata.labels[kueue.x-k8s.io/queue-name]", "`default`",
      "Kueue's webhook puts a JobSet without a queue in the namespace's default LocalQueue"},
     Want::kText,
     "default",
     When::kAlways},
    {{"spec.replicatedJobs[*].template.spec.template.metadata.labels[kueue.x-k8s.io/podset]",
      "the replicated job's name", "Kueue, at admission: the pod set the template is"},
     Want::kJobName,
     "",
     When::kAlways},
    {{"spec.replicatedJobs[*].template.spec.template.metadata.annotations[kueue.x-k8s.io/"
      "workload]",
      "any, where Kueue admitted the template",
      "Kueue, at admission (topology-aware scheduling): the Workload that admitted it"},
     Want::kAny,
     "",
     When::kKueueAdmitted},
    {{"spec.replicatedJobs[*].template.spec.template.metadata.annotations[kueue.x-k8s.io/"
      "podset-unconstrained-topology]",
      "`\"true\"`, where Kueue admitted the template",
      "Kueue, at admission: topology-aware scheduling without a topology request"},
     Want::kText,
     "true",
     When::kKueueAdmitted},
    {{"spec.replicatedJobs[*].template.spec.template.spec.schedulingGates[kueue.x-k8s.io/"
      "topology]",
      "any, where Kueue admitted the template",
      "Kueue, at admission: pods wait for their topology assignment"},
     Want::kAny,
     "",
     When::kKueueAdmitted},
    {{"spec.replicatedJobs[*].template.spec.template.spec.nodeSelector[*]",
      "any, where Kueue admitted the template",
      "Kueue, at admission: the ResourceFlavor's node labels"},
     Want::kAny,
     "",
     When::kKueueAdmitted},
    {{"spec.replicatedJobs[*].template.spec.template.spec.tolerations[*]",
      "any, where Kueue admitted the template",
      "Kueue, at admission: the ResourceFlavor's tolerations"},
     Want::kAny,
     "",
     When::kKueueAdmitted},
};

// A live object, as `kubectl get -o yaml` prints it: its metadata has what only the server sets.
bool looks_live(const YAML::Node& doc) {
  YAML::Node metadata = yaml::lookup(doc, "metadata");
  if (!metadata.IsMap()) return false;
  for (std::string_view key : {"uid", "resourceVersion", "managedFields"}) {
    if (yaml::lookup(metadata, key).IsDefined()) return true;
  }
  YAML::Node created = yaml::lookup(metadata, "creationTimestamp");
  return created.IsDefined() && !created.IsNull();
}

// What the rules' conditions ask of the two trees, taken before anything is folded (the rules
// fold the very labels these are read from).
struct Facts {
  bool kueue_managed = false;
  std::set<std::string> admitted_jobs;  // replicated jobs whose pod template Kueue admitted
};

Facts facts_of(const YAML::Node& render, const YAML::Node& live) {
  Facts facts;
  facts.kueue_managed =
      yaml::lookup(yaml::descend(live, {"metadata", "labels"}), kQueueLabel).IsDefined();
  YAML::Node live_jobs = yaml::descend(live, {"spec", "replicatedJobs"});
  YAML::Node render_jobs = yaml::descend(render, {"spec", "replicatedJobs"});
  if (!live_jobs.IsSequence()) return facts;
  auto podset_label = [](const YAML::Node& job) {
    return yaml::scalar_at(
        yaml::descend(job, {"template", "spec", "template", "metadata", "labels"}), kPodSetLabel);
  };
  for (const auto& job : live_jobs) {
    std::optional<std::string> name = yaml::scalar_at(job, "name");
    if (!name || podset_label(job) != name) continue;
    bool user_wrote_it = false;
    if (render_jobs.IsSequence()) {
      for (const auto& other : render_jobs) {
        if (yaml::scalar_at(other, "name") == name) user_wrote_it = podset_label(other).has_value();
      }
    }
    if (!user_wrote_it) facts.admitted_jobs.insert(*name);
  }
  return facts;
}

// Folds one rule: walks its path through `live` with the render's counterpart alongside, and
// removes what it matches.
class RuleWalk {
 public:
  RuleWalk(const Rule& rule, const Facts& facts, std::vector<DefaultedField>& out)
      : rule_(rule), facts_(facts), out_(out), segments_(path_segments(rule.doc.path)) {}

  void run(const YAML::Node& render, YAML::Node live) { fold(0, render, live, "", {}); }

 private:
  struct Context {
    std::string job;         // the replicated job the walk is in
    std::size_t position{};  // the position of the last `[#]` item
  };
  // A child of the node at one level of the walk.
  struct Child {
    std::string key;  // mapping key, or the list item's key (diff.h) or position
    std::size_t index{};
    YAML::Node render, live;
    std::string path;
  };

  // True when something below `live` (or a child of it) was folded.
  bool fold(std::size_t level, const YAML::Node& render, YAML::Node live, const std::string& path,
            const Context& context) {
    if (level >= segments_.size() || !(live.IsMap() || live.IsSequence())) return false;
    std::string_view segment = segments_[level];
    bool last = level + 1 == segments_.size();
    // What to remove, by key or position (never by assigning nodes: that writes into the tree).
    std::vector<std::string> removed_keys;
    std::vector<std::size_t> removed_items;
    bool folded = false;
    for (const Child& child : children_of(segment, render, live, path)) {
      Context inner = context;
      if (level > 0 && segments_[level - 1] == "replicatedJobs") inner.job = child.key;
      if (segment == "[#]") inner.position = child.index;
      bool remove = false;
      if (last) {
        if (child.render.IsDefined() || !matches(child.live, inner)) continue;
        out_.push_back({child.path, rule_.doc.reason});
        remove = folded = true;
      } else if (fold(level + 1, child.render, child.live, child.path, inner)) {
        folded = true;
        // A mapping or list the render does not have, emptied by the fold, goes too.
        remove = !child.render.IsDefined() && child.live.size() == 0;
      }
      if (remove) {
        removed_keys.push_back(child.key);
        removed_items.push_back(child.index);
      }
    }
    if (live.IsMap()) {
      for (const std::string& key : removed_keys) live.remove(key);
    } else {
      std::sort(removed_items.rbegin(), removed_items.rend());  // last first: positions hold
      for (std::size_t index : removed_items) live.remove(index);
    }
    return folded;
  }

  std::vector<Child> children_of(std::string_view segment, const YAML::Node& render,
                                 const YAML::Node& live, const std::string& path) const {
    std::vector<Child> out;
    bool item = segment.front() == '[';
    std::string_view wanted = item ? segment.substr(1, segment.size() - 2) : segment;
    auto undefined = [] { return YAML::Node(YAML::NodeType::Undefined); };
    if (live.IsMap()) {
      if (item && wanted == "#") return out;  // positions are for lists
      if (!item) {
        YAML::Node child = yaml::lookup(live, wanted);
        if (child.IsDefined()) {
          out.push_back({std::string(wanted), 0, yaml::lookup(render, wanted), child,
                         path_child(path, wanted)});
        }
        return out;
      }
      for (const auto& kv : live) {
        const std::string& key = kv.first.Scalar();
        if (wanted != "*" && key != wanted) continue;
        out.push_back({key, 0, render.IsMap() ? yaml::lookup(render, key) : undefined(), kv.second,
                       path_item(path, key)});
      }
      return out;
    }
    if (!item) return out;
    std::vector<std::string> live_keys = sequence_item_keys(live);
    std::vector<std::string> render_keys =
        render.IsSequence() ? sequence_item_keys(render) : std::vector<std::string>();
    for (std::size_t i = 0; i < live.size(); ++i) {
      if (wanted == "#") {
        out.push_back({std::to_string(i), i, i < render_keys.size() ? render[i] : undefined(),
                       live[i], path_item(path, std::to_string(i))});
        continue;
      }
      if (wanted != "*" && live_keys[i] != wanted) continue;
      auto at = std::find(render_keys.begin(), render_keys.end(), live_keys[i]);
      std::size_t there = static_cast<std::size_t>(at - render_keys.begin());
      out.push_back({live_keys[i], i, at == render_keys.end() ? undefined() : render[there],
                     live[i], path_item(path, live_keys[i])});
    }
    return out;
  }

  bool matches(const YAML::Node& value, const Context& context) const {
    switch (rule_.when) {
      case When::kAlways:
        break;
      case When::kKueueManaged:
        if (!facts_.kueue_managed) return false;
        break;
      case When::kKueueAdmitted:
        if (!facts_.admitted_jobs.count(context.job)) return false;
        break;
    }
    switch (rule_.want) {
      case Want::kText:
        return value.IsScalar() && value.Scalar() == rule_.text;
      case Want::kAny:
        return true;
      case Want::kEmptyMap:
        return value.IsMap() && value.size() == 0;
      case Want::kJobName:
        return value.IsScalar() && !context.job.empty() && value.Scalar() == context.job;
      case Want::kRuleName:
        return value.IsScalar() &&
               value.Scalar() == "failurePolicyRule" + std::to_string(context.position);
    }
    return false;
  }

  const Rule& rule_;
  const Facts& facts_;
  std::vector<DefaultedField>& out_;
  std::vector<std::string_view> segments_;
};

std::vector<DefaultedField> fold_defaults(const YAML::Node& render, YAML::Node live) {
  std::vector<DefaultedField> out;
  Facts facts = facts_of(render, live);
  for (const Rule& rule : kRules) RuleWalk(rule, facts, out).run(render, live);
  return out;
}

// --- server-populated fields
// -----------------------------------------------------------------------

constexpr std::string_view kServerMetadata[] = {
    "creationTimestamp", "generation", "resourceVersion", "uid", "selfLink", "managedFields"};

// A removed field: its path and its value (undefined when the document did not have it).
using Removed = std::pair<std::string, YAML::Node>;

YAML::Node take(YAML::Node map, std::string_view key) {
  if (!map.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
  YAML::Node value = yaml::lookup(map, key);
  if (value.IsDefined()) map.remove(std::string(key));
  return value;
}

// Removes every nested `metadata.creationTimestamp: null` below `root`'s own metadata.
// Iterative: input depth cannot overflow the stack.
void remove_null_timestamps(const YAML::Node& root, std::vector<Removed>& removed) {
  std::vector<std::pair<YAML::Node, std::string>> pending;
  for (const auto& kv : root) {
    if (kv.first.Scalar() != "metadata") pending.emplace_back(kv.second, kv.first.Scalar());
  }
  while (!pending.empty()) {
    auto [node, path] = std::move(pending.back());
    pending.pop_back();
    if (node.IsMap()) {
      YAML::Node metadata = yaml::lookup(node, "metadata");
      if (metadata.IsMap()) {
        YAML::Node stamp = yaml::lookup(metadata, "creationTimestamp");
        if (stamp.IsDefined() && stamp.IsNull()) {
          metadata.remove("creationTimestamp");
          removed.emplace_back(path_child(path_child(path, "metadata"), "creationTimestamp"),
                               stamp);
        }
      }
      for (const auto& kv : node)
        pending.emplace_back(kv.second, path_child(path, kv.first.Scalar()));
    } else if (node.IsSequence()) {
      std::vector<std::string> keys = sequence_item_keys(node);
      for (std::size_t i = 0; i < node.size(); ++i)
        pending.emplace_back(node[i], path_item(path, keys[i]));
    }
  }
}

std::vector<Removed> remove_server_fields(YAML::Node doc) {
  std::vector<Removed> removed;
  if (!doc.IsMap()) return removed;
  YAML::Node metadata = yaml::lookup(doc, "metadata");
  for (std::string_view key : kServerMetadata)
    removed.emplace_back(path_child("metadata", key), take(metadata, key));
  YAML::Node annotations = yaml::lookup(metadata, "annotations");
  YAML::Node applied = take(annotations, kLastAppliedAnnotation);
  removed.emplace_back(path_item("metadata.annotations", kLastAppliedAnnotation), applied);
  if (applied.IsDefined() && annotations.size() == 0) metadata.remove("annotations");
  removed.emplace_back("status", take(doc, "status"));
  remove_null_timestamps(doc, removed);
  return removed;
}

}  // namespace

HiddenFields hide_server_fields(YAML::Node a, YAML::Node b) {
  // Which side is live is told by the fields removed next.
  bool a_live = looks_live(a), b_live = looks_live(b);
  std::vector<Removed> from_a = remove_server_fields(a), from_b = remove_server_fields(b);
  // A namespace that only one side has is the one the server filled in (`default` or the
  // context's); two different namespaces are a real difference and stay.
  YAML::Node a_metadata = yaml::lookup(a, "metadata"), b_metadata = yaml::lookup(b, "metadata");
  bool a_namespace = yaml::lookup(a_metadata, "namespace").IsDefined();
  bool b_namespace = yaml::lookup(b_metadata, "namespace").IsDefined();
  if (a_namespace != b_namespace) {
    from_a.emplace_back("metadata.namespace", take(a_metadata, "namespace"));
    from_b.emplace_back("metadata.namespace", take(b_metadata, "namespace"));
  }
  // A render that names itself by generateName only gets its name from the server: the live
  // name is that prefix and a made-up suffix.
  for (auto [render, live] :
       {std::pair{a_metadata, b_metadata}, std::pair{b_metadata, a_metadata}}) {
    std::optional<std::string> prefix = yaml::scalar_at(render, "generateName");
    std::optional<std::string> name = yaml::scalar_at(live, "name");
    if (!prefix || !name || yaml::lookup(render, "name").IsDefined()) continue;
    if (name->size() <= prefix->size() || name->compare(0, prefix->size(), *prefix) != 0) continue;
    (render.is(a_metadata) ? from_b : from_a).emplace_back("metadata.name", take(live, "name"));
  }
  std::vector<std::string> differing;
  auto value_in = [](const std::vector<Removed>& removed, const std::string& path) {
    for (const Removed& r : removed) {
      if (r.first == path) return r.second;
    }
    return YAML::Node(YAML::NodeType::Undefined);
  };
  auto note = [&](const std::string& path, const YAML::Node& x, const YAML::Node& y) {
    for (const std::string& seen : differing) {
      if (seen == path) return;
    }
    if (!diff_trees(x, y, "", DiffDetail::kWhere).empty()) differing.push_back(path);
  };
  for (const Removed& r : from_a) note(r.first, r.second, value_in(from_b, r.first));
  for (const Removed& r : from_b) note(r.first, value_in(from_a, r.first), r.second);
  HiddenFields hidden;
  hidden.server = std::move(differing);
  if (a_live != b_live) hidden.defaulted = a_live ? fold_defaults(b, a) : fold_defaults(a, b);
  return hidden;
}

const std::vector<DefaultedFieldRule>& defaulted_field_rules() {
  static const std::vector<DefaultedFieldRule> rules = [] {
    std::vector<DefaultedFieldRule> out;
    for (const Rule& rule : kRules) out.push_back(rule.doc);
    return out;
  }();
  return rules;
}

}  // namespace rtb::k8s
