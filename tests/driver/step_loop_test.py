"""Tests of the bench driver's step loop with fake workers, a fake profiler and a fake clock."""

import argparse
import dataclasses
import json
import types
import re
import unittest
from typing import Any, Optional

import numpy as np


from doubles import InlineCompletionWatcher
from driver_loader import load_driver

bd = load_driver()

TIMING_LINE = re.compile(r"^TRAINER_STEP_TIMING step=(\d+) policy_version=(\d+) rtt_s=(\d+\.\d{3}) "
                         r"timing=(\S+)$")


class FakeClock:

  def __init__(self):
    self.now = 1000.0

  def __call__(self) -> float:
    return self.now

  def advance(self, seconds: float) -> None:
    self.now += seconds


class Response:
  """Stands in for datatypes.Response: metadata and a request id."""

  def __init__(self, **metadata):
    self.metadata = metadata
    self.request_id = None


class Request:

  def __init__(self, payload):
    self.payload = payload
    self.metadata = {}
    self.request_id = "train_req_test"


class Events:
  """One ordered log shared by the fakes, so tests can check what happened before what."""

  def __init__(self):
    self.items = []

  def add(self, *item):
    self.items.append(item)

  def names(self):
    return [item[0] for item in self.items]


class ExplicitWorker:
  """The current TrainerWorker: fwd_bwd(request, **kwargs) queues, update() applies."""

  def __init__(self, clock, events, mb_seconds=2.0, update_seconds=0.5, fail_at=None):
    self.clock, self.events = clock, events
    self.mb_seconds, self.update_seconds = mb_seconds, update_seconds
    self.fail_at = fail_at
    self.fwd_bwd_calls = []
    self.updates = 0
    self.profiler = None

  def fwd_bwd(self, request, **kwargs):
    index = len(self.fwd_bwd_calls)
    self.fwd_bwd_calls.append((request, dict(kwargs)))
    self.events.add("fwd_bwd", index, bool(self.profiler and self.profiler.active))
    if self.fail_at is not None and index == self.fail_at:
      raise RuntimeError("device lost")
    self.clock.advance(self.mb_seconds)
    return Response(queued=True)

  def update(self):
    self.updates += 1
    self.events.add("update", self.updates)
    self.clock.advance(self.update_seconds)
    return self.updates

  def get_metrics(self):
    self.events.add("get_metrics")
    return {"loss": np.float32(1.5), "gradient_norm": 0.25, "note": "text"}


class FusedWorker(ExplicitWorker):
  """A worker that applies the optimizer inside the last fwd_bwd and says so (tunix#2719)."""

  def fwd_bwd(self, request, accumulate_gradients=False, apply_optimizer=False, skip_jit=False):
    index = len(self.fwd_bwd_calls)
    self.fwd_bwd_calls.append((request, dict(accumulate_gradients=accumulate_gradients,
                                             apply_optimizer=apply_optimizer, skip_jit=skip_jit)))
    self.events.add("fwd_bwd", index, bool(self.profiler and self.profiler.active))
    self.clock.advance(self.mb_seconds)
    if apply_optimizer:
      self.updates += 1
      self.clock.advance(self.update_seconds)
      return Response(queued=True, updated=True, train_step=self.updates)
    return Response(queued=True)


class LegacyWorker(ExplicitWorker):
  """The old TrainerWorker: fwd_bwd(payload=None, **kwargs) pops the optimizer flags."""

  def fwd_bwd(self, payload=None, **kwargs):
    self.fwd_bwd_calls.append((payload, dict(kwargs)))
    self.events.add("fwd_bwd", len(self.fwd_bwd_calls) - 1, False)
    accumulate = bool(kwargs.pop("accumulate_gradients", False))
    apply = bool(kwargs.pop("apply_optimizer", False))
    kwargs.pop("skip_jit", None)
    assert not kwargs, kwargs
    self.clock.advance(self.mb_seconds)
    if apply:
      self.updates += 1
      return {"queued": True, "updated": True, "train_step": self.updates}
    return {"queued": True, "updated": False} if accumulate else Response(queued=True)


class LiarWorker(FusedWorker):
  """Takes apply_optimizer but reports that it did not update: the driver must call update()."""

  def fwd_bwd(self, request, accumulate_gradients=False, apply_optimizer=False, skip_jit=False):
    super().fwd_bwd(request, accumulate_gradients, False, skip_jit)
    return {"updated": False}


class TimingWorker(ExplicitWorker):

  def __init__(self, clock, events, timing=None, error=None, rtt=0.25):
    super().__init__(clock, events)
    self.timing, self.error, self.rtt = timing, error, rtt
    self.timing_calls = 0

  def get_step_timing(self):
    self.timing_calls += 1
    self.clock.advance(self.rtt)
    if self.error is not None:
      raise self.error
    return self.timing


class FakeProfiler:

  def __init__(self, events, fail_start=False):
    self.events = events
    self.active = False
    self.starts, self.stops = [], 0
    self.fail_start = fail_start

  def start(self, log_dir):
    if self.fail_start:
      raise RuntimeError("profiler busy")
    self.starts.append(log_dir)
    self.active = True
    self.events.add("profiler_start", log_dir)

  def stop(self):
    self.stops += 1
    self.active = False
    self.events.add("profiler_stop")


class Token:
  """A device result: block_until_ready() moves the clock to when it is ready."""

  def __init__(self, clock, events, ready_at, label):
    self.clock, self.events, self.ready_at, self.label = clock, events, ready_at, label

  def block_until_ready(self):
    self.events.add("wait", self.label)
    self.clock.now = max(self.clock.now, self.ready_at)
    return self

  def is_ready(self):
    return self.clock.now >= self.ready_at


