"""Tests of the end of a run (summary.py): BENCH_SUMMARY and its means, the dropped-token
verdict, chips counted from the devices, and the human summary lines."""

import dataclasses
import json
import types
import unittest
from typing import Any, List, Optional

from fakes import FusedWorker, Harness, make_plan, summary_of
from driver_loader import load_driver

bd = load_driver()


class SummarizeTest(unittest.TestCase):

  def test_summary(self):
    plan = make_plan(steps=3, micro_steps=5, chips=2, tokens_regular=10, tokens_final=10)
    records = [
        bd.StepRecord(step=i, seconds=s, microbatch_s=mbs, tokens=50, tokens_per_s_per_chip=0,
                      fused_update=True)
        for i, (s, mbs) in enumerate([(100.0,
                                       [9, 9, 9, 9, 9]), (10.0,
                                                          [1, 5, 2, 3, 4]), (12.0,
                                                                             [7, 8, 6, 8, 9])])
    ]
    layer = bd.LayerRouting(0, 2.0, 2.001, 20, 10.0)
    summary = summary_of(plan, records, rows=2, tokens_per_row=64, real_len=60, segments=2,
                         final_rows=2, layers=1, topk=2, experts=8, routing=[layer],
                         knobs={"steps": 3}, extra={"compile": {}})
    self.assertEqual(summary["step_s"], [100.0, 10.0, 12.0])
    self.assertAlmostEqual(summary["mean_step_s"], 11.0)
    # micro-batches 3..5 of steps 2 and 3: [2, 3, 4, 6, 8, 9]
    self.assertAlmostEqual(summary["median_microbatch_s"], 5.0)
    self.assertAlmostEqual(summary["tokens_per_s_per_chip"], round(128 * 5 / 11.0 / 2, 3))
    self.assertAlmostEqual(summary["real_tokens_per_s_per_chip"], round(50 / 11.0 / 2, 3))
    self.assertEqual(summary["first_step_s"], 100.0)
    self.assertEqual(summary["steady_steps"], [1, 2])
    self.assertEqual(summary["microbatch_timing"], "dispatch")
    self.assertEqual(
        summary["routing"],
        [{"layer": 0, "target": 2.0, "achieved": 2.001, "max_load": 20, "mean_load": 10.0}])
    for key in ("name", "steps", "micro_steps", "rows", "tokens_per_row", "real_len", "layers",
                "topk", "experts", "chips", "knobs", "compile"):
      self.assertIn(key, summary)
    json.dumps(summary)

  def test_summary_of_one_step_and_few_micro_batches(self):
    plan = make_plan(steps=1, micro_steps=2)
    records = [bd.StepRecord(0, 4.0, [1.0, 3.0], 140, 0, False)]
    summary = summary_of(plan, records)
    self.assertEqual(summary["mean_step_s"], 4.0)
    self.assertEqual(summary["median_microbatch_s"], 2.0)

  def test_a_short_final_micro_batch_is_no_regular_one(self):
    # FINAL_ROWS < rows: the last micro-batch of each step is short; it stays out of the median
    # and of the boundary-free estimate.
    records = [
        bd.StepRecord(step=i, seconds=s, microbatch_s=mbs, tokens=50, tokens_per_s_per_chip=0,
                      fused_update=True, microbatch_timing="device")
        for i, (s, mbs) in enumerate([(30.0, [9, 9, 9, 9, 0.5]), (
            14.0, [4, 3, 2, 2, 0.5]), (16.0, [6, 3, 3, 3, 0.5])])
    ]
    plan = make_plan(steps=3, micro_steps=5)
    plan.short_final = True
    for record in records:
      record.boundary_free_step_s = bd.boundary_free_estimate(record.seconds, record.microbatch_s,
                                                              True, True)
    self.assertEqual([r.boundary_free_step_s for r in records], [30.0, 12.0, 13.0])
    summary = summary_of(plan, records)
    self.assertEqual(summary["median_microbatch_s"], 2.5)  # of [2, 2, 3, 3]: no 0.5
    self.assertEqual(summary["boundary_free_step_s"], 12.5)  # steps 1 and 2
    self.assertIn("estimate", summary["definitions"]["boundary_free_step_s"].lower())
    self.assertIn("short final", summary["definitions"]["median_microbatch_s"])
    # The same steps with a full final micro-batch pool it.
    plan.short_final = False
    self.assertEqual(summary_of(plan, records)["median_microbatch_s"], 2.0)
    # No estimate without device times, or with fewer than 3 micro-batches, or with nothing
    # regular left; one steady step without an estimate leaves the mean out.
    self.assertIsNone(bd.boundary_free_estimate(16.0, [6, 3, 3, 3], False, False))
    self.assertIsNone(bd.boundary_free_estimate(16.0, [6, 3], True, False))
    self.assertIsNone(bd.boundary_free_estimate(16.0, [6, 3, 0.5], True, True))
    self.assertEqual(bd.boundary_free_estimate(16.0, [6, 3, 0.5], True, False), 10.5)
    records[2].boundary_free_step_s = None
    self.assertIsNone(summary_of(plan, records)["boundary_free_step_s"])

  def test_summary_line_from_a_run(self):
    harness = Harness(FusedWorker)
    plan = make_plan(steps=3, micro_steps=3)
    records = harness.run(plan)
    summary = summary_of(plan, records, rows=2, tokens_per_row=64, real_len=50, final_rows=2,
                         layers=2, topk=2, experts=8)
    self.assertTrue(summary["fused_update"])
    self.assertEqual(len(summary["step_s"]), 3)
    self.assertAlmostEqual(summary["mean_step_s"], 6.5)

  def test_no_median_when_steps_timed_micro_batches_differently(self):
    plan = make_plan(steps=3, micro_steps=2)
    records = [
        bd.StepRecord(step, 2.0, [1.0, 1.0], 10, 0.0, False, microbatch_timing=timing,
                      microbatch_timing_source=source)
        for step, (timing, source) in enumerate([("device",
                                                  "token"), ("device",
                                                             "token"), ("dispatch", "dispatch")])
    ]
    summary = summary_of(plan, records)
    self.assertEqual(summary["microbatch_timing"], "mixed")
    self.assertIsNone(summary["median_microbatch_s"])
    self.assertEqual(summary["microbatch_timing_source"], ["dispatch", "token"])
    self.assertEqual(summary["mean_step_s"], 2.0)

  def test_no_steps(self):
    summary = summary_of(make_plan(steps=0), [])
    self.assertIsNone(summary["first_step_s"])
    self.assertIsNone(summary["mean_step_s"])
    self.assertIsNone(summary["tokens_per_s_per_chip"])
    self.assertIsNone(summary["update"])
    self.assertFalse(summary["fused_update"])


