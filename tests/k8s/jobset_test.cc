#include "rtb/k8s/jobset.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <tuple>
#include <vector>

#include "rtb/base/error.h"
#include "rtb/base/io.h"
#include "rtb/k8s/dryrun.h"
#include "rtb/k8s/yaml.h"
#include "test_util.h"

namespace rtb::k8s {
namespace {

std::vector<std::string> words_of(const std::string& text) {
  std::vector<std::string> words;
  std::size_t pos = 0;
  while ((pos = text.find_first_not_of(' ', pos)) != std::string::npos) {
    std::size_t end = text.find(' ', pos);
    if (end == std::string::npos) end = text.size();
    words.push_back(text.substr(pos, end - pos));
    pos = end;
  }
  return words;
}

std::string block_text(std::string_view script, const StartupBlock& block) {
  return std::string(script.substr(block.begin, block.end - block.begin));
}

std::string startup_error(std::string_view script) {
  return test::error_of([&] { find_startup_block(script); }).message();
}

struct Loaded {
  std::string path;
  std::string text;
  DryRun dryrun;
};

Loaded load(const std::string& name) {
  Loaded loaded;
  loaded.path = testdata(name);
  loaded.text = read_file(loaded.path);
  loaded.dryrun = parse_dryrun(loaded.text, loaded.path);
  return loaded;
}

const std::string kTrainerMain = "tunix.experimental.examples.common.run_trainer_node.main";
const std::string kOrchestratorMain =
    "tunix.experimental.examples.deepswe_dist.run_deepswe_dist.main";
const std::string kRolloutMain = "tunix.experimental.examples.common.run_rollout_node.main";

// --- find_startup_block
// ---------------------------------------------------------------------------

TEST(FindStartupBlock, RealTrainerScript) {
  Loaded main = load("launch_dryrun.txt");
  ASSERT_EQ(main.dryrun.documents.size(), 3u);
  JobSetView trainer(main.dryrun.documents[1]);
  auto container = trainer.container("main");
  ASSERT_TRUE(container.has_value());
  auto script = bash_script_node(container->node);
  ASSERT_TRUE(script.has_value());
  StartupBlock block = find_startup_block(script->Scalar());
  // The block is the file's line 456 without the literal block's 18-space indentation.
  std::vector<std::string> lines = lines_of(main.text);
  EXPECT_EQ(block_text(script->Scalar(), block), lines[455].substr(18));
  std::vector<std::string> script_lines = lines_of(script->Scalar());
  ASSERT_LT(block.first_line, script_lines.size());
  EXPECT_EQ(script_lines[block.first_line], lines[455].substr(18));
  EXPECT_EQ(script_lines[block.first_line - 1], "(");
  EXPECT_EQ(script_lines[block.first_line + 1], ") & PID=$!");
}

TEST(FindStartupBlock, IndentedMarkersAndTrailingBlanks) {
  std::string script = "echo a\n    (   \n  FOO=1 python x\n    ) & PID=$!\nwait $PID\n";
  StartupBlock block = find_startup_block(script);
  EXPECT_EQ(block_text(script, block), "  FOO=1 python x");
  EXPECT_EQ(block.first_line, 2u);
}

TEST(FindStartupBlock, SeveralLines) {
  std::string script = "(\nA=1 \\\n  python x \\\n  --k=v\n) & PID=$!\n";
  StartupBlock block = find_startup_block(script);
  EXPECT_EQ(block_text(script, block), "A=1 \\\n  python x \\\n  --k=v");
  EXPECT_EQ(block.first_line, 1u);
}

TEST(FindStartupBlock, CrlfScript) {
  std::string script = "echo a\r\n(\r\nFOO=1 python x\r\n) & PID=$!\r\nwait\r\n";
  StartupBlock block = find_startup_block(script);
  std::string text = block_text(script, block);
  EXPECT_EQ(text.rfind("FOO=1 python x", 0), 0u) << text;
  EXPECT_THAT(text, Not(HasSubstr("PID")));
  EXPECT_THAT(text, Not(HasSubstr("(")));
  EXPECT_EQ(block.first_line, 2u);
}

TEST(FindStartupBlock, AtTheEndWithoutNewline) {
  std::string script = "(\nFOO=1 python x\n) & PID=$!";
  EXPECT_EQ(block_text(script, find_startup_block(script)), "FOO=1 python x");
}

TEST(FindStartupBlock, EmptyBlock) {
  std::string script = "(\n) & PID=$!\n";
  StartupBlock block = find_startup_block(script);
  EXPECT_EQ(block_text(script, block), "");
}

TEST(FindStartupBlock, UnclosedBlockThrows) {
  EXPECT_THAT(startup_error("echo a\n(\nFOO=1 python x\nwait\n"), HasSubstr("never closed"));
  EXPECT_THAT(startup_error("(\n"), HasSubstr("never closed"));
}

TEST(FindStartupBlock, NoBlockThrows) {
  EXPECT_THAT(startup_error("echo a\nFOO=1 python x & PID=$!\n"), HasSubstr("no startup block"));
  EXPECT_THAT(startup_error(""), HasSubstr("no startup block"));
  // A closing line without an opening one is not a block.
  EXPECT_THAT(startup_error("python x\n) & PID=$!\n"), HasSubstr("no startup block"));
  // `(` must be alone on its line.
  EXPECT_THAT(startup_error("( python x\n) & PID=$!\n"), HasSubstr("no startup block"));
}

// --- containers
// -----------------------------------------------------------------------------------

using ContainerRow = std::tuple<std::string, bool, std::string>;  // job, init, name

std::vector<ContainerRow> rows(const JobSetView& view) {
  std::vector<ContainerRow> out;
  for (const ContainerRef& ref : view.containers()) out.emplace_back(ref.job, ref.init, ref.name());
  return out;
}

TEST(JobSetContainers, DocumentOrderWithInitContainersBeforeAndAfter) {
  Loaded main = load("launch_dryrun.txt");
  JobSetView trainer(main.dryrun.documents.at(1));
  EXPECT_THAT(
      rows(trainer),
      ElementsAre(ContainerRow{"proc", true, "pathways-rm"},
                  ContainerRow{"proc", true, "pathways-proxy"}, ContainerRow{"proc", false, "main"},
                  ContainerRow{"pw-node", false, "pathways-worker"},
                  ContainerRow{"pw-node", true, "colocated-python-sidecar"}));
  EXPECT_THAT(trainer.job_names(), ElementsAre("proc", "pw-node"));
  EXPECT_EQ(trainer.name(), "abtest-train");
}

TEST(JobSetContainers, V5pHasNoInitContainers) {
  Loaded v5p = load("launch_dryrun_v5p.txt");
  JobSetView trainer(v5p.dryrun.documents.at(1));
  EXPECT_THAT(rows(trainer), ElementsAre(ContainerRow{"proc", false, "pathways-rm"},
                                         ContainerRow{"proc", false, "pathways-proxy"},
                                         ContainerRow{"proc", false, "main"},
                                         ContainerRow{"pw-node", false, "pathways-worker"}));
}

TEST(JobSetContainers, ContainerByName) {
  Loaded main = load("launch_dryrun.txt");
  JobSetView trainer(main.dryrun.documents.at(1));
  auto proxy = trainer.container("pathways-proxy");
  ASSERT_TRUE(proxy.has_value());
  EXPECT_TRUE(proxy->init);
  EXPECT_EQ(proxy->job, "proc");
  EXPECT_EQ(proxy->path(),
            "spec.replicatedJobs[proc].template.spec.template.spec.initContainers[pathways-proxy]");
  YAML::Node args = yaml::lookup(proxy->node, "args");
  ASSERT_TRUE(args.IsSequence());
  EXPECT_EQ(args.size(), 19u);
  EXPECT_EQ(args[args.size() - 1].Scalar(), "--sidecar_name=external");
  EXPECT_EQ(main.dryrun.documents[1].line_of(proxy->node), 388u);

  auto worker = trainer.container("pathways-worker");
  ASSERT_TRUE(worker.has_value());
  EXPECT_FALSE(worker->init);
  EXPECT_EQ(worker->path(),
            "spec.replicatedJobs[pw-node].template.spec.template.spec.containers[pathways-worker]");
  EXPECT_FALSE(trainer.container("nope").has_value());
  EXPECT_FALSE(trainer.container("").has_value());
}

TEST(JobSetContainers, ContainerNodeIsAReferenceIntoTheDocument) {
  Loaded main = load("launch_dryrun.txt");
  JobSetView trainer(main.dryrun.documents.at(1));
  auto proxy = trainer.container("pathways-proxy");
  ASSERT_TRUE(proxy.has_value());
  proxy->node["image"] = "example/changed:1";
  EXPECT_THAT(yaml::emit(main.dryrun.documents[1].root), HasSubstr("image: example/changed:1\n"));
}

TEST(JobSetContainers, PodSpecs) {
  Loaded main = load("launch_dryrun.txt");
  JobSetView trainer(main.dryrun.documents.at(1));
  YAML::Node worker_spec = trainer.pod_spec("pw-node");
  ASSERT_TRUE(worker_spec.IsMap());
  EXPECT_EQ(yaml::scalar_at(worker_spec, "restartPolicy"), std::optional<std::string>("OnFailure"));
  EXPECT_EQ(yaml::scalar_at(trainer.pod_spec("proc"), "restartPolicy"),
            std::optional<std::string>("Never"));
  EXPECT_FALSE(trainer.pod_spec("missing").IsDefined());
}

TEST(JobSetContainers, DocumentWithoutJobs) {
  DryRun dryrun = parse_dryrun("---\nkind: JobSet\nmetadata:\n  name: empty\n", "e.yaml");
  ASSERT_EQ(dryrun.documents.size(), 1u);
  JobSetView view(dryrun.documents[0]);
  EXPECT_TRUE(view.containers().empty());
  EXPECT_TRUE(view.job_names().empty());
  EXPECT_FALSE(view.process_main().has_value());
  EXPECT_EQ(role_of(view, RoleMains{}), Role::kUnknown);
  Error error = test::error_of([&] { view.client("e.yaml"); });
  EXPECT_EQ(error.file(), "e.yaml");
  EXPECT_EQ(error.line(), 2);
  EXPECT_THAT(error.message(), HasSubstr("empty"));
  EXPECT_THAT(error.message(), HasSubstr("no client container"));
}

// --- bash_script_node / process_main ----------------------------------------------------------

TEST(BashScriptNode, Forms) {
  auto script_of = [](const std::string& yaml_text) {
    auto node = bash_script_node(YAML::Load(yaml_text));
    return node ? node->Scalar() : std::string("<none>");
  };
  // A container and the script bash_script_node finds in it.
  std::pair<const char*, const char*> cases[] = {
      {"command: [bash, -c, echo hi]\n", "echo hi"},
      {"command: [/bin/bash, -c, x]\n", "x"},
      {"command: [sh, -c, x]\n", "x"},
      {"command: [/bin/sh, -c, x]\n", "x"},
      {"command: [bash, -lc, x]\n", "<none>"},
      {"command: [bash, -c]\n", "<none>"},
      // Arguments after the script are its $0, $1, ... (render-bench packs a large driver there).
      {"command: [bash, -c, x, y]\n", "x"},
      {"command: [bash, -c, x, bench-client, AAAA, BBBB]\n", "x"},
      {"command: [bash, -c, x, [y]]\n", "<none>"},
      {"command: [python, -c, x]\n", "<none>"},
      {"command: [bash, -c, [x]]\n", "<none>"},
      {"args: [bash, -c, x]\n", "<none>"},
      {"command: bash -c x\n", "<none>"},
  };
  for (const auto& [container, script] : cases)
    EXPECT_EQ(script_of(container), script) << container;
}

TEST(ProcessMain, FirstScriptThatNamesOne) {
  DryRun dryrun = parse_dryrun(
      "---\nkind: JobSet\nmetadata:\n  name: x\nspec:\n  replicatedJobs:\n  - name: a\n"
      "    template:\n      spec:\n        template:\n          spec:\n            containers:\n"
      "            - name: sidecar\n              command: [bash, -c, sleep infinity]\n"
      "            - name: main\n              command: [bash, -c, \"python -m m "
      "--process_main=my.module.main --k=v\"]\n",
      "f");
  ASSERT_EQ(dryrun.documents.size(), 1u);
  JobSetView view(dryrun.documents[0]);
  auto found = view.process_main();
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->first, "my.module.main");
  EXPECT_EQ(found->second.name(), "main");
}

// --- client()
// -------------------------------------------------------------------------------------

TEST(WrapperExports, NamesAndLinesOutsideTheStartupBlock) {
  Loaded main = load("launch_dryrun.txt");
  ClientCommand client = JobSetView(main.dryrun.documents.at(1)).client(main.path);
  std::vector<WrapperExport> found = wrapper_exports(client);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].name, "FT_REGISTERED_MARKER");
  EXPECT_EQ(found[0].line, 450u);
  EXPECT_THAT(std::string(main.dryrun.documents.at(1).input_line(450)),
              HasSubstr("export FT_REGISTERED_MARKER="));

  // Several names on a line, quoted values with blanks, exports after the block, and what is
  // inside the block (bash's own assignments there are the startup env) is not an export.
  client.script =
      "export A=1 B='x y' C\n"
      "  export   D=\"p q\"\n"
      "(\n"
      "  export E=1; python3 run.py\n"
      ") & PID=$!\n"
      "export F\n"
      "exported=1\n";
  client.block = find_startup_block(client.script);
  client.startup_line = 10 + client.block.first_line;  // the script starts on input line 10
  std::vector<std::pair<std::string, std::size_t>> got;
  for (const WrapperExport& e : wrapper_exports(client)) got.emplace_back(e.name, e.line);
  EXPECT_THAT(got, ElementsAre(std::pair<std::string, std::size_t>{"A", 10},
                               std::pair<std::string, std::size_t>{"B", 10},
                               std::pair<std::string, std::size_t>{"C", 10},
                               std::pair<std::string, std::size_t>{"D", 11},
                               std::pair<std::string, std::size_t>{"F", 15}));
}