class AsyncWorker(ExplicitWorker):
  """Dispatch returns at once; the device runs micro-batches back to back (tokens in the
  response), like a trainer that publishes readiness."""

  def __init__(self, clock, events, device_seconds=3.0, dispatch_seconds=0.1):
    super().__init__(clock, events)
    self.device_seconds, self.dispatch_seconds = device_seconds, dispatch_seconds
    self.device_free = clock.now

  def _run(self, label, seconds):
    self.clock.advance(self.dispatch_seconds)
    start = max(self.clock.now, self.device_free)
    self.device_free = start + seconds
    return Token(self.clock, self.events, self.device_free, label)

  def fwd_bwd(self, request, **kwargs):
    self.fwd_bwd_calls.append((request, dict(kwargs)))
    index = len(self.fwd_bwd_calls) - 1
    self.events.add("fwd_bwd", index, False)
    return {"queued": True, "loss": self._run(f"mb{index}", self.device_seconds)}

  def update(self):
    self.updates += 1
    self.events.add("update", self.updates)
    return {"train_step": self.updates, "token": self._run(f"update{self.updates}", 1.0)}


def make_plan(steps=2, micro_steps=3, window=None, chips=4, tokens_regular=100, tokens_final=40,
              padded=128, stage=None):
  return bd.BenchPlan(name="bench-x", steps=steps, micro_steps=micro_steps, regular="REGULAR",
                      final="FINAL", tokens_regular=tokens_regular, tokens_final=tokens_final,
                      chips=chips, padded_tokens_per_call=padded, profile_window=window,
                      profile_dir="/tmp/trace-dir", stage_boundary=stage)


class Harness:
  """Runs run_steps on a worker and keeps what it printed."""

  def __init__(self, worker_class=ExplicitWorker, **worker_kwargs):
    self.clock = FakeClock()
    self.events = Events()
    self.worker = worker_class(self.clock, self.events, **worker_kwargs)
    self.profiler = FakeProfiler(self.events)
    self.worker.profiler = self.profiler
    self.lines, self.logs = [], []

  def run(self, plan, **kwargs):
    calls = bd.WorkerCalls(self.worker, make_request=Request)
    kwargs.setdefault("watcher", InlineCompletionWatcher(self.clock))
    kwargs.setdefault("observer", bd.DeviceObserver(block_all=self.fence))
    return bd.run_steps(self.worker, plan, clock=self.clock, profiler=self.profiler, calls=calls,
                        out=self.lines.append, log=self.logs.append, **kwargs)

  def fence(self):
    """Waits for all device work: the fake workers' device is done at `device_free`."""
    self.events.add("fence")
    self.clock.now = max(self.clock.now, getattr(self.worker, "device_free", self.clock.now))

  def machine(self, prefix):
    return [line for line in self.lines if line.startswith(prefix)]

  def bench_steps(self):
    return [json.loads(line[len("BENCH_STEP "):]) for line in self.machine("BENCH_STEP ")]


class UpdateTest(unittest.TestCase):

  def test_explicit_update_for_a_worker_without_apply_optimizer(self):
    harness = Harness(ExplicitWorker)
    records = harness.run(make_plan(steps=2, micro_steps=3))
    worker = harness.worker
    self.assertEqual(worker.updates, 2)
    self.assertEqual(len(worker.fwd_bwd_calls), 6)
    for request, kwargs in worker.fwd_bwd_calls:
      self.assertIsInstance(request, Request)
      self.assertNotIn("apply_optimizer", kwargs)  # would leak into trainer.fwd_bwd(**kwargs)
      self.assertEqual(kwargs, {"skip_jit": False})
    payloads = [request.payload for request, _ in worker.fwd_bwd_calls]
    self.assertEqual(payloads, ["REGULAR", "REGULAR", "FINAL"] * 2)
    names = [name for name in harness.events.names() if name in ("fwd_bwd", "update")]
    self.assertEqual(names, ["fwd_bwd"] * 3 + ["update"] + ["fwd_bwd"] * 3 + ["update"])
    self.assertEqual([record.fused_update for record in records], [False, False])
    self.assertEqual([record.train_step for record in records], [1, 2])

  def test_no_second_update_after_a_fused_one(self):
    harness = Harness(FusedWorker)
    records = harness.run(make_plan(steps=3, micro_steps=4))
    worker = harness.worker
    self.assertEqual(worker.updates, 3)  # one per step, all inside fwd_bwd
    self.assertNotIn("update", harness.events.names())
    flags = [kwargs["apply_optimizer"] for _, kwargs in worker.fwd_bwd_calls]
    self.assertEqual(flags, [False, False, False, True] * 3)
    self.assertTrue(all(kwargs["accumulate_gradients"] for _, kwargs in worker.fwd_bwd_calls))
    self.assertEqual([record.fused_update for record in records], [True] * 3)
    self.assertEqual([record.train_step for record in records], [1, 2, 3])
    self.assertTrue(all(step["fused_update"] for step in harness.bench_steps()))

  def test_legacy_worker_takes_the_payload_and_fuses(self):
    harness = Harness(LegacyWorker)
    records = harness.run(make_plan(steps=2, micro_steps=2))
    self.assertEqual(harness.worker.updates, 2)
    self.assertNotIn("update", harness.events.names())
    payload, kwargs = harness.worker.fwd_bwd_calls[0]
    self.assertEqual(payload, "REGULAR")
    self.assertEqual(kwargs["apply_optimizer"], False)
    self.assertEqual(harness.worker.fwd_bwd_calls[1][1]["apply_optimizer"], True)
    self.assertTrue(all(record.fused_update for record in records))

  def test_a_worker_that_reports_no_update_gets_update(self):
    harness = Harness(LiarWorker)
    records = harness.run(make_plan(steps=2, micro_steps=2))
    self.assertEqual(harness.events.names().count("update"), 2)
    self.assertFalse(any(record.fused_update for record in records))

  def test_worker_calls_detects_the_generation(self):
    events, clock = Events(), FakeClock()
    explicit = bd.WorkerCalls(ExplicitWorker(clock, events))
    self.assertTrue(explicit.takes_request)
    self.assertFalse(explicit.can_fuse)
    fused = bd.WorkerCalls(FusedWorker(clock, events))
    self.assertTrue(fused.takes_request and fused.can_fuse)
    legacy = bd.WorkerCalls(LegacyWorker(clock, events))
    self.assertFalse(legacy.takes_request)
    self.assertTrue(legacy.can_fuse)
    self.assertEqual(legacy.payload_keyword, "payload")

  def test_response_updated(self):
    self.assertTrue(bd.response_updated({"updated": True}))
    self.assertTrue(bd.response_updated(Response(updated=True)))
    self.assertTrue(bd.response_updated({"metadata": {"updated": True}}))
    self.assertFalse(bd.response_updated(Response(queued=True)))
    self.assertFalse(bd.response_updated(None))
    self.assertFalse(bd.response_updated(7))


