"""Tests of the settings that follow the e2e run (resolve.py): each resolved with the source
that decided it."""

import types
import unittest
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from settings_env import base_env, settings_error
from driver_loader import load_driver

bd = load_driver()


class StageBoundaryTest(unittest.TestCase):

  def test_auto_follows_the_orchestrator(self):

    def resolve(orch, **env):
      return bd.resolve_stage_boundary(
          bd.parse_settings({"TRAINER_ARGV": "--a", "ORCH_ARGV": orch, **env}))

    self.assertFalse(resolve("--batch_size=4").resolved)
    self.assertTrue(resolve("--pipeline_step_boundary").resolved)
    self.assertTrue(resolve("--pipeline_step_boundary=true --stage_next_microbatch").resolved)
    self.assertFalse(resolve("--pipeline_step_boundary --stage_next_microbatch=false").resolved)
    self.assertFalse(resolve("--pipeline_step_boundary=1 --nostage_next_microbatch").resolved)
    self.assertTrue(resolve("--x", ORCH_PIPELINE_STEP_BOUNDARY="1").resolved)
    self.assertFalse(
        resolve("--x", ORCH_PIPELINE_STEP_BOUNDARY="1",
                ORCH_STAGE_NEXT_MICROBATCH="false").resolved)
    # The flag outranks the environment.
    self.assertFalse(
        resolve("--pipeline_step_boundary=false", ORCH_PIPELINE_STEP_BOUNDARY="true").resolved)
    # Staging without the pipelined boundary: the e2e refuses it, so it does not stage.
    refused = resolve("--stage_next_microbatch")
    self.assertFalse(refused.resolved)
    self.assertIn("refuses", refused.source)
    self.assertFalse(resolve("--pipeline_step_boundary --stage_before_update=false").before_update)
    self.assertFalse(resolve("--pipeline_step_boundary", STAGE_BOUNDARY="off").resolved)
    with self.assertRaises(bd.SettingsError):
      resolve("--pipeline_step_boundary=maybe")
    with self.assertRaises(bd.SettingsError):
      resolve("--x", ORCH_STAGE_NEXT_MICROBATCH="sometimes")
    with self.assertRaises(bd.SettingsError):
      resolve("--x", STAGE_BOUNDARY="always")

  def resolved(self, orch: str = "--x", **env: str) -> Any:
    return bd.resolve_stage_boundary(bd.parse_settings(base_env(ORCH_ARGV=orch, **env)))

  def test_each_resolution_names_its_source(self):
    self.assertEqual(self.resolved(STAGE_BOUNDARY="on"),
                     bd.StagePlan("on", True, "STAGE_BOUNDARY=on", True))
    self.assertEqual(self.resolved("--stage_before_update=false", STAGE_BOUNDARY="off"),
                     bd.StagePlan("off", False, "STAGE_BOUNDARY=off", False))
    self.assertEqual(
        self.resolved(),
        bd.StagePlan(
            "auto", False, "auto: PIPELINE_STEP_BOUNDARY not set in the e2e run (off); "
            "STAGE_NEXT_MICROBATCH follows PIPELINE_STEP_BOUNDARY", True))
    self.assertEqual(
        self.resolved("--pipeline_step_boundary"),
        bd.StagePlan(
            "auto", True, "auto: ORCH_ARGV --pipeline_step_boundary=true; "
            "STAGE_NEXT_MICROBATCH follows PIPELINE_STEP_BOUNDARY", True))
    self.assertEqual(
        self.resolved(ORCH_PIPELINE_STEP_BOUNDARY="yes", ORCH_STAGE_NEXT_MICROBATCH="0").source,
        "auto: orchestrator env PIPELINE_STEP_BOUNDARY=yes; "
        "orchestrator env STAGE_NEXT_MICROBATCH=0")
    self.assertEqual(
        self.resolved("--pipeline_step_boundary --stage_next_microbatch --stage_before_update=0"),
        bd.StagePlan(
            "auto", True, "auto: ORCH_ARGV --pipeline_step_boundary=true; ORCH_ARGV "
            "--stage_next_microbatch=true; ORCH_ARGV --stage_before_update=false", False))
    refused = self.resolved("--stage_next_microbatch")
    self.assertEqual(
        refused.source, "auto: PIPELINE_STEP_BOUNDARY not set in the e2e run (off); ORCH_ARGV "
        "--stage_next_microbatch=true (the e2e refuses staging without the pipelined boundary, so "
        "it does not stage)")