TEST(JobSetClient, TrainerStartupOfTheMainFixture) {
  Loaded main = load("launch_dryrun.txt");
  JobSetView trainer(main.dryrun.documents.at(1));
  ClientCommand client = trainer.client(main.path);
  EXPECT_EQ(client.container.name(), "main");
  EXPECT_EQ(client.container.job, "proc");
  EXPECT_FALSE(client.container.init);
  EXPECT_EQ(client.startup_line, 456u);

  ASSERT_EQ(client.startup.env.size(), 30u);
  EXPECT_EQ(client.startup.env.front().name, "PYTHONUNBUFFERED");
  EXPECT_EQ(client.startup.env.front().value, "1");
  EXPECT_EQ(client.startup.env[2].name, "WEIGHT_SYNC_DISABLE_TIMEOUTS");
  EXPECT_EQ(client.startup.env[2].value, "1");
  EXPECT_EQ(client.startup.env.back().name, "ENABLE_PJRT_COMPATIBILITY");
  std::vector<std::string> names;
  for (const auto& assignment : client.startup.env) names.push_back(assignment.name);
  EXPECT_EQ(names[25], "ENABLE_MULTI_NUMA");
  EXPECT_EQ(client.startup.env[25].value, "");
  EXPECT_EQ(names[26], "LIBTPU_INIT_ARGS");
  EXPECT_EQ(words_of(client.startup.env[26].value).size(), 15u);
  EXPECT_EQ(words_of(client.startup.env[26].value).front(),
            "--DANGEROUS_tpu_runtime_abi_verification_disabled=true");
  EXPECT_EQ(names[27], "MAXTEXT_EXTRA_FLAGS");
  std::vector<std::string> maxtext = words_of(client.startup.env[27].value);
  ASSERT_EQ(maxtext.size(), 30u);
  EXPECT_EQ(maxtext.front(), "custom_mesh_and_rule=cp-as-ep");
  EXPECT_EQ(maxtext.back(), "fp8_moe_fake_quant=true");

  ASSERT_EQ(client.startup.words.size(), 3u + 58u);
  EXPECT_EQ(client.startup.words[0].value, "python");
  EXPECT_EQ(client.startup.words[1].value, "-m");
  EXPECT_EQ(client.startup.words[2].value, "tunix.experimental.distributed.runtime.main");
  EXPECT_EQ(client.startup.words[3].value, "--discovery_addrs=abtest-orch:20000");
  EXPECT_EQ(client.startup.words[5].value, "--process_main=" + kTrainerMain);
  EXPECT_EQ(client.startup.words[6].value, "--worker_id=abtest-train");
  EXPECT_EQ(client.startup.words.back().value, "--skip_first_n_profiler_steps=-1");
  std::vector<std::string> argv;
  for (const auto& word : client.startup.words) argv.push_back(word.value);
  EXPECT_THAT(argv, ::testing::Contains("--optimizer_chain_kwargs={'max_norm': 0.0625}"));
  EXPECT_THAT(
      argv, ::testing::Contains("--trainable_parameters_mask=^(?!.*routed_experts/gate/kernel).*"));

  // The script is command[2], and the startup line is where the file has it.
  EXPECT_EQ(client.script, client.script_node.Scalar());
  EXPECT_THAT(lines_of(main.text)[client.startup_line - 1], HasSubstr("--worker_id=abtest-train"));
}