class StepTimingTest(unittest.TestCase):

  def test_one_line_per_step_in_the_orchestrator_format(self):
    timing = {"v": 1, "train_step": 3, "mb": [{"i": 0, "ready_ago_s": None}],
              "update": None, "prepare": None}
    harness = Harness(TimingWorker, timing=timing, rtt=0.25)
    harness.run(make_plan(steps=2, micro_steps=2))
    lines = harness.machine("TRAINER_STEP_TIMING")
    self.assertEqual(len(lines), 2)
    for step, line in enumerate(lines):
      match = TIMING_LINE.match(line)
      self.assertIsNotNone(match, line)
      self.assertEqual(int(match.group(1)), step)
      self.assertEqual(int(match.group(2)), step)
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
    self.assertEqual(lines, [f"TRAINER_STEP_TIMING step={step} unavailable: rpc unavailable"
                             for step in (0, 1, 2)])
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


class ProfilerTest(unittest.TestCase):

  def test_window_covers_exactly_its_calls(self):
    harness = Harness(ExplicitWorker)
    harness.run(make_plan(steps=3, micro_steps=3, window=(3, 4)))
    profiler = harness.profiler
    self.assertEqual(profiler.starts, ["/tmp/trace-dir"])
    self.assertEqual(profiler.stops, 1)
    traced = [item[1] for item in harness.events.items if item[0] == "fwd_bwd" and item[2]]
    self.assertEqual(traced, [3, 4, 5, 6])
    # The stop comes after the window's last call has finished on the device: a fence, which
    # consumes no metrics (get_metrics would take the step's metrics from its BENCH_STEP).
    names = harness.events.names()
    stop = names.index("profiler_stop")
    self.assertEqual(names[stop - 2:stop], ["fwd_bwd", "fence"])
    self.assertEqual(len([name for name in names[:stop] if name == "fwd_bwd"]), 7)

  def test_window_stop_waits_on_the_call_token(self):
    harness = Harness(AsyncWorker)
    harness.run(make_plan(steps=1, micro_steps=4, window=(1, 2)))
    names = harness.events.items
    stop = harness.events.names().index("profiler_stop")
    self.assertEqual(names[stop - 1], ("wait", "mb2"))
    self.assertEqual(harness.profiler.stops, 1)

  def test_window_past_the_end_stops_at_the_end(self):
    harness = Harness(ExplicitWorker)
    harness.run(make_plan(steps=2, micro_steps=3, window=(4, 10)))
    self.assertEqual(len(harness.profiler.starts), 1)
    self.assertEqual(harness.profiler.stops, 1)
    self.assertEqual(harness.events.names()[-1], "profiler_stop")
    self.assertTrue(any("end of the run" in line for line in harness.logs))

  def test_window_after_the_run_never_starts(self):
    harness = Harness(ExplicitWorker)
    harness.run(make_plan(steps=1, micro_steps=3, window=(3, 2)))
    self.assertEqual(harness.profiler.starts, [])
    self.assertEqual(harness.profiler.stops, 0)
    self.assertTrue(any("no trace" in line for line in harness.logs))

  def test_trace_is_stopped_on_an_exception(self):
    harness = Harness(ExplicitWorker, fail_at=4)
    with self.assertRaises(RuntimeError):
      harness.run(make_plan(steps=3, micro_steps=3, window=(2, 5)))
    self.assertEqual(len(harness.profiler.starts), 1)
    self.assertEqual(harness.profiler.stops, 1)

  def test_no_stop_when_the_failure_precedes_the_window(self):
    harness = Harness(ExplicitWorker, fail_at=1)
    with self.assertRaises(RuntimeError):
      harness.run(make_plan(steps=3, micro_steps=3, window=(5, 2)))
    self.assertEqual(harness.profiler.starts, [])
    self.assertEqual(harness.profiler.stops, 0)

  def test_a_profiler_that_cannot_start_leaves_the_run_going(self):
    harness = Harness(ExplicitWorker)
    harness.profiler.fail_start = True
    records = harness.run(make_plan(steps=2, micro_steps=2, window=(0, 2)))
    self.assertEqual(len(records), 2)
    self.assertEqual(harness.profiler.stops, 0)
    self.assertTrue(any("start failed" in line for line in harness.logs))