class TokenDroppingTest(unittest.TestCase):

  def test_dropped_tokens_counted_by_the_trainer(self):
    records = [
        bd.StepRecord(
            i, 1.0, [1.0], 10, 0, True, metrics={
                "loss": 0.1, "moe/layer0/dropped_tokens": float(i), "moe/layer1/dropped_tokens": 1.0
            }) for i in range(3)
    ]
    self.assertEqual(records[2].as_json()["dropped_tokens"], 3.0)
    config = types.SimpleNamespace(capacity_factor=-1.0, ragged_buffer_factor=2.75)
    out = bd.token_dropping(config, records, experts=8)
    self.assertEqual(out["verdict"], "dropped")
    self.assertEqual(out["dropped_tokens"], 6.0)
    self.assertEqual(out["counted_steps"], 3)
    zero = [bd.StepRecord(0, 1.0, [1.0], 10, 0, True, metrics={"tokens_dropped": 0.0})]
    self.assertEqual(bd.token_dropping(config, zero, experts=8)["verdict"], "none")

  def test_dropped_tokens_from_the_configuration(self):
    records = [bd.StepRecord(0, 1.0, [1.0], 10, 0, True, metrics={"loss": 0.1})]
    self.assertNotIn("dropped_tokens", records[0].as_json())
    dropless = types.SimpleNamespace(capacity_factor=-1.0, ragged_buffer_factor=-1.0)
    out = bd.token_dropping(dropless, records, experts=8)
    self.assertEqual(out["verdict"], "none")
    self.assertIn("dropless by configuration", out["why"])
    self.assertIsNone(out["dropped_tokens"])
    # The seed's runs: ragged buffers 2.75x the balanced size may overflow, and nothing counts.
    seed = types.SimpleNamespace(capacity_factor=-1.0, ragged_buffer_factor=2.75)
    out = bd.token_dropping(seed, records, experts=512)
    self.assertEqual(out["verdict"], "unknown")
    self.assertIn("ragged_buffer_factor 2.75", out["why"])
    self.assertEqual(bd.token_dropping(None, records, experts=512)["verdict"], "unknown")
    self.assertEqual(bd.token_dropping(dropless, records, experts=None)["verdict"], "not-moe")
    lines: List[str] = []
    bd.report_summary(
        {
            "name": "x", "first_step_s": 1.0, "steady_steps": [
            ], "mean_step_s": 1.0, "microbatch_timing": "device", "median_microbatch_s": 1.0,
            "microbatch_timing_source": "token", "tokens_per_s_per_chip": 1.0,
            "real_tokens_per_s_per_chip": 1.0, "token_dropping": out
        }, lines.append)
    self.assertTrue(any("WARNING: dropped tokens: unknown" in line for line in lines), lines)


