"""Tests of reading what the trainer reports (metrics.py): get_metrics() trees flattened for
BENCH_STEP, the TRAINER_STEP_TIMING line, and dropped-token counts."""

import dataclasses
import json
import re
import unittest
from typing import Any, List, Set, Tuple

import numpy as np

from doubles import MetricsBuffer
from fakes import Events, ExplicitWorker, FakeClock, Harness, TimingWorker, make_plan
from driver_loader import load_driver

bd = load_driver()

TIMING_LINE = re.compile(r"^TRAINER_STEP_TIMING step=(\d+) policy_version=(\d+) rtt_s=(\d+\.\d{3}) "
                         r"timing=(\S+)$")


class StepTimingTest(unittest.TestCase):

  def test_one_line_per_step_in_the_orchestrator_format(self):
    timing = {
        "v": 1, "train_step": 3, "mb": [{"i": 0, "ready_ago_s": None}], "update": None,
        "prepare": None
    }
    harness = Harness(TimingWorker, timing=timing, rtt=0.25)
    harness.run(make_plan(steps=2, micro_steps=2))
    lines = harness.machine("TRAINER_STEP_TIMING")
    self.assertEqual(len(lines), 2)
    for step, line in enumerate(lines):
      match = TIMING_LINE.match(line)
      assert match is not None, line
      self.assertEqual(int(match.group(1)), step)
      # The policy version after the step's update (Tunix docs/trainer_step_timing.md@40a12182).
      self.assertEqual(int(match.group(2)), step + 1)
      self.assertEqual(match.group(3), "0.250")
      self.assertEqual(match.group(4), json.dumps(timing, separators=(",", ":")))
      self.assertEqual(json.loads(match.group(4)), timing)
    # Logged once the step's device work is done, before the step's BENCH_STEP line.
    order = [line.split(" ")[0] for line in harness.lines]
    self.assertEqual(order, ["TRAINER_STEP_TIMING", "BENCH_STEP"] * 2)

  def test_failure_is_logged_and_the_run_goes_on(self):
    harness = Harness(TimingWorker, error=RuntimeError("rpc\nunavailable"))
    harness.run(make_plan(steps=3, micro_steps=2))
    lines = harness.machine("TRAINER_STEP_TIMING")
    self.assertEqual(
        lines,
        [f"TRAINER_STEP_TIMING step={step} unavailable: rpc unavailable" for step in (0, 1, 2)])
    self.assertEqual(len(harness.bench_steps()), 3)

  def test_none_is_logged_as_unavailable(self):
    harness = Harness(TimingWorker, timing=None)
    harness.run(make_plan(steps=1, micro_steps=2))
    (line,) = harness.machine("TRAINER_STEP_TIMING")
    self.assertTrue(line.startswith("TRAINER_STEP_TIMING step=0 unavailable: "), line)
    self.assertNotIn("timing=null", line)

  def test_unencodable_timing_is_logged_as_unavailable(self):
    harness = Harness(TimingWorker, timing={"when": object()})
    harness.run(make_plan(steps=1, micro_steps=1))
    (line,) = harness.machine("TRAINER_STEP_TIMING")
    self.assertIn("unavailable", line)

  def test_numpy_values_are_encoded(self):
    harness = Harness(TimingWorker, timing={"v": np.int64(1), "x": np.float32(0.5)})
    harness.run(make_plan(steps=1, micro_steps=1))
    (line,) = harness.machine("TRAINER_STEP_TIMING")
    self.assertTrue(line.endswith('timing={"v":1,"x":0.5}'), line)

  def test_no_line_without_get_step_timing(self):
    harness = Harness(ExplicitWorker)
    harness.run(make_plan(steps=2, micro_steps=2))
    self.assertEqual(harness.machine("TRAINER_STEP_TIMING"), [])

  def test_the_snapshot_is_taken_at_the_calls_midpoint(self):
    clock = FakeClock()
    worker = TimingWorker(clock, Events(), timing={"v": 1, "mb": []}, rtt=0.5)
    lines: List[str] = []
    snapshot = bd.log_step_timing(worker, 4, 3, clock, lines.append)
    self.assertEqual(snapshot.at, 1000.25)
    self.assertEqual(snapshot.record, {"v": 1, "mb": []})
    self.assertEqual(
        lines,
        ['TRAINER_STEP_TIMING step=4 policy_version=3 rtt_s=0.500 '
         'timing={"v":1,"mb":[]}'])
    self.assertIsNone(bd.log_step_timing(object(), 0, 0, clock, lines.append))
    self.assertEqual(len(lines), 1)  # nothing logged without get_step_timing