class TimingTest(unittest.TestCase):

  def test_bench_step_json(self):
    harness = Harness(ExplicitWorker, mb_seconds=2.0, update_seconds=0.5)
    harness.run(make_plan(steps=2, micro_steps=3, chips=4, tokens_regular=100, tokens_final=40))
    steps = harness.bench_steps()
    self.assertEqual([step["step"] for step in steps], [0, 1])  # from 0, as the orchestrator
    for step in steps:
      self.assertTrue({"step", "seconds", "microbatch_s", "tokens", "tokens_per_s_per_chip",
                       "real_tokens_per_s_per_chip", "padded_tokens", "microbatch_timing",
                       "microbatch_timing_source", "update", "staged", "profiled",
                       "fused_update"} <= set(step))
      self.assertEqual(step["tokens"], 100 * 2 + 40)
      self.assertEqual(step["padded_tokens"], 128 * 3)
      self.assertAlmostEqual(step["seconds"], 6.5)
      # Without anything to wait on a micro-batch lasts until the next dispatch; the last one
      # until the step's end, update included; and the step says so.
      self.assertEqual(step["microbatch_s"], [2.0, 2.0, 2.5])
      self.assertEqual(step["microbatch_timing"], "dispatch")
      self.assertEqual(step["microbatch_timing_source"], "dispatch")
      # The seed's tokens/s/chip counts padding; the real-token figure stands beside it.
      self.assertAlmostEqual(step["tokens_per_s_per_chip"], round(384 / 6.5 / 4, 3))
      self.assertAlmostEqual(step["real_tokens_per_s_per_chip"], round(240 / 6.5 / 4, 3))
      self.assertEqual(step["update"], "explicit")
      self.assertFalse(step["staged"] or step["profiled"])
      self.assertFalse(step["fused_update"])
      self.assertEqual(step["metrics"], {"loss": 1.5, "gradient_norm": 0.25})
    for line in harness.machine("BENCH_STEP"):
      self.assertTrue(line.startswith("BENCH_STEP {"))
      self.assertNotIn("\n", line)

  def test_device_tokens_give_device_intervals(self):
    harness = Harness(AsyncWorker, device_seconds=3.0, dispatch_seconds=0.1)
    records = harness.run(make_plan(steps=2, micro_steps=4))
    for record in records:
      self.assertEqual(len(record.microbatch_s), 4)
      # The first includes its own dispatch (the device was idle); the rest are back to back.
      self.assertAlmostEqual(record.microbatch_s[0], 3.1, places=6)
      for value in record.microbatch_s[1:]:
        self.assertAlmostEqual(value, 3.0, places=6)
      self.assertEqual(record.microbatch_timing, "device")
      self.assertEqual(record.microbatch_timing_source, "token")
    # step: 0.1 dispatch, 4 x 3 s back to back, then the update's 1 s
    self.assertAlmostEqual(records[0].seconds, 0.1 + 12.0 + 1.0, places=6)
    waits = [item[1] for item in harness.events.items if item[0] == "wait"]
    self.assertEqual(waits[:5], ["mb0", "mb1", "mb2", "mb3", "update1"])

  def test_step_end_waits_for_the_device(self):
    harness = Harness(AsyncWorker, device_seconds=5.0, dispatch_seconds=0.0)
    records = harness.run(make_plan(steps=1, micro_steps=2))
    self.assertAlmostEqual(records[0].seconds, 11.0, places=6)

  def test_summary(self):
    plan = make_plan(steps=3, micro_steps=5, chips=2, tokens_regular=10, tokens_final=10)
    records = [bd.StepRecord(step=i, seconds=s, microbatch_s=mbs, tokens=50,
                             tokens_per_s_per_chip=0, fused_update=True)
               for i, (s, mbs) in enumerate([(100.0, [9, 9, 9, 9, 9]),
                                             (10.0, [1, 5, 2, 3, 4]),
                                             (12.0, [7, 8, 6, 8, 9])])]
    layer = bd.LayerRouting(0, 2.0, 2.001, 20, 10.0)
    summary = bd.summarize(plan, records, rows=2, tokens_per_row=64, real_len=60, segments=2,
                           final_rows=2, layers=1, topk=2, experts=8, routing=[layer],
                           routing_final=None, knobs={"steps": 3}, extra={"compile": {}})
    self.assertEqual(summary["step_s"], [100.0, 10.0, 12.0])
    self.assertAlmostEqual(summary["mean_step_s"], 11.0)
    # micro-batches 3..5 of steps 2 and 3: [2, 3, 4, 6, 8, 9]
    self.assertAlmostEqual(summary["median_microbatch_s"], 5.0)
    self.assertAlmostEqual(summary["tokens_per_s_per_chip"], round(128 * 5 / 11.0 / 2, 3))
    self.assertAlmostEqual(summary["real_tokens_per_s_per_chip"], round(50 / 11.0 / 2, 3))
    self.assertEqual(summary["first_step_s"], 100.0)
    self.assertEqual(summary["steady_steps"], [1, 2])
    self.assertEqual(summary["microbatch_timing"], "dispatch")
    self.assertEqual(summary["routing"], [{"layer": 0, "target": 2.0, "achieved": 2.001,
                                           "max_load": 20, "mean_load": 10.0}])
    for key in ("name", "steps", "micro_steps", "rows", "tokens_per_row", "real_len", "layers",
                "topk", "experts", "chips", "knobs", "compile"):
      self.assertIn(key, summary)
    json.dumps(summary)

  def test_summary_of_one_step_and_few_micro_batches(self):
    plan = make_plan(steps=1, micro_steps=2)
    records = [bd.StepRecord(0, 4.0, [1.0, 3.0], 140, 0, False)]
    summary = bd.summarize(plan, records, rows=1, tokens_per_row=8, real_len=7, segments=1,
                           final_rows=1, layers=None, topk=None, experts=None, routing=[],
                           routing_final=None, knobs={})
    self.assertEqual(summary["mean_step_s"], 4.0)
    self.assertEqual(summary["median_microbatch_s"], 2.0)

  def test_dropped_tokens_counted_by_the_trainer(self):
    records = [bd.StepRecord(i, 1.0, [1.0], 10, 0, True,
                             metrics={"loss": 0.1, "moe/layer0/dropped_tokens": float(i),
                                      "moe/layer1/dropped_tokens": 1.0})
               for i in range(3)]
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
    lines = []
    bd.report_summary({"name": "x", "first_step_s": 1.0, "steady_steps": [], "mean_step_s": 1.0,
                       "microbatch_timing": "device", "median_microbatch_s": 1.0,
                       "microbatch_timing_source": "token", "tokens_per_s_per_chip": 1.0,
                       "real_tokens_per_s_per_chip": 1.0, "token_dropping": out}, lines.append)
    self.assertTrue(any("WARNING: dropped tokens: unknown" in line for line in lines), lines)

  def test_summary_line_from_a_run(self):
    harness = Harness(FusedWorker)
    plan = make_plan(steps=3, micro_steps=3)
    records = harness.run(plan)
    summary = bd.summarize(plan, records, rows=2, tokens_per_row=64, real_len=50, segments=1,
                           final_rows=2, layers=2, topk=2, experts=8, routing=[],
                           routing_final=None, knobs={})
    self.assertTrue(summary["fused_update"])
    self.assertEqual(len(summary["step_s"]), 3)
    self.assertAlmostEqual(summary["mean_step_s"], 6.5)


