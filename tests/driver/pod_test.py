"""Tests of the bench in the pod (pod.py).

PodFlowTest runs the one-file driver as the pod does (python3 bench_driver.py, settings from the
environment) on the stand-ins of fake_tunix.py: set-up, payloads, compile, timed steps and
summary, and each way the run stops. In-process: resolve_plan_inputs, which checks the settings
against the shapes Tunix reports, the warm-up signature check, the compile call, the actor
log-prob pass and the gradient-norm warning.
"""

import contextlib
import hashlib
import io
import json
import os
import types
import unittest
from typing import Any, Callable, Dict, List, Tuple

import fake_tunix
from fake_tunix import FAKES, ORCH_ARGV, TRAINER_ARGV, TRAINER_ARGV_UNPROFILED
from settings_env import base_env, settings_error
from driver_loader import load_driver

bd = load_driver()


class ResolvePlanInputsTest(unittest.TestCase):
  """The checks that need the shapes Tunix reports (a stand-in for TunixSetup)."""

  def setup(self, **overrides):
    values = dict(rows=64, tokens=65536, num_segments=17, max_segments_per_row=16,
                  routing_shape=(60, 10), experts=512, warmup_segment_counts=None,
                  max_prompt_length=None, max_response_length=None)
    values.update(overrides)
    return types.SimpleNamespace(**values)

  def settings(self, **env):
    defaults = {"ROUTING_TARGETS": ",".join(["2"] * 60)}
    defaults.update(env)
    return bd.parse_settings(base_env(**defaults))

  def test_segments_follow_the_e2e_packing(self):
    # The seed's rows: 8,192 + 57,344 = 65,536-token trajectories, one per 60,948-token row.
    seed = self.setup(max_prompt_length=8192, max_response_length=57344)
    resolved = bd.resolve_plan_inputs(self.settings(), seed)
    self.assertEqual(resolved["segments"], 1)
    self.assertIn("max-length trajectories", resolved["segments_rule"])
    self.assertEqual(resolved["max_prompt_length"], 8192)
    # Short trajectories: as many as fit on the 64-token grid, capped by the packer.
    short = self.setup(max_prompt_length=1000, max_response_length=2000)  # 3,008 per segment
    self.assertEqual(bd.resolve_plan_inputs(self.settings(), short)["segments"], 16)
    # A concrete warm-up payload: each row's own count (the seed's rule).
    counted = self.setup(warmup_segment_counts=[3, 1] * 32)
    resolved = bd.resolve_plan_inputs(self.settings(), counted)
    self.assertEqual(resolved["segments"], [3, 1] * 32)
    self.assertIn("warm-up", resolved["segments_rule"])
    # SEGMENTS wins.
    resolved = bd.resolve_plan_inputs(self.settings(SEGMENTS="5"), seed)
    self.assertEqual((resolved["segments"], resolved["segments_rule"]), (5, "SEGMENTS"))

  def test_defaults_resolve_from_the_shapes(self):
    resolved = bd.resolve_plan_inputs(self.settings(ROUTING_SCALE="0.5"), self.setup())
    self.assertEqual(resolved["real_len"], 60948)
    self.assertEqual(resolved["segments"], 16)
    self.assertEqual(resolved["final_rows"], 64)
    self.assertEqual(resolved["targets"], [1.5] * 60)

  def test_errors(self):
    cases: List[Tuple[Dict[str, str], Dict[str, Any], str]] = [
        ({"ROUTING_TARGETS": "2,2"}, {}, "ROUTING_TARGETS has 2 values but the model has 60"),
        ({"REAL_LEN": "70000"}, {}, "exceeds the token budget T=65536"),
        ({"SEGMENTS": "17"}, {}, "the 16 segments a row may hold"),
        ({"SEGMENTS": "9", "REAL_LEN": "8"}, {}, "exceeds REAL_LEN=8"),
        ({"FINAL_ROWS": "65"}, {}, "exceeds the rows per micro-batch R=64"),
    ]
    for env, setup, fragment in cases:
      with self.subTest(env=env):
        self.assertIn(
            fragment,
            settings_error(self, bd.resolve_plan_inputs, self.settings(**env), self.setup(**setup)))
    settings = bd.parse_settings(base_env())
    self.assertIn("ROUTING_TARGETS is required",
                  settings_error(self, bd.resolve_plan_inputs, settings, self.setup()))

  def test_no_routing_shape_needs_no_targets(self):
    resolved = bd.resolve_plan_inputs(bd.parse_settings(base_env()),
                                      self.setup(routing_shape=None, experts=None))
    self.assertIsNone(resolved["targets"])


