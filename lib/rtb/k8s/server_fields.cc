#include "rtb/k8s/server_fields.h"

#include <utility>

#include "rtb/k8s/diff.h"
#include "rtb/k8s/yaml.h"

namespace rtb::k8s {
namespace {

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

std::vector<std::string> hide_server_fields(YAML::Node a, YAML::Node b) {
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
    if (!diff_trees(x, y).empty()) differing.push_back(path);
  };
  for (const Removed& r : from_a) note(r.first, r.second, value_in(from_b, r.first));
  for (const Removed& r : from_b) note(r.first, value_in(from_a, r.first), r.second);
  return differing;
}

}  // namespace rtb::k8s