class DeviceModel:
  """A device on the fake clock: work runs back to back; the trainer publishes readiness
  tokens (last_fwd_bwd_token / last_update_token, as Tunix's StepTimer reads them)."""

  def __init__(self, clock, events):
    self.clock, self.events = clock, events
    self.device_free = clock.now
    self.last_fwd_bwd_token = None
    self.last_update_token = None

  def run(self, label, seconds):
    start = max(self.clock.now, self.device_free)
    self.device_free = start + seconds
    return Token(self.clock, self.events, self.device_free, label)


class StagingWorker(ExplicitWorker):
  """Stands in for the seed's TrainerWorker staging change (PIPELINE_STEP_BOUNDARY /
  STAGE_NEXT_MICROBATCH; AI-Hypercomputer/maxtext#5718 underneath): stage_fwd_bwd(request)
  sends a micro-batch to the trainer host ahead of its fwd_bwd, fwd_bwd(..., defer_update=True)
  defers the fused update, apply_deferred_update() dispatches it. No public Tunix has these.

  Sending a micro-batch takes `transfer_seconds` of host time; the device waits for it unless
  the micro-batch was staged while it computed the previous one."""

  def __init__(self, clock, events, mb_seconds=2.0, update_seconds=0.5, transfer_seconds=1.0,
               stage_error=None):
    super().__init__(clock, events, mb_seconds=mb_seconds, update_seconds=update_seconds)
    self.transfer_seconds = transfer_seconds
    self.stage_error = stage_error
    self._trainer = DeviceModel(clock, events)
    self.staged = set()
    self.deferred = False
    self.calls = []

  @property
  def device_free(self):
    return self._trainer.device_free

  def _update(self):
    self.updates += 1
    self._trainer.last_update_token = self._trainer.run(f"update{self.updates}",
                                                        self.update_seconds)

  def fwd_bwd(self, request, accumulate_gradients=False, apply_optimizer=False, skip_jit=False,
              defer_update=False):
    index = len(self.fwd_bwd_calls)
    self.fwd_bwd_calls.append((request, dict(apply_optimizer=apply_optimizer,
                                             defer_update=defer_update)))
    staged = id(request) in self.staged
    self.staged.discard(id(request))
    self.events.add("fwd_bwd", index, staged)
    if not staged:
      self.clock.advance(self.transfer_seconds)
    self._trainer.last_fwd_bwd_token = self._trainer.run(f"mb{index}", self.mb_seconds)
    if apply_optimizer and defer_update:
      self.deferred = True
      return Response(queued=True, deferred=True)
    if apply_optimizer:
      self._update()
      return Response(queued=True, updated=True, train_step=self.updates)
    return Response(queued=True)

  def stage_fwd_bwd(self, request):
    self.events.add("stage")
    if self.stage_error is not None:
      raise self.stage_error
    self.clock.advance(self.transfer_seconds)
    self.staged.add(id(request))
    return Response(staged=True)

  def apply_deferred_update(self):
    assert self.deferred, "apply_deferred_update without a deferred update"
    self.deferred = False
    self.events.add("apply_deferred_update")
    self._update()
    return self.updates

  def update(self):
    raise AssertionError("the staged path never calls update()")


def stage_plan(resolved=True, before_update=True):
  return bd.StagePlan("on" if resolved else "off", resolved, "test", before_update)