class PodFlowTest(fake_tunix.FakeTunixTestCase):
  """The whole pod flow against the stand-ins."""

  def test_explicit_worker_run(self):
    result, calls = self.run_driver()
    self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
    events = [call["event"] for call in calls]
    # MaxText's config and the warm-up payload come before the trainer is built (a bad setting
    # costs CPU seconds, not a slice).
    self.assertEqual(events[:5], ["jax_initialize", "pyconfig", "warmup", "trainer", "worker"])
    worker = calls[4]
    self.assertEqual(worker["context"], "MESH")
    self.assertEqual(worker["worker_id"], "bench-trainer")
    self.assertEqual(calls[3]["chain"], "{'max_norm': 0.0625}")
    self.assertEqual(calls[1]["argv"], ["model_name=qwen3-0.6b"])
    self.assertEqual(events.count("compile"), 1)
    self.assertTrue(next(c for c in calls if c["event"] == "compile")["abstract"])
    fwd_bwd = [call for call in calls if call["event"] == "fwd_bwd"]
    self.assertEqual(len(fwd_bwd), 6)
    self.assertEqual(events.count("update"), 2)
    rows, tokens = 4, 512 - round(512 * 4588 / 65536)
    for index, call in enumerate(fwd_bwd):
      # fwd_bwd(request, **kwargs): the warm-up step asks for the fused update (tunix#2719); this
      # worker does not say `updated`, so step 1 is not asked.
      self.assertEqual(
          call["kwargs"],
          {"skip_jit": False, "apply_optimizer": index == 2} if index < 3 else {"skip_jit": False})
      self.assertEqual(call["tokens"], rows * tokens)
      self.assertTrue(call["request"].startswith("train_req_"))
      self.assertIsNone(call["jax_platforms"])  # the orchestrator import did not leave cpu
    loss = next(call for call in calls if call["event"] == "with_loss_fn")
    self.assertTrue(loss["has_aux"])
    self.assertEqual(loss["loss"], {"seq_logprob_error_threshold": 2.0})
    self.assertEqual(
        next(c for c in calls if c["event"] == "with_gen_model_input_fn")["value"],
        {"pad_id": 3, "eos_id": 4})

    steps = [json.loads(line.split(" ", 1)[1]) for line in self.machine(result, "BENCH_STEP ")]
    self.assertEqual([step["step"] for step in steps], [0, 1])
    for step in steps:
      self.assertFalse(step["fused_update"])
      self.assertEqual(step["microbatch_timing"], "dispatch")  # nothing to wait on here
      self.assertEqual(step["tokens"], 3 * rows * tokens)
      self.assertEqual(len(step["microbatch_s"]), 3)
      self.assertEqual(step["metrics"], {"loss": 0.5, "gradient_norm": 2.0})
    timing = self.machine(result, "TRAINER_STEP_TIMING ")
    self.assertEqual(len(timing), 2)
    self.assertRegex(
        # policy_version: the version after the step's update (Tunix
        # docs/trainer_step_timing.md@40a12182), step + 1 when every step applies one.
        timing[1],
        r"^TRAINER_STEP_TIMING step=1 policy_version=2 rtt_s=\d+\.\d{3} "
        r'timing=\{"v":1,"train_step":2,"mb":\[\],"update":null,"prepare":null\}$')
    summary = self.summary_of(result)
    self.assertEqual(summary["name"], "bench-test")
    # A bench of one arm: no BENCH_ARM line, no arm or run fields.
    self.assertNotIn("arm", summary)
    self.assertEqual(self.machine(result, "BENCH_ARM "), [])
    self.assertEqual(summary["update_path"]["ran"], "explicit")
    self.assertIn("did not apply it in the warm-up step", summary["update_path"]["why"])
    self.assertLess(summary["fence_s"], 1.0)  # the state leaf is ready at once here
    self.assertEqual((summary["rows"], summary["tokens_per_row"], summary["real_len"]),
                     (4, 512, tokens))
    self.assertEqual((summary["layers"], summary["topk"], summary["experts"]), (3, 2, 16))
    self.assertEqual(summary["chips"], 4)  # 8 TPU7x devices, two per chip
    # One 64 + 448-token trajectory per 476-token row (max-length trajectories that fit).
    self.assertEqual(summary["segments"], 1)
    self.assertIn("max-length trajectories", summary["choices"]["segments"]["source"])
    self.assertEqual(summary["choices"]["pad_position"]["value"], "end")
    self.assertEqual(summary["fallbacks"], [])
    self.assertEqual(len(summary["step_s"]), 2)
    self.assertEqual([entry["target"] for entry in summary["routing"]], [1.0, 2.0, 4.0])
    for entry in summary["routing"]:
      self.assertAlmostEqual(entry["achieved"], entry["target"], delta=0.01 * entry["target"])
    self.assertEqual(summary["knobs"]["logp_gates"], "on")
    # The fake MaxText config sizes its ragged buffers at 2x balanced and counts no drops.
    self.assertEqual(summary["token_dropping"]["verdict"], "unknown")
    self.assertEqual(summary["token_dropping"]["ragged_buffer_factor"], 2.0)
    self.assertIn("WARNING: dropped tokens: unknown", result.stdout)
    self.assertEqual(summary["compile"]["method"], "worker.compile")
    for line in result.stdout.splitlines():
      self.assertTrue(
          line.startswith(
              ("[TrainerBench] ", "BENCH_STEP {", "BENCH_SUMMARY {", "TRAINER_STEP_TIMING step=")),
          line)

  def test_versions_name_the_code_the_run_called(self):
    result, _ = self.run_driver()
    self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
    versions = self.summary_of(result)["versions"]
    called = {
        "tunix.experimental.examples.common.run_trainer_node",
        "tunix.experimental.worker.trainer_worker", "tunix.experimental.common.datatypes",
        "tunix.experimental.examples.deepswe_dist.run_deepswe_dist",
        "tunix.experimental.orchestrator.batch_assembly",
        "tunix.experimental.orchestrator.compile_warmup", "tunix.utils.maxtext_utils",
        "tunix.experimental.distributed.runtime.contexts.k8s_context"
    }
    self.assertEqual(set(versions["modules"]), called)
    for name, digest in versions["modules"].items():
      self.assertRegex(digest, r"^[0-9a-f]{12}$", name)
    worker_file = os.path.join(self.root, "tunix/experimental/worker/trainer_worker.py")
    with open(worker_file, "rb") as handle:
      self.assertEqual(versions["modules"]["tunix.experimental.worker.trainer_worker"],
                       hashlib.sha256(handle.read()).hexdigest()[:12])
    # The stand-ins have no version (the set-up imports maxtext too); numpy is the real one.
    self.assertEqual(versions["packages"]["tunix"], "unknown")
    self.assertEqual(versions["packages"]["maxtext"], "unknown")
    self.assertIsNone(versions["packages"]["libtpu"])  # not imported
    self.assertRegex(versions["packages"]["numpy"], r"^\d+\.\d+")
    # Another TrainerWorker file: its hash and the run's code hash change, nothing else.
    with open(worker_file, encoding="utf-8") as handle:
      worker = handle.read()
    root = self.variant(
        replace={"tunix/experimental/worker/trainer_worker.py": worker + "\n# another build\n"})
    changed, _ = self.run_driver(root=root)
    self.assertEqual(changed.returncode, 0, changed.stdout + changed.stderr)
    other = self.summary_of(changed)["versions"]
    differing = {name for name in called if other["modules"][name] != versions["modules"][name]}
    self.assertEqual(differing, {"tunix.experimental.worker.trainer_worker"})
    self.assertNotEqual(other["code"], versions["code"])

  def test_staging_without_the_calls_stops_before_the_trainer(self):
    line = self.run_stopped(2, STAGE_BOUNDARY="on")  # nothing was timed
    self.assertIn("STAGE_BOUNDARY=on", line)
    self.assertIn("stage_fwd_bwd", line)
    # auto, with the e2e orchestrator staging: a fact found at run time, exit 1, before the
    # trainer is built; STAGE_BOUNDARY=off runs unstaged.
    result, calls = self.run_driver(ORCH_PIPELINE_STEP_BOUNDARY="true")
    self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
    (line,) = result.stderr.strip().splitlines()
    self.assertIn("the e2e run stages the step boundary (auto: ", line)
    self.assertIn("STAGE_BOUNDARY=off", line)
    events = {call["event"] for call in calls}
    self.assertFalse(events & {"trainer", "worker"}, events)  # no trainer built
    result, _ = self.run_driver(ORCH_PIPELINE_STEP_BOUNDARY="true", STAGE_BOUNDARY="off")
    self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
    stage = self.summary_of(result)["stage_boundary"]
    self.assertEqual((stage["requested"], stage["resolved"], stage["engaged"]),
                     ("off", "off", False))

  def test_fallbacks_stop_the_run_unless_allowed(self):
    root = self.variant(remove=["tunix/experimental/orchestrator/compile_warmup.py"])
    line = self.run_stopped(1, root=root)
    self.assertIn("build_trainer_warmup_payload is missing", line)
    self.assertIn("ALLOW_FALLBACKS=1 would", line)
    result, calls = self.run_driver(root=root, ALLOW_FALLBACKS="1")
    self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
    fallbacks = self.summary_of(result)["fallbacks"]
    self.assertEqual(len(fallbacks), 1)
    self.assertIn("equivalent payload layout", fallbacks[0])

  def test_a_tokenizer_that_does_not_load_is_a_fallback(self):
    root = self.variant(
        replace={
            "transformers.py": """
        class AutoTokenizer:
          @staticmethod
          def from_pretrained(path, trust_remote_code=False):
            raise OSError("no such model: " + str(path))
        """
        })
    result, _ = self.run_driver(root=root)
    self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
    self.assertIn("did not load (no such model", result.stderr)
    result, calls = self.run_driver(root=root, ALLOW_FALLBACKS="1", FAKE_PAD="9")
    self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
    self.assertEqual(
        next(c for c in calls if c["event"] == "with_gen_model_input_fn")["value"],
        {"pad_id": 9, "eos_id": 9})

  def test_a_warmup_signature_mismatch_is_fatal(self):
    worker = FAKES["tunix/experimental/worker/trainer_worker.py"].replace(
        'return "; ".join(sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k)))',
        'return "completion_ids: expected [4,512] int32, got [4,512] int64"')
    root = self.variant(replace={"tunix/experimental/worker/trainer_worker.py": worker})
    line = self.run_stopped(1, root=root)
    self.assertIn("differs from the warm-up signature", line)
    self.assertIn("completion_ids: expected [4,512] int32, got [4,512] int64", line)

  def test_a_changed_signature_names_function_argument_and_file(self):
    # A newer BatchConfig that requires an argument the driver does not know.
    assembly = FAKES["tunix/experimental/orchestrator/batch_assembly.py"].replace(
        "class BatchConfig:\n          pad_id: int = 0",
        "class BatchConfig:\n          token_policy: str\n          pad_id: int = 0")
    self.assertNotEqual(assembly, FAKES["tunix/experimental/orchestrator/batch_assembly.py"])
    root = self.variant(replace={"tunix/experimental/orchestrator/batch_assembly.py": assembly})
    line = self.run_stopped(1, root=root)
    self.assertIn("BatchConfig (", line)
    self.assertIn("batch_assembly.py", line)
    self.assertIn("'token_policy'", line)

  def test_routing_off_and_prompts(self):
    orch = ORCH_ARGV + " --max_prompt_length=40"
    result, calls = self.run_driver(ROUTING="off", ORCH_ARGV=orch)
    self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
    fwd_bwd = [call for call in calls if call["event"] == "fwd_bwd"]
    self.assertTrue(fwd_bwd and not any(call["routed"] for call in fwd_bwd))
    # Prompts are real tokens without the completion mask.
    self.assertTrue(all(0 < call["completion"] < call["tokens"] for call in fwd_bwd))
    choices = self.summary_of(result)["choices"]
    self.assertEqual(choices["routing"], {"value": False, "source": "ROUTING=off"})
    self.assertEqual(choices["max_prompt_length"]["value"], 40)

  def test_padding_follows_the_orchestrators_environment(self):
    result, _ = self.run_driver(ORCH_PACK_PAD_POSITION="start", ORCH_PACK_PAD_ALIGN="64")
    self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
    summary = self.summary_of(result)
    self.assertEqual(summary["choices"]["pad_position"]["value"], "start")
    self.assertIn("PACK_PAD_POSITION=start", summary["choices"]["pad_position"]["source"])
    self.assertEqual(summary["shift"], 0)  # 36 tokens of padding: less than one 64-token step
    self.assertIn("pad_position: start (orchestrator env PACK_PAD_POSITION=start)", result.stdout)

  def test_the_actor_log_prob_pass(self):
    result, calls = self.run_driver(LOGPS_PASS="on")
    self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
    events = [call["event"] for call in calls if call["event"] in ("per_token_logps", "fwd_bwd")]
    self.assertEqual(events, ["per_token_logps", "fwd_bwd"] * 6)  # before each micro-batch
    first = next(call for call in calls if call["event"] == "per_token_logps")
    self.assertEqual((first["role"], first["pad"], first["eos"], first["segmented"]),
                     ("actor", 3, 4, True))
    steps = [json.loads(line.split(" ", 1)[1]) for line in self.machine(result, "BENCH_STEP ")]
    self.assertTrue(all(len(step["logps_pass_s"]) == 3 for step in steps))
    # auto: this program uses no rollout log-probs as old ones, so the e2e makes no pass.
    result, calls = self.run_driver()
    self.assertNotIn("per_token_logps", [call["event"] for call in calls])
    choice = self.summary_of(result)["choices"]["logps_pass"]
    self.assertFalse(choice["value"])
    self.assertIn("no actor log-prob pass", choice["source"])
    # on, without the call: exit 2 naming it.
    worker = FAKES["tunix/experimental/worker/trainer_worker.py"].replace(
        "def per_token_logps(self, request):", "def _no_per_token_logps(self, request):")
    root = self.variant(replace={"tunix/experimental/worker/trainer_worker.py": worker})
    result, _ = self.run_driver(root=root, LOGPS_PASS="on")
    self.assertEqual(result.returncode, 2, result.stdout + result.stderr)
    self.assertIn("LOGPS_PASS=on but this image's Tunix lacks TrainerWorker.per_token_logps",
                  result.stderr)

  def test_a_step_with_nothing_to_end_on_stops_the_run(self):
    result, calls = self.run_driver(FAKE_NO_STATE="1")
    self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
    (line,) = result.stderr.strip().splitlines()
    self.assertTrue(line.startswith("bench_driver: no way to end the step on its update: "), line)
    self.assertEqual([call["event"] for call in calls].count("update"), 1)  # step 0 only
    self.assertEqual(self.machine(result, "BENCH_STEP "), [])

  def test_fused_worker_gets_no_update(self):
    result, calls = self.run_driver(worker="fused")
    self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
    events = [call["event"] for call in calls]
    self.assertNotIn("update", events)
    flags = [call["kwargs"]["apply_optimizer"] for call in calls if call["event"] == "fwd_bwd"]
    self.assertEqual(flags, [False, False, True] * 2)
    steps = [json.loads(line.split(" ", 1)[1]) for line in self.machine(result, "BENCH_STEP ")]
    self.assertTrue(all(step["fused_update"] for step in steps))
    self.assertEqual([step["train_step"] for step in steps], [1, 2])
    self.assertEqual(self.summary_of(result)["update_path"]["ran"], "fused")

  def test_dump_hlo_sets_xla_flags_before_jax_starts(self):
    result, calls = self.run_driver(DUMP_HLO="1", PROFILE_DIR="/data/trace",
                                    XLA_FLAGS="--xla_gpu_enable_latency_hiding_scheduler=true")
    self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
    (imported,) = [call for call in calls if call["event"] == "jax_initialize"]
    self.assertEqual(
        imported["xla_flags"], "--xla_gpu_enable_latency_hiding_scheduler=true "
        "--xla_dump_to=/data/trace/hlo --xla_dump_hlo_as_text")
    self.assertIn("DUMP_HLO: XLA_FLAGS += --xla_dump_to=/data/trace/hlo", result.stdout)
    result, calls = self.run_driver()
    (imported,) = [call for call in calls if call["event"] == "jax_initialize"]
    self.assertIsNone(imported["xla_flags"])

  def test_dump_hlo_on_pathways_warns_that_the_client_compiles_nothing(self):
    pathways = {"JAX_PLATFORMS": "proxy", "JAX_BACKEND_TARGET": "grpc://127.0.0.1:29000"}
    result, _ = self.run_driver(DUMP_HLO="1", **pathways)
    self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
    (warning,) = [line for line in result.stdout.splitlines() if "WARNING: DUMP_HLO=1" in line]
    self.assertIn("pathways-proxy compiles", warning)
    self.assertIn("render-bench --dump-hlo", warning)
    for settings in ({"DUMP_HLO": "1"}, pathways):
      result, _ = self.run_driver(**settings)
      self.assertNotIn("WARNING: DUMP_HLO", result.stdout + result.stderr)

  def test_knobs_reach_the_payload_and_the_algorithm(self):
    result, calls = self.run_driver(LOGP_GATES="off", FINAL_ROWS="1", PROFILE_WINDOW="1:1",
                                    SEGMENTS="2", PAD_POSITION="start", PAD_ALIGN="64",
                                    TRAINER_ARGV=TRAINER_ARGV_UNPROFILED)
    self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
    warmup = next(call for call in calls if call["event"] == "warmup")
    self.assertIsNone(warmup["seq_logprob_error_threshold"])
    loss = next(call for call in calls if call["event"] == "with_loss_fn")
    self.assertEqual(loss["loss"], {"seq_logprob_error_threshold": None})
    self.assertIn("seq_logprob_error_threshold=2.0 turned off", result.stdout)
    # The trainer's own profiler is off; the driver traces step 1, whole: its 3 calls and its
    # update, inside its mark.
    self.assertEqual(next(c for c in calls if c["event"] == "trainer")["profiler_steps"], 0)
    self.assertEqual(self.summary_of(result)["profiler"]["by"], "driver")
    events = [call["event"] for call in calls]
    self.assertEqual(events.count("start_trace"), 1)
    self.assertEqual(events.count("stop_trace"), 1)
    opened, closed = events.index("start_trace"), events.index("stop_trace")
    traced = [event for event in events[opened + 1:closed] if event != "get_step_timing"]
    self.assertEqual(traced,
                     ["step_trace", "fwd_bwd", "fwd_bwd", "fwd_bwd", "update", "step_trace_end"])
    self.assertEqual(calls[opened + 1]["step_num"], 1)
    # Every step is marked for profile-report (jax.profiler.StepTraceAnnotation, step_num).
    marks = [call for call in calls if call["event"] == "step_trace"]
    self.assertEqual([mark["step_num"] for mark in marks], list(range(len(marks))))
    self.assertEqual({mark["name"] for mark in marks}, {"bench_step"})
    start = next(call for call in calls if call["event"] == "start_trace")
    self.assertEqual(start["log_dir"], "gs://bucket/bench/bench_profile")
    rows = [call["rows"] for call in calls if call["event"] == "fwd_bwd"]
    self.assertEqual(rows, [4, 4, 1] * 2)  # the last micro-batch of a step has 1 real row
    summary = self.summary_of(result)
    self.assertEqual(summary["final_rows"], 1)
    self.assertEqual(summary["segments"], 2)
    self.assertEqual(summary["shift"], 0)  # 37 tokens of padding < PAD_ALIGN 64: no move
    self.assertIn("routing_final", summary)
    self.assertEqual(summary["knobs"]["profile_window"], "1:1")

  def test_bad_settings_found_with_the_shapes_exit_2(self):
    for settings, fragment in [
        ({"ROUTING_TARGETS": "1,2"}, "ROUTING_TARGETS has 2 values but the model has 3 decoder"),
        ({"SEGMENTS": "5"}, "the 4 segments a row may hold"),
        ({"FINAL_ROWS": "5"}, "R=4"),
        ({"ROUTING_TARGETS": "1,2,9"}, "cannot be reached with 16 experts and top-2"),
        ({"ORCH_ARGV": ORCH_ARGV.replace("--max_seq_token_per_tpu=512",
                                         "")}, "does not select sequence packing"),
    ]:
      with self.subTest(settings=settings):
        result, _ = self.run_driver(**settings)
        self.assertEqual(result.returncode, 2, result.stdout + result.stderr)
        self.assertEqual(len(result.stderr.splitlines()), 1, result.stderr)
        self.assertIn(fragment, result.stderr)
        self.assertEqual(self.machine(result, "BENCH_"), [])

  def test_a_flag_tunix_rejects_exits_2_with_one_line(self):
    result, _ = self.run_driver(TRAINER_ARGV=TRAINER_ARGV + " --unknown_flag=1")
    self.assertEqual(result.returncode, 2, result.stdout + result.stderr)
    self.assertEqual(len(result.stderr.splitlines()), 1, result.stderr)
    self.assertIn("TRAINER_ARGV is rejected by Tunix's argument parser", result.stderr)
    self.assertIn("unrecognized arguments: --unknown_flag=1", result.stderr)

  def test_a_failing_step_exits_1_and_stops_the_trace(self):
    result, calls = self.run_driver(FAKE_FAIL_AT="4", PROFILE_WINDOW="1:1",
                                    TRAINER_ARGV=TRAINER_ARGV_UNPROFILED)
    self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
    self.assertEqual(result.stderr.splitlines()[-1], "bench_driver: failed: device lost")
    self.assertIn("Traceback", result.stderr)
    events = [call["event"] for call in calls]
    self.assertEqual(events.count("start_trace"), 1)
    self.assertEqual(events.count("stop_trace"), 1)
    self.assertEqual(len(self.machine(result, "BENCH_STEP ")), 1)
    self.assertEqual(self.machine(result, "BENCH_SUMMARY"), [])


