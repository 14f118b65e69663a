"""Tests of the pod's set-up (setup.py) that run in-process: the stages and their order, the
staged boundary a worker can run (check_staging), train requests and the model's shapes. The
stages' work against stand-in Tunix modules is tested through the driver run as a process
(pod_test.py, preflight_test.py)."""

import dataclasses
import types
import unittest
from typing import Any, Dict, Optional

from fakes import (Events, ExplicitWorker, FakeClock, FusedWorker, Request, StagingWorker,
                   stage_plan)
from settings_env import base_env
from driver_loader import load_driver

bd = load_driver()


class CheckStagingTest(unittest.TestCase):

  def test_on_needs_every_call(self):
    settings = bd.parse_settings(
        {"TRAINER_ARGV": "--a", "ORCH_ARGV": "--b", "STAGE_BOUNDARY": "on"})
    plan = bd.resolve_stage_boundary(settings)
    self.assertTrue(plan.resolved)
    clock, events = FakeClock(), Events()
    with self.assertRaisesRegex(bd.SettingsError, r"stage_fwd_bwd.*defer_update.*"
                                r"apply_deferred_update"):
      bd.check_staging(plan, bd.WorkerCalls(FusedWorker(clock, events), Request))
    self.assertIs(bd.check_staging(plan, bd.WorkerCalls(StagingWorker(clock, events), Request)),
                  plan)
    # auto that the worker cannot run: a fact found at run time, exit 1, before any trainer.
    auto = bd.StagePlan("auto", True, "auto: ORCH_ARGV --pipeline_step_boundary=true")
    with self.assertRaisesRegex(
        bd.TunixMissing, r"^the e2e run stages the step boundary "
        r"\(auto: .*lacks .*stage_fwd_bwd.*STAGE_BOUNDARY=off"):
      bd.check_staging(auto, bd.WorkerCalls(FusedWorker(clock, events), Request))
    # off, explicitly: nothing is checked.
    off = bd.StagePlan("off", False, "STAGE_BOUNDARY=off")
    self.assertIs(bd.check_staging(off, bd.WorkerCalls(FusedWorker(clock, events), Request)), off)

  def test_what_needs_no_staging_passes_through(self):
    clock, events = FakeClock(), Events()
    off = stage_plan(False)
    self.assertIs(bd.check_staging(off, bd.WorkerCalls(ExplicitWorker(clock, events))), off)

    # After the update a fusing worker needs no deferred update, only the stage call.

    class StagesAfter(FusedWorker):

      def stage_fwd_bwd(self, request):
        raise AssertionError("never called")

    after = stage_plan(True, before_update=False)
    self.assertIs(bd.check_staging(after, bd.WorkerCalls(StagesAfter(clock, events))), after)
    with self.assertRaisesRegex(bd.SettingsError, "lacks fwd_bwd\\(..., defer_update=True\\)"):
      bd.check_staging(stage_plan(True), bd.WorkerCalls(StagesAfter(clock, events)))

  def test_the_pod_and_the_preflight_refuse_alike(self):
    # A worker without the staging calls under an e2e that stages (auto): both modes refuse in
    # the same set-up stage, with the same line.
    settings = bd.parse_settings(base_env(ORCH_PIPELINE_STEP_BOUNDARY="true"))
    refusals = []
    for mode in (bd.POD, bd.PREFLIGHT):
      setup = bd.Setup(settings, mode, log=[].append)
      setup.worker_class = FusedWorker
      with self.assertRaises(bd.TunixMissing) as caught:
        setup.staged_boundary()
      self.assertIsNone(setup.stage_plan)
      refusals.append(str(caught.exception))
    self.assertEqual(refusals[0], refusals[1])
    self.assertIn("auto: orchestrator env PIPELINE_STEP_BOUNDARY=true", refusals[0])
    self.assertIn("lacks TrainerWorker.stage_fwd_bwd(request)", refusals[0])
    # STAGE_BOUNDARY=off, explicit, runs unstaged.
    off = bd.Setup(
        bd.parse_settings(base_env(ORCH_PIPELINE_STEP_BOUNDARY="true", STAGE_BOUNDARY="off")),
        bd.POD, log=[].append)
    off.worker_class = FusedWorker
    self.assertTrue(off.staged_boundary().startswith("off (STAGE_BOUNDARY=off"))
    staging = bd.Setup(settings, bd.PREFLIGHT, log=[].append)
    staging.worker_class = StagingWorker
    self.assertTrue(staging.staged_boundary().startswith("on (auto: "))