class ThroughputTest(unittest.TestCase):

  def test_the_seeds_tokens_per_second_per_chip(self):
    # 64 rows x 65,536 tokens x 9 micro-steps / s per step / 128 chips, padding included.
    for step_s, expected in ((82.671, 3567), (106.30, 2774), (89.77, 3285)):
      plan = bd.BenchPlan(name="seed", steps=5, micro_steps=9, regular=None, final=None,
                          tokens_regular=64 * 60948, tokens_final=64 * 60948, chips=128,
                          padded_tokens_per_call=64 * 65536)
      records = [
          bd.StepRecord(step, 300.0 if step == 0 else step_s, [], plan.tokens_per_step, 0.0, True)
          for step in range(5)
      ]
      summary = summary_of(plan, records, rows=64, tokens_per_row=65536, real_len=60948,
                           final_rows=64)
      self.assertEqual(round(summary["tokens_per_s_per_chip"]), expected)
      self.assertEqual(summary["mean_step_s"], step_s)  # steps 1-4 of 5
      self.assertEqual(summary["first_step_s"], 300.0)
      self.assertLess(summary["real_tokens_per_s_per_chip"], summary["tokens_per_s_per_chip"])

  def test_profiled_steps_stay_out_of_the_means(self):
    plan = make_plan(steps=4, micro_steps=2, window=(2, 1))
    self.assertEqual([plan.profiled(step) for step in range(4)], [False, False, True, False])
    records = [
        bd.StepRecord(step, seconds, [1.0, 1.0], 10, 0.0, False, profiled=plan.profiled(step))
        for step, seconds in enumerate([50.0, 10.0, 99.0, 12.0])
    ]
    summary = summary_of(plan, records)
    self.assertEqual(summary["steady_steps"], [1, 3])
    self.assertEqual(summary["profiled_steps"], [2])
    self.assertEqual(summary["mean_step_s"], 11.0)


class CountChipsTest(unittest.TestCase):

  def test_count_chips(self):

    @dataclasses.dataclass
    class Device:
      device_kind: str
      coords: Optional[tuple] = None
      slice_index: int = 0

    v7x = [Device("TPU7x", (x, y, 0)) for x in range(2) for y in range(2) for _ in range(2)]
    self.assertEqual(bd.count_chips(v7x), (4, 2))
    v5p = [Device("TPU v5", (x, 0, 0)) for x in range(4)]
    self.assertEqual(bd.count_chips(v5p), (4, 1))
    self.assertEqual(bd.count_chips([Device("TPU7x")] * 8), (4, 2))
    self.assertEqual(bd.count_chips([Device("cpu")] * 3), (3, 1))
    two_slices = [Device("TPU v5", (0, 0, 0), s) for s in range(2)]
    self.assertEqual(bd.count_chips(two_slices), (2, 1))


