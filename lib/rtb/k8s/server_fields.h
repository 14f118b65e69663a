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

// Removes the server-populated fields from both documents, in place: `status`, and in the
// top-level metadata `creationTimestamp`, `generation`, `resourceVersion`, `uid`, `selfLink`,
// `managedFields` and the last-applied annotation (with `annotations` itself when that leaves it
// empty); also `creationTimestamp: null` in any nested `metadata` (the API's serialisation of an
// unset time in pod and job templates); `metadata.namespace` when only one side has it (the
// server fills it in); and `metadata.name` when the other side has only `generateName` and the
// name is that prefix with something after it (the server made it up). Returns the diff paths
// (diff.h) of those removed fields whose value differs between the two documents (present in one
// only, or different), in the order above: what a comparison would otherwise have reported.
std::vector<std::string> hide_server_fields(YAML::Node a, YAML::Node b);

}  // namespace rtb::k8s