class StagedBoundaryTest(unittest.TestCase):

  def test_staging_removes_the_transfer_bubble(self):
    off = Harness(StagingWorker)
    records_off = off.run(make_plan(steps=3, micro_steps=3, stage=stage_plan(False)))
    on = Harness(StagingWorker)
    state = bd.StageState(stage_plan(True), on.logs.append)
    records_on = on.run(make_plan(steps=3, micro_steps=3, stage=stage_plan(True)),
                        stage_state=state)
    # Off: every step starts with a 1 s transfer to an idle device: 1 + 3 x 2 + 0.5.
    self.assertEqual([round(r.seconds, 6) for r in records_off], [7.5] * 3)
    self.assertTrue(all(r.update == "fused" for r in records_off))
    # On: steps 1 and 2 start with a staged micro-batch; the bubble is gone.
    self.assertEqual([round(r.seconds, 6) for r in records_on], [7.5, 6.5, 6.5])
    self.assertEqual([r.staged for r in records_on], [False, True, True])
    self.assertTrue(all(r.update == "deferred" for r in records_on))
    summary = state.summary()
    self.assertEqual(summary["staged_steps"], [1, 2])
    self.assertTrue(summary["engaged"])
    self.assertIsNone(summary["latched_off"])
    # The order the seed's orchestrator uses: last fwd_bwd (deferred), stage, apply the update.
    names = [n for n in on.events.names() if n in ("fwd_bwd", "stage", "apply_deferred_update")]
    self.assertEqual(names[2:5], ["fwd_bwd", "stage", "apply_deferred_update"])
    self.assertEqual(names[-2:], ["fwd_bwd", "apply_deferred_update"])  # no stage after the last
    flags = [kwargs for _, kwargs in on.worker.fwd_bwd_calls]
    self.assertEqual(flags[2], {"apply_optimizer": True, "defer_update": True})
    # Device-mode micro-batch times from the readiness tokens.
    self.assertTrue(all(r.microbatch_timing == "device" for r in records_on))
    self.assertAlmostEqual(records_on[1].microbatch_s[2], 2.0)

  def test_a_failed_stage_latches_staging_off(self):
    harness = Harness(StagingWorker, stage_error=RuntimeError("trainer host\nunreachable"))
    state = bd.StageState(stage_plan(True), harness.logs.append)
    records = harness.run(make_plan(steps=3, micro_steps=2, stage=stage_plan(True)),
                          stage_state=state)
    self.assertEqual(harness.events.names().count("stage"), 1)  # never tried again
    self.assertFalse(any(r.staged for r in records))  # the next micro-batch went whole
    summary = state.summary()
    self.assertFalse(summary["engaged"])
    self.assertIn("stage_fwd_bwd failed: trainer host unreachable", summary["latched_off"])
    self.assertEqual(len([l for l in harness.logs if "off for the rest of the run" in l]), 1)
    # Once off, steps run as before (the fused update).
    self.assertEqual([r.update for r in records], ["deferred", "fused", "fused"])

  def test_a_stage_without_overlap_latches_staging_off(self):
    harness = Harness(StagingWorker, mb_seconds=0.0)  # the device is done before the stage
    state = bd.StageState(stage_plan(True), harness.logs.append)
    records = harness.run(make_plan(steps=3, micro_steps=2, stage=stage_plan(True)),
                          stage_state=state)
    self.assertEqual([r.staged for r in records], [False, True, False])
    self.assertIn("no overlap", state.summary()["latched_off"])

  def test_on_needs_every_call(self):
    settings = bd.parse_settings({"TRAINER_ARGV": "--a", "ORCH_ARGV": "--b",
                                  "STAGE_BOUNDARY": "on"})
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
    self.assertFalse(resolve("--x", ORCH_PIPELINE_STEP_BOUNDARY="1",
                             ORCH_STAGE_NEXT_MICROBATCH="false").resolved)
    # The flag outranks the environment.
    self.assertFalse(resolve("--pipeline_step_boundary=false",
                             ORCH_PIPELINE_STEP_BOUNDARY="true").resolved)
    # Staging without the pipelined boundary: the e2e refuses it, so it does not stage.
    refused = resolve("--stage_next_microbatch")
    self.assertFalse(refused.resolved)
    self.assertIn("refuses", refused.source)
    self.assertFalse(resolve("--pipeline_step_boundary --stage_before_update=false")
                     .before_update)
    self.assertFalse(resolve("--pipeline_step_boundary", STAGE_BOUNDARY="off").resolved)
    with self.assertRaises(bd.SettingsError):
      resolve("--pipeline_step_boundary=maybe")
    with self.assertRaises(bd.SettingsError):
      resolve("--x", ORCH_STAGE_NEXT_MICROBATCH="sometimes")
    with self.assertRaises(bd.SettingsError):
      resolve("--x", STAGE_BOUNDARY="always")


class TokenFusedWorker(StagingWorker):
  """Publishes readiness tokens and fuses the update into the last call (no staging)."""

  stage_fwd_bwd = None
  apply_deferred_update = None

  def fwd_bwd(self, request, accumulate_gradients=False, apply_optimizer=False, skip_jit=False):
    return super().fwd_bwd(request, accumulate_gradients, apply_optimizer, skip_jit)


class StepEndTest(unittest.TestCase):

  def test_a_fused_update_is_part_of_its_step(self):
    # The update the worker dispatches inside the last call takes 4 s on the device; the step
    # ends when it is done, and the next step's first micro-batch does not absorb it.
    harness = Harness(TokenFusedWorker, mb_seconds=1.0, update_seconds=4.0,
                      transfer_seconds=0.0)
    records = harness.run(make_plan(steps=2, micro_steps=2))
    self.assertEqual([r.update for r in records], ["fused", "fused"])
    self.assertEqual([round(r.seconds, 6) for r in records], [6.0, 6.0])
    self.assertEqual([r.microbatch_s for r in records], [[1.0, 1.0], [1.0, 1.0]])
    self.assertIn(("wait", "update1"), harness.events.items)

  def test_without_an_update_token_the_step_ends_at_a_fence(self):

    class NoUpdateToken(TokenFusedWorker):

      def _update(self):
        self.updates += 1
        self._trainer.run(f"update{self.updates}", self.update_seconds)  # no token published

    harness = Harness(NoUpdateToken, mb_seconds=1.0, update_seconds=4.0, transfer_seconds=0.0)
    records = harness.run(make_plan(steps=2, micro_steps=2))
    self.assertEqual([round(r.seconds, 6) for r in records], [6.0, 6.0])
    self.assertEqual(harness.events.names().count("fence"), 2)

  def test_a_profiled_step_keeps_its_metrics(self):
    harness = Harness(ExplicitWorker)
    records = harness.run(make_plan(steps=3, micro_steps=3, window=(3, 3)))
    self.assertEqual([r.profiled for r in records], [False, True, False])
    steps = harness.bench_steps()
    self.assertEqual([step["profiled"] for step in steps], [False, True, False])
    keys = [sorted(step.get("metrics", {})) for step in steps]
    self.assertEqual(keys, [["gradient_norm", "loss"]] * 3)

  def test_the_trainers_ready_times_come_first(self):

    class Published(StagingWorker):
      stage_fwd_bwd = None
      apply_deferred_update = None

      def fwd_bwd(self, request, accumulate_gradients=False, apply_optimizer=False,
                  skip_jit=False):
        response = super().fwd_bwd(request, accumulate_gradients, False, skip_jit)
        self.ready = getattr(self, "ready", []) + [self._trainer.last_fwd_bwd_token.ready_at]
        self._trainer.last_fwd_bwd_token = None  # readiness only through get_step_timing
        return response

      def update(self):
        self.updates += 1
        self._trainer.run("update", self.update_seconds)
        return self.updates

      def get_step_timing(self):
        self.clock.advance(0.1)
        now = self.clock.now
        record = {"v": 1, "train_step": self.updates, "update": None, "prepare": None,
                  "mb": [{"i": i, "ready_ago_s": round(now - ready, 3)}
                         for i, ready in enumerate(self.ready)]}
        self.ready = []
        self.clock.advance(0.1)
        return record

    harness = Harness(Published, mb_seconds=2.0, transfer_seconds=0.0)
    records = harness.run(make_plan(steps=2, micro_steps=3))
    for record in records:
      self.assertEqual(record.microbatch_timing, "device")
      self.assertEqual(record.microbatch_timing_source, "step_timing")
      for value in record.microbatch_s:
        self.assertAlmostEqual(value, 2.0, places=6)


