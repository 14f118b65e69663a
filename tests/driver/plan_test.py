"""Tests of what the step loop runs and records (plan.py): BenchPlan's counts and profiled steps,
the BENCH_STEP record, the profiler window, the staged boundary's state and a stage's verdict."""

import unittest
from typing import Any, List, Optional, Tuple

from fakes import Events, FakeProfiler, Request, Response, make_plan, stage_plan
from driver_loader import load_driver

bd = load_driver()


class BenchPlanTest(unittest.TestCase):

  def test_tokens_per_step(self):
    plan = make_plan(micro_steps=3, tokens_regular=100, tokens_final=40, padded=128)
    self.assertEqual(plan.tokens_per_step, 100 * 2 + 40)  # the last micro-batch is the final one
    self.assertEqual(plan.padded_tokens_per_step, 128 * 3)
    self.assertEqual(make_plan(micro_steps=1, tokens_final=40).tokens_per_step, 40)

  def test_a_step_is_profiled_when_it_is_in_the_window(self):
    # PROFILE_WINDOW counts timed steps, whatever MICRO_STEPS is.
    for window, profiled in [((1, 1), [False, True, False]), ((0, 2), [True, True, False]),
                             ((1, 2), [False, True, True]), ((0, 3), [True, True, True])]:
      with self.subTest(window=window):
        plan = make_plan(steps=3, micro_steps=3, window=window)
        self.assertEqual([plan.profiled(step) for step in range(3)], profiled)
    self.assertFalse(make_plan(window=None).profiled(0))


class StepRecordTest(unittest.TestCase):

  def test_as_json(self):
    record = bd.StepRecord(step=2, seconds=6.5000004, microbatch_s=[2.0000004, 1.25], tokens=240,
                           tokens_per_s_per_chip=14.76923, fused_update=False, padded_tokens=384,
                           real_tokens_per_s_per_chip=9.2307692)
    self.assertEqual(
        record.as_json(), {
            "step": 2,
            "seconds": 6.5,
            "train_step_s": 6.5,
            "boundary_free_step_s": None,
            "microbatch_s": [2.0, 1.25],
            "microbatch_timing": "dispatch",
            "microbatch_timing_source": "dispatch",
            "tokens": 240,
            "padded_tokens": 384,
            "tokens_per_s_per_chip": 14.769,
            "real_tokens_per_s_per_chip": 9.231,
            "update": "explicit",
            "fused_update": False,
            "staged": False,
            "profiled": False,
            "replays": None,
        })
    # The optional keys appear only when there is something to say.
    record.train_step = 3
    record.logps_pass_s = [0.1234567]
    record.metrics = {"loss": 1.5, "moe/dropped_tokens": 2.0}
    extra = {
        key: value
        for key, value in record.as_json().items()
        if key not in ("step", "seconds", "train_step_s", "boundary_free_step_s", "microbatch_s",
                       "microbatch_timing", "microbatch_timing_source", "tokens", "padded_tokens",
                       "tokens_per_s_per_chip", "real_tokens_per_s_per_chip", "update",
                       "fused_update", "staged", "profiled", "replays")
    }
    self.assertEqual(record.as_json()["train_step_s"], round(6.5000004 - 0.1234567, 6))
    self.assertEqual(
        extra, {
            "train_step": 3, "logps_pass_s": [0.123457],
            "metrics": {"loss": 1.5, "moe/dropped_tokens": 2.0}, "dropped_tokens": 2.0
        })
    record.metrics = {}
    self.assertNotIn("metrics", record.as_json())


class ProfileWindowTest(unittest.TestCase):

  def window(self, window: Optional[Tuple[int, int]] = (2, 3), log_dir: Optional[str] = "/traces",
             fail_start: bool = False) -> Any:
    self.events = Events()
    self.profiler = FakeProfiler(self.events, fail_start=fail_start)
    self.logs: List[str] = []
    return bd.ProfileWindow(window, log_dir, self.profiler, self.logs.append)

  def test_starts_at_its_first_step_and_stops_once(self):
    window = self.window()
    self.assertEqual([window.is_first(step) for step in range(6)],
                     [False, False, True, False, False, False])
    self.assertEqual([window.is_last(step) for step in range(6)],
                     [False, False, False, False, True, False])
    window.stop()  # not started: nothing to stop
    window.start(1)
    self.assertEqual(self.profiler.starts, [])
    window.start(2)
    window.start(2)
    self.assertEqual(self.profiler.starts, ["/traces"])
    self.assertEqual(self.logs, ["profiler: tracing steps 2..4 to /traces"])
    window.stop(" at the end")
    window.stop()
    self.assertEqual(self.profiler.stops, 1)
    self.assertEqual(self.logs[-1], "profiler: trace stopped at the end")

  def test_a_failed_start_leaves_no_window(self):
    window = self.window(fail_start=True)
    window.start(2)
    self.assertFalse(window.started)
    self.assertIsNone(window.window)
    self.assertEqual(self.logs[-1], "profiler: start failed, no trace: profiler busy")
    self.assertFalse(window.is_last(4))
    window.stop()
    self.assertEqual(self.profiler.stops, 0)

  def test_no_window(self):
    window = self.window(window=None, log_dir=None)
    self.assertEqual(window.log_dir, "/tmp/bench_profile")
    window.start(0)
    self.assertFalse(window.is_first(0) or window.is_last(0) or window.started)