class PaddingTest(unittest.TestCase):

  def test_padding_follows_the_orchestrator(self):

    def resolve(orch="--x", **env):
      settings = bd.parse_settings(base_env(ORCH_ARGV=orch, **env))
      position, align = bd.resolve_padding(settings)
      return position.value, align.value, position.source, align.source

    self.assertEqual(resolve()[:2], ("end", 4096))
    self.assertEqual(resolve("--pack_pad_position=start --pack_pad_align 512")[:2], ("start", 512))
    self.assertEqual(
        resolve(ORCH_PACK_PAD_POSITION="start", ORCH_PACK_PAD_ALIGN="1024")[:2], ("start", 1024))
    # The flag outranks the environment; the knob outranks both.
    position, align, source, _ = resolve("--pack_pad_position=end", ORCH_PACK_PAD_POSITION="start",
                                         PAD_POSITION="start", PAD_ALIGN="128")
    self.assertEqual((position, align), ("start", 128))
    self.assertIn("knob", source)
    self.assertIn("ORCH_ARGV",
                  resolve("--pack_pad_position=end", ORCH_PACK_PAD_POSITION="start")[2])
    with self.assertRaises(bd.SettingsError):
      resolve("--pack_pad_align=100")
    with self.assertRaises(bd.SettingsError):
      bd.parse_settings(base_env(ORCH_PACK_PAD_POSITION="middle"))

  def test_each_choice_names_its_source(self):

    def choices(orch: str = "--x", **env: str) -> Any:
      return bd.resolve_padding(bd.parse_settings(base_env(ORCH_ARGV=orch, **env)))

    default = "the packer's default (the e2e orchestrator sets none)"
    self.assertEqual(choices(), (bd.Choice("end", default), bd.Choice(4096, default)))
    self.assertEqual(
        choices(PAD_POSITION="start", PAD_ALIGN="256"),
        (bd.Choice("start", "PAD_POSITION (the knob)"), bd.Choice(256, "PAD_ALIGN (the knob)")))
    self.assertEqual(choices("--pack_pad_position=START --pack_pad_align 512"),
                     (bd.Choice("start", "ORCH_ARGV --pack_pad_position=START"),
                      bd.Choice(512, "ORCH_ARGV --pack_pad_align=512")))
    self.assertEqual(choices(ORCH_PACK_PAD_POSITION="start", ORCH_PACK_PAD_ALIGN="1024"),
                     (bd.Choice("start", "orchestrator env PACK_PAD_POSITION=start"),
                      bd.Choice(1024, "orchestrator env PACK_PAD_ALIGN=1024")))
    self.assertEqual(
        settings_error(self, choices, "--pack_pad_align=100"),
        "ORCH_ARGV --pack_pad_align='100': must be a multiple of the segment "
        "alignment 64")
    self.assertEqual(settings_error(self, choices, "--pack_pad_position=middle"),
                     "ORCH_ARGV --pack_pad_position='middle': must be one of end|start")


class RoutingTest(unittest.TestCase):

  def test_routing_follows_the_orchestrator(self):

    def resolve(orch="--x", **env):
      return bd.resolve_routing(bd.parse_settings(base_env(ORCH_ARGV=orch, **env)))

    # auto with no evidence is an error: replaying changes the program compiled.
    self.assertEqual(
        settings_error(self, resolve),
        "ROUTING=auto but nothing says whether the e2e run replays routing (no ORCH_ARGV "
        "--return_routed_experts, ORCH_RETURN_ROUTED_EXPERTS or ROLLOUT_RETURN_ROUTED_EXPERTS): "
        "set ROUTING=on or off")
    self.assertFalse(resolve("--no-return_routed_experts").value)
    self.assertTrue(resolve("--return_routed_experts=true").value)
    self.assertFalse(resolve(ORCH_RETURN_ROUTED_EXPERTS="false").value)
    self.assertFalse(resolve("--return_routed_experts", ROUTING="off").value)
    with self.assertRaises(bd.SettingsError):
      bd.parse_settings(base_env(ROUTING="sometimes"))

  def test_each_choice_names_its_source(self):

    def choice(orch: str = "--x", **env: str) -> Any:
      return bd.resolve_routing(bd.parse_settings(base_env(ORCH_ARGV=orch, **env)))

    self.assertEqual(choice(ROUTING="on"), bd.Choice(True, "ROUTING=on"))
    self.assertEqual(choice("--return_routed_experts", ROUTING="off"),
                     bd.Choice(False, "ROUTING=off"))
    self.assertEqual(choice("--return_routed_experts=0", ORCH_RETURN_ROUTED_EXPERTS="true"),
                     bd.Choice(False, "auto: ORCH_ARGV --return_routed_experts=false"))
    self.assertEqual(choice(ORCH_RETURN_ROUTED_EXPERTS="off"),
                     bd.Choice(False, "auto: orchestrator env RETURN_ROUTED_EXPERTS=off"))
    # Then the rollout JobSet's setting, which render-bench copies.
    self.assertEqual(
        choice(ROLLOUT_RETURN_ROUTED_EXPERTS="true"),
        bd.Choice(
            True, "auto: the rollout JobSet's --return_routed_experts / "
            "RETURN_ROUTED_EXPERTS=true (ROLLOUT_RETURN_ROUTED_EXPERTS)"))
    self.assertFalse(
        choice(ORCH_RETURN_ROUTED_EXPERTS="false", ROLLOUT_RETURN_ROUTED_EXPERTS="true").value)


