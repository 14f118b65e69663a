#include "rtb/bench/aot.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "rtb/base/error.h"
#include "rtb/base/io.h"
#include "rtb/bench/aot_input.h"
#include "rtb/bench/render.h"
#include "rtb/bench/trainer_config.h"
#include "rtb/k8s/dryrun.h"
#include "rtb/k8s/jobset.h"
#include "rtb/k8s/yaml.h"
#include "rtb/logs/memlog.h"
#include "rtb/logs/memlog_verdict.h"
#include "test_util.h"

namespace rtb::bench {
namespace {

RenderResult render(RenderOptions options, const std::string& file = "launch_dryrun.txt") {
  k8s::DryRun dryrun = k8s::parse_dryrun(read_file(testdata(file)), file);
  if (options.name.empty()) options.name = "aot-bench";
  options.driver_source = "print('driver')\n";
  options.tool_version = "test";
  return render_bench(dryrun, options);
}

AotPlan plan(RenderOptions options = {}, AotOptions aot = {},
             const std::string& file = "launch_dryrun.txt") {
  return plan_aot(render(std::move(options), file).bench, aot);
}

// The value MaxText sees for a key: its last occurrence.
std::string value_of(const AotPlan& p, const std::string& key) {
  std::string found = "(absent)";
  for (const AotKey& k : p.keys) {
    if (k.key == key) found = k.value;
  }
  return found;
}

std::string origin_of(const AotPlan& p, const std::string& key) {
  std::string found = "(absent)";
  for (const AotKey& k : p.keys) {
    if (k.key == key) found = k.origin;
  }
  return found;
}

std::string env_of(const AotPlan& p, const std::string& name) {
  for (const auto& [n, v] : p.env) {
    if (n == name) return v;
  }
  return "(absent)";
}

std::string aot_error_of(RenderOptions options, AotOptions aot = {}) {
  try {
    plan(std::move(options), std::move(aot));
  } catch (const Error& e) {
    return e.message();
  }
  return "no error";
}

TEST(Aot, FixtureTrainerFieldByField) {
  AotPlan p = plan();
  EXPECT_EQ(p.bench_name, "aot-bench");
  EXPECT_EQ(p.slice, "tpu7x:4x4x8");
  EXPECT_EQ(p.compile_topology, "tpu7x-256");
  EXPECT_EQ(p.chips, 128);
  EXPECT_EQ(p.devices, 256);
  EXPECT_DOUBLE_EQ(p.hbm_gib_per_device, 94.74);
  EXPECT_THAT(p.mesh, ElementsAre(Pair("fsdp", 32), Pair("tensor", 1), Pair("expert", 2),
                                  Pair("context", 4)));
  EXPECT_EQ(p.train_micro_batch_size, 64);
  EXPECT_EQ(p.per_device_batch_size, "0.25");
  EXPECT_EQ(p.max_seq_token_per_tpu, 65536);
  EXPECT_EQ(p.max_segments_per_packed_row, 16);
  EXPECT_EQ(p.packed_rows, 64) << "fsdp 32 x expert 2";
  EXPECT_EQ(p.logps_chunk, 512);

  EXPECT_EQ(value_of(p, "model_name"), "qwen3.5-397b-a17b");
  EXPECT_EQ(value_of(p, "run_name"), "aot-bench") << "--worker_id, renamed by the render";
  EXPECT_EQ(value_of(p, "ici_fsdp_parallelism"), "32");
  EXPECT_EQ(value_of(p, "ici_context_parallelism"), "4");
  EXPECT_EQ(value_of(p, "ici_expert_parallelism"), "2");
  EXPECT_EQ(value_of(p, "context_parallel_load_balance"), "False");
  EXPECT_EQ(value_of(p, "per_device_batch_size"), "0.25");
  EXPECT_EQ(value_of(p, "max_target_length"), "65536");
  EXPECT_EQ(value_of(p, "max_prefill_predict_length"), "8192");
  EXPECT_EQ(value_of(p, "attention"), "flash");
  EXPECT_EQ(origin_of(p, "attention"), "--maxtext_attention");
  EXPECT_EQ(value_of(p, "remat_policy"), "custom");
  EXPECT_EQ(value_of(p, "base_num_kv_heads"), "2");
  EXPECT_EQ(value_of(p, "learning_rate"), "2e-6");
  EXPECT_EQ(value_of(p, "trainable_parameters_mask"), "^(?!.*routed_experts/gate/kernel).*");
  EXPECT_EQ(value_of(p, "float32_gate_logits"), "True");
  EXPECT_EQ(value_of(p, "float32_logits"), "False");
  EXPECT_EQ(value_of(p, "skip_step_on_nan"), "True");
  EXPECT_EQ(value_of(p, "skip_step_on_spikes"), "(absent)");
  EXPECT_EQ(value_of(p, "enable_checkpointing"), "False");
  EXPECT_EQ(value_of(p, "load_parameters_path"), "(absent)");
  // MAXTEXT_EXTRA_FLAGS come after what Tunix derives, so they win.
  EXPECT_EQ(value_of(p, "ragged_buffer_factor"), "2.0");
  EXPECT_EQ(origin_of(p, "sa_block_q"), "MAXTEXT_EXTRA_FLAGS");
  EXPECT_EQ(value_of(p, "compile_topology"), "tpu7x-256");
  EXPECT_EQ(value_of(p, "compile_topology_num_slices"), "1");
  EXPECT_EQ(value_of(p, "compile_engine_loss"), "grpo");
  EXPECT_EQ(value_of(p, "compile_engine_logps_chunk_size"), "512");
  EXPECT_EQ(value_of(p, "compile_engine_max_seq_token_per_tpu"), "65536");
  EXPECT_EQ(value_of(p, "compile_engine_max_segments_per_packed_row"), "16");
  EXPECT_EQ(value_of(p, "compile_engine_grpo_config"),
            "{num_generations: 16, beta: 0.0, epsilon: 0.2, epsilon_high: 0.28, temperature: 1.0, "
            "loss_algo: 'gspo-token', loss_agg_mode: 'sequence-mean-token-mean', "
            "advantage_estimator: 'rloo', use_rollout_logps: false}");
  std::string xla = value_of(p, "compile_xla_flags");
  EXPECT_THAT(xla, HasSubstr("--xla_tpu_scoped_vmem_limit_kib=65472"));
  EXPECT_THAT(xla, Not(HasSubstr("DANGEROUS"))) << "only --xla_* flags are compile options";
  EXPECT_THAT(env_of(p, "LIBTPU_INIT_ARGS"),
              HasSubstr("--DANGEROUS_tpu_runtime_abi_verification_disabled=true"));
  EXPECT_EQ(env_of(p, "JAX_COMPILATION_CACHE_DIR"), "(absent)") << "the run's cache is withheld";
  EXPECT_EQ(env_of(p, "MAXTEXT_EXTRA_FLAGS"), "(absent)") << "its items are keys";
  EXPECT_EQ(env_of(p, "REMAT_DECODER_LAYER_INPUT"), "device");
  EXPECT_EQ(env_of(p, "TRAINER_ARGV"), "(absent)") << "driver settings are not trainer env";
  // The compile keys come last, in this order.
  ASSERT_GE(p.keys.size(), 4u);
  EXPECT_EQ(p.keys.back().key, "compile_xla_flags");
}

TEST(Aot, KnobsReachTheCompile) {
  RenderOptions o;
  o.trainer_slice = "tpu7x:4x4x4";
  o.libtpu_flags = {"--xla_tpu_scoped_vmem_limit_kib=65536", "--xla_brand_new=1"};
  o.maxtext_flags = {"ragged_buffer_factor=2.75", "new_key=x;y"};
  o.logps_chunk = 4096;
  o.trainer_args = {"--train_micro_batch_size=32"};
  o.orchestrator_args = {"--beta=0.04", "--no-overlong_loss_masking", "--loss_algo=grpo",
                         "--sampler_is_length_buckets=512,2048"};
  AotOptions aot;
  aot.compile_keys = {"compile_engine_router_replay=true", "ragged_buffer_factor=3.0"};
  AotPlan p = plan(o, aot);
  EXPECT_EQ(p.compile_topology, "tpu7x-128");
  EXPECT_EQ(p.devices, 128);
  EXPECT_EQ(value_of(p, "ici_fsdp_parallelism"), "16");
  EXPECT_EQ(value_of(p, "per_device_batch_size"), "0.25") << "32 / 128";
  EXPECT_EQ(p.packed_rows, 32);
  EXPECT_THAT(value_of(p, "compile_xla_flags"), HasSubstr("--xla_tpu_scoped_vmem_limit_kib=65536"));
  EXPECT_THAT(value_of(p, "compile_xla_flags"), HasSubstr("--xla_brand_new=1"));
  EXPECT_THAT(env_of(p, "LIBTPU_INIT_ARGS"), HasSubstr("--xla_tpu_scoped_vmem_limit_kib=65536"));
  EXPECT_THAT(env_of(p, "LIBTPU_INIT_ARGS"), Not(HasSubstr("65472")));
  EXPECT_EQ(value_of(p, "new_key"), "x;y");
  EXPECT_EQ(value_of(p, "compile_engine_logps_chunk_size"), "4096");
  EXPECT_EQ(value_of(p, "compile_engine_router_replay"), "true");
  EXPECT_EQ(value_of(p, "ragged_buffer_factor"), "3.0") << "--compile-key comes last";
  EXPECT_EQ(value_of(p, "compile_engine_grpo_config"),
            "{num_generations: 16, beta: 0.04, epsilon: 0.2, epsilon_high: 0.28, "
            "temperature: 1.0, loss_algo: 'grpo', loss_agg_mode: 'sequence-mean-token-mean', "
            "advantage_estimator: 'rloo', use_rollout_logps: false, overlong_loss_masking: "
            "false, sampler_is_length_buckets: [512, 2048]}");
}

// aot-check reads the trainer argv through trainer_config's table, as diff-configs does: the two
// agree on every MaxText key a flag sets.
TEST(Aot, TrainerKeysFollowTheSharedTable) {
  RenderOptions o;
  // The fixture gives --learning_rate=2e-6; a later --optimizer_learning_rate is the same
  // argparse option in run_trainer_node, so it wins.
  o.trainer_args = {"--optimizer_learning_rate=3e-6", "--learning_rate_final_fraction=0.1"};
  AotPlan p = plan(o);
  EXPECT_EQ(value_of(p, "learning_rate"), "3e-6");
  EXPECT_EQ(origin_of(p, "learning_rate"), "--optimizer_learning_rate");
  EXPECT_EQ(value_of(p, "learning_rate_final_fraction"), "0.1");
  RenderResult rendered = render(o);
  BenchClient client = read_bench_client(rendered.bench);
  std::map<std::string, std::string> env;
  for (const k8s::shell::Assignment& a : client.trainer_env) env[a.name] = a.value;
  std::size_t compared = 0;
  for (const TrainerKey& k : trainer_keys(client.trainer.items(), env)) {
    // aot-check's own: the compile takes prompt + response (the row fed is a compile key of its
    // own), no checkpoint and no profiler; and only the table's rows are run_trainer_node options.
    if (k.key == "max_target_length" || is_checkpoint_key(k.key) || !k.rule ||
        k.rule->applies == KeyApplies::kProfiling)
      continue;
    // The compile passes it where Tunix does (MAXTEXT_EXTRA_FLAGS may set it again, later).
    auto passed =
        std::find_if(p.keys.begin(), p.keys.end(), [&](const AotKey& a) { return a.key == k.key; });
    ASSERT_NE(passed, p.keys.end()) << k.key;
    EXPECT_EQ(passed->value, k.value) << k.key << " <- " << k.origin;
    EXPECT_EQ(passed->origin,
              k.key == "base_num_kv_heads" ? "--base_num_kv_heads, --rollout_mesh_tp" : k.origin)
        << k.key;
    ++compared;
  }
  EXPECT_GE(compared, 30u);
}

// The compile takes no checkpoint, whatever --weights keeps: trainer_config.h decides what loads
// one, for render-bench and aot-check alike.
TEST(Aot, NoCheckpointReachesTheCompile) {
  RenderOptions keep;
  keep.weights = Weights::kCheckpoint;
  AotPlan p = plan(keep, {}, "launch_dryrun_weights_profiler.txt");
  EXPECT_EQ(value_of(p, "load_parameters_path"), "(absent)");
  EXPECT_EQ(env_of(p, "MAXTEXT_CKPT"), "(absent)");
  EXPECT_THAT(
      messages_of(p.diagnostics),
      testing::IsSupersetOf(
          {"--maxtext_ckpt_path is not passed: the compile uses abstract weights",
           "MAXTEXT_EXTRA_FLAGS load_parameters_path=gs://example-bucket/ckpt/model/0/items "
           "is not passed: the compile uses abstract weights"}));
  // The default render already dropped them: nothing to note.
  AotPlan random = plan({}, {}, "launch_dryrun_weights_profiler.txt");
  EXPECT_EQ(value_of(random, "load_parameters_path"), "(absent)");
  for (const Diagnostic& note : random.diagnostics) {
    EXPECT_EQ(note.severity, Severity::kNote);
    EXPECT_THAT(note.message, Not(HasSubstr("abstract weights")));
  }
}

TEST(Aot, V5pSliceAndFilledAxis) {
  AotPlan p = plan({}, {}, "launch_dryrun_v5p.txt");
  EXPECT_EQ(p.slice, "tpuv5:4x4x4");
  EXPECT_EQ(p.compile_topology, "v5p-128") << "v5p names count two cores per chip";
  EXPECT_EQ(p.devices, 64);
  EXPECT_EQ(p.per_device_batch_size, "1.0");
  EXPECT_DOUBLE_EQ(p.hbm_gib_per_device, 95.0);

  RenderOptions o;
  o.maxtext_flags = {"ici_fsdp_parallelism=-1"};
  AotPlan filled = plan(o);
  EXPECT_THAT(filled.mesh, ElementsAre(Pair("fsdp", 32), Pair("tensor", 1), Pair("expert", 2),
                                       Pair("context", 4)));
}

TEST(Aot, ErrorsForMeshSliceAndInput) {
  RenderOptions mesh;
  mesh.maxtext_flags = {"ici_fsdp_parallelism=48"};
  EXPECT_THAT(aot_error_of(mesh), HasSubstr("the mesh fsdp 48 x expert 2 x context 4 = 384 devices "
                                            "does not fill the 256 devices of tpu7x:4x4x8"));
  RenderOptions batch;
  batch.trainer_args = {"--train_micro_batch_size=48"};
  EXPECT_THAT(aot_error_of(batch), HasSubstr("--train_micro_batch_size=48 is not a multiple of "
                                             "--mesh_fsdp=32"));
  RenderOptions two_fills;
  two_fills.maxtext_flags = {"ici_fsdp_parallelism=-1", "ici_data_parallelism=-1"};
  EXPECT_THAT(aot_error_of(two_fills), HasSubstr("both -1"));
  AotOptions dcn;
  dcn.compile_keys = {"dcn_data_parallelism=2"};
  EXPECT_THAT(aot_error_of({}, dcn), HasSubstr("one slice"));
  AotOptions bad_key;
  bad_key.compile_keys = {"novalue"};
  EXPECT_THAT(aot_error_of({}, bad_key), HasSubstr("--compile-key novalue: expected KEY=VALUE"));
  RenderOptions orch;
  orch.orchestrator_args = {"--beta=abc"};
  EXPECT_THAT(aot_error_of(orch), HasSubstr("orchestrator --beta=abc: not a number"));

  // A slice that names no known topology.
  RenderResult rendered = render({});
  YAML::Node bench = YAML::Clone(rendered.bench);
  k8s::Document doc{bench, 0};
  auto rm = k8s::JobSetView(doc).container("pathways-rm");
  ASSERT_TRUE(rm.has_value());
  YAML::Node args = rm->node["args"];
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i].Scalar().rfind("--instance_type=", 0) == 0) args[i] = "--instance_type=tpu9:4x4x4";
  }
  Error e = test::error_of([&] { plan_aot(bench, {}); });
  EXPECT_THAT(e.message(), HasSubstr("the trainer slice tpu9:4x4x4 gives no compile_topology: "
                                     "unknown TPU type 'tpu9'"));
  // The e2e trainer itself is not a bench render.
  k8s::DryRun dryrun =
      k8s::parse_dryrun(read_file(testdata("launch_dryrun.txt")), "launch_dryrun.txt");
  k8s::Roles roles = select_roles(dryrun, k8s::RoleMains{});
  Error not_bench = test::error_of([&] { plan_aot(roles.trainer->root, {}); });
  EXPECT_THAT(not_bench.message(), HasSubstr("abtest-train is not a bench JobSet"));
}