class StageStateTest(unittest.TestCase):

  def test_latches_off_once(self):
    logs: List[str] = []
    state = bd.StageState(stage_plan(True), logs.append)
    self.assertTrue(state.active)
    state.staged_steps.append(1)
    state.latch_off("first reason")
    state.latch_off("second reason")
    self.assertFalse(state.active)
    self.assertEqual(logs, ["staged step boundary: off for the rest of the run: first reason"])
    self.assertEqual(
        state.summary(), {
            "requested": "on",
            "resolved": "on",
            "source": "test",
            "position": "before_update",
            "engaged": True,
            "staged_steps": 1,
            "latched_off": "first reason",
        })

  def test_summary_without_staging(self):
    self.assertFalse(bd.StageState(stage_plan(False), print).active)
    self.assertEqual(
        bd.StageState(None, print).summary(), {
            "requested": "off",
            "resolved": "off",
            "source": "",
            "position": "before_update",
            "engaged": False,
            "staged_steps": 0,
            "latched_off": None,
        })
    after = bd.StageState(stage_plan(True, before_update=False), print)
    self.assertEqual(after.summary()["position"], "after_update")


class StageEvidenceTest(unittest.TestCase):

  def test_only_positive_evidence_counts(self):
    request = Request("REGULAR")  # request_id "train_req_test"

    def staged(**metadata):
      response = Response(staged=True, **metadata)
      response.request_id = request.request_id
      return response

    self.assertIsNone(bd.stage_evidence(staged(overlap_s=0.25), request, None))
    self.assertIsNone(bd.stage_evidence(staged(), request, True))  # the driver saw the overlap
    self.assertIsNone(bd.stage_evidence({"staged": True, "handle": "train_req_test"}, request,
                                        True))
    refusals = {
        "the worker staged nothing (queue full)": (Response(staged=False,
                                                            reason="queue\nfull"), True),
        "the worker staged nothing": ({"staged": False}, True),
        "the worker's stage response does not say it staged (no `staged`: true)": (None, True),
        "the stage response's request id None does not match the staged request's "
        "'train_req_test': nothing to pass back": (Response(staged=True, overlap_s=1.0), True),
        "the stage response's request id 'other' does not match the staged request's "
        "'train_req_test': nothing to pass back": ({"staged": True, "request_id": "other"}, True),
        "the stage measured no overlap with the device (the worker's overlap_s is 0)":
            (staged(overlap_s=0.0), True),
        "the stage measured no overlap: the step's last micro-batch was done on the device "
        "before the stage began": (staged(), False),
        "neither the worker (no overlap_s) nor the driver (no completion to check) saw the stage "
        "overlap the device": (staged(), None),
    }
    for reason, (response, busy) in refusals.items():
      with self.subTest(reason=reason):
        self.assertEqual(bd.stage_evidence(response, request, busy), reason)


class StepRecordReplaysTest(unittest.TestCase):

  def test_replays_come_from_maxtexts_metric_right_after_profiled(self):
    record = bd.StepRecord(step=0, seconds=1.0, microbatch_s=[1.0], tokens=1,
                           tokens_per_s_per_chip=1.0, fused_update=False)
    self.assertIsNone(record.replays)  # no metrics: not counted
    record.metrics = {"loss": 1.5}
    self.assertIsNone(record.as_json()["replays"])
    # MaxText's update() records the step's count once (maxtext_engine.py@b8bf66d6).
    record.metrics = {"loss": 1.5, "moe_dropless_replays": 2.0}
    keys = list(record.as_json())
    self.assertEqual(keys[keys.index("profiled") + 1], "replays")
    self.assertEqual(record.as_json()["replays"], 2)
    self.assertIsInstance(record.as_json()["replays"], int)
    record.metrics = {"train/moe_dropless_replays": 0.0}
    self.assertEqual(record.replays, 0)  # counted zero is not "not counted"
    record.metrics = {"moe_dropless_replays": float("nan")}
    self.assertIsNone(record.replays)


if __name__ == "__main__":
  unittest.main()
