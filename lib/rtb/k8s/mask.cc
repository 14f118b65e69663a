#include "rtb/k8s/mask.h"

#include <optional>
#include <string>
#include <vector>

#include "rtb/k8s/yaml.h"

namespace rtb::k8s {
namespace {

void replace_scalar(YAML::Node node, const std::string& text) {
  if (node.Scalar() != text) yaml::set_string(node, text);
}

void mask_in_place(YAML::Node node, const SecretMasker& masker) {
  if (node.IsMap()) {
    // A Kubernetes env entry: its value is named by the entry's `name`.
    std::optional<std::string> name = yaml::scalar_at(node, "name");
    bool credential_entry = name && masker.names_credential(*name);
    for (auto item : node) {
      YAML::Node value = item.second;
      if (!value.IsScalar()) {
        mask_in_place(value, masker);
        continue;
      }
      std::string key = item.first.IsScalar() ? item.first.Scalar() : std::string();
      if (credential_entry && key == "value" && looks_like_credential(value.Scalar())) {
        replace_scalar(value, masker.fingerprint(value.Scalar()));
      } else {
        replace_scalar(value, masker.value(key, value.Scalar()));
      }
    }
  } else if (node.IsSequence()) {
    std::vector<std::string> words;
    bool all_scalars = true;
    for (const YAML::Node& item : node) {
      if (!item.IsScalar()) {
        all_scalars = false;
        break;
      }
      words.push_back(item.Scalar());
    }
    if (all_scalars) {
      std::vector<std::string> masked = masker.scrub_words(words);
      for (std::size_t i = 0; i < masked.size(); ++i) replace_scalar(node[i], masked[i]);
      return;
    }
    for (YAML::Node item : node) {
      if (item.IsScalar()) {
        replace_scalar(item, masker.scrub(item.Scalar()));
      } else {
        mask_in_place(item, masker);
      }
    }
  } else if (node.IsScalar()) {
    replace_scalar(node, masker.scrub(node.Scalar()));
  }
}

}  // namespace

YAML::Node masked_copy(const YAML::Node& root, const SecretMasker& masker) {
  YAML::Node copy = YAML::Clone(root);
  if (masker.masks()) mask_in_place(copy, masker);
  return copy;
}

void mask_documents(DryRun& dryrun, const SecretMasker& masker) {
  if (!masker.masks()) return;
  // In place, not masked_copy(): a clone loses yaml-cpp's marks, which give messages their lines.
  for (Document& document : dryrun.documents) mask_in_place(document.root, masker);
  for (Diagnostic& diagnostic : dryrun.diagnostics) {
    diagnostic.message = masker.scrub(diagnostic.message);
  }
}

}  // namespace rtb::k8s