TEST(JobSetClient, StartupLinesOfEveryFixtureDocument) {
  struct Case {
    const char* file;
    std::size_t document;
    std::size_t line;
    std::size_t env;
    std::size_t argv;
  };
  for (const Case& c :
       {Case{"launch_dryrun.txt", 0, 221, 13, 49}, Case{"launch_dryrun.txt", 1, 456, 30, 58},
        Case{"launch_dryrun.txt", 2, 772, 12, 27}, Case{"launch_dryrun_v5p.txt", 0, 109, 13, 49},
        Case{"launch_dryrun_v5p.txt", 1, 325, 29, 58},
        Case{"launch_dryrun_v5p.txt", 2, 586, 12, 27},
        Case{"trainer_no_proxy.txt", 1, 292, 14, 37}}) {
    SCOPED_TRACE(std::string(c.file) + " document " + std::to_string(c.document));
    Loaded loaded = load(c.file);
    ClientCommand client = JobSetView(loaded.dryrun.documents.at(c.document)).client(c.file);
    EXPECT_EQ(client.startup_line, c.line);
    EXPECT_EQ(client.startup.env.size(), c.env);
    ASSERT_GE(client.startup.words.size(), 3u);
    EXPECT_EQ(client.startup.words.size() - 3, c.argv);
  }
}