class LogpsPassTest(unittest.TestCase):

  def test_the_pass_runs_before_each_micro_batch_inside_the_step(self):
    harness = Harness(ExplicitWorker, mb_seconds=2.0, update_seconds=0.5)
    scored = []

    def score(payload):
      scored.append(payload)
      harness.events.add("logps", payload)
      harness.clock.advance(0.25)

    plan = make_plan(steps=2, micro_steps=3)
    plan.logps_pass = score
    records = harness.run(plan)
    self.assertEqual(scored, ["REGULAR", "REGULAR", "FINAL"] * 2)
    names = [n for n in harness.events.names() if n in ("logps", "fwd_bwd")]
    self.assertEqual(names, ["logps", "fwd_bwd"] * 6)
    for record in records:
      self.assertEqual(record.logps_pass_s, [0.25] * 3)
      self.assertAlmostEqual(record.seconds, 6.5 + 0.75)
    self.assertEqual(harness.bench_steps()[0]["logps_pass_s"], [0.25] * 3)
    self.assertNotIn("logps_pass_s", Harness(ExplicitWorker).run(make_plan())[0].as_json())


class ThroughputTest(unittest.TestCase):

  def test_the_seeds_tokens_per_second_per_chip(self):
    # 64 rows x 65,536 tokens x 9 micro-steps / s per step / 128 chips, padding included.
    for step_s, expected in ((82.671, 3567), (106.30, 2774), (89.77, 3285)):
      plan = bd.BenchPlan(name="seed", steps=5, micro_steps=9, regular=None, final=None,
                          tokens_regular=64 * 60948, tokens_final=64 * 60948, chips=128,
                          padded_tokens_per_call=64 * 65536)
      records = [bd.StepRecord(step, 300.0 if step == 0 else step_s, [], plan.tokens_per_step,
                               0.0, True) for step in range(5)]
      summary = bd.summarize(plan, records, rows=64, tokens_per_row=65536, real_len=60948,
                             segments=1, final_rows=64, layers=None, topk=None, experts=None,
                             routing=[], routing_final=None, knobs={})
      self.assertEqual(round(summary["tokens_per_s_per_chip"]), expected)
      self.assertEqual(summary["mean_step_s"], step_s)  # steps 1-4 of 5
      self.assertEqual(summary["first_step_s"], 300.0)
      self.assertLess(summary["real_tokens_per_s_per_chip"], summary["tokens_per_s_per_chip"])

  def test_profiled_steps_stay_out_of_the_means(self):
    plan = make_plan(steps=4, micro_steps=2, window=(4, 2))
    self.assertEqual([plan.profiled(step) for step in range(4)], [False, False, True, False])
    records = [bd.StepRecord(step, seconds, [1.0, 1.0], 10, 0.0, False,
                             profiled=plan.profiled(step))
               for step, seconds in enumerate([50.0, 10.0, 99.0, 12.0])]
    summary = bd.summarize(plan, records, rows=1, tokens_per_row=8, real_len=7, segments=1,
                           final_rows=1, layers=None, topk=None, experts=None, routing=[],
                           routing_final=None, knobs={})
    self.assertEqual(summary["steady_steps"], [1, 3])
    self.assertEqual(summary["profiled_steps"], [2])
    self.assertEqual(summary["mean_step_s"], 11.0)


