"""Tests of the pod's set-up (setup.py) that run in-process: the staged boundary a worker can
run (check_staging)."""

import unittest

from fakes import Events, FakeClock, FusedWorker, Request, StagingWorker
from driver_loader import load_driver

bd = load_driver()


class CheckStagingTest(unittest.TestCase):

  def test_on_needs_every_call(self):
    settings = bd.parse_settings({
        "TRAINER_ARGV": "--a",
        "ORCH_ARGV": "--b",
        "STAGE_BOUNDARY": "on"
    })
    plan = bd.resolve_stage_boundary(settings)
    self.assertTrue(plan.resolved)
    clock, events = FakeClock(), Events()
    with self.assertRaisesRegex(bd.SettingsError, r"stage_fwd_bwd.*defer_update.*"
                                r"apply_deferred_update"):
      bd.check_staging(plan, bd.WorkerCalls(FusedWorker(clock, events), Request))
    self.assertIs(bd.check_staging(plan, bd.WorkerCalls(StagingWorker(clock, events), Request)),
                  plan)
    # auto that the worker cannot run: off, and said loudly.
    auto = bd.StagePlan("auto", True, "auto: ORCH_ARGV --pipeline_step_boundary=true")
    lines = []
    result = bd.check_staging(auto, bd.WorkerCalls(FusedWorker(clock, events), Request),
                              lines.append)
    self.assertFalse(result.resolved)
    self.assertIn("CANNOT reproduce", lines[0])


if __name__ == "__main__":
  unittest.main()
