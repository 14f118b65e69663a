"""Tests of the settings that follow the e2e run (resolve.py): each resolved with the source
that decided it."""

import unittest

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


if __name__ == "__main__":
  unittest.main()