TEST(JobSetClient, NoStartupBlockReportsFileAndLine) {
  Loaded bad = load("bad/no_startup_block.txt");
  ASSERT_EQ(bad.dryrun.documents.size(), 3u);
  JobSetView trainer(bad.dryrun.documents[1]);
  // The error points into the trainer's client script: its first line (after `- |`).
  std::vector<std::string> lines = lines_of(bad.text);
  ASSERT_THAT(lines[313], HasSubstr("- |"));
  Error error = test::error_of([&] { trainer.client(bad.path); });
  EXPECT_EQ(error.file(), bad.path);
  EXPECT_EQ(error.line(), 315);
  EXPECT_THAT(error.message(), HasSubstr("abtest-train"));
  EXPECT_THAT(error.message(), HasSubstr("'main'"));
  EXPECT_THAT(error.message(), HasSubstr("no startup block"));
  // The role is still found textually.
  EXPECT_EQ(role_of(trainer, RoleMains{}), Role::kTrainer);
}

Error client_error(const Loaded& loaded, std::size_t document) {
  return test::error_of(
      [&] { JobSetView(loaded.dryrun.documents.at(document)).client(loaded.path); });
}

TEST(JobSetClient, UnbalancedQuoteReportsFileAndLine) {
  Loaded bad = load("bad/unbalanced_quote.txt");
  Error error = client_error(bad, 1);
  EXPECT_EQ(error.file(), bad.path);
  EXPECT_EQ(error.line(), 330);
  EXPECT_THAT(error.message(), HasSubstr("unterminated single quote"));
  EXPECT_THAT(error.message(), HasSubstr("abtest-train"));
  EXPECT_THAT(std::string(error.what()), HasSubstr(bad.path + ":330:"));
}