class ReportSummaryTest(unittest.TestCase):
  """The human lines after BENCH_SUMMARY."""

  SUMMARY = {
      "name": "arm-a",
      "first_step_s": 90.5,
      "steady_steps": [1, 2],
      "mean_step_s": 10.25,
      "microbatch_timing": "device",
      "median_microbatch_s": 1.125,
      "microbatch_timing_source": "loss",
      "tokens_per_s_per_chip": 3567.0,
      "real_tokens_per_s_per_chip": 3300.0,
  }

  def lines(self, **changes: Any) -> List[str]:
    summary = dict(self.SUMMARY)
    summary.update(changes)
    lines: List[str] = []
    bd.report_summary(summary, lines.append)
    return lines

  def test_device_times(self):
    lines = self.lines()
    self.assertEqual(len(lines), 5)
    self.assertTrue(lines[0].startswith("arm-a: done. Steps count from 0; step 0 took 90.5 s"))
    self.assertIn("the means cover steps [1, 2]", lines[0])
    self.assertTrue(lines[1].startswith("  mean_step_s 10.25: "))
    self.assertEqual(
        lines[2], "  median_microbatch_s 1.125: device time per regular micro-batch "
        "(completion from loss)")
    self.assertTrue(lines[3].startswith("  tokens_per_s_per_chip 3567.0: "))
    self.assertEqual(lines[4], "  real_tokens_per_s_per_chip 3300.0: real tokens only")

  def test_the_estimate_and_the_update_path_are_said(self):
    lines = self.lines(boundary_free_step_s=9.5, fence_s=0.001,
                       update_path={"ran": "fused", "why": "named"})
    self.assertEqual(
        lines[3], "  boundary_free_step_s 9.5: an ESTIMATE, the step with its first micro-batch "
        "replaced by the median regular one")
    self.assertEqual(lines[6],
                     "  update path: fused (named); step-end fence 0.001 s on the idle device")

  def test_dispatch_intervals_and_mixed_timing_are_said(self):
    self.assertIn("WARNING: host DISPATCH intervals, not device times",
                  self.lines(microbatch_timing="dispatch")[2])
    self.assertEqual(
        self.lines(microbatch_timing="mixed")[2],
        "  median_microbatch_s: none (steps timed micro-batches differently: mixed)")

  def test_dropped_tokens_and_staging(self):
    dropped = {"verdict": "dropped", "dropped_tokens": 12.0, "why": "counted"}
    self.assertEqual(
        self.lines(token_dropping=dropped)[5],
        "  WARNING: dropped tokens: 12 (counted): this arm did less MoE work than the e2e run's "
        "would at the same routing")
    none = {"verdict": "none", "why": "dropless by configuration"}
    self.assertEqual(
        self.lines(token_dropping=none)[5], "  dropped tokens: none (dropless by configuration)")
    staged = {"resolved": "on", "staged_steps": 2, "latched_off": "no overlap"}
    self.assertEqual(
        self.lines(stage_boundary=staged)[5],
        "  staged step boundary: 2 steps counted staged (each on the worker's evidence); latched "
        "off: no overlap")
    self.assertEqual(len(self.lines(stage_boundary={"resolved": "off"})), 5)


def replay_record(step: int, replays: Optional[float], **metrics: float) -> Any:
  """A step whose metrics carry MaxText's moe_dropless_replays (None: not counted)."""
  if replays is not None:
    metrics["moe_dropless_replays"] = replays
  return bd.StepRecord(step, 1.0, [1.0], 10, 0, True, metrics=metrics or None)