class ScalarMetricsTest(unittest.TestCase):

  def test_scalar_metrics(self):

    @dataclasses.dataclass
    class WeightedMetric:  # MaxText's and Tunix's field names
      unreduced_sum: Any
      denominator: Any

    class Buffer:  # MaxText's MetricsBuffer: one entry per micro-batch

      def __init__(self, step):
        self.id = step
        self.weighted_metrics = {
            "loss": WeightedMetric(np.array([2.0, 6.0], np.float32), np.array([2.0, 2.0])),
            "kl": WeightedMetric(np.array([0.0]), np.array([0.0])),
        }
        self.scalar_metrics = {
            "gradient_norm": np.array([0.5]), "lr": 1e-6, "is_ratio/max": np.array([1.0, 3.0]),
            "is_ratio/mean": np.array([1.0, 2.0])
        }
        self.aggregation_fns = {"is_ratio/max": np.max}

    expected = {
        "loss": 2.0, "kl": 0.0, "gradient_norm": 0.5, "lr": 1e-6, "is_ratio/max": 3.0,
        "is_ratio/mean": 1.5
    }
    self.assertEqual(bd.scalar_metrics(Buffer(0)), expected)
    # MaxText's get_metrics() returns the buffers since the last call, one per step.
    self.assertEqual(bd.scalar_metrics([Buffer(0), Buffer(1)]), expected)
    self.assertEqual(bd.scalar_metrics({"a": {"b": 1}, "c": [np.float32(1), 3]}),
                     {"a/b": 1.0, "c": 2.0})
    self.assertEqual(bd.scalar_metrics({"loss": {"value": 3.0, "weight": 2.0}}), {"loss": 1.5})
    self.assertEqual(bd.scalar_metrics(None), {})
    # Another kind is named once, not dropped silently.
    warnings: List[str] = []
    warned: Set[Tuple[str, str]] = set()
    for _ in range(2):
      self.assertEqual(
          bd.scalar_metrics({"odd": object(), "x": 1}, warn=warnings.append, warned=warned),
          {"x": 1.0})
    self.assertEqual(len(warnings), 1)
    self.assertIn("odd", warnings[0])


class ReadyTimesTest(unittest.TestCase):
  """The trainer's own ready times, moved onto the driver's clock."""

  def snapshot(self, mb: Any, update: Any = None) -> Any:
    return bd.TimingSnapshot(record={"v": 1, "mb": mb, "update": update}, at=100.0)

  def test_ready_times(self):
    snapshot = self.snapshot([{"i": 0, "ready_ago_s": 3.0}, {"i": 1, "ready_ago_s": 1}],
                             {"ready_ago_s": 0.5})
    self.assertEqual(bd.ready_times(snapshot, 2), ([97.0, 99.0], 99.5))
    self.assertEqual(bd.ready_times(self.snapshot([{"ready_ago_s": 2.0}]), 1), ([98.0], None))
    self.assertEqual(
        bd.ready_times(self.snapshot([{"ready_ago_s": 2.0}], {"ready_ago_s": True}), 1),
        ([98.0], None))
    # A NaN or infinite update time is no time: the update's readiness was not observed.
    for ago in (float("nan"), float("inf")):
      with self.subTest(ago=ago):
        self.assertEqual(
            bd.ready_times(self.snapshot([{"ready_ago_s": 2.0}], {"ready_ago_s": ago}), 1),
            ([98.0], None))

  def test_none_unless_every_call_has_one(self):
    for mb in ([{"ready_ago_s": 1.0}], [{"ready_ago_s": 1.0},
                                        {"ready_ago_s": None}], [{"ready_ago_s": 1.0},
                                                                 {"ready_ago_s": float("nan")}],
               [{"ready_ago_s": 1.0}, {"ready_ago_s": False}], [{"ready_ago_s": 1.0}, 2.0], "mb"):
      with self.subTest(mb=mb):
        self.assertIsNone(bd.ready_times(self.snapshot(mb), 2))
    self.assertIsNone(bd.ready_times(None, 2))
    self.assertIsNone(bd.ready_times(bd.TimingSnapshot(record=[1, 2], at=1.0), 2))


class DroppedTokensTest(unittest.TestCase):

  def test_dropped_tokens_of(self):
    metrics = {
        "loss": 1.0,
        "moe/layer0/dropped_tokens": 2.0,
        "moe/layer1/tokens_dropped": 3.0,
        "num_dropped_tokens": 1.0,
        "dropped_token_count": 0.0,
        "moe/dropped_tokens_rate": 9.0,  # not a count
        "moe/layer2/dropped_tokens": float("nan"),  # not finite: left out
    }
    self.assertEqual(bd.dropped_tokens_of(metrics),
                     (6.0, "dropped_token_count,moe/layer0/dropped_tokens,"
                      "moe/layer1/tokens_dropped,num_dropped_tokens"))
    self.assertEqual(bd.dropped_tokens_of({"loss": 1.0}), (None, None))
    self.assertEqual(bd.dropped_tokens_of(None), (None, None))
    self.assertEqual(bd.dropped_tokens_of({"dropped_tokens": 0.0}), (0.0, "dropped_tokens"))


class ReplaysAndGradNormTest(unittest.TestCase):

  def test_replays_of(self):
    self.assertIsNone(bd.replays_of(None))
    self.assertIsNone(bd.replays_of({"loss": 1.0}))
    self.assertEqual(bd.replays_of({"moe_dropless_replays": 2.0}), 2)
    # Several such names (per layer, say) add up; a NaN is not a count.
    self.assertEqual(bd.replays_of({"a/moe_dropless_replays": 1.0, "b/moe_dropless_replays": 2.0}),
                     3)
    self.assertIsNone(bd.replays_of({"moe_dropless_replays": float("nan")}))
    self.assertIsNone(bd.replays_of({"moe_dropless_replays_total": 2.0}))

  def test_replays_from_maxtexts_metrics_buffer(self):
    # update() records the count once per step (maxtext_engine.py@b8bf66d6).
    buffer = MetricsBuffer(id=1, scalar_metrics={"moe_dropless_replays": np.array([3])})
    self.assertEqual(bd.replays_of(bd.scalar_metrics([buffer])), 3)

  def test_grad_norm_name(self):
    self.assertIsNone(bd.grad_norm_name({"loss": 1.0}))
    self.assertEqual(bd.grad_norm_name({"loss": 1.0, "gradient_norm": 2.0}), "gradient_norm")
    self.assertEqual(bd.grad_norm_name({"opt/grad_norm": 2.0}), "opt/grad_norm")


if __name__ == "__main__":
  unittest.main()