TEST(Aot, ScriptQuotesEveryValue) {
  RenderOptions o;
  o.maxtext_flags = {"hostile='$(touch${IFS}x)';`y`"};
  AotOptions aot;
  aot.compile_keys = {"weird=a b 'c' $(d)"};
  aot.python = "/opt/py thon/bin/python3";
  aot.log = "logs/it's here.log";
  aot.source = "dry\nrun.txt";
  aot.tool_version = "9.9";
  AotPlan p = plan(o, aot);
  std::string script = aot_script(p, aot);
  EXPECT_THAT(script, HasSubstr("PYTHON='/opt/py thon/bin/python3'\n"));
  EXPECT_THAT(script, HasSubstr("LOG='logs/it'\\''s here.log'\n"));
  EXPECT_THAT(script, HasSubstr("  'hostile='\\''$(touch${IFS}x)'\\'';`y`' \\\n"));
  EXPECT_THAT(script, HasSubstr("  'weird=a b '\\''c'\\'' $(d)' \\\n"));
  EXPECT_THAT(script, HasSubstr("from dry?run.txt:")) << "no line break inside a comment";
  EXPECT_THAT(script, HasSubstr("\"$PYTHON\" -m maxtext.training_engine.maxtext_engine_compile "
                                "\"$BASE_CONFIG\" \\\n"));
  EXPECT_THAT(script, HasSubstr("  compile_topology=tpu7x-256 \\\n"));
  EXPECT_THAT(script, HasSubstr("exit 3\n"));
  AotOptions defaults;
  std::string plain = aot_script(p, defaults);
  EXPECT_THAT(plain, HasSubstr("LOG=\"logs/aot-bench-$(date -u +%Y%m%dT%H%M%SZ).log\"\n"));
  defaults.base_config = "/x/base.yml";
  EXPECT_THAT(aot_script(p, defaults), HasSubstr("BASE_CONFIG=/x/base.yml\n"));
}

