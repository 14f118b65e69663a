#include "rtb/k8s/server_fields.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "rtb/base/io.h"
#include "rtb/k8s/diff.h"
#include "rtb/k8s/dryrun.h"
#include "rtb/k8s/yaml.h"
#include "test_util.h"

namespace rtb::k8s {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

YAML::Node load_fixture(std::string_view name) {
  DryRun render = parse_dryrun(read_file(test::testdata(name)), std::string(name));
  return YAML::Clone(render.documents.at(0).root);
}

TEST(HideServerFields, AKubectlGetOfTheAppliedRenderIsTheRender) {
  // The xpk render and the `kubectl get -o yaml` built from it (testdata/SOURCES.md).
  YAML::Node render = load_fixture("diff_renders/xpk_pathways_v5p-8_at_254bbe3f.yaml");
  YAML::Node live = load_fixture("diff_renders/xpk_pathways_v5p-8_at_254bbe3f_kubectl_get.yaml");
  ASSERT_FALSE(diff_trees(render, live).empty());
  EXPECT_THAT(hide_server_fields(render, live),
              ElementsAre("metadata.creationTimestamp", "metadata.generation",
                          "metadata.resourceVersion", "metadata.uid", "metadata.managedFields",
                          "metadata.annotations[kubectl.kubernetes.io/last-applied-configuration]",
                          "status", "metadata.namespace"));
  EXPECT_THAT(diff_trees(render, live), IsEmpty()) << "kubectl's formatting is no difference";
}

TEST(HideServerFields, KeepsUserFieldsAndRealNamespaceChanges) {
  YAML::Node a = YAML::Load(
      "metadata: {name: x, namespace: a, annotations: {keep: '1'}, uid: u1}\n"
      "spec:\n  template:\n    metadata: {creationTimestamp: null, labels: {l: v}}\n");
  YAML::Node b = YAML::Load(
      "metadata: {name: x, namespace: b, uid: u1, annotations: {keep: '1', "
      "kubectl.kubernetes.io/last-applied-configuration: '{}'}}\nspec:\n  template:\n"
      "    metadata: {labels: {l: v}}\nstatus: {restarts: 0}\n");
  EXPECT_THAT(hide_server_fields(a, b),
              ElementsAre("metadata.annotations[kubectl.kubernetes.io/last-applied-configuration]",
                          "status", "spec.template.metadata.creationTimestamp"))
      << "the same uid is not a difference";
  std::vector<Difference> left = diff_trees(a, b);
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].path, "metadata.namespace") << "a and b: not filled in by the server";
  EXPECT_TRUE(yaml::lookup(yaml::lookup(b, "metadata"), "annotations").IsMap())
      << "annotations that keep a user entry stay";
}

TEST(HideServerFields, ANameGeneratedFromGenerateName) {
  YAML::Node render = YAML::Load("metadata: {generateName: sleep-job-}\nspec: {}\n");
  YAML::Node live =
      YAML::Load("metadata: {generateName: sleep-job-, name: sleep-job-x5ffx, uid: u}\nspec: {}\n");
  EXPECT_THAT(hide_server_fields(render, live), ElementsAre("metadata.uid", "metadata.name"));
  EXPECT_THAT(diff_trees(render, live), IsEmpty());
  // A name that does not extend the prefix, or a render that has a name, is a difference.
  for (const char* other : {"metadata: {generateName: sleep-job-, name: other-x5ffx}\n",
                            "metadata: {generateName: sleep-job-, name: sleep-job-}\n"}) {
    YAML::Node a = YAML::Load("metadata: {generateName: sleep-job-}\n");
    YAML::Node b = YAML::Load(other);
    EXPECT_THAT(hide_server_fields(a, b), IsEmpty()) << other;
    EXPECT_EQ(diff_trees(a, b).size(), 1u) << other;
  }
  YAML::Node named = YAML::Load("metadata: {generateName: sleep-job-, name: sleep-job-a}\n");
  YAML::Node renamed = YAML::Load("metadata: {generateName: sleep-job-, name: sleep-job-b}\n");
  EXPECT_THAT(hide_server_fields(named, renamed), IsEmpty());
  EXPECT_EQ(diff_trees(named, renamed).size(), 1u);
}

}  // namespace
}  // namespace rtb::k8s