class TokenDroppingReplaysTest(unittest.TestCase):
  """The token_dropping verdict under MaxText's retry_when_tokens_dropped (issue 25 item 2)."""

  # The seed's measured runs: ragged buffers 2.75x the balanced size, which may overflow.
  SEED = dict(capacity_factor=-1.0, ragged_buffer_factor=2.75)

  def verdict(self, records: List[Any], retry: Optional[bool], **config: Any) -> Any:
    settings = dict(self.SEED, **config)
    if retry is not None:
      settings["retry_when_tokens_dropped"] = retry
    return bd.token_dropping(types.SimpleNamespace(**settings), records, experts=512)

  def test_the_seeds_no_token_dropped_is_provable_with_replays_counted(self):
    clean = [replay_record(step, 0.0, loss=0.1) for step in range(3)]
    out = self.verdict(clean, retry=True)
    self.assertEqual(out["verdict"], "none")
    self.assertEqual(out["replays"], 0)
    self.assertEqual(out["replay_counted_steps"], 3)
    self.assertIs(out["retry_when_tokens_dropped"], True)
    self.assertIn("rerun dropless", out["why"])
    self.assertEqual(out["ragged_buffer_factor"], 2.75)
    replayed = [replay_record(0, 0.0), replay_record(1, 2.0), replay_record(2, 1.0)]
    out = self.verdict(replayed, retry=True)
    self.assertEqual(out["verdict"], "replayed")
    self.assertEqual(out["replays"], 3)
    self.assertIsNone(out["dropped_tokens"])

  def test_without_a_count_in_every_step_the_replay_cannot_say_none(self):
    partial = [replay_record(0, 0.0), replay_record(1, None, loss=0.1)]
    out = self.verdict(partial, retry=True)
    self.assertEqual(out["verdict"], "unknown")
    self.assertEqual(out["replay_counted_steps"], 1)
    self.assertIn("counted in 1 of 2 steps", out["why"])
    # A replay counted in one step proves nothing of a step that counted none: "replayed" says
    # no token was dropped, so it stays unknown, with the replays it saw.
    some = self.verdict([replay_record(0, 1.0), replay_record(1, None, loss=0.1)], retry=True)
    self.assertEqual((some["verdict"], some["replays"]), ("unknown", 1))

  def test_retry_off_keeps_the_configurations_verdict(self):
    records = [replay_record(0, None, loss=0.1)]
    out = self.verdict(records, retry=False)
    self.assertEqual(out["verdict"], "unknown")
    self.assertIs(out["retry_when_tokens_dropped"], False)
    self.assertIsNone(out["replays"])
    self.assertEqual(out["replay_counted_steps"], 0)
    self.assertEqual(self.verdict(records, retry=None)["retry_when_tokens_dropped"], None)
    # A count without the setting proves nothing about dropping.
    self.assertEqual(self.verdict([replay_record(0, 0.0)], retry=None)["verdict"], "unknown")
    dropless = self.verdict(records, retry=False, ragged_buffer_factor=-1.0)
    self.assertEqual(dropless["verdict"], "none")

  def test_the_replay_does_not_cover_a_positive_capacity_factor(self):
    for replays in (0.0, 2.0):
      out = self.verdict([replay_record(0, replays)], retry=True, capacity_factor=1.25)
      self.assertEqual(out["verdict"], "unknown")
      self.assertIn("capacity_factor is positive", out["why"])

  def test_counted_drops_still_win_and_not_moe_stays(self):
    dropped = [replay_record(0, 1.0, dropped_tokens=4.0)]
    self.assertEqual(self.verdict(dropped, retry=True)["verdict"], "dropped")
    none_dropped = [replay_record(0, 1.0, dropped_tokens=0.0)]
    self.assertEqual(self.verdict(none_dropped, retry=True)["verdict"], "replayed")
    self.assertEqual(
        bd.token_dropping(types.SimpleNamespace(retry_when_tokens_dropped=True),
                          [replay_record(0, 0.0)], experts=None)["verdict"], "not-moe")

  def test_the_replayed_verdict_is_a_warning(self):
    lines: List[str] = []
    summary = dict(ReportSummaryTest.SUMMARY,
                   token_dropping={"verdict": "replayed", "replays": 3, "why": "counted"})
    bd.report_summary(summary, lines.append)
    self.assertEqual(
        lines[5], "  WARNING: MoE dropless replays: 3 (counted): no token dropped, but each "
        "replay is a whole extra forward/backward in the step times")