// Regression (fixed): the column in the message counts from the start of the startup line after
// YAML removed the literal block's 18-space indentation, while the message is prefixed with the
// file and line: "unbalanced_quote.txt:330: ... unterminated single quote starting at column 3276",
// but the quote is at column 3294 of line 330 of the file (column 3276 is 18 characters before it).
TEST(JobSetClient, UnbalancedQuoteColumnPointsAtTheQuoteInTheFile) {
  Loaded bad = load("bad/unbalanced_quote.txt");
  std::string line = lines_of(bad.text)[329];
  std::size_t quote = line.find("'^(?!");
  ASSERT_NE(quote, std::string::npos);
  ASSERT_EQ(quote + 1, 3294u);
  Error error = client_error(bad, 1);
  EXPECT_THAT(error.message(), HasSubstr(fmt::format("column {}", quote + 1)));
}

// --- roles
// ----------------------------------------------------------------------------------------

TEST(Roles, RoleOfEachJobSet) {
  Loaded main = load("launch_dryrun.txt");
  const auto& docs = main.dryrun.documents;
  EXPECT_EQ(role_of(JobSetView(docs[0]), RoleMains{}), Role::kOrchestrator);
  EXPECT_EQ(role_of(JobSetView(docs[1]), RoleMains{}), Role::kTrainer);
  EXPECT_EQ(role_of(JobSetView(docs[2]), RoleMains{}), Role::kRollout);
  EXPECT_EQ(JobSetView(docs[1]).process_main()->first, kTrainerMain);
  EXPECT_EQ(JobSetView(docs[0]).process_main()->first, kOrchestratorMain);
  EXPECT_EQ(JobSetView(docs[2]).process_main()->first, kRolloutMain);
  for (const Document& doc : docs) EXPECT_TRUE(is_jobset(doc));
  EXPECT_EQ(role_name(Role::kTrainer), "trainer");
  EXPECT_EQ(role_name(Role::kOrchestrator), "orchestrator");
  EXPECT_EQ(role_name(Role::kRollout), "rollout");
  EXPECT_EQ(role_name(Role::kUnknown), "unknown");
}