class RolloutLogpsTest(unittest.TestCase):

  def test_rollout_logps_follow_the_program(self):
    args = types.SimpleNamespace(use_rollout_logps=False, seq_logprob_error_threshold=None,
                                 truncated_importance_sampling_type=None,
                                 sampler_is_length_buckets=None)
    self.assertFalse(bd.rollout_logps_requested(args).value)
    args.truncated_importance_sampling_type = "seq-mask-tis"
    choice = bd.rollout_logps_requested(args)
    self.assertTrue(choice.value)
    self.assertIn("truncated_importance_sampling_type", choice.source)

  def test_the_source_lists_every_reason(self):
    args = types.SimpleNamespace(use_rollout_logps=True, seq_logprob_error_threshold=2.0,
                                 truncated_importance_sampling_type="none",
                                 sampler_is_length_buckets=0)
    self.assertEqual(bd.rollout_logps_requested(args),
                     bd.Choice(True, "--use_rollout_logps=True, --seq_logprob_error_threshold=2.0"))
    self.assertEqual(
        bd.rollout_logps_requested(types.SimpleNamespace()),
        bd.Choice(False, "no --use_rollout_logps, TIS type, sequence log-prob threshold or IS "
                  "buckets"))


class TrajectorySegmentsTest(unittest.TestCase):

  def test_trajectory_segments(self):
    # As many max-length trajectories as fit on the 64-token grid: 3,008 tokens per segment.
    self.assertEqual(bd.trajectory_segments(60948, 1000, 2000), 20)
    self.assertEqual(bd.trajectory_segments(3000, 1000, 2000), 1)
    self.assertEqual(bd.trajectory_segments(6016, 1000, 2000), 2)
    self.assertIsNone(bd.trajectory_segments(6016, None, 2000))


class Scorer:
  """A TrainerWorker that can score micro-batches with the actor."""

  def per_token_logps(self, request: Any) -> Any:
    return request