def quietly(call: Callable[[], Any]) -> Tuple[Any, str]:
  """(what call() returns, what it printed)."""
  out = io.StringIO()
  with contextlib.redirect_stdout(out):
    result = call()
  return result, out.getvalue()


class ArmsFlowTest(fake_tunix.FakeTunixTestCase):
  """A same-pod A/B as its pod runs it: the driver once per run, a fresh process each, with the
  run's arm settings (render-bench --arm writes BENCH_ARM and BENCH_RUN with each run's own)."""

  def test_each_run_says_its_arm_and_runs_with_its_settings(self):
    # The control "base" (2 steps), then "more" (3 steps, another seed, a MaxText flag) twice; its
    # first run fails in its second fwd_bwd, and the next run goes on.
    arms: Dict[str, Dict[str, str]] = {
        "base": {},
        "more": {"STEPS": "3", "SEED": "7", "MAXTEXT_EXTRA_FLAGS": "override_model_config=true"}
    }
    runs: List[Tuple[str, Dict[str, str]]] = [("base", {}), ("more", {"FAKE_FAIL_AT": "1"}),
                                              ("more", {})]
    for run, (arm, extra) in enumerate(runs, start=1):
      with self.subTest(run=run, arm=arm):
        result, calls = self.run_driver(BENCH_ARM=arm, BENCH_RUN=str(run), **arms[arm], **extra)
        # The BENCH_ARM line comes first, with the settings the run has.
        machine = [line for line in result.stdout.splitlines() if line.startswith("BENCH_")]
        self.assertTrue(machine[0].startswith("BENCH_ARM "), result.stdout)
        announced = json.loads(machine[0].split(" ", 1)[1])
        self.assertEqual((announced["arm"], announced["run"]), (arm, run))
        self.assertEqual(announced["knobs"]["steps"], int(arms[arm].get("STEPS", "2")))
        self.assertEqual(announced["knobs"]["seed"], int(arms[arm].get("SEED", "0")))
        # The arm's MaxText flag reaches MaxText's config in its runs only.
        pyconfig = next(call for call in calls if call["event"] == "pyconfig")
        self.assertEqual("override_model_config=true" in pyconfig["argv"], arm == "more",
                         pyconfig["argv"])
        if extra:  # the failed run: reported, no summary
          self.assertEqual(result.returncode, 1)
          self.assertIn("device lost", result.stderr)
          self.assertEqual(self.machine(result, "BENCH_SUMMARY "), [])
          continue
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        steps = [json.loads(line.split(" ", 1)[1]) for line in self.machine(result, "BENCH_STEP ")]
        self.assertEqual(len(steps), int(arms[arm].get("STEPS", "2")))
        for step in steps:
          self.assertEqual((step["arm"], step["run"]), (arm, run))
        summary = self.summary_of(result)
        self.assertEqual((summary["arm"], summary["run"]), (arm, run))
        self.assertEqual(summary["knobs"]["seed"], int(arms[arm].get("SEED", "0")))