TEST(Aot, JsonAndExplain) {
  AotPlan p = plan();
  std::string json = aot_plan_json(p, {});
  EXPECT_THAT(json, HasSubstr("\"schema\": \"rtb.aot-check/1\""));
  EXPECT_THAT(json, HasSubstr("\"compile_topology\": \"tpu7x-256\""));
  EXPECT_THAT(json, HasSubstr("\"mesh\": {\"fsdp\": 32, \"tensor\": 1, \"expert\": 2, "
                              "\"context\": 4}"));
  EXPECT_THAT(json, HasSubstr("{\"key\": \"sa_block_q\", \"value\": \"1024\", \"from\": "
                              "\"MAXTEXT_EXTRA_FLAGS\"}"));
  std::string explained = explain_aot_keys(p);
  EXPECT_THAT(explained, HasSubstr("ici_fsdp_parallelism=32  <- --mesh_fsdp\n"));
  EXPECT_THAT(explained, HasSubstr("env LIBTPU_INIT_ARGS="));
}

TEST(Aot, EachArmHasItsOwnLog) {
  test::expect_calls<std::string, std::string_view, std::string_view>(
      aot_arm_log_path, {{{"logs/aot-bench-20261030T011938Z.log", "base"},
                          "logs/aot-bench-20261030T011938Z-base.log"},
                         {{"x.tar.log", "blk"}, "x.tar-blk.log"},
                         {{"out/compile", "blk"}, "out/compile-blk"},      // no extension
                         {{"run.d/compile", "blk"}, "run.d/compile-blk"},  // a folder's dot is none
                         {{"logs/.log", "blk"}, "logs/.log-blk"}});        // nor is a leading dot
}