class HelpersTest(unittest.TestCase):

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

  def test_split_runtime_argv(self):
    words = ["--process_main=tunix.x.run_trainer_node.main", "--discovery_id", "trainer",
             "--discovery_port=8080", "--discovery_addrs=orch:1", "--mesh_fsdp=32",
             "--maxtext_output_directory", "gs://b/out", "--process_executor=E"]
    main, rest = bd.split_runtime_argv("TRAINER_ARGV", words)
    self.assertEqual(main, "tunix.x.run_trainer_node.main")
    self.assertEqual(rest, ["--mesh_fsdp=32", "--maxtext_output_directory", "gs://b/out"])
    self.assertEqual(bd.process_module(main, "d"), "tunix.x.run_trainer_node")
    self.assertEqual(bd.process_module(None, "d"), "d")
    self.assertEqual(bd.flag_value(rest, "--maxtext_output_directory"), "gs://b/out")
    self.assertEqual(bd.flag_value(["--a=1", "--a=2"], "--a"), "2")
    with self.assertRaises(bd.SettingsError):
      bd.split_runtime_argv("TRAINER_ARGV", ["--process_main=a.main", "--process", "--x"])

  def test_disable_logp_gates(self):

    @dataclasses.dataclass
    class GRPOConfig:
      epsilon: float = 0.2
      use_rollout_logps: bool = False
      sampler_is: Optional[str] = "token"
      sampler_is_threshold: float = 2.0
      seq_logprob_error_threshold: Optional[float] = 2.0
      truncated_importance_sampling_type: Optional[str] = None
      truncated_importance_sampling_ratio_min: Optional[float] = None
      truncated_importance_sampling_ratio: Optional[float] = None
      sampler_is_length_buckets: Any = (512, 2048)
      tis_enabled: bool = True

    config = GRPOConfig()
    changed = bd.disable_logp_gates(config)
    self.assertIsNone(config.sampler_is)
    self.assertIsNone(config.seq_logprob_error_threshold)
    self.assertFalse(config.tis_enabled)
    self.assertEqual(config.sampler_is_threshold, 2.0)
    self.assertEqual(config.sampler_is_length_buckets, (512, 2048))
    self.assertEqual(config.epsilon, 0.2)
    self.assertFalse(config.use_rollout_logps)
    self.assertEqual(len(changed), 3)
    self.assertEqual(bd.disable_logp_gates(config), [])  # nothing left to turn off

    args = argparse.Namespace(truncated_importance_sampling_type="seq-mask-tis",
                              truncated_importance_sampling_ratio_min=0.5,
                              truncated_importance_sampling_ratio=2.0, beta=0.0)
    changed = bd.disable_logp_gates(args)
    self.assertEqual(len(changed), 3)
    self.assertIsNone(args.truncated_importance_sampling_type)
    self.assertIsNone(args.truncated_importance_sampling_ratio_min)
    self.assertEqual(args.beta, 0.0)

  def test_device_observer_uses_fresh_completions_only(self):
    events, clock = Events(), FakeClock()

    class Trainer:
      last_fwd_bwd_token = None

    class Worker:
      _trainer = Trainer()

    observer = bd.DeviceObserver()
    worker = Worker()
    self.assertEqual(observer.completion(worker, Response(), "fwd_bwd"), (None, "dispatch"))
    first = Token(clock, events, 1.0, "a")
    Worker._trainer.last_fwd_bwd_token = first
    self.assertEqual(observer.completion(worker, Response(), "fwd_bwd"), (first, "token"))
    self.assertEqual(observer.completion(worker, Response(), "fwd_bwd"),
                     (None, "dispatch"))  # stale
    in_response = Token(clock, events, 1.0, "b")
    self.assertEqual(observer.completion(worker, {"loss": in_response}, "fwd_bwd"),
                     (in_response, "token"))

  def test_device_observer_reads_maxtexts_cached_losses(self):
    events, clock = Events(), FakeClock()

    @dataclasses.dataclass
    class WeightedMetric:
      unreduced_sum: Any
      denominator: Any

    class Engine:
      _cached_losses = []

    class Worker:
      _trainer = Engine()

    observer = bd.DeviceObserver()
    worker = Worker()
    self.assertEqual(observer.completion(worker, None, "fwd_bwd"), (None, "dispatch"))
    loss = WeightedMetric(Token(clock, events, 2.0, "sum"), Token(clock, events, 2.0, "den"))
    Engine._cached_losses.append(loss)
    self.assertEqual(observer.completion(worker, None, "fwd_bwd"), (loss, "loss"))
    self.assertEqual(observer.completion(worker, None, "fwd_bwd"), (None, "dispatch"))
    # The update's completion never comes from a loss.
    Engine._cached_losses.append(WeightedMetric(Token(clock, events, 3.0, "s"), 1.0))
    self.assertEqual(observer.completion(worker, None, "update"), (None, "dispatch"))

  def test_fence_consumes_nothing(self):
    blocked = []
    observer = bd.DeviceObserver(block_all=lambda: blocked.append(True))
    self.assertTrue(observer.fence())
    self.assertEqual(blocked, [True])
    self.assertFalse(bd.DeviceObserver().fence())

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
        self.scalar_metrics = {"gradient_norm": np.array([0.5]), "lr": 1e-6,
                               "is_ratio/max": np.array([1.0, 3.0]),
                               "is_ratio/mean": np.array([1.0, 2.0])}
        self.aggregation_fns = {"is_ratio/max": np.max}

    expected = {"loss": 2.0, "kl": 0.0, "gradient_norm": 0.5, "lr": 1e-6, "is_ratio/max": 3.0,
                "is_ratio/mean": 1.5}
    self.assertEqual(bd.scalar_metrics(Buffer(0)), expected)
    # MaxText's get_metrics() returns the buffers since the last call, one per step.
    self.assertEqual(bd.scalar_metrics([Buffer(0), Buffer(1)]), expected)
    self.assertEqual(bd.scalar_metrics({"a": {"b": 1}, "c": [np.float32(1), 3]}),
                     {"a/b": 1.0, "c": 2.0})
    self.assertEqual(bd.scalar_metrics({"loss": {"value": 3.0, "weight": 2.0}}), {"loss": 1.5})
    self.assertEqual(bd.scalar_metrics(None), {})
    # Another kind is named once, not dropped silently.
    warnings = []
    warned = set()
    for _ in range(2):
      self.assertEqual(bd.scalar_metrics({"odd": object(), "x": 1}, warn=warnings.append,
                                         warned=warned), {"x": 1.0})
    self.assertEqual(len(warnings), 1)
    self.assertIn("odd", warnings[0])


if __name__ == "__main__":
  unittest.main()
