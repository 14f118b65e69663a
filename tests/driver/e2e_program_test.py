"""The driver run as the pod runs it (fake_tunix.py) compiles and times the e2e's program (issue 25
items 4, 5, 6, 8, 10): the log-prob keywords the image's run_trainer_node passes, LOGPS_PASS as
its rl_program decides, every setting checked before TrainerWorker(...) builds the trainer, the
ids and routing the e2e uses, which weights load and which profiler traces."""

import json
import unittest
from typing import Any, Dict, List

import fake_tunix
from fake_tunix import FAKES, TRAINER_ARGV, TRAINER_ARGV_UNPROFILED

TRAINER_NODE = "tunix/experimental/examples/common/run_trainer_node.py"
ORCHESTRATOR = "tunix/experimental/examples/deepswe_dist/run_deepswe_dist.py"
RL_PROGRAM = "tunix/experimental/orchestrator/rl_program.py"
WORKER_CALL = ("trainer_worker.TrainerWorker(trainer_factory=factory, worker_id=args.worker_id,\n"
               "                                              execution_context=mesh)")


def trainer_node_calling(keywords: str) -> str:
  """The stand-in run_trainer_node whose main passes `keywords` to TrainerWorker(...) too."""
  text = FAKES[TRAINER_NODE]
  assert WORKER_CALL in text
  return text.replace(WORKER_CALL, WORKER_CALL[:-1] + ", " + keywords + ")")


def events(calls: List[Dict[str, Any]]) -> List[str]:
  return [call["event"] for call in calls]


class LogpsKeywordsTest(fake_tunix.FakeTunixTestCase):
  """Item 4: the chunk keywords go to TrainerWorker(...) exactly as the image's main passes
  them, not because the constructor takes them."""

  def test_a_call_without_the_keywords_passes_none(self):
    # The constructor takes logps_chunk_size, but the image's main does not pass it.
    result, calls = self.run_driver(TRAINER_ARGV=TRAINER_ARGV + " --compute_logps_chunk_size=256")
    self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
    worker = next(call for call in calls if call["event"] == "worker")
    self.assertEqual(worker["chunk"], 0)
    choices = self.summary_of(result)["choices"]
    self.assertNotIn("logps_chunk", choices)
    self.assertIsNone(choices["logps_chunk_size"]["value"])
    self.assertIn("calls TrainerWorker(...) without logps_chunk_size",
                  choices["logps_chunk_size"]["source"])
    self.assertIsNone(choices["logps_micro_batch_size"]["value"])

  def test_a_call_with_the_keyword_passes_the_argvs_value(self):
    root = self.variant(replace={
        TRAINER_NODE: trainer_node_calling("logps_chunk_size=args.compute_logps_chunk_size")
    })
    result, calls = self.run_driver(root=root,
                                    TRAINER_ARGV=TRAINER_ARGV + " --compute_logps_chunk_size=256")
    self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
    self.assertEqual(next(call for call in calls if call["event"] == "worker")["chunk"], 256)
    chunk = self.summary_of(result)["choices"]["logps_chunk_size"]
    self.assertEqual(chunk["value"], 256)
    self.assertIn("TrainerWorker(logps_chunk_size=args.compute_logps_chunk_size)", chunk["source"])

  def test_a_keyword_the_worker_does_not_take_stops_before_the_trainer(self):
    root = self.variant(replace={TRAINER_NODE: trainer_node_calling("logps_micro_batch_size=4")})
    line = self.run_stopped(1, root=root)
    self.assertIn("passes TrainerWorker(logps_micro_batch_size=4) but this TrainerWorker", line)
    self.assertNotIn("trainer", events(self.logged_calls(root)))

  def test_an_unreadable_call_stops_with_exit_1(self):
    text = FAKES[TRAINER_NODE].replace(WORKER_CALL, "trainer_worker.TrainerWorker(**vars(args))")
    root = self.variant(replace={TRAINER_NODE: text})
    line = self.run_stopped(1, root=root)
    self.assertRegex(
        line, r"^bench_driver: .*run_trainer_node\.py:\d+: TrainerWorker\(\.\.\.\) "
        r"takes \*\*kwargs")