class GradNormTest(unittest.TestCase):
  """BENCH_SUMMARY grad_norm (issue 25 item 11)."""

  def test_reported(self):
    records = [
        replay_record(0, None, loss=1.0, gradient_norm=0.5),
        replay_record(1, None, loss=1.0)
    ]
    out = bd.grad_norm(types.SimpleNamespace(skip_step_on_spikes=False), records)
    self.assertEqual(
        out, {
            "reported": True, "metric": "gradient_norm", "steps": 1, "skip_step_on_spikes": False,
            "why": "reported as gradient_norm in 1 of 2 steps"
        })
    other = bd.grad_norm(None, [replay_record(0, None, **{"opt/grad_norm": 0.5})])
    self.assertEqual((other["metric"], other["skip_step_on_spikes"]), ("opt/grad_norm", None))

  def test_not_reported_says_why(self):
    records = [replay_record(0, None, loss=1.0)]
    off = bd.grad_norm(types.SimpleNamespace(skip_step_on_spikes=False), records)
    self.assertFalse(off["reported"])
    self.assertIsNone(off["metric"])
    self.assertEqual(off["steps"], 0)
    self.assertIn("skip_step_on_spikes is off", off["why"])
    self.assertIn("e591f30c", off["why"])
    self.assertIn("b8bf66d6", off["why"])
    on = bd.grad_norm(types.SimpleNamespace(skip_step_on_spikes=True), records)
    self.assertIn("skip_step_on_spikes is on, yet", on["why"])
    self.assertIn("no skip_step_on_spikes", bd.grad_norm(None, records)["why"])
    silent = bd.grad_norm(None, [replay_record(0, None)])
    self.assertIn("reported no metrics", silent["why"])
    lines: List[str] = []
    bd.report_summary(dict(ReportSummaryTest.SUMMARY, grad_norm=off), lines.append)
    self.assertTrue(
        lines[5].startswith("  gradient norm: not reported, the grad-norm gate is not "
                            "evaluated (skip_step_on_spikes is off"), lines)
    self.assertEqual(len(self.lines_with(dict(off, reported=True))), 5)

  @staticmethod
  def lines_with(norm: Any) -> List[str]:
    lines: List[str] = []
    bd.report_summary(dict(ReportSummaryTest.SUMMARY, grad_norm=norm), lines.append)
    return lines


class MicrobatchTimingWhyTest(unittest.TestCase):
  """BENCH_SUMMARY microbatch_timing_why (issue 25 item 3)."""

  def test_the_steady_steps_reasons_once_each(self):
    plan = make_plan(steps=3, micro_steps=2)
    records = [
        bd.StepRecord(step, 1.0, [0.5, 0.5], 10, 0, False, timing_why=why)
        for step, why in enumerate(["compile step", "reason a", "reason a"])
    ]
    self.assertEqual(summary_of(plan, records)["microbatch_timing_why"], "reason a")
    records[2].timing_why = "reason b"
    self.assertEqual(summary_of(plan, records)["microbatch_timing_why"], "reason a; reason b")
    for record in records:
      record.timing_why = None
    self.assertIsNone(summary_of(plan, records)["microbatch_timing_why"])

  def test_the_dispatch_warning_gives_the_reason(self):
    lines: List[str] = []
    bd.report_summary(
        dict(ReportSummaryTest.SUMMARY, microbatch_timing="dispatch",
             microbatch_timing_why="host dispatch intervals: a call had nothing to wait on (x)"),
        lines.append)
    self.assertIn(
        "WARNING: host DISPATCH intervals, not device times: a call had nothing to wait "
        "on (x)", lines[2])
    self.assertNotIn("offers no completion", lines[2])


if __name__ == "__main__":
  unittest.main()
