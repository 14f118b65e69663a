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

std::vector<std::string> paths_of(const std::vector<DefaultedField>& fields) {
  std::vector<std::string> paths;
  for (const DefaultedField& field : fields) paths.push_back(field.path);
  return paths;
}

std::vector<std::string> differences_of(const YAML::Node& a, const YAML::Node& b) {
  std::vector<std::string> out;
  for (const Difference& d : diff_trees(a, b)) {
    out.push_back(std::string(kind_name(d.kind)) + " " + d.path + ": " + d.old_value + " -> " +
                  d.new_value);
  }
  return out;
}

YAML::Node load_fixture(std::string_view name) {
  DryRun render = parse_dryrun(read_file(test::testdata(name)), std::string(name));
  return YAML::Clone(render.documents.at(0).root);
}

TEST(HideServerFields, AKubectlGetOfTheAppliedRenderIsTheRender) {
  // The xpk render and the `kubectl get -o yaml` built from it (testdata/SOURCES.md).
  YAML::Node render = load_fixture("diff_renders/xpk_pathways_v5p-8_at_254bbe3f.yaml");
  YAML::Node live = load_fixture("diff_renders/xpk_pathways_v5p-8_at_254bbe3f_kubectl_get.yaml");
  ASSERT_FALSE(diff_trees(render, live).empty());
  EXPECT_THAT(hide_server_fields(render, live).server,
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
  EXPECT_THAT(hide_server_fields(a, b).server,
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
  EXPECT_THAT(hide_server_fields(render, live).server,
              ElementsAre("metadata.uid", "metadata.name"));
  EXPECT_THAT(diff_trees(render, live), IsEmpty());
  // A name that does not extend the prefix, or a render that has a name, is a difference.
  for (const char* other : {"metadata: {generateName: sleep-job-, name: other-x5ffx}\n",
                            "metadata: {generateName: sleep-job-, name: sleep-job-}\n"}) {
    YAML::Node a = YAML::Load("metadata: {generateName: sleep-job-}\n");
    YAML::Node b = YAML::Load(other);
    EXPECT_THAT(hide_server_fields(a, b).server, IsEmpty()) << other;
    EXPECT_EQ(diff_trees(a, b).size(), 1u) << other;
  }
  YAML::Node named = YAML::Load("metadata: {generateName: sleep-job-, name: sleep-job-a}\n");
  YAML::Node renamed = YAML::Load("metadata: {generateName: sleep-job-, name: sleep-job-b}\n");
  EXPECT_THAT(hide_server_fields(named, renamed).server, IsEmpty());
  EXPECT_EQ(diff_trees(named, renamed).size(), 1u);
}

TEST(HideDefaultedFields, TheJobSetApisDefaultsOnARealLiveObject) {
  // Kueue's sample JobSet, and the live object a reporter made of it (kueue issue 7649; the
  // reporter dropped the queue label and changed `args`, and wrote `cpu: "1"` quoted).
  YAML::Node render = load_fixture("diff_renders/kueue_sample-jobset_at_3d8443b6.yaml");
  YAML::Node live = load_fixture("diff_renders/kueue_issue7649_kubectl_get_jobset.yaml");
  HiddenFields hidden = hide_server_fields(render, live);
  EXPECT_THAT(hidden.server, ElementsAre("metadata.creationTimestamp", "metadata.generation",
                                         "metadata.resourceVersion", "metadata.uid", "status",
                                         "metadata.namespace", "metadata.name"));
  const std::string job = "spec.replicatedJobs[workers].", driver = "spec.replicatedJobs[driver].";
  EXPECT_THAT(
      paths_of(hidden.defaulted),
      ElementsAre("spec.successPolicy.operator", "spec.startupPolicy.startupPolicyOrder",
                  job + "template.spec.completionMode", driver + "template.spec.completionMode",
                  job + "template.spec.template.spec.restartPolicy",
                  driver + "template.spec.template.spec.restartPolicy",
                  "spec.network.publishNotReadyAddresses", job + "groupName", driver + "groupName",
                  driver + "replicas", job + "template.metadata", driver + "template.metadata",
                  job + "template.spec.template.metadata",
                  driver + "template.spec.template.metadata", "spec.suspend"));
  EXPECT_THAT(std::string(hidden.defaulted[0].reason), HasSubstr("JobSet"));
  // What the reporter changed is all that is left; `enableDNSHostnames: false`, which the
  // render sets against the default, is the same on both sides.
  EXPECT_THAT(
      differences_of(render, live),
      ElementsAre(
          "removed metadata.labels: kueue.x-k8s.io/queue-name: user-queue -> ",
          "type-changed " + job +
              "template.spec.template.spec.containers[sleep].resources.requests."
              "cpu: 1 -> \"1\"",
          "changed " + job + "template.spec.template.spec.containers[sleep].args[0]: 100s -> 10s",
          "type-changed " + driver +
              "template.spec.template.spec.containers[sleep].resources.requests."
              "cpu: 2 -> \"2\"",
          "changed " + driver +
              "template.spec.template.spec.containers[sleep].args[0]: 100s -> 10s"));
}

TEST(HideDefaultedFields, KueuesAdmissionOnARealLiveObject) {
  // A JobSet Kueue admitted with topology-aware scheduling (kueue issue 8101), against the JobSet
  // reconstructed from that TrainingRuntime and TrainJob (testdata/SOURCES.md).
  YAML::Node render = load_fixture("diff_renders/kueue_issue8101_render_reconstructed.yaml");
  DryRun list = parse_dryrun(
      read_file(test::testdata("diff_renders/kueue_issue8101_kubectl_get_jobset.yaml")), "l");
  YAML::Node live = YAML::Clone(list.documents.at(0).root["items"][0]);
  HiddenFields hidden = hide_server_fields(render, live);
  const std::string pod = "spec.replicatedJobs[node].template.spec.template.";
  EXPECT_THAT(
      paths_of(hidden.defaulted),
      ElementsAre("spec.successPolicy.operator", "spec.startupPolicy.startupPolicyOrder",
                  "spec.replicatedJobs[node].template.spec.completionMode",
                  "spec.network.enableDNSHostnames", "spec.network.publishNotReadyAddresses",
                  "spec.replicatedJobs[node].groupName", "spec.replicatedJobs[node].replicas",
                  "spec.suspend", "metadata.labels[kueue.x-k8s.io/queue-name]",
                  pod + "metadata.labels[kueue.x-k8s.io/podset]",
                  pod + "metadata.annotations[kueue.x-k8s.io/workload]",
                  pod + "metadata.annotations[kueue.x-k8s.io/podset-unconstrained-topology]",
                  pod + "spec.schedulingGates[kueue.x-k8s.io/topology]",
                  pod + "spec.nodeSelector[nvidia.com/gpu.present]"));
  // The toleration the runtime set, which the live object shows changed, is never folded.
  EXPECT_THAT(differences_of(render, live),
              ElementsAre("changed " + pod + "spec.tolerations[0].operator: Equal -> Exists",
                          "removed " + pod + "spec.tolerations[0].value: true -> "));
}

// A render, and the same object live (a uid) with `extra` merged into its spec.
std::pair<YAML::Node, YAML::Node> render_and_live(const std::string& render_spec,
                                                  const std::string& live_spec,
                                                  const std::string& live_metadata = "") {
  return {YAML::Load("metadata: {name: js}\nspec:\n" + render_spec),
          YAML::Load("metadata: {name: js, uid: u" + live_metadata + "}\nspec:\n" + live_spec)};
}

TEST(HideDefaultedFields, OnlyWhatTheRenderLacksAndOnlyTheDefaultValue) {
  const std::string job = "  replicatedJobs:\n  - name: w\n    template:\n      spec:\n";
  // Absent from the render, the default live: folded.
  auto [render, live] = render_and_live(job, job + "        completionMode: Indexed\n");
  EXPECT_THAT(paths_of(hide_server_fields(render, live).defaulted),
              ElementsAre("spec.replicatedJobs[w].template.spec.completionMode"));
  EXPECT_THAT(diff_trees(render, live), IsEmpty());
  // Another value than the default is no default: reported.
  std::tie(render, live) = render_and_live(job, job + "        completionMode: NonIndexed\n");
  EXPECT_THAT(hide_server_fields(render, live).defaulted, IsEmpty());
  EXPECT_EQ(diff_trees(render, live).size(), 1u);
  // A value the render set, changed live: reported, even to the default.
  std::tie(render, live) = render_and_live(job + "        completionMode: NonIndexed\n",
                                           job + "        completionMode: Indexed\n");
  EXPECT_THAT(hide_server_fields(render, live).defaulted, IsEmpty());
  EXPECT_EQ(diff_trees(render, live).size(), 1u);
  std::tie(render, live) = render_and_live("  suspend: true\n", "  suspend: false\n");
  EXPECT_THAT(hide_server_fields(render, live).defaulted, IsEmpty());
  EXPECT_EQ(diff_trees(render, live).size(), 1u);
  // A failure policy rule named by position.
  std::tie(render, live) = render_and_live(
      "  failurePolicy:\n    rules: [{action: FailJobSet}, {name: mine, action: RestartJobSet}]\n",
      "  failurePolicy:\n    restartStrategy: Recreate\n    rules: [{name: failurePolicyRule0, "
      "action: FailJobSet}, {name: mine, action: RestartJobSet}]\n");
  EXPECT_THAT(
      paths_of(hide_server_fields(render, live).defaulted),
      ElementsAre("spec.failurePolicy.rules[0].name", "spec.failurePolicy.restartStrategy"));
  EXPECT_THAT(diff_trees(render, live), IsEmpty());
  std::tie(render, live) = render_and_live(
      "  failurePolicy:\n    rules: [{action: FailJobSet}, {action: RestartJobSet}]\n",
      "  failurePolicy:\n    rules: [{name: failurePolicyRule1, action: FailJobSet}, "
      "{name: failurePolicyRule0, action: RestartJobSet}]\n");
  EXPECT_THAT(hide_server_fields(render, live).defaulted, IsEmpty()) << "not their positions";
}

TEST(HideDefaultedFields, TwoRendersOrTwoLiveObjectsFoldNothing) {
  YAML::Node a = YAML::Load("metadata: {name: js}\nspec: {}\n");
  YAML::Node b = YAML::Load("metadata: {name: js}\nspec: {suspend: false}\n");
  EXPECT_THAT(hide_server_fields(a, b).defaulted, IsEmpty()) << "two renders";
  EXPECT_EQ(diff_trees(a, b).size(), 1u);
  a = YAML::Load("metadata: {name: js, uid: u1}\nspec: {}\n");
  b = YAML::Load("metadata: {name: js, uid: u2}\nspec: {suspend: false}\n");
  EXPECT_THAT(hide_server_fields(a, b).defaulted, IsEmpty()) << "two live objects";
  EXPECT_EQ(diff_trees(a, b).size(), 1u);
  // The live side may be A.
  a = YAML::Load("metadata: {name: js, resourceVersion: '7'}\nspec: {suspend: false}\n");
  b = YAML::Load("metadata: {name: js}\nspec: {}\n");
  EXPECT_THAT(paths_of(hide_server_fields(a, b).defaulted), ElementsAre("spec.suspend"));
  EXPECT_THAT(diff_trees(a, b), IsEmpty());
}

TEST(HideDefaultedFields, AdmissionFieldsOnlyWhereKueueAdmittedThePodTemplate) {
  const std::string job =
      "  replicatedJobs:\n  - name: w\n    template:\n      spec:\n        template:\n";
  const std::string added =
      "          spec:\n            nodeSelector: {pool: a}\n"
      "            tolerations: [{key: google.com/tpu, operator: Exists}]\n";
  const std::string podset = "          metadata: {labels: {kueue.x-k8s.io/podset: w}}\n";
  // Without Kueue's podset label on the live template, a toleration or a node selector the render
  // lacks is the user's change (a newer render applied), not Kueue's: reported.
  auto [render, live] = render_and_live(job, job + added);
  EXPECT_THAT(hide_server_fields(render, live).defaulted, IsEmpty());
  EXPECT_THAT(diff_trees(render, live), ::testing::Not(IsEmpty()));
  // With it, Kueue admitted the pod set and wrote its flavor's selector and tolerations there.
  std::tie(render, live) = render_and_live(job, job + podset + added);
  const std::string pod = "spec.replicatedJobs[w].template.spec.template.";
  EXPECT_THAT(paths_of(hide_server_fields(render, live).defaulted),
              ElementsAre(pod + "metadata.labels[kueue.x-k8s.io/podset]",
                          pod + "spec.nodeSelector[pool]", pod + "spec.tolerations[0]"));
  EXPECT_THAT(diff_trees(render, live), IsEmpty()) << "emptied maps and lists go too";
  // The podset label names the replicated job, or it is no Kueue's.
  std::tie(render, live) =
      render_and_live(job, job + "          metadata: {labels: {kueue.x-k8s.io/podset: x}}\n");
  EXPECT_THAT(hide_server_fields(render, live).defaulted, IsEmpty());
  // A toleration appended to the render's own: only the new one.
  std::tie(render, live) = render_and_live(
      job + "          spec: {tolerations: [{key: a, operator: Exists}]}\n",
      job + podset +
          "          spec: {tolerations: [{key: a, operator: Exists}, {key: b, operator: "
          "Exists}]}\n");
  EXPECT_THAT(
      paths_of(hide_server_fields(render, live).defaulted),
      ElementsAre(pod + "metadata.labels[kueue.x-k8s.io/podset]", pod + "spec.tolerations[1]"));
  EXPECT_THAT(diff_trees(render, live), IsEmpty());
  // `suspend: true` is Kueue holding a JobSet it manages (its queue label) until admission.
  std::tie(render, live) =
      render_and_live("  replicatedJobs: []\n", "  replicatedJobs: []\n  suspend: true\n",
                      ", labels: {kueue.x-k8s.io/queue-name: q}");
  YAML::Node render_labels = YAML::Load("{kueue.x-k8s.io/queue-name: q}");
  render["metadata"]["labels"] = render_labels;
  EXPECT_THAT(paths_of(hide_server_fields(render, live).defaulted), ElementsAre("spec.suspend"));
  std::tie(render, live) =
      render_and_live("  replicatedJobs: []\n", "  replicatedJobs: []\n  suspend: true\n");
  EXPECT_THAT(hide_server_fields(render, live).defaulted, IsEmpty()) << "no Kueue: reported";
}

TEST(DefaultedFieldRules, EveryRuleIsInTheDocsTable) {
  // docs/diff-renders.md lists the recognised fields, one table row each: `path` | value | why.
  std::string docs = read_file(test::testdata("../docs/diff-renders.md"));
  ASSERT_FALSE(defaulted_field_rules().empty());
  for (const DefaultedFieldRule& rule : defaulted_field_rules()) {
    std::string row = "| `" + std::string(rule.path) + "` | " + std::string(rule.value) + " | " +
                      std::string(rule.reason) + " |";
    EXPECT_NE(docs.find(row), std::string::npos) << "docs/diff-renders.md lacks the row " << row;
  }
}

}  // namespace
}  // namespace rtb::k8s