class WarmupSignatureTest(unittest.TestCase):
  """check_warmup_signature: the payload must be what the trainer compiled for."""

  def setup(self, mismatch: Any = None, allowed: bool = False) -> Any:
    signature = None if mismatch is None else (lambda payload: ("sig", payload))
    return types.SimpleNamespace(warmup="WARMUP", payload_signature=signature,
                                 signature_mismatch=mismatch,
                                 fallbacks=bd.Fallbacks(allowed, log=[].append))

  def test_a_matching_payload(self):
    compared = []

    def mismatch(expected, actual):
      compared.append((expected, actual))
      return ""

    _, out = quietly(lambda: bd.check_warmup_signature(self.setup(mismatch), "PAYLOAD"))
    self.assertEqual(compared, [(("sig", "WARMUP"), ("sig", "PAYLOAD"))])
    self.assertEqual(out, "[TrainerBench] payload matches the warm-up signature\n")

  def test_a_mismatch_stops_the_run(self):
    with self.assertRaises(bd.TunixMissing) as caught:
      bd.check_warmup_signature(self.setup(lambda a, b: "completion_ids:\n int64"), "PAYLOAD")
    self.assertEqual(
        str(caught.exception), "the payload differs from the warm-up signature (fwd_bwd would "
        "recompile another program): completion_ids: int64")

    def broken(a, b):
      raise ValueError("no shapes")

    with self.assertRaisesRegex(
        bd.TunixMissing, r"^could not compare the payload with the "
        r"warm-up signature: no shapes$"):
      bd.check_warmup_signature(self.setup(broken), "PAYLOAD")

  def test_without_the_functions_a_fallback(self):
    with self.assertRaisesRegex(bd.TunixMissing, "ALLOW_FALLBACKS=1 would time without checking"):
      bd.check_warmup_signature(self.setup(), "PAYLOAD")
    allowed = self.setup(allowed=True)
    bd.check_warmup_signature(allowed, "PAYLOAD")
    self.assertEqual(len(allowed.fallbacks.taken), 1)


