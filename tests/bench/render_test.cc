#include "rtb/bench/render.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bench/render_options_util.h"
#include "rtb/base/compress.h"
#include "rtb/base/error.h"
#include "rtb/base/io.h"
#include "rtb/base/process.h"
#include "rtb/bench/render_steps.h"
#include "rtb/k8s/diff.h"
#include "rtb/k8s/jobset.h"
#include "rtb/k8s/yaml.h"
#include "test_util.h"

namespace rtb::bench {
namespace {

k8s::DryRun fixture() {
  return k8s::parse_dryrun(read_file(RTB_TESTDATA_DIR "/launch_dryrun.txt"), "launch_dryrun.txt");
}

using testing_util::kClient;

RenderOptions options() { return testing_util::test_render_options(); }

const k8s::Document& trainer_of(const k8s::DryRun& dryrun) {
  return *select_roles(dryrun, k8s::RoleMains{}).trainer;
}

TEST(RenderTest, RecordsEveryChangeAndPassesItsOwnSelfCheck) {
  k8s::DryRun dryrun = fixture();
  RenderResult result = render_bench(dryrun, options());
  EXPECT_EQ(result.trainer_name, "abtest-train");
  bool has_name = false, has_restarts = false;
  for (const Change& change : result.changes) {
    has_name |= change.path == "metadata.name" && change.new_value == "abtest-bench";
    has_restarts |= change.path == "spec.failurePolicy.maxRestarts" && change.new_value == "0";
  }
  EXPECT_TRUE(has_name);
  EXPECT_TRUE(has_restarts);
  EXPECT_NO_THROW(check_bench_against_e2e(trainer_of(dryrun).root, result.bench, result.changes));
  // The emitted text reads back as the same tree.
  EXPECT_TRUE(k8s::diff_trees(YAML::Load(result.yaml), result.bench).empty());
}

TEST(RenderTest, RenderingFromATakenDryRunGivesTheSameBench) {
  // render_bench(DryRun&&) edits the trainer document in place instead of a copy: same bench,
  // changes and diagnostics (their input lines too), on every fixture and with knobs that warn.
  for (const char* name :
       {"launch_dryrun.txt", "launch_dryrun_v5p.txt", "launch_dryrun_weights_profiler.txt"}) {
    SCOPED_TRACE(name);
    for (bool with_knobs : {false, true}) {
      RenderOptions o = options();
      if (with_knobs) {
        o.trainer_args = {"--foo=1"};
        o.libtpu_flags = {"--xla_tpu_scoped_vmem_limit_kib=65536"};
        o.namespace_name = "other";
      }
      const std::string text = read_file(std::string(RTB_TESTDATA_DIR "/") + name);
      const k8s::DryRun kept = k8s::parse_dryrun(text, name);
      RenderResult copied = render_bench(kept, o);
      RenderResult taken = render_bench(k8s::parse_dryrun(text, name), o);
      EXPECT_EQ(taken.yaml, copied.yaml);
      EXPECT_EQ(taken.trainer_name, copied.trainer_name);
      EXPECT_TRUE(taken.changes == copied.changes);
      EXPECT_EQ(taken.diagnostics, copied.diagnostics);
      // The kept DryRun is unchanged by a render from it.
      EXPECT_TRUE(
          k8s::diff_trees(trainer_of(kept).root, trainer_of(k8s::parse_dryrun(text, name)).root)
              .empty());
    }
  }
}

TEST(RenderTest, VisitScalarsGivesEachScalarItsKeyAndPath) {
  const YAML::Node root = YAML::Load(
      "metadata: {name: a, labels: {x/y: b}}\n"
      "jobs:\n- name: proc\n  args: [--k=1, --k=2, c]\n- name: other\n  command: [d]\n"
      "plain: [e, f]\n");
  const YAML::Node skipped = root["jobs"][1]["command"];
  std::vector<std::string> seen;
  render_steps::visit_scalars(
      root, skipped, [&](YAML::Node node, const render_steps::ScalarPlace& place) {
        seen.push_back(node.Scalar() + " " + place.key() + " " + place.path());
      });
  std::sort(seen.begin(), seen.end());
  EXPECT_THAT(seen, ::testing::ElementsAre(
                        "--k=1 args jobs[proc].args[--k]", "--k=2 args jobs[proc].args[--k#2]",
                        "a name metadata.name", "b x/y metadata.labels[x/y]",
                        "c args jobs[proc].args[#2]", "e plain plain[0]", "f plain plain[1]",
                        "other name jobs[other].name", "proc name jobs[proc].name"));
  // Nothing skipped: the command's item too.
  std::size_t all = 0;
  render_steps::visit_scalars(root, YAML::Node(),
                              [&](YAML::Node, const render_steps::ScalarPlace&) { ++all; });
  EXPECT_EQ(all, seen.size() + 1);
}

TEST(RenderTest, SelfCheckRefusesADifferenceNoOptionAskedFor) {
  k8s::DryRun dryrun = fixture();
  RenderResult result = render_bench(dryrun, options());
  YAML::Node tampered = YAML::Clone(result.bench);
  tampered["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]
          ["priorityClassName"] = "high";
  Error e = test::error_of(
      [&] { check_bench_against_e2e(trainer_of(dryrun).root, tampered, result.changes); });
  EXPECT_NE(e.message().find("internal error: self-check"), std::string::npos) << e.what();
  EXPECT_NE(e.message().find("priorityClassName"), std::string::npos) << e.what();
  EXPECT_NE(e.message().find("(medium -> high)"), std::string::npos) << e.what();
  // A recorded change covers its path and what lies below it, nothing else.
  std::vector<Change> changes = result.changes;
  changes.push_back({"test",
                     "spec.replicatedJobs[pw-node].template.spec.template.spec.priorityClassName",
                     "", ""});
  EXPECT_NO_THROW(check_bench_against_e2e(trainer_of(dryrun).root, tampered, changes));
}

TEST(RenderTest, SelfCheckSeesAFlagChangedInsideTheStartupLine) {
  k8s::DryRun dryrun = fixture();
  RenderOptions o = options();
  o.libtpu_flags = {"--xla_tpu_scoped_vmem_limit_kib=1"};
  RenderResult result = render_bench(dryrun, o);
  std::vector<Change> without_libtpu;
  for (const Change& change : result.changes) {
    if (change.knob != "--libtpu-flag") without_libtpu.push_back(change);
  }
  EXPECT_THROW(check_bench_against_e2e(trainer_of(dryrun).root, result.bench, without_libtpu),
               Error);
}

TEST(RenderTest, ValidatesJobSetNames) {
  EXPECT_NO_THROW(validate_jobset_name("abtest-bench-2"));
  for (const char* bad : {"", "Abc", "a_b", "a.b", "-ab", "ab-", "1ab", "a b"}) {
    EXPECT_THROW(validate_jobset_name(bad), Error) << bad;
  }
  EXPECT_THROW(validate_jobset_name(std::string(64, 'a')), Error);
  // A name that is a valid label but makes pod names longer than 63 characters.
  RenderOptions o = options();
  o.name = std::string(50, 'a');
  k8s::DryRun dryrun = fixture();
  EXPECT_THROW(render_bench(dryrun, o), Error);
}

// The seed's LAUNCH_RENDER names the DRY_RUN when no file is given; an explicit file or --demo
// wins.
TEST(RenderTest, DryrunInputFromTheArgumentElseLaunchRender) {
  EXPECT_EQ(dryrun_input("a.txt", false, "b.txt"), "a.txt");
  EXPECT_EQ(dryrun_input("-", false, "b.txt"), "-");
  EXPECT_EQ(dryrun_input("", false, "b.txt"), "b.txt");
  EXPECT_EQ(dryrun_input("", false, nullptr), "");
  EXPECT_EQ(dryrun_input("", false, ""), "");
  EXPECT_EQ(dryrun_input("", true, "b.txt"), "") << "--demo wins over the environment";
  EXPECT_EQ(dryrun_input("a.txt", true, "b.txt"), "a.txt") << "the caller refuses both";
}

TEST(RenderTest, HeredocTerminatorNeverOccursInTheText) {
  EXPECT_EQ(heredoc_terminator("print(1)\n"), "BENCH_DRIVER_EOF");
  EXPECT_EQ(heredoc_terminator("a\nBENCH_DRIVER_EOF\nb\n"), "BENCH_DRIVER_EOF_1");
  EXPECT_EQ(heredoc_terminator("BENCH_DRIVER_EOF\nBENCH_DRIVER_EOF_1"), "BENCH_DRIVER_EOF_2");
  EXPECT_EQ(heredoc_terminator("x BENCH_DRIVER_EOF\n"), "BENCH_DRIVER_EOF");
}

TEST(RenderTest, DriverEnvironmentStartsWithTheMarkerAndValidates) {
  RenderOptions o = options();
  o.driver.extra_env = {{"REAL_LEN", "1000"}};
  auto env = driver_environment(o, "--a=1", "--b=2");
  ASSERT_FALSE(env.empty());
  EXPECT_EQ(env.front().first, k8s::kDriverSettingsStart);
  EXPECT_EQ(env.front().second, "abtest-bench");
  EXPECT_EQ(env[env.size() - 2], std::make_pair(std::string("TRAINER_ARGV"), std::string("--a=1")));
  EXPECT_EQ(env.back(), std::make_pair(std::string("ORCH_ARGV"), std::string("--b=2")));
  bool has_real_len = false;
  for (const auto& [name, value] : env) has_real_len |= name == "REAL_LEN" && value == "1000";
  EXPECT_TRUE(has_real_len);
  // Each value is checked by the driver settings table, in the words of its option.
  using Tweak = std::function<void(RenderOptions&)>;
  test::expect_cases<std::string, Tweak>(
      [](const Tweak& tweak) {
        RenderOptions bad = options();
        tweak(bad);
        return test::error_of([&] { driver_environment(bad, "", ""); }).message();
      },
      {{[](RenderOptions& x) { x.driver.steps = 0; }, "--steps 0: must be >= 1"},
       {[](RenderOptions& x) { x.driver.micro_steps = -2; }, "--micro-steps -2: must be >= 1"},
       {[](RenderOptions& x) { x.driver.pad_align = 100; },
        "--pad-align 100: must be a multiple of the segment alignment 64"},
       {[](RenderOptions& x) { x.driver.routing_scale = -1; }, "--routing-scale -1: must be >= 0"},
       {[](RenderOptions& x) { x.driver.routing_scale = std::nan(""); },
        "--routing-scale nan: must be finite"},
       {[](RenderOptions& x) { x.driver.advantages = "none"; },
        "--advantages none: must be one of random|zero"},
       {[](RenderOptions& x) { x.profile_window = std::make_pair(-1, 2); },
        "--profile-window -1:2: START must be >= 0"},
       // The window counts timed steps, so it must end within --steps (default 5).
       {[](RenderOptions& x) { x.profile_window = std::make_pair(4, 2); },
        "--profile-window 4:2: ends after the last timed step (STEPS=5: steps 0..4)"},
       {[](RenderOptions& x) {
          x.driver.steps = 2;
          x.profile_window = std::make_pair(2, 1);
        },
        "--profile-window 2:1: ends after the last timed step (STEPS=2: steps 0..1)"},
       {[](RenderOptions& x) {
          x.driver.extra_env = {{"STEPS", "1"}};
        },
        "--driver-env STEPS: set it with its own option, not --driver-env"},
       {[](RenderOptions& x) {
          x.driver.extra_env = {{"1BAD", "1"}};
        },
        "--driver-env 1BAD=1: '1BAD' is not an environment variable name"},
       {[](RenderOptions& x) {
          x.driver.other_settings = {{"REAL_LEN", "5"}};
        },
        "internal error: REAL_LEN has no option of its own"}});
}

// --driver-env: a setting of the table is checked as the driver checks it; one with its own option
// (or that the render writes) is refused even when that option is absent; other names pass.
TEST(RenderTest, DriverEnvOfATableSettingIsCheckedByTheTable) {
  auto message = [](const std::string& name, const std::string& value) {
    RenderOptions o = options();
    o.driver.extra_env = {{name, value}};
    return test::error_of([&] { driver_environment(o, "", ""); }).message();
  };
  EXPECT_EQ(message("REAL_LEN", "x"), "--driver-env REAL_LEN=x: not an integer");
  EXPECT_EQ(message("SEGMENTS", "0"), "--driver-env SEGMENTS=0: must be >= 1");
  EXPECT_EQ(message("ORCH_PACK_PAD_ALIGN", "100"),
            "--driver-env ORCH_PACK_PAD_ALIGN=100: must be a multiple of the segment alignment 64");
  for (const char* name : {"PROFILE_WINDOW", "TRAINER_ARGV", "ORCH_ARGV", "BENCH_NAME",
                           "ROUTING_TARGETS", "LOGP_GATES"}) {
    EXPECT_EQ(message(name, "1"),
              fmt::format("--driver-env {}: set it with its own option, not --driver-env", name));
  }
  RenderOptions o = options();
  o.driver.extra_env = {{"REAL_LEN", " 1000 "},
                        {"FINAL_ROWS", ""},
                        {"PROFILE_DIR", "gs://b/p"},
                        {"SEGMENTS", "3"},
                        {"NOT_A_SETTING", "anything"}};
  auto env = driver_environment(o, "", "");
  std::vector<std::pair<std::string, std::string>> tail(env.end() - 7, env.end() - 2);
  EXPECT_EQ(tail, o.driver.extra_env) << "written as given, in order";
}

TEST(RenderTest, StageBoundaryAndTheOrchestratorsStagingEnvironmentReachTheDriver) {
  RenderOptions o = options();
  auto value_of = [](const std::vector<std::pair<std::string, std::string>>& env,
                     const std::string& name) -> std::optional<std::string> {
    for (const auto& [key, value] : env) {
      if (key == name) return value;
    }
    return std::nullopt;
  };
  auto env = driver_environment(o, "", "", {{"PIPELINE_STEP_BOUNDARY", "1"}});
  EXPECT_EQ(value_of(env, "STAGE_BOUNDARY"), "auto");
  EXPECT_EQ(value_of(env, "ORCH_PIPELINE_STEP_BOUNDARY"), "1");
  EXPECT_EQ(value_of(env, "ORCH_STAGE_NEXT_MICROBATCH"), std::nullopt);
  o.driver.stage_boundary = "sometimes";
  EXPECT_THROW(driver_environment(o, "", ""), Error);
  o.driver.stage_boundary = "on";
  o.driver.extra_env = {{"STAGE_BOUNDARY", "off"}};
  EXPECT_THROW(driver_environment(o, "", ""), Error);  // its own option, not --driver-env

  // From a DRY_RUN whose orchestrator sets them in its startup block.
  std::string text = read_file(RTB_TESTDATA_DIR "/launch_dryrun.txt");
  const std::string anchor = "ORCHESTRATOR_ID=\"abtest-orch\"";
  std::size_t at = text.find(anchor);
  ASSERT_NE(at, std::string::npos);
  text.insert(at, "PIPELINE_STEP_BOUNDARY=true STAGE_NEXT_MICROBATCH=0 ");
  RenderResult result = render_bench(k8s::parse_dryrun(text, "staged.txt"), options());
  EXPECT_NE(result.yaml.find("STAGE_BOUNDARY=auto"), std::string::npos);
  EXPECT_NE(result.yaml.find("ORCH_PIPELINE_STEP_BOUNDARY=true"), std::string::npos);
  EXPECT_NE(result.yaml.find("ORCH_STAGE_NEXT_MICROBATCH=0"), std::string::npos);
  RenderResult plain = render_bench(fixture(), options());
  EXPECT_EQ(plain.yaml.find("ORCH_PIPELINE_STEP_BOUNDARY"), std::string::npos);
}

std::optional<std::string> setting(const std::vector<std::pair<std::string, std::string>>& env,
                                   const std::string& name) {
  std::optional<std::string> found;
  for (const auto& [key, value] : env) {
    if (key == name) found = value;
  }
  return found;
}

TEST(RenderTest, PadAndRoutingSettingsAreWrittenOnlyWhenGiven) {
  // Unset, the driver follows the e2e orchestrator's packing and its own defaults.
  auto plain = driver_environment(options(), "", "");
  for (const char* name :
       {"PAD_POSITION", "PAD_ALIGN", "ROUTING", "ALLOW_FALLBACKS", "LOGPS_PASS"}) {
    EXPECT_EQ(setting(plain, name), std::nullopt) << name;
  }
  RenderOptions o = options();
  o.driver.pad_position = "start";
  o.driver.pad_align = 2048;
  o.driver.routing = "off";
  o.driver.allow_fallbacks = true;
  o.driver.logps_pass = "on";
  auto env = driver_environment(o, "", "");
  EXPECT_EQ(setting(env, "PAD_POSITION"), "start");
  EXPECT_EQ(setting(env, "PAD_ALIGN"), "2048");
  EXPECT_EQ(setting(env, "ROUTING"), "off");
  EXPECT_EQ(setting(env, "ALLOW_FALLBACKS"), "1");
  EXPECT_EQ(setting(env, "LOGPS_PASS"), "on");
  for (auto tweak : std::vector<std::function<void(RenderOptions&)>>{
           [](RenderOptions& x) { x.driver.routing = "sometimes"; },
           [](RenderOptions& x) { x.driver.logps_pass = "1"; },
           [](RenderOptions& x) { x.driver.pad_position = "middle"; },
           [](RenderOptions& x) { x.driver.pad_align = 0; },
       }) {
    RenderOptions bad = options();
    tweak(bad);
    EXPECT_THROW(driver_environment(bad, "", ""), Error);
  }
  // Each has its own option, so --driver-env refuses it even when that option is not given.
  for (const char* name :
       {"PAD_POSITION", "PAD_ALIGN", "ROUTING", "ALLOW_FALLBACKS", "LOGPS_PASS"}) {
    RenderOptions bad = options();
    bad.driver.extra_env = {{name, "1"}};
    Error e = test::error_of([&] { driver_environment(bad, "", ""); });
    EXPECT_NE(e.message().find("its own option"), std::string::npos) << name << ": " << e.what();
  }
}

TEST(RenderTest, TheOrchestratorsPackingAndRoutingEnvironmentReachesTheDriver) {
  // Startup-block assignments win; the container's env list fills in the rest.
  std::string text = read_file(RTB_TESTDATA_DIR "/launch_dryrun.txt");
  const std::string anchor = "ORCHESTRATOR_ID=\"abtest-orch\"";
  std::size_t at = text.find(anchor);
  ASSERT_NE(at, std::string::npos);
  text.insert(at, "PACK_PAD_POSITION=start PACK_PAD_ALIGN=512 ");
  const std::string env_anchor =
      "                    fieldPath: metadata.labels['jobset.sigs.k8s.io/jobset-name']\n";
  std::size_t env_at = text.find(env_anchor);  // the orchestrator's env list comes first
  ASSERT_NE(env_at, std::string::npos);
  ASSERT_LT(env_at, text.find("name: abtest-train"));
  text.insert(env_at + env_anchor.size(),
              "              - name: RETURN_ROUTED_EXPERTS\n"
              "                value: \"true\"\n"
              "              - name: PACK_PAD_ALIGN\n"
              "                value: \"64\"\n");
  RenderResult result = render_bench(k8s::parse_dryrun(text, "packed.txt"), options());
  std::string script = result
                           .bench["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
                                 ["spec"]["containers"][0]["command"][2]
                           .Scalar();
  EXPECT_NE(script.find("ORCH_PACK_PAD_POSITION=start"), std::string::npos);
  EXPECT_NE(script.find("ORCH_PACK_PAD_ALIGN=512"), std::string::npos);
  EXPECT_EQ(script.find("ORCH_PACK_PAD_ALIGN=64"), std::string::npos);
  EXPECT_NE(script.find("ORCH_RETURN_ROUTED_EXPERTS=true"), std::string::npos);
  EXPECT_EQ(script.find("PAD_POSITION=end"), std::string::npos);
  EXPECT_EQ(script.find(" PAD_POSITION="), std::string::npos);
  EXPECT_EQ(script.find(" PAD_ALIGN="), std::string::npos);
  RenderResult plain = render_bench(fixture(), options());
  for (const char* name :
       {"ORCH_PACK_PAD_POSITION", "ORCH_PACK_PAD_ALIGN", "ORCH_RETURN_ROUTED_EXPERTS"}) {
    EXPECT_EQ(plain.yaml.find(name), std::string::npos) << name;
  }
}

// The startup block's assignments of a driver script, as (name, value-as-written) pairs.
std::vector<std::pair<std::string, std::string>> startup_assignments(const std::string& script) {
  std::vector<std::pair<std::string, std::string>> found;
  std::size_t begin = script.find("\n(\n");
  std::size_t end = script.find("\n) & PID=$!");
  if (begin == std::string::npos || end == std::string::npos) return found;
  std::string block = script.substr(begin + 3, end - begin - 3);
  for (std::size_t start = 0; start < block.size();) {
    std::size_t newline = block.find('\n', start);
    std::string line =
        block.substr(start, newline == std::string::npos ? newline : newline - start);
    start = newline == std::string::npos ? block.size() : newline + 1;
    std::size_t first = line.find_first_not_of(' ');
    std::size_t eq = line.find('=');
    if (first == std::string::npos || eq == std::string::npos || line.back() != '\\') continue;
    found.emplace_back(line.substr(first, eq - first), line.substr(eq + 1, line.size() - eq - 3));
  }
  return found;
}

TEST(RenderTest, PreflightIsACpuJobRunningTheDriverWithTheBenchClientsSettings) {
  k8s::DryRun dryrun = fixture();
  RenderOptions o = options();
  o.namespace_name = "other-ns";
  o.image = "registry.example/trainer:2";
  o.driver.routing = "on";
  o.driver.pad_position = "start";
  PreflightResult preflight = render_preflight(dryrun, o);
  const YAML::Node& job = preflight.job;
  EXPECT_EQ(job["apiVersion"].Scalar(), "batch/v1");
  EXPECT_EQ(job["kind"].Scalar(), "Job");
  EXPECT_EQ(job["metadata"]["name"].Scalar(), "abtest-bench-preflight");
  EXPECT_EQ(job["metadata"]["namespace"].Scalar(), "other-ns");
  EXPECT_EQ(job["metadata"]["labels"]["rl-trainer-bench/bench"].Scalar(), "abtest-bench");
  EXPECT_EQ(job["spec"]["backoffLimit"].as<int>(), 0);
  const YAML::Node pod = job["spec"]["template"]["spec"];
  EXPECT_EQ(pod["restartPolicy"].Scalar(), "Never");
  EXPECT_EQ(pod["serviceAccountName"].Scalar(), "xpk-sa");
  for (const char* scheduling : {"nodeSelector", "tolerations", "affinity", "hostNetwork"}) {
    EXPECT_FALSE(pod[scheduling].IsDefined()) << scheduling;
  }
  EXPECT_EQ(preflight.yaml.find("google.com/tpu"), std::string::npos);
  EXPECT_EQ(preflight.yaml.find("gke-tpu"), std::string::npos);
  ASSERT_EQ(pod["containers"].size(), 1u);
  const YAML::Node container = pod["containers"][0];
  EXPECT_EQ(container["image"].Scalar(), "registry.example/trainer:2");
  EXPECT_EQ(container["resources"]["requests"]["cpu"].Scalar(), "2");
  int platforms = 0;
  for (const YAML::Node& item : container["env"]) {
    if (item["name"].Scalar() != "JAX_PLATFORMS") continue;
    ++platforms;
    EXPECT_EQ(item["value"].Scalar(), "cpu");
  }
  EXPECT_EQ(platforms, 1);
  // The same script as the bench client's, with JAX_PLATFORMS=cpu and --preflight.
  ASSERT_EQ(container["command"].size(), 3u);
  EXPECT_EQ(container["command"][0].Scalar(), "bash");
  EXPECT_EQ(container["command"][1].Scalar(), "-c");
  std::string script = container["command"][2].Scalar();
  EXPECT_NE(script.find("cat > /tmp/bench_driver.py <<'BENCH_DRIVER_EOF'\nprint('driver')\n"),
            std::string::npos);
  EXPECT_NE(script.find("\n  python3 /tmp/bench_driver.py --preflight\n) & PID=$!"),
            std::string::npos);
  std::string client_script = render_bench(dryrun, o)
                                  .bench["spec"]["replicatedJobs"][0]["template"]["spec"]
                                        ["template"]["spec"]["containers"][0]["command"][2]
                                  .Scalar();
  auto expected = startup_assignments(client_script);
  auto driver_start = std::find_if(expected.begin(), expected.end(), [](const auto& a) {
    return a.first == k8s::kDriverSettingsStart;
  });
  ASSERT_NE(driver_start, expected.end());
  expected.insert(driver_start, {"JAX_PLATFORMS", "cpu"});
  EXPECT_EQ(startup_assignments(script), expected);
  EXPECT_EQ(setting(expected, "ROUTING"), "on");
  EXPECT_EQ(setting(expected, "PAD_POSITION"), "start");
  // The emitted text reads back as the same tree.
  EXPECT_TRUE(k8s::diff_trees(YAML::Load(preflight.yaml), job).empty());
  // The bench's checks still apply.
  o.driver.pad_align = 100;
  EXPECT_THROW(render_preflight(dryrun, o), Error);
}

TEST(RenderTest, NumericsPreflightJobRunsTheNumericsChecksWithMoreMemory) {
  k8s::DryRun dryrun = fixture();
  RenderOptions o = options();
  o.image = "registry.example/trainer:2";
  PreflightResult setup = render_preflight(dryrun, o);
  PreflightResult numerics = render_preflight(dryrun, o, PreflightChecks::kNumerics);
  EXPECT_EQ(numerics.job["metadata"]["name"].Scalar(), "abtest-bench-numerics");
  const YAML::Node container = numerics.job["spec"]["template"]["spec"]["containers"][0];
  std::string script = container["command"][2].Scalar();
  EXPECT_NE(script.find("\n  python3 /tmp/bench_driver.py --preflight --numerics\n) & PID=$!"),
            std::string::npos);
  EXPECT_EQ(container["resources"]["requests"]["memory"].Scalar(), "16Gi");
  // Otherwise the set-up preflight's Job: same image, environment and settings.
  const YAML::Node setup_container = setup.job["spec"]["template"]["spec"]["containers"][0];
  EXPECT_EQ(setup_container["resources"]["requests"]["memory"].Scalar(), "8Gi");
  EXPECT_TRUE(k8s::diff_trees(setup_container["env"], container["env"]).empty());
  EXPECT_EQ(setup_container["image"].Scalar(), container["image"].Scalar());
  EXPECT_EQ(startup_assignments(setup_container["command"][2].Scalar()),
            startup_assignments(script));
}

TEST(RenderTest, MaxtextReplaceOfAnAbsentKeyNamesIt) {
  RenderOptions o = options();
  o.maxtext_replace = {"no_such_key=1"};
  k8s::DryRun dryrun = fixture();
  Error e = test::error_of([&] { render_bench(dryrun, o); });
  EXPECT_NE(e.message().find("no_such_key"), std::string::npos) << e.what();
}

TEST(RenderTest, TrainerSliceThatDoesNotDivideTheMeshFails) {
  RenderOptions o = options();
  o.trainer_slice = "tpu7x:1x1x1";  // 2 devices; context 4 x expert 2 does not divide them
  k8s::DryRun dryrun = fixture();
  EXPECT_THROW(render_bench(dryrun, o), Error);
}

// Text that compresses poorly: pseudo-random printable characters.
std::string incompressible(std::size_t size) {
  std::string text;
  std::uint64_t state = 88172645463325252ull;
  for (std::size_t i = 0; i < size; ++i) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    text += static_cast<char>('!' + state % 90);
    if (i % 100 == 99) text += '\n';
  }
  return text;
}

// The client container's command: bash, -c, the script and the arguments after it.
std::vector<std::string> client_command(const RenderResult& result) {
  std::vector<std::string> words;
  for (const YAML::Node& word : result.bench["spec"]["replicatedJobs"][0]["template"]["spec"]
                                            ["template"]["spec"]["containers"][0]["command"]) {
    words.push_back(word.Scalar());
  }
  return words;
}

TEST(RenderTest, ADriverTooLargeForTheScriptGoesInTheCommandsArguments) {
  RenderOptions o = options();
  k8s::DryRun dryrun = fixture();
  o.driver_source = std::string(100000, '#') + "\n";  // fits verbatim: the script holds it
  std::vector<std::string> command = client_command(render_bench(dryrun, o));
  ASSERT_EQ(command.size(), 3u);
  EXPECT_NE(command[2].find("cat > /tmp/bench_driver.py <<'BENCH_DRIVER_EOF'"), std::string::npos);
  // 300 KB that gzip barely shrinks: about 400 KB of base64, three times what one argument of
  // the command may hold (128 KiB), in pieces that follow the script ($0 names it).
  o.driver_source = incompressible(300000);
  command = client_command(render_bench(dryrun, o));
  ASSERT_GE(command.size(), 8u);
  EXPECT_EQ(command[3], "bench-client");
  EXPECT_EQ(command[2].find("cat > /tmp/bench_driver.py"), std::string::npos);
  for (std::size_t i = 2; i < command.size(); ++i) EXPECT_LE(command[i].size(), 65536u) << i;
  // The script's lines that write the driver, run as the pod runs them, write it.
  const std::string& script = command[2];
  std::size_t from = script.find("printf '%s' \"$@\" | base64 -d > /tmp/bench_driver.py.gz");
  std::size_t to = script.find("set --\n", from);
  ASSERT_NE(from, std::string::npos) << script;
  ASSERT_NE(to, std::string::npos) << script;
  const std::string path =
      (std::filesystem::temp_directory_path() /
       ("rtb_packed_driver_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
        ".py"))
          .string();
  std::string lines = script.substr(from, to + 7 - from);
  for (std::size_t at; (at = lines.find("/tmp/bench_driver.py")) != std::string::npos;)
    lines.replace(at, std::string_view("/tmp/bench_driver.py").size(), path);
  std::vector<std::string> argv = {"bash", "-c", lines + "[ $# -eq 0 ] || exit 7\n"};
  argv.insert(argv.end(), command.begin() + 3, command.end());
  EXPECT_EQ(run_process(argv), 0);
  EXPECT_EQ(read_file(path), o.driver_source);
  std::remove(path.c_str());
  std::remove((path + ".gz").c_str());
  // The whole command within what execve() takes beside the pod's environment.
  o.driver_source = incompressible(1100000);
  Error e = test::error_of([&] { render_bench(dryrun, o); });
  EXPECT_NE(e.message().find("1048576"), std::string::npos) << e.what();
}

TEST(RenderTest, ADriverPackedAheadGoesInAsGiven) {
  // render-bench's embedded driver comes packed from the build: the command carries that form
  // (here a marker, to tell it from a packing at render time) instead of packing again.
  RenderOptions o = options();
  o.driver_source = std::string(140000, '#') + "\n";
  o.driver_packed = base64_encode("packed at build time");
  k8s::DryRun dryrun = fixture();
  // The first line of each base64 text (the YAML indents the lines of the script).
  auto first_line = [](const std::string& data) {
    std::string text = base64_encode(data);
    return text.substr(0, text.find('\n'));
  };
  std::string_view packed = o.driver_packed;
  std::string given(packed.substr(0, packed.find('\n')));
  std::string script = render_bench(dryrun, o).yaml;
  EXPECT_NE(script.find(given), std::string::npos);
  EXPECT_EQ(script.find(first_line(gzip_compress(o.driver_source))), std::string::npos);
  // A driver without its last newline gets one in the script: the given form is not of that
  // text, so the render compresses the text itself.
  o.driver_source = std::string(140000, '#');
  script = render_bench(dryrun, o).yaml;
  EXPECT_EQ(script.find(given), std::string::npos);
  EXPECT_NE(script.find(first_line(gzip_compress(std::string(140000, '#') + "\n"))),
            std::string::npos);
}

TEST(RenderTest, SummaryCountsChangesByKnob) {
  k8s::DryRun dryrun = fixture();
  RenderOptions o = options();
  o.libtpu_flags = {"--xla_new=1"};
  std::string summary = summarize_changes(render_bench(dryrun, o));
  EXPECT_NE(summary.find("abtest-train -> abtest-bench"), std::string::npos) << summary;
  EXPECT_NE(summary.find("--libtpu-flag 3"), std::string::npos) << summary;
}

TEST(RenderTest, WhatTheWrapperExportsIsWarnedAboutOrNoted) {
  // The demo's wrapper exports its fail-fast marker: a note. A credential it exports: a warning
  // (the bench's trainer would run without it), naming it but never its value.
  RenderResult plain = render_bench(fixture(), options());
  using ::testing::AllOf;
  using ::testing::Contains;
  using ::testing::HasSubstr;
  using ::testing::Not;
  EXPECT_THAT(messages_of(plain.diagnostics, Severity::kNote),
              Contains(HasSubstr("exports FT_REGISTERED_MARKER (line 450) outside "
                                 "its startup block")));
  EXPECT_THAT(texts_of(plain.diagnostics, Severity::kWarning),
              Not(Contains(HasSubstr("wrapper script exports"))));
  std::string text = read_file(RTB_TESTDATA_DIR "/launch_dryrun.txt");
  std::string marker = "export FT_REGISTERED_MARKER=/dev/shm/tunix_ft_registered";
  std::size_t at = text.find(marker);
  ASSERT_NE(at, std::string::npos);
  text.insert(at + marker.size(), " HF_TOKEN=hf_abc WANDB_API_KEY");
  RenderResult secret = render_bench(k8s::parse_dryrun(text, "x.txt"), options());
  EXPECT_THAT(texts_of(secret.diagnostics, Severity::kWarning),
              Contains(AllOf(HasSubstr("exports HF_TOKEN (line 450), WANDB_API_KEY (line 450) "),
                             HasSubstr("--driver-env NAME=VALUE"), Not(HasSubstr("hf_abc")))));
  // --driver-env gives it: no warning.
  RenderOptions given = options();
  given.driver.extra_env = {{"HF_TOKEN", "x"}, {"WANDB_API_KEY", "y"}};
  EXPECT_THAT(texts_of(render_bench(k8s::parse_dryrun(text, "x.txt"), given).diagnostics,
                       Severity::kWarning),
              Not(Contains(HasSubstr("wrapper script exports"))));
}

TEST(RenderTest, AShellExpansionInATrainerArgumentIsAWarningAtItsLine) {
  std::string text = read_file(RTB_TESTDATA_DIR "/launch_dryrun.txt");
  std::string flag = "--port=20002";
  std::size_t at = text.find(flag);
  ASSERT_NE(at, std::string::npos);
  text.replace(at, flag.size(), "--port=$TRAINER_PORT");
  RenderResult result = render_bench(k8s::parse_dryrun(text, "x.txt"), options());
  std::vector<Diagnostic> warnings;
  for (const Diagnostic& d : result.diagnostics) {
    if (d.severity == Severity::kWarning) warnings.push_back(d);
  }
  ASSERT_EQ(warnings.size(), 1u);
  // Placed at the client's startup line as the JobSet view gives it ("x.txt:N").
  EXPECT_THAT(warnings[0].where, ::testing::MatchesRegex("x\\.txt:[0-9]+"));
  EXPECT_EQ(warnings[0].message,
            "trainer argument --port=$TRAINER_PORT contains a shell expansion; the driver receives "
            "it literally");
  // The notes (what --explain says) have no place.
  for (const Diagnostic& d : result.diagnostics) {
    if (d.severity == Severity::kNote) {
      EXPECT_EQ(d.where, "");
    }
  }
}

TEST(RenderTest, ExplainMasksValuesByTheSettingTheirPathEndsIn) {
  SecretMasker::Key key{};
  SecretMasker masker = SecretMasker::with_key(key);
  RenderResult result;
  result.changes = {
      {"--driver-env", "spec.x.containers[main].env[HF_TOKEN].value", "old-secret", "new-secret"},
      {"--trainer-arg", "spec.x.containers[main].startup.argv[--hf_token]", "",
       "--hf_token=s3cr3t"},
      {"--name", "spec.x.startup.argv[--worker_id]", "--worker_id=a", "--worker_id=b"},
      {"--max-tokens", "spec.x.startup.argv[--max_tokens]", "", "--max_tokens=8192"}};
  result.diagnostics = {{Severity::kNote, "", "kept WANDB_API_KEY=k3y from the e2e"}};
  std::string text = explain_changes(result, masker);
  for (const char* secret : {"old-secret", "new-secret", "s3cr3t", "k3y"})
    EXPECT_EQ(text.find(secret), std::string::npos) << secret << "\n" << text;
  EXPECT_NE(text.find("env[HF_TOKEN].value: " + masker.fingerprint("old-secret") + " -> " +
                      masker.fingerprint("new-secret") + "\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("argv[--hf_token]: (absent) -> ***#"), std::string::npos) << text;
  EXPECT_NE(text.find("argv[--worker_id]: --worker_id=a -> --worker_id=b\n"), std::string::npos);
  EXPECT_NE(text.find("argv[--max_tokens]: (absent) -> --max_tokens=8192\n"), std::string::npos);
  EXPECT_NE(text.find("note: kept WANDB_API_KEY=***#"), std::string::npos) << text;
  EXPECT_NE(explain_changes(result, SecretMasker::showing()).find("--hf_token=s3cr3t"),
            std::string::npos);
}

// --- weights (--weights), the trainer's profiler (--profile-window), the rollout's routing ------

k8s::DryRun weights_fixture() {
  return k8s::parse_dryrun(read_file(RTB_TESTDATA_DIR "/launch_dryrun_weights_profiler.txt"),
                           "launch_dryrun_weights_profiler.txt");
}

// The bench client's script (command[2]).
std::string client_script(const RenderResult& result) {
  return result
      .bench["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]
            ["command"][2]
      .Scalar();
}

// The changes of one knob, as "path: old -> new".
std::vector<std::string> changes_of(const RenderResult& result, std::string_view knob) {
  std::vector<std::string> out;
  for (const Change& change : result.changes) {
    if (change.knob == knob)
      out.push_back(fmt::format("{}: {} -> {}", change.path, change.old_value, change.new_value));
  }
  return out;
}

TEST(RenderTest, WeightsRandomDropsEverySettingThatLoadsACheckpoint) {
  k8s::DryRun dryrun = weights_fixture();
  RenderResult result = render_bench(dryrun, options());  // random is the default
  std::string c(kClient);
  EXPECT_EQ(changes_of(result, "--weights"),
            (std::vector<std::string>{
                c + ".startup.argv[--maxtext_ckpt_path]: "
                    "--maxtext_ckpt_path=gs://example-bucket/ckpt/model/0/items -> ",
                c + ".startup.env.MAXTEXT_EXTRA_FLAGS[load_parameters_path]: "
                    "load_parameters_path=gs://example-bucket/ckpt/model/0/items -> ",
                c + ".startup.env.MAXTEXT_CKPT: gs://example-bucket/ckpt/model/0/items -> "}));
  std::string script = client_script(result);
  EXPECT_EQ(script.find("ckpt/model"), std::string::npos) << "no checkpoint reaches the trainer";
  EXPECT_EQ(script.find("load_parameters_path"), std::string::npos);
  // The weights, the profiler, and what the wrapper exports outside the startup block.
  ASSERT_EQ(messages_of(result.diagnostics, Severity::kNote).size(), 3u);
  EXPECT_EQ(messages_of(result.diagnostics, Severity::kNote)[0],
            "--weights random: dropped --maxtext_ckpt_path=gs://example-bucket/ckpt/model/0/items, "
            "MAXTEXT_EXTRA_FLAGS load_parameters_path=gs://example-bucket/ckpt/model/0/items, "
            "MAXTEXT_CKPT=gs://example-bucket/ckpt/model/0/items: MaxText initialises random "
            "weights");
  EXPECT_NO_THROW(check_bench_against_e2e(trainer_of(dryrun).root, result.bench, result.changes));
}

TEST(RenderTest, WeightsRandomDropsTheCheckpointOfTheContainersEnvList) {
  std::string text = read_file(RTB_TESTDATA_DIR "/launch_dryrun.txt");
  // The trainer's client container env list (the one after the trainer's client script).
  const std::string env = "              env:\n              # Injects the JobSet Name\n";
  std::size_t env_at = text.find(env, text.find("name: abtest-train"));
  ASSERT_NE(env_at, std::string::npos);
  ASSERT_LT(env_at, text.find("name: abtest-roll"));
  text.insert(env_at + std::string("              env:\n").size(),
              "              - name: MAXTEXT_CKPT\n"
              "                value: gs://example-bucket/other/0/items\n");
  k8s::DryRun dryrun = k8s::parse_dryrun(text, "env.txt");
  RenderResult result = render_bench(dryrun, options());
  std::vector<std::string> changes = changes_of(result, "--weights");
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(changes[1],
            std::string(kClient) +
                ".env[MAXTEXT_CKPT]: MAXTEXT_CKPT=gs://example-bucket/other/0/items -> ");
  EXPECT_EQ(result.yaml.find("gs://example-bucket/other"), std::string::npos);
  RenderOptions keep = options();
  keep.weights = Weights::kCheckpoint;
  EXPECT_NE(render_bench(dryrun, keep).yaml.find("gs://example-bucket/other"), std::string::npos);
}

TEST(RenderTest, EmptyCheckpointValuesLoadNoCheckpoint) {
  // Tunix sets load_parameters_path only for a non-empty value: `--maxtext_ckpt_path=` and
  // MAXTEXT_CKPT="" load nothing, so neither --weights says the bench loads a checkpoint.
  std::string text = read_file(RTB_TESTDATA_DIR "/launch_dryrun_weights_profiler.txt");
  auto blank = [&](const std::string& from, const std::string& to) {
    ASSERT_NE(text.find(from), std::string::npos) << from;
    text.replace(text.find(from), from.size(), to);
  };
  blank("--maxtext_ckpt_path=gs://example-bucket/ckpt/model/0/items", "--maxtext_ckpt_path=");
  blank("MAXTEXT_CKPT=gs://example-bucket/ckpt/model/0/items", "MAXTEXT_CKPT=\"\"");
  blank(" load_parameters_path=gs://example-bucket/ckpt/model/0/items", "");
  k8s::DryRun dryrun = k8s::parse_dryrun(text, "empty.txt");
  RenderOptions o = options();
  o.weights = Weights::kCheckpoint;
  RenderResult kept = render_bench(dryrun, o);
  EXPECT_EQ(messages_of(kept.diagnostics, Severity::kNote)[0],
            "--weights checkpoint: the e2e trainer loads no checkpoint, so MaxText initialises "
            "random weights");
  RenderResult random = render_bench(dryrun, options());
  EXPECT_EQ(messages_of(random.diagnostics, Severity::kNote)[0],
            "--weights random: the e2e trainer loads no checkpoint; MaxText initialises random "
            "weights");
  EXPECT_TRUE(changes_of(random, "--weights").empty());
  // The last of a flag is the one argparse keeps: a later empty value loads nothing.
  std::string later = read_file(RTB_TESTDATA_DIR "/launch_dryrun_weights_profiler.txt");
  const std::string flag = "--maxtext_ckpt_path=gs://example-bucket/ckpt/model/0/items";
  later.replace(later.find(flag) + flag.size(), 0, " --maxtext_ckpt_path=");
  EXPECT_EQ(messages_of(render_bench(k8s::parse_dryrun(later, "later.txt"), o).diagnostics,
                        Severity::kNote)[0]
                .find(flag),
            std::string::npos);
  // An empty checkpoint knob does not contradict --weights random.
  RenderOptions knob = options();
  knob.trainer_args = {"--maxtext_ckpt_path="};
  EXPECT_NO_THROW(render_bench(dryrun, knob));
}

TEST(RenderTest, WeightsCheckpointKeepsTheE2esAndSaysSo) {
  RenderOptions o = options();
  o.weights = Weights::kCheckpoint;
  RenderResult result = render_bench(weights_fixture(), o);
  EXPECT_TRUE(changes_of(result, "--weights").empty());
  std::string script = client_script(result);
  EXPECT_NE(script.find("--maxtext_ckpt_path=gs://example-bucket/ckpt/model/0/items"),
            std::string::npos);
  EXPECT_NE(script.find("MAXTEXT_CKPT=gs://example-bucket/ckpt/model/0/items"), std::string::npos);
  EXPECT_NE(script.find("load_parameters_path=gs://"), std::string::npos);
  EXPECT_EQ(messages_of(result.diagnostics, Severity::kNote)[0].rfind(
                "--weights checkpoint: kept --maxtext_ckpt_path=", 0),
            0u)
      << messages_of(result.diagnostics, Severity::kNote)[0];
  // An e2e without a checkpoint: nothing to drop or keep, and the note says so.
  std::string text = read_file(RTB_TESTDATA_DIR "/launch_dryrun.txt");
  const std::string flag = "--maxtext_ckpt_path=gs://example-bucket/ckpt/model/0/items";
  text.replace(text.find(flag), flag.size(), "");
  RenderResult none = render_bench(k8s::parse_dryrun(text, "none.txt"), options());
  EXPECT_TRUE(changes_of(none, "--weights").empty());
  EXPECT_EQ(messages_of(none.diagnostics, Severity::kNote)[0],
            "--weights random: the e2e trainer loads no checkpoint; MaxText initialises random "
            "weights");
}

TEST(RenderTest, WeightsRandomRefusesAKnobThatLoadsACheckpoint) {
  k8s::DryRun dryrun = fixture();
  RenderOptions o = options();
  o.maxtext_flags = {"load_full_state_path=gs://b/state"};
  EXPECT_EQ(test::error_of([&] { render_bench(dryrun, o); }).message(),
            "--maxtext-flag load_full_state_path=gs://b/state: loads a checkpoint, but --weights "
            "is random (give --weights checkpoint)");
  o = options();
  o.trainer_args = {"--maxtext_load_parameters_path=gs://b/p"};
  EXPECT_NE(test::error_of([&] { render_bench(dryrun, o); }).message().find("--trainer-arg"),
            std::string::npos);
  o.weights = Weights::kCheckpoint;
  EXPECT_NO_THROW(render_bench(dryrun, o));
  EXPECT_EQ(weights_name(Weights::kCheckpoint), "checkpoint");
}

TEST(RenderTest, ProfileWindowLeavesTheTraceToTheDriverAlone) {
  k8s::DryRun dryrun = weights_fixture();  // --profiler_steps=3, MAXTEXT profiler=xplane
  RenderOptions o = options();
  o.profile_window = std::make_pair(3, 2);
  RenderResult result = render_bench(dryrun, o);
  std::string c(kClient);
  EXPECT_EQ(changes_of(result, "--profile-window"),
            (std::vector<std::string>{
                c + ".startup.argv[--profiler_steps]: --profiler_steps=3 -> --profiler_steps=0",
                c + ".startup.env.MAXTEXT_EXTRA_FLAGS[profiler]: profiler=xplane -> "}));
  std::string script = client_script(result);
  EXPECT_NE(script.find("PROFILE_WINDOW=3:2"), std::string::npos);
  EXPECT_EQ(script.find("profiler=xplane"), std::string::npos);
  EXPECT_NE(script.find("--skip_first_n_profiler_steps=5"), std::string::npos)
      << "the e2e's other profiler flags stay (inert with --profiler_steps=0)";
  EXPECT_EQ(messages_of(result.diagnostics, Severity::kNote)[1],
            "profiler: the driver's (PROFILE_WINDOW=3:2, timed steps 3..4); the trainer's own "
            "is turned off (was --profiler_steps=3, MAXTEXT_EXTRA_FLAGS profiler=xplane)");
  EXPECT_NO_THROW(check_bench_against_e2e(trainer_of(dryrun).root, result.bench, result.changes));
  // Without a window the e2e's profiler runs as the e2e sets it.
  RenderResult plain = render_bench(dryrun, options());
  EXPECT_TRUE(changes_of(plain, "--profile-window").empty());
  EXPECT_EQ(client_script(plain).find("PROFILE_WINDOW"), std::string::npos);
  EXPECT_EQ(
      messages_of(plain.diagnostics, Severity::kNote)[1],
      "profiler: the trainer's own, as the e2e sets it (--profiler_steps=3, "
      "MAXTEXT_EXTRA_FLAGS profiler=xplane); the driver traces nothing (no --profile-window)");
  // The main fixture's trainer profiler is off (--profiler_steps=0): the window changes no flag.
  RenderResult off = render_bench(fixture(), o);
  EXPECT_TRUE(changes_of(off, "--profile-window").empty());
  EXPECT_NE(client_script(off).find("--profiler_steps=0 --skip_first_n_profiler_steps=-1"),
            std::string::npos);
  EXPECT_EQ(messages_of(off.diagnostics, Severity::kNote)[1],
            "profiler: the driver's (PROFILE_WINDOW=3:2, timed steps 3..4); the e2e trainer's "
            "profiler is off");
}

// --dump-hlo: under Pathways the proxy compiles, so XLA's dump flags go on its args, and nowhere
// else; the dump lands next to the driver's trace (<PROFILE_DIR>/hlo).
TEST(RenderTest, DumpHloSetsXlasDumpFlagsOnTheProxyWhichCompiles) {
  k8s::DryRun dryrun = fixture();
  RenderOptions o = options();
  o.dump_hlo = true;
  RenderResult result = render_bench(dryrun, o);
  const std::string args =
      "spec.replicatedJobs[proc].template.spec.template.spec.initContainers[pathways-proxy].args";
  const std::string dir = "gs://example-bucket/abtest/maxtext/bench_profile/hlo";
  EXPECT_EQ(
      changes_of(result, "--dump-hlo"),
      (std::vector<std::string>{args + "[--xla_dump_to]:  -> --xla_dump_to=" + dir,
                                args + "[--xla_dump_hlo_as_text]:  -> --xla_dump_hlo_as_text"}));
  EXPECT_EQ(client_script(result).find("xla_dump"), std::string::npos)
      << "the client compiles nothing under Pathways: no dump flag, no DUMP_HLO";
  EXPECT_EQ(result.yaml.find("xla_dump_to"), result.yaml.rfind("xla_dump_to"))
      << "the proxy's args alone";
  EXPECT_THAT(messages_of(result.diagnostics, Severity::kNote),
              testing::Contains("--dump-hlo: the pathways-proxy writes the HLO of every module it "
                                "compiles to " +
                                dir + ", next to the driver's trace"));
  EXPECT_NO_THROW(check_bench_against_e2e(trainer_of(dryrun).root, result.bench, result.changes));
  // PROFILE_DIR moves the dump with the trace; a local path is the proxy container's own.
  o.driver.extra_env = {{"PROFILE_DIR", "/data/trace"}};
  EXPECT_THAT(messages_of(render_bench(dryrun, o).diagnostics, Severity::kNote),
              testing::Contains("--dump-hlo: the pathways-proxy writes the HLO of every module it "
                                "compiles to /data/trace/hlo, a path of its own container: copy it "
                                "with `kubectl cp -c pathways-proxy <pod>:/data/trace/hlo .`"));
  o.driver.extra_env.clear();
  o.libtpu_flags = {"--xla_dump_to=/elsewhere"};
  EXPECT_EQ(test::error_of([&] { render_bench(dryrun, o); }).message(),
            "--dump-hlo: --libtpu-flag --xla_dump_to=/elsewhere sets the dump too; give one of "
            "them");
  o.libtpu_flags.clear();
  std::string text = read_file(RTB_TESTDATA_DIR "/launch_dryrun.txt");
  text.replace(text.find("name: pathways-proxy"), 20, "name: pathways-other");
  k8s::DryRun no_proxy = k8s::parse_dryrun(text, "no_proxy.txt");
  EXPECT_EQ(test::error_of([&] { render_bench(no_proxy, o); }).message(),
            "--dump-hlo: the trainer JobSet has no pathways-proxy container, so its client "
            "compiles: use --driver-env DUMP_HLO=1");
}

TEST(RenderTest, TheRolloutsRoutedExpertsSettingReachesTheDriver) {
  auto setting = [](const RenderResult& result) -> std::optional<std::string> {
    for (const auto& [name, value] : startup_assignments(client_script(result))) {
      if (name == kRolloutRoutedExpertsSetting) return value;
    }
    return std::nullopt;
  };
  // The main fixture's rollout passes --return_routed_experts=true; the other one sets
  // RETURN_ROUTED_EXPERTS=false in its startup block and no flag.
  EXPECT_EQ(setting(render_bench(fixture(), options())), "true");
  EXPECT_EQ(setting(render_bench(weights_fixture(), options())), "false");
  std::string text = read_file(RTB_TESTDATA_DIR "/launch_dryrun.txt");
  auto with = [&](const std::string& replacement) {
    std::string edited = text;
    const std::string flag = " --return_routed_experts=true";
    edited.replace(edited.find(flag), flag.size(), replacement);
    return k8s::parse_dryrun(edited, "rollout.txt");
  };
  EXPECT_EQ(setting(render_bench(with(" --return_routed_experts"), options())), "true")
      << "a bare flag is true (argparse const=True)";
  EXPECT_EQ(setting(render_bench(with(""), options())), std::nullopt) << "no evidence: not written";
  // argparse's nargs="?" takes the next word as the value (type=_str2bool).
  EXPECT_EQ(setting(render_bench(with(" --return_routed_experts False"), options())), "False");
  EXPECT_EQ(setting(render_bench(with(" --return_routed_experts 1"), options())), "1");
  // --no-... is false, and the last one wins.
  EXPECT_EQ(
      setting(render_bench(with(" --return_routed_experts --no-return_routed_experts"), options())),
      "false");
  EXPECT_EQ(
      setting(render_bench(with(" --no-return_routed_experts --return_routed_experts"), options())),
      "true");
  // A blank value is unset: not written, and not compared as false.
  EXPECT_EQ(setting(render_bench(with(" --return_routed_experts="), options())), std::nullopt);
  {
    std::string blank = read_file(RTB_TESTDATA_DIR "/launch_dryrun_weights_profiler.txt");
    const std::string env = "RETURN_ROUTED_EXPERTS=false";
    ASSERT_NE(blank.find(env), std::string::npos);
    blank.replace(blank.find(env), env.size(), "RETURN_ROUTED_EXPERTS=");
    EXPECT_EQ(setting(render_bench(k8s::parse_dryrun(blank, "blank.txt"), options())),
              std::nullopt);
  }
  EXPECT_EQ(test::error_of([&] {
              render_bench(with(" --return_routed_experts=maybe"), options());
            }).message(),
            "rollout JobSet 'abtest-roll': --return_routed_experts=maybe: not a boolean "
            "(true/false, 1/0, yes/no, on/off)");
  // Two rollout JobSets that disagree.
  std::size_t rollout = text.rfind("\n---\n");
  std::string second = text.substr(rollout);
  std::size_t at = second.find("abtest-roll\n");
  ASSERT_NE(at, std::string::npos);
  second.replace(at, std::string("abtest-roll").size(), "abtest-roll2");
  const std::string flag = "--return_routed_experts=true";
  second.replace(second.find(flag), flag.size(), "--return_routed_experts=0");
  EXPECT_NE(
      test::error_of([&] { render_bench(k8s::parse_dryrun(text + second, "two.txt"), options()); })
          .message()
          .find("the rollout JobSets disagree on routed experts: 'abtest-roll' has "
                "--return_routed_experts=true, 'abtest-roll2' has --return_routed_experts=0"),
      std::string::npos);
  // A rollout with a blank value says nothing: the other one's setting is used.
  std::string blank_second = second;
  blank_second.replace(blank_second.find("--return_routed_experts=0"),
                       std::string("--return_routed_experts=0").size(), "--return_routed_experts=");
  EXPECT_EQ(setting(render_bench(k8s::parse_dryrun(text + blank_second, "two.txt"), options())),
            "true");
}

TEST(RenderTest, RenderChunksParseEachDistinctRolloutOnce) {
  std::string text = read_file(RTB_TESTDATA_DIR "/launch_dryrun.txt");
  std::size_t rollout = text.rfind("\n---\n");
  std::string copy = text.substr(rollout);
  std::size_t at = copy.find("abtest-roll\n");
  copy.replace(at, std::string("abtest-roll").size(), "abtest-roll2");
  std::string differing = copy;
  differing.replace(differing.find("abtest-roll2\n"), std::string("abtest-roll2").size(),
                    "abtest-roll3");
  const std::string flag = "--return_routed_experts=true";
  differing.replace(differing.find(flag), flag.size(), "--return_routed_experts=false");
  k8s::RoleMains mains;
  auto rollouts = [&](const std::string& input) {
    k8s::DryRun dryrun = k8s::parse_dryrun(
        input, "x", k8s::render_chunks(mains, {std::string(kRolloutRoutedExpertsFlag)}));
    return select_roles(dryrun, mains).rollouts.size();
  };
  EXPECT_EQ(rollouts(text), 1u);
  EXPECT_EQ(rollouts(text + copy), 1u) << "the same routed-expert text: parsed once";
  EXPECT_EQ(rollouts(text + copy + differing), 2u);
  EXPECT_EQ(rollouts(text.substr(0, rollout) + "\n"), 0u);
}

}  // namespace
}  // namespace rtb::bench
