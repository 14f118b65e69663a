// The fields the Kubernetes API server writes into an object it stores, which a render never has:
// what `kubectl get -o yaml` adds to an applied JobSet. A render compared with the live object
// leaves them out, as `kubectl diff` does.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <string_view>
#include <vector>

namespace rtb::k8s {

// The annotation `kubectl apply` (client side) keeps the applied object in.
inline constexpr std::string_view kLastAppliedAnnotation =
    "kubectl.kubernetes.io/last-applied-configuration";

// A field the cluster filled in on the live object that the render did not have: a default of
// the JobSet API or something Kueue wrote at admission (defaulted_field_rules()).
struct DefaultedField {
  std::string path;         // diff path (diff.h) of the field
  std::string_view reason;  // the rule's reason (static storage)
};

struct HiddenFields {
  // Server-populated fields whose values differed, by diff path, in the order named below.
  std::vector<std::string> server;
  // Defaulted and admission fields only the live side had, in the order of the rules.
  std::vector<DefaultedField> defaulted;
};

// Removes the server-populated fields from both documents, in place: `status`, and in the
// top-level metadata `creationTimestamp`, `generation`, `resourceVersion`, `uid`, `selfLink`,
// `managedFields` and the last-applied annotation (with `annotations` itself when that leaves it
// empty); also `creationTimestamp: null` in any nested `metadata` (the API's serialisation of an
// unset time in pod and job templates); `metadata.namespace` when only one side has it (the
// server fills it in); and `metadata.name` when the other side has only `generateName` and the
// name is that prefix with something after it (the server made it up). Those of them whose value
// differs between the two documents (present in one only, or different) are `server`: what a
// comparison would otherwise have reported.
//
// When exactly one side is a live object (its metadata has a `uid`, `resourceVersion`,
// `creationTimestamp` or `managedFields`) and the other a render, also removes from the live side
// each field of defaulted_field_rules() that the render does not have and that holds the rule's
// value (`defaulted`), and a mapping or list that this leaves empty where the render has none. A
// field the render sets is never removed, whatever the live value.
HiddenFields hide_server_fields(YAML::Node a, YAML::Node b);

// A field the JobSet API's defaulting or Kueue's admission adds to a JobSet, as
// docs/diff-renders.md lists it.
struct DefaultedFieldRule {
  // A diff path where `[*]` is any list item (by its key, diff.h) or mapping key, and `[#]` any
  // list item by its position.
  std::string_view path;
  std::string_view value;   // the value it must have, as the docs say it
  std::string_view reason;  // who adds it, and why
};
const std::vector<DefaultedFieldRule>& defaulted_field_rules();

}  // namespace rtb::k8s