class CompileTest(unittest.TestCase):

  def test_the_compile_call_each_worker_has(self):
    calls: List[Any] = []

    class Compiles:

      def compile(self, payload):
        calls.append(("compile", payload))

    class WarmsUp:

      def warmup_compile(self, payload):
        calls.append(("warmup_compile", payload))

    def setup(worker: Any, abstract: bool) -> Any:
      return types.SimpleNamespace(worker=worker, warmup="WARMUP", warmup_is_abstract=abstract)

    (method, _), out = quietly(lambda: bd.compile_trainer(setup(Compiles(), True), "REGULAR"))
    self.assertEqual(method, "worker.compile")
    self.assertIn("first_step_s", out)
    (method, _), _ = quietly(lambda: bd.compile_trainer(setup(Compiles(), False), "REGULAR"))
    (method, _), _ = quietly(lambda: bd.compile_trainer(setup(WarmsUp(), False), "REGULAR"))
    self.assertEqual(method, "worker.warmup_compile (in the background; step 0 waits for it)")
    (method, seconds), _ = quietly(lambda: bd.compile_trainer(setup(object(), True), "REGULAR"))
    self.assertEqual(method, "none")
    self.assertGreaterEqual(seconds, 0.0)
    # An abstract warm-up payload is what compiles; a concrete one stands in for the payload.
    self.assertEqual(calls, [("compile", "WARMUP"), ("compile", "REGULAR"),
                             ("warmup_compile", "WARMUP")])