// Each arm's plan is the document of one plan with the arm's name for its schema.
TEST(Aot, ArmsPlanJson) {
  AotPlan p = plan();
  AotOptions log;
  log.log = "a-base.log";
  std::string json = aot_arms_plan_json({{"base", p, log}, {"blk", p, {}}});
  EXPECT_THAT(json, HasSubstr("\"schema\": \"rtb.aot-check.arms/1\""));
  EXPECT_THAT(json, Not(HasSubstr("rtb.aot-check/1")));
  std::string one = aot_plan_json(p, {});
  std::string fields = one.substr(one.find("\"bench\""));  // after "schema", to the last brace
  fields = fields.substr(0, fields.rfind('}'));
  std::size_t blk = json.find("\"arm\": \"blk\"");
  ASSERT_NE(blk, std::string::npos);
  EXPECT_LT(json.find("\"arm\": \"base\""), blk);
  EXPECT_THAT(json, HasSubstr("\"log\": \"a-base.log\""));
  // Written one level deeper: compare without the indentation.
  auto flat = [](std::string text) {
    std::erase(text, ' ');
    return text;
  };
  EXPECT_THAT(flat(json.substr(blk)), HasSubstr(flat(fields)));
}

TEST(Aot, ArmsRunReportsEachArmAndFailsWhenOneDoesNotFit) {
  auto summary_of = [](const char* log) {
    std::vector<logs::MemLog> memlogs;
    memlogs.push_back(logs::read_memlog(testdata(log)));
    logs::HbmOptions hbm;
    hbm.chip = "tpu7x";
    return logs::summarize(std::move(memlogs), hbm);
  };
  std::vector<AotArmResult> both_fit = {{"base", summary_of("memlog_engine_compile_a.log")},
                                        {"blk", summary_of("memlog_engine_compile_a.log")}};
  EXPECT_EQ(aot_arms_outcome(both_fit), Outcome::kPass);
  std::vector<AotArmResult> one_does_not = {{"base", summary_of("memlog_engine_compile_a.log")},
                                            {"blk", summary_of("memlog_engine_compile_b.log")}};
  EXPECT_EQ(aot_arms_outcome(one_does_not), Outcome::kFail);

  std::string text = aot_arms_run_text(one_does_not);
  EXPECT_EQ(text.rfind("arm base:\nlog ", 0), 0u) << text;
  std::size_t blk = text.find("\n\narm blk:\nlog ");
  ASSERT_NE(blk, std::string::npos) << text;
  EXPECT_THAT(text.substr(0, blk), HasSubstr("verdict                  fits"));
  EXPECT_THAT(text.substr(blk), HasSubstr("DOES NOT FIT (fwd_bwd)"));

  std::string json = aot_arms_run_json(one_does_not);
  test::expect_contains(json, {"\"schema\": \"rtb.aot-check.arms-run/1\"", "\"exit_code\": 1,",
                               "\"arm\": \"base\"", "\"arm\": \"blk\"", "\"fits\": false"});
  EXPECT_THAT(json, Not(HasSubstr("rtb.aot-summarize/1")));
}