class LogpsPassTest(fake_tunix.FakeTunixTestCase):
  """Item 4: LOGPS_PASS=auto as the image's rl_program decides."""

  USES_ROLLOUT = FAKES[ORCHESTRATOR].replace(
      "sampler_is_threshold: float = 2.0\n",
      "sampler_is_threshold: float = 2.0\n          use_rollout_logps: bool = True\n")

  def test_a_config_without_policy_loss_fn_is_grpo(self):
    # getattr(algo_config, "policy_loss_fn", "grpo"): the loss checks the agreement itself.
    root = self.variant(replace={ORCHESTRATOR: self.USES_ROLLOUT})
    result, calls = self.run_driver(root=root)
    self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
    self.assertNotIn("per_token_logps", events(calls))
    choice = self.summary_of(result)["choices"]["logps_pass"]
    self.assertFalse(choice["value"])
    self.assertIn("the GRPO loss checks the agreement itself", choice["source"])

  def test_an_rl_program_that_never_fuses_scores_every_micro_batch(self):
    never_fuses = """
        class StandardRLProgram:
          async def train_stage(self, batch):
            return await self._apply_sampler_trainer_agreement(batch)
        """
    root = self.variant(replace={ORCHESTRATOR: self.USES_ROLLOUT, RL_PROGRAM: never_fuses})
    result, calls = self.run_driver(root=root)
    self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
    self.assertEqual(events(calls).count("per_token_logps"), 6)
    self.assertIn("never fuses it", self.summary_of(result)["choices"]["logps_pass"]["source"])


class BeforeTheTrainerTest(fake_tunix.FakeTunixTestCase):
  """Item 6 and 8: a bad setting stops the run before TrainerWorker(...) builds the trainer."""

  def stopped_before_the_trainer(self, returncode: int, root: str = "", **settings: str) -> str:
    root = root or self.variant()
    line = self.run_stopped(returncode, root=root, **settings)
    self.assertNotIn("trainer", events(self.logged_calls(root)))
    return line

  def test_routing_targets_against_maxtexts_layers(self):
    line = self.stopped_before_the_trainer(2, ROUTING_TARGETS="1,2")
    self.assertEqual(
        line, "bench_driver: ROUTING_TARGETS has 2 values but the model has 3 "
        "decoder layers")
    line = self.stopped_before_the_trainer(2, ROUTING_TARGETS="1,2,9")
    self.assertIn("routing target 9 of layer 2 cannot be reached with 16 experts and top-2", line)

  def test_routing_auto_without_evidence(self):
    line = self.stopped_before_the_trainer(2, ROLLOUT_RETURN_ROUTED_EXPERTS="")
    self.assertIn("ROUTING=auto but nothing says whether the e2e run replays routing", line)

  def test_an_unknown_per_token_field(self):
    datatypes = "tunix/experimental/common/datatypes.py"
    warmup = "tunix/experimental/orchestrator/compile_warmup.py"
    root = self.variant(
        replace={
            datatypes: FAKES[datatypes].replace(
                "num_segments: int = 1\n", "num_segments: int = 1\n          returns: Any = None\n"
            ), warmup: FAKES[warmup].replace(
                "advantages=token(np.float32),",
                "advantages=token(np.float32), returns=token(np.float32),")
        })
    line = self.stopped_before_the_trainer(1, root=root)
    self.assertIn(
        "the warm-up payload has a per-token field returns[4,512] float32 the payload "
        "builder does not know", line)

  def test_payload_settings_against_the_warmup_shape(self):
    line = self.stopped_before_the_trainer(2, FINAL_ROWS="9")
    self.assertEqual(line, "bench_driver: FINAL_ROWS=9 exceeds the rows per micro-batch R=4")
    result, calls = self.run_driver(args=["--preflight"], JAX_PLATFORMS="cpu", REAL_LEN="600")
    self.assertEqual(result.returncode, 2, result.stdout + result.stderr)
    self.assertIn("preflight: FAIL  payload settings: REAL_LEN=600 exceeds the token budget T=512",
                  result.stdout)
    self.assertNotIn("trainer", events(calls))
    result, _ = self.run_driver(args=["--preflight"], JAX_PLATFORMS="cpu")
    self.assertIn("preflight: ok    payload settings: REAL_LEN 476 of T=512", result.stdout)

  def test_a_maxtext_config_that_does_not_load(self):
    argv = TRAINER_ARGV + " --maxtext_model_name=unknown"
    # The pod: a WARNING, then the old order (the trainer first, the warm-up payload after it).
    result, calls = self.run_driver(TRAINER_ARGV=argv)
    self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
    self.assertIn(
        "WARNING: MaxText's config did not load before the trainer (MaxText's pyconfig "
        "refused model_name=unknown: no such model: unknown)", result.stdout)
    order = events(calls)
    self.assertEqual(order[:4], ["jax_initialize", "pyconfig", "trainer", "worker"])
    self.assertLess(order.index("worker"), order.index("warmup"))
    # The preflight, whose job is to find it: a failure.
    result, _ = self.run_driver(args=["--preflight"], JAX_PLATFORMS="cpu", TRAINER_ARGV=argv)
    self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
    self.assertIn("preflight: FAIL  MaxText config: MaxText's pyconfig refused model_name=unknown",
                  result.stdout)

  def test_the_preflight_checks_routing_too(self):
    result, calls = self.run_driver(args=["--preflight"], JAX_PLATFORMS="cpu",
                                    ROUTING_TARGETS="1,2")
    self.assertEqual(result.returncode, 2, result.stdout + result.stderr)
    self.assertIn(
        "preflight: FAIL  MaxText config: ROUTING_TARGETS has 2 values but the model "
        "has 3 decoder layers", result.stdout)
    self.assertNotIn("trainer", events(calls))