TEST(Roles, CustomRoleMains) {
  Loaded main = load("launch_dryrun.txt");
  const auto& docs = main.dryrun.documents;
  RoleMains swapped;
  swapped.trainer = kRolloutMain;
  swapped.rollout = kTrainerMain;
  EXPECT_EQ(role_of(JobSetView(docs[1]), swapped), Role::kRollout);
  EXPECT_EQ(role_of(JobSetView(docs[2]), swapped), Role::kTrainer);
  EXPECT_EQ(role_of(JobSetView(docs[0]), swapped), Role::kOrchestrator);
  Roles roles = select_roles(main.dryrun, swapped);
  EXPECT_EQ(roles.trainer, &docs[2]);
  ASSERT_EQ(roles.rollouts.size(), 1u);
  EXPECT_EQ(roles.rollouts[0], &docs[1]);

  RoleMains other;
  other.trainer = "my.own.trainer.main";
  EXPECT_EQ(role_of(JobSetView(docs[1]), other), Role::kUnknown);
  // A prefix of the real value is not a match.
  RoleMains prefix;
  prefix.trainer = "tunix.experimental.examples.common.run_trainer_node";
  EXPECT_EQ(role_of(JobSetView(docs[1]), prefix), Role::kUnknown);
}

TEST(Roles, SelectRolesOfTheMainFixture) {
  Loaded main = load("launch_dryrun.txt");
  Roles roles = select_roles(main.dryrun, RoleMains{});
  EXPECT_EQ(roles.trainer, &main.dryrun.documents[1]);
  EXPECT_EQ(roles.orchestrator, &main.dryrun.documents[0]);
  ASSERT_EQ(roles.rollouts.size(), 1u);
  EXPECT_EQ(roles.rollouts[0], &main.dryrun.documents[2]);
}