class LogpsPassTest(unittest.TestCase):
  """LOGPS_PASS: whether the actor scores each micro-batch before it trains, as the image's
  rl_program decides (its can_fuse_agreement_in_loss, with its getattr defaults)."""

  REASON = "the payload carries rollout log-probs and the GRPO config's use_rollout_logps is on"

  def resolve(self, setting: str = "auto", algo_config: Any = None, use_rollout_logps: bool = True,
              rollout: bool = True, worker: Any = None, request_class: Any = object,
              log: Optional[List[str]] = None, program: Tuple[str, str] = ("always", "rl.py"),
              **orch: Any) -> Any:
    settings = bd.parse_settings(base_env(LOGPS_PASS=setting))
    orch_args = types.SimpleNamespace(**orch)
    if algo_config is None:
      algo_config = types.SimpleNamespace(use_rollout_logps=use_rollout_logps)
    return bd.resolve_logps_pass(settings, algo_config, orch_args, bd.Choice(rollout, "test"),
                                 Scorer() if worker is None else worker, request_class,
                                 log=(log if log is not None else []).append, program=program)

  def test_off_and_on(self):
    self.assertEqual(self.resolve("off", worker=object(), request_class=None),
                     bd.Choice(False, "LOGPS_PASS=off"))
    self.assertEqual(self.resolve("on", rollout=False), bd.Choice(True, "LOGPS_PASS=on"))
    self.assertEqual(settings_error(self, self.resolve, "on", None, True, True, object()),
                     "LOGPS_PASS=on but this image's Tunix lacks TrainerWorker.per_token_logps")
    self.assertEqual(
        settings_error(self, self.resolve, "on", None, True, True, object(), None),
        "LOGPS_PASS=on but this image's Tunix lacks TrainerWorker.per_token_logps, "
        "datatypes.LogprobsRequest")

  def test_auto_follows_the_program(self):
    no_pass = bd.Choice(
        False, "auto: the e2e program makes no actor log-prob pass (no rollout "
        "log-probs, or the GRPO config does not use them as the old ones)")
    self.assertEqual(self.resolve(rollout=False), no_pass)
    self.assertEqual(self.resolve(use_rollout_logps=False), no_pass)
    # use_rollout_logps is the GRPO config's, as rl_program reads it, not the argv's.
    self.assertEqual(self.resolve(algo_config=types.SimpleNamespace(), use_rollout_logps=True),
                     no_pass)
    # An rl_program that never fuses the check into the loss scores every micro-batch.
    self.assertEqual(
        self.resolve(),
        bd.Choice(True, "auto: " + self.REASON + " (the image's rl_program never "
                  "fuses it: rl.py)"))
    # One without the pass makes none, whatever the config.
    self.assertEqual(
        self.resolve(program=("never", "rl.py")),
        bd.Choice(False, "auto: the image's rl_program makes no actor log-prob pass (rl.py)"))

  def test_a_loss_that_checks_the_agreement_needs_no_pass(self):

    def config(**fields: Any) -> Any:
      values: Dict[str, Any] = dict(policy_loss_fn="grpo", log_sampler_trainer_agreement=False,
                                    num_iterations=1, use_rollout_logps=True)
      values.update(fields)
      return types.SimpleNamespace(**values)

    def resolve(algo_config: Any, **orch: Any) -> Any:
      return self.resolve(algo_config=algo_config, program=("fusable", "rl.py"), **orch)

    fused = bd.Choice(False, f"auto: {self.REASON}, but the GRPO loss checks the agreement itself")
    self.assertEqual(resolve(config(), batch_size=4, mini_batch_size=None), fused)
    self.assertEqual(resolve(config(), batch_size=4, mini_batch_size=4), fused)
    self.assertEqual(resolve(config()), fused)  # sizes unknown
    # rl_program's getattr defaults: no policy_loss_fn is grpo, no agreement logging, 1 iteration.
    self.assertEqual(resolve(types.SimpleNamespace(use_rollout_logps=True)), fused)
    scored = bd.Choice(True, "auto: " + self.REASON)
    cases: List[Tuple[Dict[str, Any], Dict[str,
                                           Any]]] = [({"policy_loss_fn": "gspo"}, {}),
                                                     ({"log_sampler_trainer_agreement": True}, {}),
                                                     ({"num_iterations": 2}, {}),
                                                     ({}, {"batch_size": 4, "mini_batch_size": 2})]
    for fields, orch in cases:
      with self.subTest(fields=fields, orch=orch):
        self.assertEqual(resolve(config(**fields), **orch), scored)

  def test_auto_without_the_calls_warns_and_goes_on(self):
    lines: List[str] = []
    choice = self.resolve(worker=object(), request_class=None, log=lines)
    self.assertEqual(
        choice,
        bd.Choice(
            False, f"auto: {self.REASON}; not reproducible: lacks "
            "TrainerWorker.per_token_logps, datatypes.LogprobsRequest"))
    self.assertEqual(len(lines), 1)
    self.assertTrue(lines[0].startswith("WARNING: the e2e program scores each micro-batch"),
                    lines[0])
    self.assertIn("the bench CANNOT reproduce that pass", lines[0])


class ConcreteSegmentCountsTest(unittest.TestCase):

  def test_counts_of_a_concrete_payload(self):
    ids = np.array([[1, 1, 2, 3, 0], [1, 1, 1, 0, 0], [0, 0, 0, 0, 0]], dtype=np.int32)
    # An all-padding row counts as one segment.
    self.assertEqual(bd.concrete_segment_counts(types.SimpleNamespace(segment_ids=ids)), [3, 1, 1])

  def test_none_for_what_is_no_packing(self):
    for segment_ids in (np.zeros((2, 4), np.int32), np.array([1, 2]), np.zeros(
        (0, 4), np.int32), types.SimpleNamespace(shape=(2, 4), dtype=np.int32), None):
      with self.subTest(segment_ids=segment_ids):
        self.assertIsNone(bd.concrete_segment_counts(
            types.SimpleNamespace(segment_ids=segment_ids)))
    self.assertIsNone(bd.concrete_segment_counts(object()))


if __name__ == "__main__":
  unittest.main()