class SameIdsTest(fake_tunix.FakeTunixTestCase):
  """Item 8: the ids and log-probs the e2e uses."""

  def test_eos_as_configure_worker_takes_it(self):
    assembly = "tunix/experimental/orchestrator/batch_assembly.py"
    engine_configures = FAKES[ORCHESTRATOR].replace(
        "          return GenerationArgs(",
        "          engine.configure_worker(role, algo=algo, assembler=assembler)\n"
        "          return GenerationArgs(")
    root = self.variant(
        replace={
            ORCHESTRATOR: engine_configures, assembly: FAKES[assembly].replace(
                "            self.pad_id, self.max_segments_per_packed_row = pad_id, "
                "max_segments_per_packed_row\n", "            self.pad_id, "
                "self.max_segments_per_packed_row = pad_id, max_segments_per_packed_row\n"
                "            self.eos_id = 7\n")
        })
    result, calls = self.run_driver(root=root, LOGPS_PASS="on")
    self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
    gen = next(call for call in calls if call["event"] == "with_gen_model_input_fn")
    self.assertEqual(gen["value"], {"pad_id": 3, "eos_id": 7})
    scored = next(call for call in calls if call["event"] == "per_token_logps")
    self.assertEqual((scored["pad"], scored["eos"]), (3, 7))
    self.assertIn("the assembler's eos_id", self.summary_of(result)["choices"]["eos_id"]["source"])

  def test_rollout_logprobs_follow_the_orchestrators_generation_args(self):
    result, calls = self.run_driver()
    self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
    choice = self.summary_of(result)["choices"]["rollout_logps"]
    self.assertTrue(choice["value"])
    self.assertIn("GenerationArgs(return_logprobs=True)", choice["source"])
    root = self.variant(replace={
        ORCHESTRATOR: FAKES[ORCHESTRATOR].replace("return_logprobs=True", "return_logprobs=False")
    })
    result, calls = self.run_driver(root=root)
    self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
    self.assertFalse(next(c for c in calls if c["event"] == "warmup")["rollout_logprobs"])


class WeightsAndProfilerTest(fake_tunix.FakeTunixTestCase):
  """Items 5 and 10, the driver's halves."""

  def test_weights(self):
    result, _ = self.run_driver()
    self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
    self.assertEqual(self.summary_of(result)["weights"]["source"], "random")
    result, _ = self.run_driver(MAXTEXT_CKPT="gs://bucket/ckpt/0/items")
    weights = self.summary_of(result)["weights"]
    self.assertEqual((weights["source"], weights["path"]),
                     ("checkpoint", "gs://bucket/ckpt/0/items"))
    result, _ = self.run_driver(MAXTEXT_EXTRA_FLAGS="load_full_state_path=gs://b/state")
    weights = self.summary_of(result)["weights"]
    self.assertEqual((weights["source"], weights["path"]), ("checkpoint", "gs://b/state"))

  def test_one_profiler_only(self):
    line = self.run_stopped(2, PROFILE_WINDOW="1:1")  # the default argv has --profiler_steps=2
    self.assertIn(
        "PROFILE_WINDOW is set and so is the trainer's own profiler (TRAINER_ARGV "
        "--profiler_steps=2)", line)
    line = self.run_stopped(2, PROFILE_WINDOW="1:1", TRAINER_ARGV=TRAINER_ARGV_UNPROFILED,
                            MAXTEXT_EXTRA_FLAGS="profiler=xplane")
    self.assertIn("MAXTEXT_EXTRA_FLAGS profiler=xplane", line)
    result, _ = self.run_driver()
    self.assertEqual(
        self.summary_of(result)["profiler"],
        {"by": "trainer", "why": "TRAINER_ARGV --profiler_steps=2"})
    summary_lines = self.machine(result, "BENCH_SUMMARY ")
    self.assertEqual(len(summary_lines), 1)
    json.loads(summary_lines[0].split(" ", 1)[1])


if __name__ == "__main__":
  unittest.main()