Error select_error(const DryRun& dryrun, const RoleMains& mains) {
  return test::error_of([&] { select_roles(dryrun, mains); });
}

// select_roles on the fixture `name` fails, naming the fixture and saying each of `phrases`.
void expect_roles_error(const std::string& name, std::initializer_list<std::string> phrases) {
  Loaded bad = load(name);
  Error error = select_error(bad.dryrun, RoleMains{});
  EXPECT_EQ(error.file(), bad.path);
  for (const std::string& phrase : phrases) EXPECT_THAT(error.message(), HasSubstr(phrase));
}

TEST(Roles, NoTrainerNamesTheJobSetsFound) {
  expect_roles_error("bad/no_trainer.txt",
                     {"no trainer", "abtest-orch", "abtest-roll", kTrainerMain});

  Loaded main = load("launch_dryrun.txt");
  RoleMains other;
  other.trainer = "my.own.trainer.main";
  Error custom = select_error(main.dryrun, other);
  EXPECT_THAT(custom.message(), HasSubstr("my.own.trainer.main"));
  EXPECT_THAT(custom.message(), HasSubstr("abtest-train"));
}

TEST(Roles, NoDocumentsAtAll) {
  Loaded empty = load("bad/empty.txt");
  EXPECT_THAT(select_error(empty.dryrun, RoleMains{}).message(), HasSubstr("no trainer"));
  Loaded not_yaml = load("bad/not_yaml.txt");
  EXPECT_THAT(select_error(not_yaml.dryrun, RoleMains{}).message(), HasSubstr("no trainer"));
}

TEST(Roles, AnInputWithoutAJobSetSaysWhatItHolds) {
  DryRun deployment =
      parse_dryrun("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n", "x.yaml");
  Error error = select_error(deployment, RoleMains{});
  EXPECT_EQ(error.file(), "x.yaml");
  EXPECT_EQ(error.line(), 1);
  EXPECT_THAT(error.message(), HasSubstr("no trainer JobSet"));
  EXPECT_THAT(error.message(), HasSubstr("not a JobSet: the input holds Deployment 'web'"));
}

TEST(Roles, ALoneJobSetIsTheTrainerOnlyWhenAskedFor) {
  Loaded main = load("launch_dryrun.txt");
  RoleMains other;
  other.trainer = "my.own.trainer.main";
  other.orchestrator = "my.own.orchestrator.main";
  other.rollout = "my.own.rollout.main";
  DryRun lone = main.dryrun;
  lone.documents = {main.dryrun.documents[1]};
  EXPECT_THAT(select_error(lone, other).message(), HasSubstr("no trainer"));
  Roles roles = select_roles(lone, other, {.lone_jobset_is_trainer = true});
  EXPECT_EQ(roles.trainer, &lone.documents[0]);
  // With two JobSets of no known role, neither is the trainer.
  EXPECT_THAT(test::error_of([&] {
                select_roles(main.dryrun, other, {.lone_jobset_is_trainer = true});
              }).message(),
              HasSubstr("no trainer"));
}

TEST(Roles, TwoTrainersNamesBoth) {
  expect_roles_error("bad/two_trainers.txt",
                     {"more than one trainer", "abtest-train ", "abtest-train2"});
}

TEST(Roles, TwoOrchestratorsIsAnError) {
  Loaded main = load("launch_dryrun.txt");
  // The rollout's main counted as an orchestrator's: two orchestrators.
  RoleMains mains;
  mains.orchestrator = kRolloutMain;
  mains.rollout = kOrchestratorMain;
  EXPECT_NO_THROW(select_roles(main.dryrun, mains));
  DryRun doubled = main.dryrun;
  doubled.documents.push_back(main.dryrun.documents[0]);
  Error error = select_error(doubled, RoleMains{});
  EXPECT_THAT(error.message(), HasSubstr("more than one orchestrator"));
  EXPECT_THAT(error.message(), HasSubstr("abtest-orch"));
}

