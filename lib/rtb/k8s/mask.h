// Credentials in a Kubernetes document, masked before a report shows or compares it.
#pragma once

#include <yaml-cpp/yaml.h>

#include "rtb/base/secrets.h"
#include "rtb/k8s/dryrun.h"

namespace rtb::k8s {

// A copy of `root` with every credential masked by `masker` (base/secrets): an env entry
// {name: HF_TOKEN, value: ...} by its name; a mapping's value by its key; every other string
// scalar by what is written in it (NAME=VALUE, --name=value, token shapes, key blocks, URL
// passwords); and a sequence of strings as an argv, so `--hf_token`, `abc` masks `abc`. Masking is
// deterministic under one masker, so two masked documents differ where their secrets differ.
// `root` itself is left as it is. Expects a document that passed yaml::check_limits.
YAML::Node masked_copy(const YAML::Node& root, const SecretMasker& masker);

// `dryrun` with every document masked in place (as masked_copy masks, keeping each node's input
// line for messages) and its diagnostics scrubbed, for a report that shows or compares it. Each
// document's `text` is left as read: it gives input positions and is never printed.
void mask_documents(DryRun& dryrun, const SecretMasker& masker);

}  // namespace rtb::k8s