class SetupTest(unittest.TestCase):

  def test_the_stages_in_the_pods_order(self):
    setup = bd.Setup(bd.parse_settings(base_env()), bd.PREFLIGHT)
    stages = [(stage.name, stage.needs) for stage in setup.stages()]
    self.assertEqual(stages, [
        ("trainer module", ()),
        ("TRAINER_ARGV", ("trainer module",)),
        ("MaxText", ("TRAINER_ARGV",)),
        ("TrainerWorker", ("TRAINER_ARGV",)),
        ("TrainerWorker call", ("TrainerWorker",)),
        ("datatypes", ("TrainerWorker",)),
        ("jax", ()),
        ("MaxText config", ("MaxText", "jax")),
        ("orchestrator module", ()),
        ("ORCH_ARGV", ("orchestrator module",)),
        ("GRPO config", ("ORCH_ARGV",)),
        ("tokenizer", ("ORCH_ARGV", "TRAINER_ARGV")),
        ("batch configuration", ("GRPO config", "tokenizer")),
        ("actor log-prob pass", ("GRPO config", "datatypes")),
        ("staged step boundary", ("TrainerWorker",)),
    ])
    # Every stage a stage needs runs before it.
    names = [name for name, _ in stages]
    for index, (_, needs) in enumerate(stages):
      self.assertTrue(all(names.index(need) < index for need in needs))

  def test_the_runtime_flags_are_split_off(self):
    setup = bd.Setup(bd.parse_settings(base_env()))
    self.assertEqual(setup.trainer_main, "tunix.experimental.examples.common.run_trainer_node.main")
    self.assertNotIn("--discovery_id=trainer", setup.trainer_words)
    self.assertEqual(setup.orch_words[0], "--batch_size=16")

  def test_refusals(self):
    with self.assertRaisesRegex(ValueError, "unknown set-up mode 'cpu'"):
      bd.Setup(bd.parse_settings(base_env()), "cpu")
    with self.assertRaisesRegex(bd.SettingsError, "ORCH_ARGV holds several processes"):
      bd.Setup(bd.parse_settings(base_env(ORCH_ARGV="--process a --process b")))


@dataclasses.dataclass
class TrainRequest:
  request_id: str
  payload: Any
  metadata: Dict[str, Any]


class TrainRequestTest(unittest.TestCase):

  def test_a_request_per_payload(self):
    make = bd.train_request_maker(TrainRequest)
    payload = types.SimpleNamespace(metadata={"step": 1})
    first, second = make(payload), make(payload)
    self.assertIs(first.payload, payload)
    self.assertRegex(first.request_id, r"^train_req_[0-9a-f]{8}$")
    self.assertNotEqual(first.request_id, second.request_id)
    self.assertEqual(first.metadata, {"step": 1})
    self.assertIsNot(first.metadata, payload.metadata)  # a copy per request
    self.assertEqual(make(types.SimpleNamespace(metadata=None)).metadata, {})

  def test_without_the_class(self):
    with self.assertRaisesRegex(bd.TunixMissing, "datatypes.TrainRequest is missing"):
      bd.train_request_maker(None)("payload")


class ModelShapesTest(unittest.TestCase):
  """Setup.model_shapes: the routing shape, experts and vocabulary of the built trainer."""

  def shapes(self, worker: Any, vocab: Optional[int] = None, **env: str) -> Any:
    env.setdefault("ROLLOUT_RETURN_ROUTED_EXPERTS", "true")
    setup = bd.Setup(bd.parse_settings(base_env(**env)))
    setup.tokenizer_vocab = vocab
    return setup.model_shapes(worker), setup.choices

  def worker(self, shape: Any = None, **config: Any) -> Any:
    trainer = types.SimpleNamespace(_config=types.SimpleNamespace(**config))
    worker = types.SimpleNamespace(_trainer=trainer)
    if shape is not None:
      worker.routed_experts_shape = lambda: shape
    return worker

  def test_the_routing_shape(self):
    worker = self.worker((3, 2), num_experts=16, vocab_size=500)
    (shape, experts, vocab, config), choices = self.shapes(worker)
    self.assertEqual((shape, experts, vocab), ((3, 2), 16, 500))
    self.assertIs(config, worker._trainer._config)
    self.assertTrue(choices["routing"].value)
    # From the model config when the worker does not say; off when ROUTING is.
    from_config = self.worker(num_decoder_layers=60, num_experts_per_tok=10, num_experts=512)
    self.assertEqual(self.shapes(from_config, vocab=1000)[0][:3], ((60, 10), 512, 1000))
    self.assertEqual(self.shapes(worker, ROUTING="off")[0][:3], (None, 16, 500))

  def test_refusals(self):
    dense = self.worker(vocab_size=500)
    self.assertIsNone(self.shapes(dense)[0][0])  # auto: nothing to replay
    with self.assertRaisesRegex(bd.SettingsError,
                                r"^ROUTING=on but the trainer reports no routing shape"):
      self.shapes(dense, ROUTING="on")
    with self.assertRaisesRegex(bd.TunixMissing, "^cannot tell the vocabulary size"):
      self.shapes(self.worker((3, 2), num_experts=16))
    with self.assertRaisesRegex(bd.TunixMissing, "its config has no num_experts"):
      self.shapes(self.worker((3, 2), vocab_size=500))


if __name__ == "__main__":
  unittest.main()


class RolloutAsOldTest(unittest.TestCase):
  """The rollout log-probs stand in for the old ones as rl_program decides: from the GRPO
  config's use_rollout_logps, which LOGPS_PASS=auto reads too (resolve.resolve_logps_pass)."""

  def test_the_grpo_config_decides_over_the_orchestrators_flag(self):
    setup = bd.Setup.__new__(bd.Setup)
    setup.orch_args = types.SimpleNamespace(use_rollout_logps=True)
    setup.algo_config = types.SimpleNamespace(use_rollout_logps=False)
    self.assertFalse(setup.rollout_as_old())
    setup.algo_config = types.SimpleNamespace()  # a config without the field: the flag
    self.assertTrue(setup.rollout_as_old())