TEST(Aot, Helpers) {
  EXPECT_EQ(python_float(0.25), "0.25");
  EXPECT_EQ(python_float(1.0), "1.0");
  EXPECT_EQ(python_float(2.0), "2.0");
  EXPECT_EQ(python_float(1e-05), "1e-05");
  EXPECT_EQ(python_float(0.125), "0.125");
  using namespace std::chrono;
  // 2026-10-30 01:19:38 UTC
  system_clock::time_point t = system_clock::from_time_t(1793323178);
  EXPECT_EQ(aot_log_path(t), "logs/aot-bench-20261030T011938Z.log");
  EXPECT_EQ(run_quiet({"true"}), 0);
  EXPECT_EQ(run_quiet({"false"}), 1);
  EXPECT_EQ(run_quiet({"/nonexistent/python3", "-c", "pass"}), 127);
  EXPECT_EQ(run_bash("exit 7"), 7);
  EXPECT_EQ(run_bash("kill -TERM $$"), 128 + 15);
  EXPECT_THAT(std::string(maxtext_probe_code()), HasSubstr(std::string(kEngineCompileModule)));
}

}  // namespace
}  // namespace rtb::bench

namespace rtb::bench {
namespace {

// The seed's default: a render that sets no chunk compiles log-probs in chunks of 512.
TEST(Aot, LogpsChunkDefaultWhenTheRenderSetsNone) {
  RenderOptions no_chunk;
  no_chunk.trainer_args_removed = {"--compute_logps_chunk_size"};
  AotPlan p = plan(no_chunk);
  EXPECT_EQ(p.logps_chunk, kAotDefaultLogpsChunk);
  EXPECT_EQ(value_of(p, "compile_engine_logps_chunk_size"), "512");
  EXPECT_EQ(origin_of(p, "compile_engine_logps_chunk_size"),
            "aot-check default (the render sets no chunk)");
  AotOptions other;
  other.default_logps_chunk = 0;  // AOT_LOGPS_CHUNK_SIZE=0: whole-sequence logits
  EXPECT_EQ(plan(no_chunk, other).logps_chunk, 0);
  // A chunk the render sets wins over the default.
  other.default_logps_chunk = 2048;
  EXPECT_EQ(plan({}, other).logps_chunk, 512);
}

TEST(Aot, LogpsChunkDefaultFromTheEnvironment) {
  EXPECT_EQ(aot_logps_chunk_default(nullptr), kAotDefaultLogpsChunk);
  EXPECT_EQ(aot_logps_chunk_default(""), kAotDefaultLogpsChunk);
  EXPECT_EQ(aot_logps_chunk_default("1024"), 1024);
  EXPECT_EQ(aot_logps_chunk_default("0"), 0);
  EXPECT_THROW(aot_logps_chunk_default("big"), Error);
  EXPECT_THROW(aot_logps_chunk_default("-1"), Error);
}

}  // namespace
}  // namespace rtb::bench
