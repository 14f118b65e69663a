"""Tests of the settings that follow the e2e run (resolve.py): each resolved with the source
that decided it."""

import types
import unittest

from settings_env import base_env
from driver_loader import load_driver

bd = load_driver()


class StageBoundaryTest(unittest.TestCase):

  def test_auto_follows_the_orchestrator(self):

    def resolve(orch, **env):
      return bd.resolve_stage_boundary(
          bd.parse_settings({
              "TRAINER_ARGV": "--a",
              "ORCH_ARGV": orch,
              **env
          }))

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
    position, align, source, _ = resolve("--pack_pad_position=end",
                                         ORCH_PACK_PAD_POSITION="start",
                                         PAD_POSITION="start",
                                         PAD_ALIGN="128")
    self.assertEqual((position, align), ("start", 128))
    self.assertIn("knob", source)
    self.assertIn("ORCH_ARGV",
                  resolve("--pack_pad_position=end", ORCH_PACK_PAD_POSITION="start")[2])
    with self.assertRaises(bd.SettingsError):
      resolve("--pack_pad_align=100")
    with self.assertRaises(bd.SettingsError):
      bd.parse_settings(base_env(ORCH_PACK_PAD_POSITION="middle"))


class RoutingTest(unittest.TestCase):

  def test_routing_follows_the_orchestrator(self):

    def resolve(orch="--x", **env):
      return bd.resolve_routing(bd.parse_settings(base_env(ORCH_ARGV=orch, **env)))

    self.assertTrue(resolve().value)
    self.assertIn("as the seed always did", resolve().source)
    self.assertFalse(resolve("--no-return_routed_experts").value)
    self.assertTrue(resolve("--return_routed_experts=true").value)
    self.assertFalse(resolve(ORCH_RETURN_ROUTED_EXPERTS="false").value)
    self.assertFalse(resolve("--return_routed_experts", ROUTING="off").value)
    with self.assertRaises(bd.SettingsError):
      bd.parse_settings(base_env(ROUTING="sometimes"))


class RolloutLogpsTest(unittest.TestCase):

  def test_rollout_logps_follow_the_program(self):
    args = types.SimpleNamespace(use_rollout_logps=False,
                                 seq_logprob_error_threshold=None,
                                 truncated_importance_sampling_type=None,
                                 sampler_is_length_buckets=None)
    self.assertFalse(bd.rollout_logps_requested(args).value)
    args.truncated_importance_sampling_type = "seq-mask-tis"
    choice = bd.rollout_logps_requested(args)
    self.assertTrue(choice.value)
    self.assertIn("truncated_importance_sampling_type", choice.source)


class TrajectorySegmentsTest(unittest.TestCase):

  def test_trajectory_segments(self):
    # As many max-length trajectories as fit on the 64-token grid: 3,008 tokens per segment.
    self.assertEqual(bd.trajectory_segments(60948, 1000, 2000), 20)
    self.assertEqual(bd.trajectory_segments(3000, 1000, 2000), 1)
    self.assertEqual(bd.trajectory_segments(6016, 1000, 2000), 2)
    self.assertIsNone(bd.trajectory_segments(6016, None, 2000))


if __name__ == "__main__":
  unittest.main()