class LogpsPassTest(unittest.TestCase):

  def test_one_request_per_payload(self):
    # Tunix's request class, as the pod tests' stand-in defines it.
    logprobs_request = fake_tunix.fake_module(
        "tunix/experimental/common/datatypes.py").LogprobsRequest
    scored: List[Any] = []

    def per_token_logps(request: Any) -> float:
      scored.append(request)
      return 0.5

    worker = types.SimpleNamespace(per_token_logps=per_token_logps)
    setup = types.SimpleNamespace(logps_request_class=logprobs_request, pad_id=3, eos_id=4,
                                  temperature=0.7, worker=worker)
    regular, final = (types.SimpleNamespace(prompt_ids=name + "-prompt",
                                            completion_ids=name + "-ids",
                                            segment_ids=name + "-segments",
                                            segment_positions=name + "-positions")
                      for name in ("regular", "final"))
    self.assertIsNone(bd.make_logps_pass(setup, False, [regular, final]))
    score = bd.make_logps_pass(setup, True, [regular, final])
    self.assertEqual(score(final), 0.5)
    score(regular)
    self.assertEqual(scored, [
        logprobs_request("final-prompt", "final-ids", 3, 4, 0.7, "actor", "final-segments",
                         "final-positions"),
        logprobs_request("regular-prompt", "regular-ids", 3, 4, 0.7, "actor", "regular-segments",
                         "regular-positions"),
    ])


if __name__ == "__main__":
  unittest.main()
