// Tests of diff-renders' library side: document matching (names, roles, renames), the
// --expect-bench classification (every knob allowed, tampered benches refused), the filter and the
// writers (diff_report.h), and diff_trees' handling of repeated keys.
#include "rtb/bench/diff_render.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "bench/render_options_util.h"
#include "rtb/base/error.h"
#include "rtb/base/io.h"
#include "rtb/bench/diff_report.h"
#include "rtb/bench/render.h"
#include "rtb/k8s/diff.h"
#include "rtb/k8s/yaml.h"
#include "test_util.h"

namespace rtb::bench {
namespace {

using test::what_of;
using testing_util::kClient;

std::string fixture_text() { return read_file(RTB_TESTDATA_DIR "/launch_dryrun.txt"); }
k8s::DryRun parse(const std::string& text, const std::string& name = "test") {
  return k8s::parse_dryrun(text, name);
}

RenderOptions bench_options(const std::string& name = "abtest-bench") {
  RenderOptions o;
  o.name = name;
  o.driver_source = "print('driver')\n";
  o.tool_version = "test";
  return o;
}

std::string render_yaml(const RenderOptions& options) {
  k8s::DryRun e2e = parse(fixture_text(), "launch_dryrun.txt");
  return render_bench(e2e, options).yaml;
}

std::string replace_once(std::string text, const std::string& from, const std::string& to) {
  std::size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

ExpectBenchResult expect_bench(const std::string& bench_yaml) {
  k8s::DryRun e2e = parse(fixture_text(), "launch_dryrun.txt");
  k8s::DryRun bench = parse(bench_yaml, "bench.yaml");
  return check_expect_bench(e2e, bench, k8s::RoleMains{});
}

std::vector<const BenchDifference*> unexpected(const ExpectBenchResult& result) {
  std::vector<const BenchDifference*> out;
  for (const BenchDifference& d : result.differences) {
    if (!d.allowed) out.push_back(&d);
  }
  return out;
}

std::string describe(const ExpectBenchResult& result) {
  std::string out;
  for (const BenchDifference& d : result.differences) {
    out += std::string(d.allowed ? bench_change_id(*d.allowed) : "UNEXPECTED") + " " +
           d.difference.path + ": " + d.difference.old_value.substr(0, 80) + " -> " +
           d.difference.new_value.substr(0, 80) + " " + d.why + "\n";
  }
  return out;
}

// --- names -----------------------------------------------------------------------------------

TEST(ReplaceName, WholeNamesAndDerivedNamesOnly) {
  EXPECT_EQ(replace_name("abtest-train", "abtest-train", "b"), "b");
  EXPECT_EQ(replace_name("--worker_id=abtest-train", "abtest-train", "b"), "--worker_id=b");
  EXPECT_EQ(replace_name("abtest-train-proc-0", "abtest-train", "b"), "b-proc-0");
  EXPECT_EQ(replace_name("abtest-train:20000 abtest-train", "abtest-train", "b"), "b:20000 b");
  EXPECT_EQ(replace_name("abtest-train2", "abtest-train", "b"), "abtest-train2");
  EXPECT_EQ(replace_name("x-abtest-train", "abtest-train", "b"), "x-abtest-train");
  EXPECT_EQ(replace_name("my_abtest-train", "abtest-train", "b"), "my_abtest-train");
  EXPECT_EQ(replace_name("", "abtest-train", "b"), "");
}

TEST(ParseRename, OldEqualsNew) {
  Rename r = parse_rename("abtest-train=abtest-bench");
  EXPECT_EQ(r.from, "abtest-train");
  EXPECT_EQ(r.to, "abtest-bench");
  for (const char* bad : {"abtest", "=b", "a=", "a=b=c", ""}) {
    EXPECT_THROW(parse_rename(bad), Error) << bad;
  }
}

// --- documents ---------------------------------------------------------------------------------

TEST(DiffRenders, IdenticalInputsHaveNoDifferences) {
  k8s::DryRun a = parse(fixture_text()), b = parse(fixture_text());
  RenderDiff diff = diff_renders(a, b, {});
  EXPECT_EQ(diff.documents.size(), 3u);
  EXPECT_EQ(diff.differences(), 0u);
  for (const DocumentDiff& doc : diff.documents) {
    EXPECT_TRUE(doc.a_name && doc.b_name) << doc.label;
    EXPECT_GT(doc.a_line, 0u);
  }
  EXPECT_EQ(diff.documents[1].label, "abtest-train");
  EXPECT_EQ(diff.documents[1].a_line, 269u);  // the line after its `---`
}

TEST(DiffRenders, ARenamedDocumentIsPairedWhenItIsTheOnlyOneOfItsRole) {
  k8s::DryRun a = parse(fixture_text());
  k8s::DryRun b =
      parse(replace_once(fixture_text(), "\n  name: abtest-orch\n", "\n  name: orch-2\n"));
  RenderDiff diff = diff_renders(a, b, {});
  ASSERT_EQ(diff.documents.size(), 3u) << "the only orchestrator on each side: paired";
  EXPECT_EQ(diff.documents[0].label, "abtest-orch");
  EXPECT_EQ(diff.documents[0].paired_by, Pairing::kOnlyOne);
  EXPECT_EQ(diff.documents[0].role, "orchestrator");
  EXPECT_EQ(diff.documents[0].b_name, "orch-2");
  ASSERT_EQ(diff.documents[0].differences.size(), 1u);
  EXPECT_EQ(diff.documents[0].differences[0].path, "metadata.name");
  EXPECT_EQ(diff.documents[0].differences[0].old_value, "abtest-orch");
  EXPECT_EQ(diff.documents[0].differences[0].new_value, "orch-2");
  EXPECT_EQ(diff.documents[1].paired_by, Pairing::kName);

  RenderDiffOptions options;
  options.renames.push_back(parse_rename("abtest-orch=orch-2"));
  diff = diff_renders(a, b, options);
  ASSERT_EQ(diff.documents.size(), 3u);
  EXPECT_EQ(diff.differences(), 0u) << "the name is all that changed";
  EXPECT_EQ(diff.documents[0].b_name, "orch-2");
  EXPECT_EQ(diff.documents[0].paired_by, Pairing::kRename);
}

TEST(DiffRenders, TwoCandidatesOnOneSideAreNotPaired) {
  // B holds two orchestrators named apart from A's: which one A's is cannot be told.
  std::string text = fixture_text();
  std::size_t train = text.find("\n---\n", text.find("\n  name: abtest-orch\n"));
  ASSERT_NE(train, std::string::npos);
  std::string orch = text.substr(0, train);
  std::string second = orch.substr(orch.find("\n---\n"));
  std::string b_text = replace_once(orch, "\n  name: abtest-orch\n", "\n  name: orch-2\n") +
                       replace_once(second, "\n  name: abtest-orch\n", "\n  name: orch-3\n");
  RenderDiff diff = diff_renders(parse(orch), parse(b_text), {});
  ASSERT_EQ(diff.documents.size(), 3u);
  for (const DocumentDiff& doc : diff.documents) {
    EXPECT_EQ(doc.paired_by, Pairing::kNone) << doc.label;
    EXPECT_EQ(doc.differences.size(), 1u) << doc.label;
  }
}

TEST(DiffRenders, TwoRunsOfOneExperimentArePairedByKind) {
  // kubernetes-sigs/jobset's preemption example (testdata/SOURCES.md): the same Workload,
  // PodGroup and JobSet under the names of a high- and a low-priority run.
  k8s::DryRun a = parse(
      read_file(test::testdata("diff_renders/jobset_wap_high-priority-jobset_at_c6b198a6.yaml")));
  k8s::DryRun b = parse(
      read_file(test::testdata("diff_renders/jobset_wap_low-priority-jobset_at_c6b198a6.yaml")));
  RenderDiff diff = diff_renders(a, b, {});
  ASSERT_EQ(diff.documents.size(), 3u);
  std::vector<std::string> labels, changes;
  for (const DocumentDiff& doc : diff.documents) {
    labels.push_back(doc.label);
    EXPECT_EQ(doc.paired_by, Pairing::kOnlyOne) << doc.label;
    EXPECT_EQ(doc.role, "") << doc.label;
    for (const k8s::Difference& d : doc.differences)
      changes.push_back(doc.label + ":" + d.path + ": " + d.old_value + " -> " + d.new_value);
  }
  EXPECT_THAT(labels,
              ::testing::ElementsAre("Workload/hp-abc", "PodGroup/hp-abc-workers-def", "hp-js"));
  EXPECT_THAT(changes, ::testing::ElementsAre(
                           "Workload/hp-abc:metadata.name: hp-abc -> lp-abc",
                           "Workload/hp-abc:spec.controllerRef.name: hp-js -> lp-js",
                           "PodGroup/hp-abc-workers-def:metadata.name: hp-abc-workers-def -> "
                           "lp-abc-workers-def",
                           "PodGroup/hp-abc-workers-def:spec.podGroupTemplateRef.workload."
                           "workloadName: hp-abc -> lp-abc",
                           "PodGroup/hp-abc-workers-def:spec.priorityClassName: high-priority -> "
                           "low-priority",
                           "hp-js:metadata.name: hp-js -> lp-js",
                           "hp-js:spec.replicatedJobs[rj].template.spec.template.spec."
                           "priorityClassName: high-priority -> low-priority",
                           "hp-js:spec.replicatedJobs[rj].template.spec.template.spec."
                           "schedulingGroup.podGroupName: hp-abc-workers-def -> "
                           "lp-abc-workers-def"));
  RenderReport report = make_render_report("a", "b", diff, DiffFilter{});
  EXPECT_EQ(report.outcome(), Outcome::kFail) << "a changed name is a difference";
  std::string text = format_render_text(report, {});
  EXPECT_THAT(text, HasSubstr("(paired JobSet hp-js (a:33) with lp-js (b:33): the only JobSet on "
                              "each side)\n"));
  EXPECT_THAT(text, HasSubstr("~ hp-js:metadata.name: hp-js -> lp-js\n"));
  std::string json = format_render_json(report);
  EXPECT_THAT(json, HasSubstr("\"b_name\": \"lp-js\", \"a_line\": 33, \"b_line\": 33, "
                              "\"differences\": 3, \"paired_by\": \"only-one\"}"));
}

TEST(DiffRenders, RenameAlsoEqualsNamesInsideValues) {
  std::string a_yaml = render_yaml(bench_options("bench-a"));
  std::string b_yaml = render_yaml(bench_options("bench-b"));
  k8s::DryRun a = parse(a_yaml), b = parse(b_yaml);
  RenderDiff plain = diff_renders(a, b, {});
  ASSERT_EQ(plain.documents.size(), 1u) << "different names, the only JobSet on each side";
  EXPECT_EQ(plain.documents[0].paired_by, Pairing::kOnlyOne);
  EXPECT_EQ(plain.documents[0].role, "trainer");
  EXPECT_THAT(plain.documents[0].differences, ::testing::Not(IsEmpty()));
  RenderDiffOptions options;
  options.renames.push_back({"bench-a", "bench-b"});
  RenderDiff renamed = diff_renders(a, b, options);
  ASSERT_EQ(renamed.documents.size(), 1u);
  EXPECT_THAT(renamed.documents[0].differences, IsEmpty());
}

TEST(DiffRenders, ByRoleMatchesTheBenchWithTheTrainer) {
  k8s::DryRun e2e = parse(fixture_text());
  k8s::DryRun bench = parse(render_yaml(bench_options()));
  RenderDiffOptions options;
  options.by_role = true;
  RenderDiff diff = diff_renders(e2e, bench, options);
  ASSERT_EQ(diff.documents.size(), 3u);
  EXPECT_EQ(diff.documents[0].label, "orchestrator");
  EXPECT_FALSE(diff.documents[0].b_name.has_value());
  EXPECT_EQ(diff.documents[1].label, "trainer");
  EXPECT_EQ(diff.documents[1].a_name, "abtest-train");
  EXPECT_EQ(diff.documents[1].b_name, "abtest-bench");
  EXPECT_EQ(diff.documents[1].paired_by, Pairing::kRole);
  EXPECT_EQ(diff.documents[2].label, "rollout");
  bool name_changed = false;
  for (const k8s::Difference& d : diff.documents[1].differences)
    name_changed |= d.path == "metadata.name" && d.new_value == "abtest-bench";
  EXPECT_TRUE(name_changed);
}

TEST(DiffRenders, FlagLevelDifferenceInsideTheStartupLine) {
  k8s::DryRun a = parse(fixture_text());
  k8s::DryRun b =
      parse(replace_once(fixture_text(), "ragged_buffer_factor=2.0", "ragged_buffer_factor=3"));
  RenderDiff diff = diff_renders(a, b, {});
  ASSERT_EQ(diff.differences(), 1u);
  const k8s::Difference& d = diff.documents[1].differences[0];
  EXPECT_EQ(d.path,
            std::string(kClient) + ".startup.env.MAXTEXT_EXTRA_FLAGS[ragged_buffer_factor]");
  EXPECT_EQ(d.old_value, "ragged_buffer_factor=2.0");
  EXPECT_EQ(d.new_value, "ragged_buffer_factor=3");
}

TEST(DiffRoles, BenchIsATrainerThroughItsTrainerArgv) {
  k8s::DryRun bench = parse(render_yaml(bench_options()));
  ASSERT_EQ(bench.documents.size(), 1u);
  EXPECT_EQ(k8s::role_of(k8s::JobSetView(bench.documents[0]), k8s::RoleMains{}),
            k8s::Role::kTrainer);
  k8s::RoleMains other;
  other.trainer = "some.other.main";
  EXPECT_EQ(k8s::role_of(k8s::JobSetView(bench.documents[0]), other), k8s::Role::kUnknown);
}

TEST(DiffDocuments, InputWithoutAJobSetFails) {
  k8s::DryRun deployment =
      k8s::parse_dryrun(read_file(RTB_TESTDATA_DIR "/diff_not_jobset.yaml"), "x.yaml");
  Error e = test::error_of([&] { diff_documents(deployment, k8s::RoleMains{}); });
  EXPECT_EQ(e.file(), "x.yaml");
  EXPECT_EQ(e.line(), 1);
  EXPECT_THAT(e.message(), HasSubstr("not a JobSet"));
  EXPECT_THAT(e.message(), HasSubstr("Deployment 'web'"));
  EXPECT_THROW(
      diff_documents(k8s::parse_dryrun("kubectl delete jobset x\n", "e"), k8s::RoleMains{}), Error);
}

TEST(DiffDocuments, AKubectlListIsItsItems) {
  // `kubectl get jobset -o yaml` without a name prints a List (kueue issue 8101, SOURCES.md).
  std::string name = "diff_renders/kueue_issue8101_kubectl_get_jobset.yaml";
  k8s::DryRun live = parse(read_file(test::testdata(name)), name);
  std::vector<DiffDocument> docs = diff_documents(live, k8s::RoleMains{});
  ASSERT_EQ(docs.size(), 1u);
  EXPECT_EQ(docs[0].kind, "JobSet");
  EXPECT_EQ(docs[0].name, "test-tas");
  EXPECT_EQ(docs[0].line, 3u) << "the item's own line, not the List's";
  EXPECT_EQ(k8s::JobSetView(docs[0].doc).job_names(), std::vector<std::string>{"node"});

  k8s::DryRun empty = parse("apiVersion: v1\nkind: List\nitems: []\n", "e.yaml");
  EXPECT_THAT(what_of([&] { diff_documents(empty, k8s::RoleMains{}); }),
              HasSubstr("e.yaml:1: not a JobSet: the input holds List '' (line 1)"));
}

TEST(DiffDocuments, AGeneratedNameIsItsPrefixUntilTheServerFillsItIn) {
  // Kueue's sample JobSet names itself by generateName only; the live object has both.
  k8s::DryRun render =
      parse(read_file(test::testdata("diff_renders/kueue_sample-jobset_at_3d8443b6.yaml")));
  k8s::DryRun live =
      parse(read_file(test::testdata("diff_renders/kueue_issue7649_kubectl_get_jobset.yaml")));
  EXPECT_EQ(diff_documents(render, k8s::RoleMains{})[0].name, "sleep-job-");
  EXPECT_EQ(diff_documents(live, k8s::RoleMains{})[0].name, "sleep-job-x5ffx");
  RenderDiff diff = diff_renders(render, live, {});
  ASSERT_EQ(diff.documents.size(), 1u);
  EXPECT_EQ(diff.documents[0].label, "sleep-job-");
  EXPECT_EQ(diff.documents[0].paired_by, Pairing::kOnlyOne);
  for (const k8s::Difference& d : diff.documents[0].differences)
    EXPECT_NE(d.path, "metadata.name") << "the name the server generated is no difference";
  EXPECT_THAT(diff.documents[0].hidden_server_fields, ::testing::Contains("metadata.name"));
}

// --- expect-bench ----------------------------------------------------------------------------

TEST(ExpectBench, PlainRenderPasses) {
  ExpectBenchResult result = expect_bench(render_yaml(bench_options()));
  EXPECT_EQ(result.e2e_name, "abtest-train");
  EXPECT_EQ(result.bench_name, "abtest-bench");
  EXPECT_EQ(result.unexpected(), 0u) << describe(result);
  std::vector<std::string> ids;
  for (const BenchDifference& d : result.differences) ids.emplace_back(bench_change_id(*d.allowed));
  for (const char* id : {"name", "gang-id", "max-restarts", "client-script", "client-program",
                         "driver-settings", "libtpu-workers"}) {
    EXPECT_NE(std::find(ids.begin(), ids.end(), id), ids.end()) << id << "\n" << describe(result);
  }
}

// The workers run the client's whole libtpu set plus their own extras (the seed's rule):
// --expect-bench allows a worker flag set to the client's value and nothing else there.
TEST(ExpectBench, WorkersTakeTheClientsLibtpuSetAndNothingElse) {
  // An e2e whose workers run another dvfs state than the client, and lack its DANGEROUS flag.
  std::string e2e_text = replace_once(fixture_text(), "--xla_tpu_dvfs_p_state=7 --megascale",
                                      "--xla_tpu_dvfs_p_state=6 --megascale");
  k8s::DryRun e2e = parse(e2e_text, "e2e.txt");
  RenderResult rendered = render_bench(e2e, bench_options());
  std::vector<std::string> worker_changes;
  for (const Change& c : rendered.changes) {
    if (c.knob == kWorkersLibtpuKnob) worker_changes.push_back(c.old_value + " -> " + c.new_value);
  }
  EXPECT_THAT(worker_changes,
              ::testing::ElementsAre(" -> --DANGEROUS_tpu_runtime_abi_verification_disabled=true",
                                     "--xla_tpu_dvfs_p_state=6 -> --xla_tpu_dvfs_p_state=7"));
  auto check = [&](const std::string& bench_yaml) {
    return check_expect_bench(e2e, parse(bench_yaml, "bench.yaml"), k8s::RoleMains{});
  };
  ExpectBenchResult result = check(rendered.yaml);
  EXPECT_EQ(result.unexpected(), 0u) << describe(result);
  // The DANGEROUS flag (client only) is a libtpu-workers change; the dvfs state, now alike in
  // client, proxy and workers, reads as a libtpu-flag change: both allowed.
  std::vector<std::string> workers;
  for (const BenchDifference& d : result.differences) {
    if (d.difference.path.find("pathways-worker") != std::string::npos)
      workers.emplace_back(bench_change_id(*d.allowed));
  }
  EXPECT_THAT(workers, ::testing::UnorderedElementsAre("libtpu-workers", "libtpu-flag"))
      << describe(result);

  struct Case {
    const char* what;
    std::string from, to;
    const char* why_part;
  };
  std::vector<Case> cases = {
      {"a worker flag neither the e2e's nor the client's", "--xla_tpu_dvfs_p_state=7 --megascale",
       "--xla_tpu_dvfs_p_state=5 --megascale", "the client has --xla_tpu_dvfs_p_state=7"},
      {"a worker-only flag changed", "--megascale_port=-1", "--megascale_port=7",
       "worker-only flag"},
      {"a worker flag the client does not set", "--xprof_compress_jftrace=true",
       "--xprof_compress_jftrace=true --xla_mine=1", "worker-only flag"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    ExpectBenchResult tampered = check(replace_once(rendered.yaml, c.from, c.to));
    std::vector<const BenchDifference*> bad = unexpected(tampered);
    ASSERT_EQ(bad.size(), 1u) << describe(tampered);
    EXPECT_THAT(bad[0]->difference.path, HasSubstr("pathways-worker].env[LIBTPU_INIT_ARGS]"));
    EXPECT_THAT(bad[0]->why, HasSubstr(c.why_part));
  }
}

// A worker entry the e2e lacks is created with the client's whole set, and allowed as that only.
TEST(ExpectBench, AWorkerLibtpuEntryCreatedWhereTheE2eHadNone) {
  std::string e2e_text = fixture_text();
  std::size_t name_at = e2e_text.find("- name: LIBTPU_INIT_ARGS");
  ASSERT_NE(name_at, std::string::npos);
  std::size_t value_end = e2e_text.find('\n', e2e_text.find("value:", name_at));
  std::size_t line_start = e2e_text.rfind('\n', name_at) + 1;
  e2e_text.erase(line_start, value_end + 1 - line_start);
  k8s::DryRun e2e = parse(e2e_text, "e2e.txt");
  RenderResult rendered = render_bench(e2e, bench_options());
  ExpectBenchResult result = check_expect_bench(e2e, parse(rendered.yaml), k8s::RoleMains{});
  EXPECT_EQ(result.unexpected(), 0u) << describe(result);
  bool created = false;
  for (const BenchDifference& d : result.differences)
    created |= d.allowed == BenchChange::kWorkersLibtpu &&
               d.difference.kind == k8s::Difference::Kind::kAdded;
  EXPECT_TRUE(created) << describe(result);
  // The same entry with one more flag is not the client's set.
  std::string tampered = replace_once(rendered.yaml, "--xla_tpu_dvfs_p_state=7\"",
                                      "--xla_tpu_dvfs_p_state=7 --xla_mine=1\"");
  ExpectBenchResult bad = check_expect_bench(e2e, parse(tampered), k8s::RoleMains{});
  EXPECT_EQ(bad.unexpected(), 1u) << describe(bad);
}

// The seed's default: a trainer without a gang-id label gets one, and --expect-bench allows it.
TEST(ExpectBench, AGangIdLabelAddedWhereTheTrainerHadNone) {
  std::string without_label = fixture_text();
  for (std::size_t at; (at = without_label.find("    scheduling.x-k8s.io/gang-id: \"abtest\"\n")) !=
                       std::string::npos;) {
    without_label.erase(at, std::string("    scheduling.x-k8s.io/gang-id: \"abtest\"\n").size());
  }
  // Once with other labels kept, once with no labels at all.
  std::string without_labels = replace_once(
      without_label,
      "  labels:\n    kueue.x-k8s.io/queue-name: multislice-queue\nspec:\n  coordinator",
      "spec:\n  coordinator");
  for (const std::string& text : {without_label, without_labels}) {
    k8s::DryRun e2e = parse(text, "e2e.txt");
    RenderResult rendered = render_bench(e2e, bench_options());
    EXPECT_EQ(
        k8s::yaml::scalar_at(rendered.bench["metadata"]["labels"], "scheduling.x-k8s.io/gang-id"),
        std::string("abtest-bench"));
    k8s::DryRun bench = parse(rendered.yaml, "bench.yaml");
    ExpectBenchResult result = check_expect_bench(e2e, bench, k8s::RoleMains{});
    EXPECT_EQ(result.unexpected(), 0u) << describe(result);
    bool gang_id = false;
    for (const BenchDifference& d : result.differences)
      gang_id |=
          d.allowed == BenchChange::kGangId && d.difference.kind == k8s::Difference::Kind::kAdded;
    EXPECT_TRUE(gang_id) << describe(result);
    // Another value, or another label added beside it, is not what render-bench adds.
    YAML::Node tampered = YAML::Clone(rendered.bench);
    tampered["metadata"]["labels"]["scheduling.x-k8s.io/gang-id"] = "someone-else";
    tampered["metadata"]["labels"]["extra"] = "x";
    k8s::DryRun tampered_bench = parse(k8s::yaml::emit(tampered), "bench.yaml");
    EXPECT_GT(check_expect_bench(e2e, tampered_bench, k8s::RoleMains{}).unexpected(), 0u);
  }
}

TEST(ExpectBench, EveryKnobPasses) {
  RenderOptions o = bench_options("ab-knobs");
  o.namespace_name = "other-ns";
  o.image = "us-docker.pkg.dev/example/other:1";
  o.output_prefix = "gs://b/bench";
  o.maxtext_flags = {"ragged_buffer_factor=2.75", "brand_new=1"};
  o.maxtext_replace = {"sa_block_q=2048"};
  o.libtpu_flags = {"--xla_tpu_scoped_vmem_limit_kib=65536", "--xla_brand_new=3"};
  o.trainer_args = {"--compute_logps_chunk_size=1024", "--new_flag"};
  o.trainer_args_removed = {"--profiler_steps"};
  o.orchestrator_args = {"--max_steps=3"};
  o.trainer_slice = "tpu7x:4x4x4";
  o.profile_window = std::make_pair(3, 2);
  ExpectBenchResult result = expect_bench(render_yaml(o));
  EXPECT_EQ(result.unexpected(), 0u) << describe(result);
  std::vector<std::string> ids;
  for (const BenchDifference& d : result.differences) ids.emplace_back(bench_change_id(*d.allowed));
  for (const char* id :
       {"namespace", "image", "maxtext-flag", "libtpu-flag", "argv-flag", "trainer-slice"}) {
    EXPECT_NE(std::find(ids.begin(), ids.end(), id), ids.end()) << id << "\n" << describe(result);
  }
}

TEST(ExpectBench, DumpHloIsAllowedInTheProxyArgsOnly) {
  RenderOptions o = bench_options();
  o.dump_hlo = true;
  std::string bench = render_yaml(o);
  ExpectBenchResult result = expect_bench(bench);
  EXPECT_EQ(result.unexpected(), 0u) << describe(result);
  std::size_t dumps = 0;
  for (const BenchDifference& d : result.differences)
    dumps += d.allowed && bench_change_id(*d.allowed) == "dump-hlo";
  EXPECT_EQ(dumps, 2u) << describe(result);
  // The same flag in the client's LIBTPU_INIT_ARGS is no --dump-hlo of render-bench's.
  std::string in_client =
      replace_once(bench, "LIBTPU_INIT_ARGS='", "LIBTPU_INIT_ARGS='--xla_dump_to=/tmp/x ");
  EXPECT_GT(expect_bench(in_client).unexpected(), 0u);
}

TEST(ExpectBench, LargerSliceAndV5pPass) {
  RenderOptions o = bench_options();
  o.trainer_slice = "tpu7x:8x8x8";
  EXPECT_EQ(expect_bench(render_yaml(o)).unexpected(), 0u);
  k8s::DryRun v5p = parse(read_file(RTB_TESTDATA_DIR "/launch_dryrun_v5p.txt"), "v5p.txt");
  RenderOptions p = bench_options();
  p.trainer_slice = "v5p:4x4x8";
  p.libtpu_flags = {"--xla_tpu_dvfs_p_state=5"};
  k8s::DryRun bench = parse(render_bench(v5p, p).yaml);
  ExpectBenchResult result = check_expect_bench(v5p, bench, k8s::RoleMains{});
  EXPECT_EQ(result.unexpected(), 0u) << describe(result);
}

struct Tamper {
  const char* what;
  std::string from, to;
  const char* path_part;  // in the one unexpected difference's path
  const char* why_part;   // in its why
};

TEST(ExpectBench, TamperedBenchesAreRefused) {
  RenderOptions o = bench_options();
  o.trainer_slice = "tpu7x:4x4x4";
  o.libtpu_flags = {"--xla_tpu_scoped_vmem_limit_kib=65536"};
  std::string bench = render_yaml(o);
  std::vector<Tamper> cases = {
      {"a priority class", "priorityClassName: medium", "priorityClassName: high",
       "priorityClassName", "not something render-bench changes"},
      {"maxRestarts not 0", "maxRestarts: 0", "maxRestarts: 5", "maxRestarts", "0"},
      {"completions that do not fit the slice", "completions: 16", "completions: 17",
       "pw-node].template.spec.completions", "gives 16"},
      {"a libtpu flag only in the worker", "--xla_tpu_dvfs_p_state=7 --megascale",
       "--xla_tpu_dvfs_p_state=6 --megascale", "pathways-worker].env[LIBTPU_INIT_ARGS]",
       "--xla_tpu_dvfs_p_state=7"},
      {"a quoted number made plain", "kueue.x-k8s.io/podset-slice-size: \"16\"",
       "kueue.x-k8s.io/podset-slice-size: 16", "podset-slice-size", "type"},
      {"a removed MAXTEXT item", "use_gdn_kernel=true ", "", "MAXTEXT_EXTRA_FLAGS[use_gdn_kernel]",
       "only to drop a checkpoint or the trainer's profiler"},
      {"an environment variable", "TF_CPP_MIN_LOG_LEVEL=0", "TF_CPP_MIN_LOG_LEVEL=1",
       "startup.env.TF_CPP_MIN_LOG_LEVEL", "not something"},
      {"a worker arg", "--server_port=29005", "--server_port=29006", "args[--server_port]",
       "not something"},
      {"a proxy arg that is no libtpu flag", "--sidecar_name=external", "--sidecar_name=other",
       "pathways-proxy].args[--sidecar_name]", "not in the client's LIBTPU_INIT_ARGS"},
  };
  for (const Tamper& t : cases) {
    SCOPED_TRACE(t.what);
    ExpectBenchResult result = expect_bench(replace_once(bench, t.from, t.to));
    std::vector<const BenchDifference*> bad = unexpected(result);
    ASSERT_EQ(bad.size(), 1u) << describe(result);
    EXPECT_THAT(bad[0]->difference.path, HasSubstr(t.path_part));
    EXPECT_THAT(bad[0]->why + " " + std::string(kind_name(bad[0]->difference.kind)),
                HasSubstr(t.why_part));
  }
}

// --weights random drops the checkpoint flags (weights); --profile-window turns the trainer's
// profiler off (profiler); both only as trainer_config.h decides.
TEST(ExpectBench, DroppedCheckpointAndTrainerProfilerAreRenderBenchChanges) {
  std::string text = read_file(RTB_TESTDATA_DIR "/launch_dryrun_weights_profiler.txt");
  k8s::DryRun e2e = parse(text, "launch_dryrun_weights_profiler.txt");
  RenderOptions o = bench_options();
  o.profile_window = std::make_pair(3, 2);
  std::string bench = render_bench(e2e, o).yaml;
  ExpectBenchResult result = check_expect_bench(e2e, parse(bench, "bench.yaml"), {});
  EXPECT_EQ(result.unexpected(), 0u) << describe(result);
  std::vector<std::string> weights, profiler;
  for (const BenchDifference& d : result.differences) {
    if (d.allowed == BenchChange::kWeights) weights.push_back(d.difference.path);
    if (d.allowed == BenchChange::kProfiler) profiler.push_back(d.difference.path);
  }
  std::string c(kClient);
  EXPECT_EQ(weights,
            (std::vector<std::string>{c + ".startup.env.MAXTEXT_EXTRA_FLAGS[load_parameters_path]",
                                      c + ".startup.env.MAXTEXT_CKPT",
                                      c + ".startup.argv[--maxtext_ckpt_path]"}))
      << describe(result);
  EXPECT_EQ(profiler, (std::vector<std::string>{c + ".startup.env.MAXTEXT_EXTRA_FLAGS[profiler]",
                                                c + ".startup.argv[--profiler_steps]"}))
      << describe(result);
  EXPECT_EQ(bench_change_id(BenchChange::kWeights), "weights");
  EXPECT_EQ(bench_change_id(BenchChange::kProfiler), "profiler");
  // Without PROFILE_WINDOW in the driver settings, dropping MaxText's profiler is not the render's.
  std::string no_window = replace_once(bench, "PROFILE_WINDOW=3:2", "PROFILE_WINDOX=3:2");
  result = check_expect_bench(e2e, parse(no_window, "bench.yaml"), {});
  std::vector<const BenchDifference*> bad = unexpected(result);
  ASSERT_EQ(bad.size(), 1u) << describe(result);
  EXPECT_THAT(bad[0]->why, HasSubstr("only where the driver traces"));
  // A removed MAXTEXT item that loads nothing is refused.
  std::string other = replace_once(bench, "use_gdn_kernel=true ", "");
  EXPECT_EQ(unexpected(check_expect_bench(e2e, parse(other, "bench.yaml"), {})).size(), 1u);
}

TEST(ExpectBench, ACheckpointDroppedFromTheClientsEnvListIsAWeightsChange) {
  // MAXTEXT_CKPT in the trainer client's env list (the one after its client script).
  std::string text = fixture_text();
  const std::string env = "              env:\n              # Injects the JobSet Name\n";
  std::size_t at = text.find(env, text.find("name: abtest-train"));
  ASSERT_NE(at, std::string::npos);
  text.insert(at + std::string("              env:\n").size(),
              "              - name: MAXTEXT_CKPT\n"
              "                value: gs://example-bucket/other/0/items\n");
  k8s::DryRun e2e = parse(text, "env.txt");
  std::string bench = render_bench(e2e, bench_options()).yaml;
  ExpectBenchResult result = check_expect_bench(e2e, parse(bench, "bench.yaml"), {});
  EXPECT_EQ(result.unexpected(), 0u) << describe(result);
  bool found = false;
  for (const BenchDifference& d : result.differences) {
    if (d.difference.path == std::string(kClient) + ".env[MAXTEXT_CKPT]") {
      found = true;
      EXPECT_EQ(d.allowed, BenchChange::kWeights);
    }
  }
  EXPECT_TRUE(found) << describe(result);
}

TEST(ExpectBench, NeedsOneBenchJobSet) {
  k8s::DryRun e2e = parse(fixture_text());
  // The e2e itself as "bench": three JobSets, one trainer: that trainer is compared, and matches.
  EXPECT_EQ(check_expect_bench(e2e, e2e, k8s::RoleMains{}).differences.size(), 0u);
  k8s::DryRun two =
      parse(render_yaml(bench_options("b-one")) + "---\n" + render_yaml(bench_options("b-two")));
  EXPECT_THROW(check_expect_bench(e2e, two, k8s::RoleMains{}), Error);
  k8s::DryRun no_trainer = parse(read_file(RTB_TESTDATA_DIR "/bad/no_trainer.txt"));
  EXPECT_THROW(check_expect_bench(no_trainer, e2e, k8s::RoleMains{}), Error);
}

// --- diff_trees: repeated keys -----------------------------------------------------------------

TEST(DiffTreesTypes, ResolvedTypesNotQuotes) {
  auto kinds = [](const char* a, const char* b) {
    std::string out;
    for (const k8s::Difference& d : k8s::diff_trees(YAML::Load(a), YAML::Load(b)))
      out += std::string(kind_name(d.kind)) + " " + d.old_value + " -> " + d.new_value + ";";
    return out;
  };
  EXPECT_EQ(kinds("a: abc", "a: \"abc\""), "") << "the same string";
  EXPECT_EQ(kinds("a: \"4x4x8\"", "a: 4x4x4"), "changed 4x4x8 -> 4x4x4;") << "strings both";
  EXPECT_EQ(kinds("a: \"4\"", "a: 5"), "type-changed \"4\" -> 5;");
  EXPECT_EQ(kinds("a: \"yes\"", "a: yes"), "type-changed \"yes\" -> yes;");
  EXPECT_EQ(kinds("a: 1", "a: 2"), "changed 1 -> 2;");
  EXPECT_EQ(kinds("a: ~", "a: \"\""), "type-changed null -> ;") << "a null node, a string";
}

TEST(DiffTreesRepeatedKeys, OneChangeIsReportedOnce) {
  std::vector<k8s::Difference> found =
      k8s::diff_trees(YAML::Load("p: a\nq: 1\np: b\n"), YAML::Load("p: a\nq: 1\np: c\n"));
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].path, "p");
  EXPECT_EQ(found[0].new_value, "c");
  EXPECT_THAT(k8s::diff_trees(YAML::Load("p: a\np: b\n"), YAML::Load("p: b\n")), IsEmpty())
      << "the last of repeated keys is the value";
}

// --- filter ----------------------------------------------------------------------------------

TEST(Glob, WildcardsAndLiteralBrackets) {
  EXPECT_TRUE(glob_match("metadata.name", "metadata.name"));
  EXPECT_FALSE(glob_match("metadata.name", "metadata.names"));
  EXPECT_TRUE(glob_match("*", ""));
  EXPECT_TRUE(glob_match("*.args[--xla_*]", "x.initContainers[pathways-proxy].args[--xla_a]"));
  EXPECT_FALSE(glob_match("*.args[--xla_*]", "x.args[--sidecar_name]"));
  EXPECT_TRUE(glob_match("a?c", "abc"));
  EXPECT_FALSE(glob_match("a?c", "ac"));
  EXPECT_TRUE(glob_match("a\\*c", "a*c"));
  EXPECT_FALSE(glob_match("a\\*c", "abc"));
  EXPECT_TRUE(glob_match("*a*b*c*", "xxaxxbxxcxx"));
  EXPECT_FALSE(glob_match("*a*b*c", "xxaxxbxxcxx"));
}

TEST(DiffFilter, IgnoreOnlyAncestorsAndDocuments) {
  DiffFilter filter;
  filter.ignore("metadata.labels");
  filter.ignore("abtest-roll:*");
  EXPECT_FALSE(filter.keep("abtest-train", "metadata.labels[gang]"));
  EXPECT_TRUE(filter.keep("abtest-train", "metadata.labelsx"));
  EXPECT_FALSE(filter.keep("abtest-roll", "spec.x"));
  EXPECT_FALSE(filter.keep("abtest-roll", "")) << "a whole document";
  EXPECT_TRUE(filter.keep("abtest-train", "spec.x"));
  DiffFilter only;
  only.only("*MAXTEXT_EXTRA_FLAGS");
  EXPECT_TRUE(only.keep("t", "a.startup.env.MAXTEXT_EXTRA_FLAGS[x]"));
  EXPECT_FALSE(only.keep("t", "a.startup.env.LIBTPU_INIT_ARGS[x]"));
}

TEST(DiffFilter, IgnoreFile) {
  std::string path = ::testing::TempDir() + "/diff_render_ignore.txt";
  {
    std::ofstream f(path);
    f << "# accepted differences\n\n  metadata.name  \n*[--worker_id]\r\n";
  }
  DiffFilter filter;
  filter.ignore_file(path);
  EXPECT_FALSE(filter.keep("t", "metadata.name"));
  EXPECT_FALSE(filter.keep("t", "x.startup.argv[--worker_id]"));
  EXPECT_TRUE(filter.keep("t", "x.startup.argv[--port]"));
  std::remove(path.c_str());
  EXPECT_THROW(filter.ignore_file(path), Error);
}

// --- writers ---------------------------------------------------------------------------------

TEST(DiffArea, Areas) {
  EXPECT_EQ(diff_area("metadata.labels[x]"), "metadata.labels");
  EXPECT_EQ(diff_area("spec.failurePolicy.maxRestarts"), "spec.failurePolicy");
  EXPECT_EQ(diff_area(""), "(document)");
  EXPECT_EQ(diff_area("spec.replicatedJobs[pw-node].template.spec.completions"),
            "replicatedJobs[pw-node].completions");
  EXPECT_EQ(diff_area(std::string(kClient) + ".startup.argv[--mesh_fsdp]"),
            "replicatedJobs[proc].containers[main].startup.argv");
  EXPECT_EQ(diff_area(std::string(kClient) + ".startup.env.MAXTEXT_EXTRA_FLAGS[x]"),
            "replicatedJobs[proc].containers[main].startup.env.MAXTEXT_EXTRA_FLAGS");
  EXPECT_EQ(diff_area(std::string(kClient) + ".startup.env.TPU_MIN_LOG_LEVEL"),
            "replicatedJobs[proc].containers[main].startup.env");
  EXPECT_EQ(diff_area("spec.replicatedJobs[pw-node].template.spec.template.spec.containers[w]"
                      ".env[LIBTPU_INIT_ARGS].value[--xla_a]"),
            "replicatedJobs[pw-node].containers[w].env[LIBTPU_INIT_ARGS]");
}

TEST(FormatRenderText, FlagValuesMultiLineValuesAndColour) {
  RenderDiff diff;
  DocumentDiff doc;
  doc.label = "abtest-train";
  doc.kind = "JobSet";
  doc.differences = {
      {k8s::Difference::Kind::kChanged, "x.LIBTPU_INIT_ARGS[--xla_foo]", "--xla_foo=1",
       "--xla_foo=2"},
      {k8s::Difference::Kind::kAdded, "x.LIBTPU_INIT_ARGS[--xla_bar]", "", "--xla_bar=3"},
      {k8s::Difference::Kind::kRemoved, "x.script", "line 1\nline 2\nline 3\n", ""},
      {k8s::Difference::Kind::kTypeChanged, "x.n", "\"4\"", "4"},
  };
  diff.documents.push_back(doc);
  RenderReport report = make_render_report("a.txt", "b.txt", diff, DiffFilter{});
  EXPECT_EQ(format_render_text(report, {}),
            "~ abtest-train:x.LIBTPU_INIT_ARGS[--xla_foo]: 1 -> 2\n"
            "+ abtest-train:x.LIBTPU_INIT_ARGS[--xla_bar]: --xla_bar=3\n"
            "- abtest-train:x.script: line 1... (3 lines)\n"
            "! abtest-train:x.n: \"4\" -> 4\n");
  std::string colored = format_render_text(report, {true, false});
  EXPECT_THAT(colored, HasSubstr("\033[33m~ abtest-train:x.LIBTPU_INIT_ARGS[--xla_foo]"));
  EXPECT_THAT(colored, HasSubstr("\033[32m+ "));
  EXPECT_THAT(colored, HasSubstr("\033[0m\n"));
  EXPECT_EQ(report.outcome(), Outcome::kFail);
  EXPECT_THAT(
      format_render_stat(report),
      HasSubstr("4 differences in 1 document: 1 added, 1 removed, 1 changed, 1 type-changed"));

  DiffFilter filter;
  filter.ignore("x.LIBTPU_INIT_ARGS");
  RenderReport filtered = make_render_report("a.txt", "b.txt", diff, filter);
  EXPECT_EQ(filtered.ignored, 2u);
  EXPECT_EQ(filtered.differences.size(), 2u);
  EXPECT_THAT(format_render_json(filtered), HasSubstr("\"ignored\": 2"));
  // What reading the inputs noted: an empty list, or each in the one JSON shape.
  EXPECT_THAT(format_render_json(filtered), HasSubstr("\"diagnostics\": [],"));
  filtered.diagnostics = {{Severity::kNote, "a.txt:7", "key 'x' repeated"}};
  EXPECT_THAT(format_render_json(filtered),
              HasSubstr("{\"severity\": \"note\", \"where\": \"a.txt:7\", \"message\": \"key 'x' "
                        "repeated\"}"));
}

TEST(FormatRenderText, AnAddedEmptyCollectionIsOneLine) {
  // A live object's `metadata: {}` against a render without it: no leaf to list below.
  RenderDiff diff;
  DocumentDiff doc;
  doc.label = "js";
  doc.kind = "JobSet";
  YAML::Node empty_map(YAML::NodeType::Map), empty_list(YAML::NodeType::Sequence);
  doc.differences = {
      {k8s::Difference::Kind::kAdded, "spec.template.metadata", "", "{}", empty_map},
      {k8s::Difference::Kind::kRemoved, "spec.tolerations", "[]", "", empty_list},
  };
  diff.documents.push_back(doc);
  RenderReport report = make_render_report("a.txt", "b.txt", diff, DiffFilter{});
  EXPECT_EQ(format_render_text(report, {}),
            "+ js:spec.template.metadata: {}\n- js:spec.tolerations: []\n");
}

TEST(FormatRenderText, ExpectBenchListsOnlyUnexpectedUnlessAsked) {
  RenderOptions o = bench_options();
  std::string bench =
      replace_once(render_yaml(o), "priorityClassName: medium", "priorityClassName: high");
  ExpectBenchResult result = expect_bench(bench);
  RenderReport report = make_expect_bench_report("e2e.txt", "bench.yaml", result, DiffFilter{});
  EXPECT_EQ(report.outcome(), Outcome::kFail);
  std::string text = format_render_text(report, {});
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
  EXPECT_THAT(text, HasSubstr("~ trainer:spec.replicatedJobs[proc].template.spec.template.spec."
                              "priorityClassName: medium -> high  [unexpected: "));
  std::string all = format_render_text(report, {false, true});
  EXPECT_THAT(all,
              HasSubstr("~ trainer:metadata.name: abtest-train -> abtest-bench  [allowed: name]"));
  DiffFilter filter;
  filter.ignore("*priorityClassName");
  EXPECT_EQ(make_expect_bench_report("e", "b", result, filter).outcome(), Outcome::kPass);
}

// The verdict diff-renders exits with: kPass same (or, with --expect-bench, only allowed
// differences), kFail otherwise; input that cannot be judged throws (kError in the tool).
TEST(RenderReportOutcome, PassFailAndError) {
  k8s::DryRun e2e = parse(fixture_text(), "launch_dryrun.txt");
  k8s::DryRun bench = parse(render_yaml(bench_options()), "bench.yaml");
  EXPECT_EQ(make_render_report("a", "b", diff_renders(e2e, e2e, {}), DiffFilter{}).outcome(),
            Outcome::kPass);
  RenderDiffOptions by_role;
  by_role.by_role = true;
  RenderDiff changed = diff_renders(e2e, bench, by_role);
  EXPECT_EQ(make_render_report("a", "b", changed, DiffFilter{}).outcome(), Outcome::kFail);
  DiffFilter everything;
  everything.ignore("*");
  EXPECT_EQ(make_render_report("a", "b", changed, everything).outcome(), Outcome::kPass);

  ExpectBenchResult allowed = check_expect_bench(e2e, bench, k8s::RoleMains{});
  EXPECT_EQ(make_expect_bench_report("a", "b", allowed, DiffFilter{}).outcome(), Outcome::kPass);
  std::string tampered = replace_once(render_yaml(bench_options()), "priorityClassName: medium",
                                      "priorityClassName: high");
  EXPECT_EQ(make_expect_bench_report("a", "b", expect_bench(tampered), DiffFilter{}).outcome(),
            Outcome::kFail);
  k8s::DryRun no_trainer = parse("kubectl delete jobset x\n", "e");
  EXPECT_THROW(check_expect_bench(no_trainer, bench, k8s::RoleMains{}), Error);
}

}  // namespace
}  // namespace rtb::bench