TEST(Roles, IsJobSet) {
  DryRun dryrun =
      parse_dryrun("---\nkind: Job\nmetadata: {name: j}\n---\nmetadata: {name: k}\n", "f");
  ASSERT_EQ(dryrun.documents.size(), 2u);
  EXPECT_FALSE(is_jobset(dryrun.documents[0]));
  EXPECT_FALSE(is_jobset(dryrun.documents[1]));
}

// --- no hidden writes into the document
// -----------------------------------------------------------

// Regression: a yaml-cpp Node reassignment once wrote through into the tree.
TEST(JobSetNoMutation, RepeatedCallsLeaveTheDocumentUnchanged) {
  for (const char* name : {"launch_dryrun.txt", "launch_dryrun_v5p.txt", "trainer_no_proxy.txt"}) {
    SCOPED_TRACE(name);
    Loaded loaded = load(name);
    Loaded fresh = load(name);
    std::vector<std::string> before;
    for (const Document& doc : loaded.dryrun.documents) before.push_back(yaml::emit(doc.root));
    for (int round = 0; round < 3; ++round) {
      for (const Document& doc : loaded.dryrun.documents) {
        JobSetView view(doc);
        view.name();
        for (const std::string& job : view.job_names()) {
          view.pod_spec(job);
          view.pod_spec(job);
        }
        view.pod_spec("missing");
        view.containers();
        view.container("main");
        view.container("pathways-proxy");
        view.container("pathways-worker");
        view.container("missing");
        view.process_main();
        role_of(view, RoleMains{});
        ClientCommand client = view.client(name);
        ClientCommand again = view.client(name);
        EXPECT_EQ(client.startup_line, again.startup_line);
      }
      select_roles(loaded.dryrun, RoleMains{});
    }
    ASSERT_EQ(loaded.dryrun.documents.size(), before.size());
    for (std::size_t i = 0; i < before.size(); ++i) {
      EXPECT_EQ(yaml::emit(loaded.dryrun.documents[i].root), before[i]) << "document " << i;
      EXPECT_EQ(yaml::emit(loaded.dryrun.documents[i].root),
                yaml::emit(fresh.dryrun.documents[i].root))
          << "document " << i;
    }
  }
}

// Regression (fixed): ContainerRef (and ClientCommand) hold yaml-cpp Nodes and keep the implicit
// copy assignment, so assigning one ContainerRef to another (`ref = other`, or reassigning a
// std::optional<ContainerRef>) makes the first container's node in the document an alias of the
// second: the document then has pathways-proxy twice and pathways-rm is gone.
TEST(JobSetNoMutation, AssigningContainerRefsLeavesTheDocumentUnchanged) {
  Loaded main = load("launch_dryrun.txt");
  const Document& trainer = main.dryrun.documents.at(1);
  std::string before = yaml::emit(trainer.root);
  JobSetView view(trainer);
  std::vector<ContainerRef> refs = view.containers();
  ASSERT_GE(refs.size(), 2u);
  ContainerRef current = refs[0];
  current = refs[1];
  EXPECT_EQ(current.name(), "pathways-proxy");
  std::optional<ContainerRef> found = view.container("main");
  found = view.container("pathways-worker");
  EXPECT_EQ(yaml::emit(trainer.root), before);
  EXPECT_THAT(rows(view), ElementsAre(ContainerRow{"proc", true, "pathways-rm"},
                                      ContainerRow{"proc", true, "pathways-proxy"},
                                      ContainerRow{"proc", false, "main"},
                                      ContainerRow{"pw-node", false, "pathways-worker"},
                                      ContainerRow{"pw-node", true, "colocated-python-sidecar"}));
}

}  // namespace
}  // namespace rtb::k8s
