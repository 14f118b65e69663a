"""The driver's step loop (steps.py) against a real-time stand-in of MaxText's training engine.

An integration test of run_steps, named for the module it guards: besides StepRunner it runs the
pod's real CompletionWatcher thread, DeviceObserver reading the engine's `_cached_losses`,
scalar_metrics on MaxText's MetricsBuffers and summarize, on real time. steps_test.py holds the
step loop's unit tests on a fake clock.

The stand-in follows AI-Hypercomputer/maxtext src/maxtext/training_engine/ at e591f30c
(maxtext_engine.py, inflight_throttler.py, metrics.py, abstract_engine.py), read upstream:
- fwd_bwd(payload) returns None as soon as the work is dispatched; before dispatching it waits
  in the InflightThrottler, whose queue holds max_inflight_computations (default 2) results,
  so dispatching micro-batch k waits for micro-batch k-2;
- no readiness tokens (no last_fwd_bwd_token / last_update_token), no get_step_timing;
- each call's loss is a WeightedMetric (unreduced_sum / denominator device arrays) appended to
  `_cached_losses`, which update() clears; get_metrics() returns the MetricsBuffers recorded
  since the last call (one per step) and clears them;
- compile() only stages: the compile happens in the first fwd_bwd;
- update() returns None and is dispatched like fwd_bwd; the engine rebinds its pure state from
  the update's output (`_state_pure`, maxtext_engine.py@b8bf66d6), on which the step ends.
The device is a thread that runs the dispatched work back to back for known durations, so the
driver's device-mode micro-batch times can be checked against them.

DroplessReplayEngine follows the same engine at b8bf66d6 under retry_when_tokens_dropped (a
micro-batch's loss recorded one call late, an overflowed micro-batch rerun dropless, the step's
moe_dropless_replays recorded by update()).

StagingTrainerWorker stands in for the seed's TrainerWorker staging change (stage_fwd_bwd,
fwd_bwd(..., defer_update=True), apply_deferred_update(); the seed's PIPELINE_STEP_BOUNDARY /
STAGE_NEXT_MICROBATCH with AI-Hypercomputer/maxtext#5718), which no public Tunix has.
"""

import queue
import threading
import time
import unittest
from typing import Any, List, Optional

import numpy as np

from doubles import MetricsBuffer, WeightedMetric
from driver_loader import load_driver
from fakes import summary_of

bd = load_driver()

MB_SECONDS = 0.2
UPDATE_SECONDS = 0.05
TRANSFER_SECONDS = 0.15
# The stand-in device sleeps for its work, so a time read between two completions can be off by
# the scheduler's wake-up latency, which reaches 10 ms and more on a loaded 2-core CI machine. What
# the tests tell apart is whole micro-batches (0.2 s), so they allow a quarter of one.
SLACK_SECONDS = 0.25 * MB_SECONDS


class DeviceArray:
  """A result on the device: ready when the device has run the work that produces it."""

  def __init__(self, value: float):
    self.value = value
    self.shape, self.dtype = (), np.dtype(np.float32)
    self._ready = threading.Event()

  def block_until_ready(self):
    self._ready.wait()
    return self

  def is_ready(self):
    return self._ready.is_set()

  def __array__(self, dtype=None, copy=None):
    self._ready.wait()  # reading a device array waits for it, as device_get does
    return np.asarray(self.value, dtype=dtype)


class Device:
  """Runs dispatched work back to back on a thread, each item for a known time."""

  def __init__(self):
    self._queue: "queue.Queue" = queue.Queue()
    threading.Thread(target=self._run, daemon=True).start()

  def dispatch(self, seconds: float, outputs: List[DeviceArray]) -> None:
    self._queue.put((seconds, outputs))

  def _run(self):
    while True:
      seconds, outputs = self._queue.get()
      time.sleep(seconds)
      for output in outputs:
        output._ready.set()  # pylint: disable=protected-access  # the device model's own array


class InflightThrottler:
  """MaxText's: a bounded queue; wait_for_next() blocks on the oldest entry only when full."""

  def __init__(self, max_inflight_computations: int = 2):
    self._queue: "queue.Queue" = queue.Queue(maxsize=max_inflight_computations)

  def add_computation(self, leaves):
    self._queue.put(leaves)

  def wait_for_next(self):
    if self._queue.full():
      for leaf in self._queue.get():
        leaf.block_until_ready()


class MaxTextLikeEngine:
  losses_attribute = "_cached_losses"  # MaxText's name

  def __init__(self, device: Device, compile_seconds: float = 0.3):
    self.device = device
    self.compile_seconds = compile_seconds
    self._compiled = False
    self._throttler = InflightThrottler(2)
    setattr(self, self.losses_attribute, [])
    self._recorded: List[MetricsBuffer] = []
    self.train_step = 0
    self.dispatches: List[float] = []
    self._state_pure: Any = None
    self.keywords: List[List[str]] = []

  def compile(self, dummy_data):
    del dummy_data
    self._compile_requested = True  # stages only: jax.jit is lazy

  def _buffer(self) -> MetricsBuffer:
    if not self._recorded or self._recorded[-1].id != self.train_step:
      self._recorded.append(MetricsBuffer(id=self.train_step))
    return self._recorded[-1]

  def fwd_bwd(self, payload, **kwargs) -> None:
    # Keyword arguments are taken and ignored, as b8bf66d6's engine documents.
    del payload
    self.keywords.append(sorted(kwargs))
    if not self._compiled:
      time.sleep(self.compile_seconds)  # the real compile runs in the first call
      self._compiled = True
    self._throttler.wait_for_next()
    loss = WeightedMetric(DeviceArray(3.0), DeviceArray(2.0))
    grads, ratio = DeviceArray(0.0), DeviceArray(1.0)
    self.device.dispatch(MB_SECONDS, [loss.unreduced_sum, loss.denominator, grads, ratio])
    self.dispatches.append(time.monotonic())
    self._throttler.add_computation([loss.unreduced_sum, loss.denominator])
    buffer = self._buffer()
    buffer.weighted_metrics.setdefault("loss", []).append(loss)
    buffer.scalar_metrics.setdefault("is_ratio/mean", []).append(ratio)
    getattr(self, self.losses_attribute).append(loss)

  def update(self, **kwargs) -> None:
    del kwargs
    self._throttler.wait_for_next()
    state = DeviceArray(0.0)
    self.device.dispatch(UPDATE_SECONDS, [state])
    self._throttler.add_computation([state])
    self._state_pure = {"model": {"w": state}}  # rebound from the update's output (b8bf66d6)
    self._buffer().scalar_metrics["learning_rate"] = [1e-6]
    getattr(self, self.losses_attribute).clear()
    self.train_step += 1

  def get_metrics(self):
    # Values as MetricsRecorder holds them: one entry per micro-batch, on the device.
    out = []
    for buffer in self._recorded:
      weighted = {
          name: WeightedMetric(np.array([np.asarray(m.unreduced_sum) for m in metrics]),
                               np.array([np.asarray(m.denominator) for m in metrics]))
          for name, metrics in buffer.weighted_metrics.items()
      }
      scalars = {
          name: np.array([np.asarray(v) for v in values
                         ]) for name, values in buffer.scalar_metrics.items()
      }
      out.append(MetricsBuffer(buffer.id, weighted, scalars))
    self._recorded = []
    return out


class PendingOverflowCheck:
  """MaxText's _PendingOverflowCheck (maxtext_engine.py@b8bf66d6): a micro-batch accumulated
  before its MoE overflow flag reached the host, with its loss."""

  def __init__(self, has_overflow, loss, micro_step):
    self.has_overflow, self.loss, self.micro_step = has_overflow, loss, micro_step


class DroplessReplayEngine(MaxTextLikeEngine):
  """MaxText's engine under retry_when_tokens_dropped (maxtext_engine.py@b8bf66d6): fwd_bwd
  parks the call's loss and overflow flag in `_pending_overflow_check`; the next fwd_bwd (after
  dispatching its own kernel) or update() reads the flag (a device read: it waits for the
  kernel), reruns an overflowed micro-batch on the dropless kernel and only then records the
  loss in `_cached_losses`; update() records moe_dropless_replays and clears the list."""

  def __init__(self, device: Device, overflow_at=(), compile_seconds: float = 0.3):
    super().__init__(device, compile_seconds)
    self.overflow_at = set(overflow_at)
    self.calls = 0
    self._dropless_replays = 0
    self._pending_overflow_check: Optional[PendingOverflowCheck] = None

  def _resolve_overflow_check(self):
    check, self._pending_overflow_check = self._pending_overflow_check, None
    if check is None:
      return
    loss = check.loss
    if bool(np.asarray(check.has_overflow)):
      self._throttler.wait_for_next()
      loss = WeightedMetric(DeviceArray(6.0), DeviceArray(2.0))
      self.device.dispatch(MB_SECONDS, [loss.unreduced_sum, loss.denominator])
      self._throttler.add_computation([loss.unreduced_sum, loss.denominator])
      self._dropless_replays += 1
    self._buffer().weighted_metrics.setdefault("loss", []).append(loss)
    getattr(self, self.losses_attribute).append(loss)

  def fwd_bwd(self, payload, **kwargs) -> None:
    del payload, kwargs
    if not self._compiled:
      time.sleep(self.compile_seconds)
      self._compiled = True
    self._throttler.wait_for_next()
    loss = WeightedMetric(DeviceArray(3.0), DeviceArray(2.0))
    flag = DeviceArray(1.0 if self.calls in self.overflow_at else 0.0)
    self.device.dispatch(MB_SECONDS, [loss.unreduced_sum, loss.denominator, flag])
    self.dispatches.append(time.monotonic())
    self._throttler.add_computation([loss.unreduced_sum, loss.denominator])
    check = PendingOverflowCheck(flag, loss, self.calls)
    self.calls += 1
    self._resolve_overflow_check()
    self._pending_overflow_check = check

  def update(self, **kwargs) -> None:
    self._resolve_overflow_check()
    super().update(**kwargs)
    self._buffer().scalar_metrics["moe_dropless_replays"] = [self._dropless_replays]
    self._dropless_replays = 0


class Response:

  def __init__(self, **metadata):
    self.metadata = metadata
    self.request_id: Optional[str] = None


class Request:

  def __init__(self, payload):
    self.payload, self.metadata, self.request_id = payload, {}, f"train_req_{id(self):x}"


class TrainerWorker:
  """Tunix's TrainerWorker over the engine: fwd_bwd(request, **kwargs) and update()."""

  def __init__(self, engine):
    self._trainer = engine

  def compile(self, dummy_data=None):
    self._trainer.compile(dummy_data)

  def _send(self, request):
    time.sleep(TRANSFER_SECONDS)  # the micro-batch's way to the trainer host and device

  def fwd_bwd(self, request, **kwargs):
    kwargs.pop("skip_jit", None)
    self._send(request)
    self._trainer.fwd_bwd(request.payload, **kwargs)
    return Response(queued=True)

  def update(self, **kwargs):
    return self._trainer.update(**kwargs)

  def get_metrics(self):
    return self._trainer.get_metrics()


class StagingTrainerWorker(TrainerWorker):
  """The seed's staging change (not in any public Tunix; see the module docstring)."""

  def __init__(self, engine, stage_error=None):
    super().__init__(engine)
    self.staged = set()
    self.deferred = False
    self.stage_error = stage_error
    self.stages = 0

  def stage_fwd_bwd(self, request):
    self.stages += 1
    if self.stage_error is not None:
      raise self.stage_error
    time.sleep(TRANSFER_SECONDS)
    self.staged.add(request.request_id)
    response = Response(staged=True)
    response.request_id = request.request_id  # the handle the staged request carries back
    return response

  def fwd_bwd(self, request, accumulate_gradients=True, apply_optimizer=False, skip_jit=False,
              defer_update=False):
    del accumulate_gradients, skip_jit
    if request.request_id in self.staged:
      self.staged.discard(request.request_id)
    else:
      self._send(request)
    self._trainer.fwd_bwd(request.payload)
    if apply_optimizer and defer_update:
      self.deferred = True
      return Response(queued=True, deferred=True)
    if apply_optimizer:
      self._trainer.update()
      return Response(queued=True, updated=True, train_step=self._trainer.train_step)
    return Response(queued=True)

  def apply_deferred_update(self):
    assert self.deferred
    self.deferred = False
    self._trainer.update()
    return self._trainer.train_step


def run(worker, device, steps=3, micro_steps=4, stage=None, state_log=None):
  plan = bd.BenchPlan(name="engine-model", steps=steps, micro_steps=micro_steps, regular="REGULAR",
                      final="FINAL", tokens_regular=100, tokens_final=100, chips=1,
                      padded_tokens_per_call=128, stage_boundary=stage)
  lines: List[str] = []
  logs: List[str] = [] if state_log is None else state_log
  state = bd.StageState(stage, logs.append)
  worker.compile(None)
  records = bd.run_steps(worker, plan, calls=bd.WorkerCalls(worker, make_request=Request),
                         observer=bd.DeviceObserver(), watcher=bd.CompletionWatcher(time.monotonic),
                         profiler=object(), out=lines.append, log=logs.append, stage_state=state)
  summary = summary_of(plan, records, tokens_per_row=128, real_len=100, stage=state.summary())
  return records, summary, lines


class MaxTextEngineModelTest(unittest.TestCase):

  def test_device_times_from_the_calls_losses(self):
    device = Device()
    records, summary, _ = run(TrainerWorker(MaxTextLikeEngine(device)), device)
    for record in records:
      self.assertEqual(record.microbatch_timing, "device")
      self.assertEqual(record.microbatch_timing_source, "loss")
      self.assertEqual(record.update, "explicit")
      # Micro-batches after the first ran back to back on the device for MB_SECONDS each.
      for value in record.microbatch_s[1:]:
        self.assertAlmostEqual(value, MB_SECONDS, delta=SLACK_SECONDS, msg=record)
      # The step holds the first transfer, four micro-batches and the update.
      expected = TRANSFER_SECONDS + 4 * MB_SECONDS + UPDATE_SECONDS
      if record.step > 0:
        self.assertAlmostEqual(record.seconds, expected, delta=SLACK_SECONDS, msg=record)
      self.assertEqual(record.metrics["loss"], 1.5)  # sum(3 x 4) / sum(2 x 4)
      self.assertEqual(record.metrics["is_ratio/mean"], 1.0)
    # Step 0 also compiles; it is reported as such and kept out of the means.
    self.assertGreater(records[0].seconds, records[1].seconds + 0.2)
    self.assertEqual(summary["first_step_s"], round(records[0].seconds, 6))
    self.assertEqual(summary["steady_steps"], [1, 2])
    self.assertEqual(summary["microbatch_timing"], "device")
    self.assertAlmostEqual(summary["median_microbatch_s"], MB_SECONDS, delta=SLACK_SECONDS)

  def test_the_warm_up_step_asks_for_the_fused_update_once(self):
    # Tunix's worker forwards **kwargs to the engine, which ignores them: step 0 asks for the
    # fused update, learns that it was not applied, and the later steps call update().
    device = Device()
    engine = MaxTextLikeEngine(device, 0.0)
    records, _, _ = run(TrainerWorker(engine), device, steps=2, micro_steps=2)
    self.assertEqual(engine.keywords, [["apply_optimizer"], ["apply_optimizer"], [], []])
    self.assertEqual([record.update for record in records], ["explicit", "explicit"])
    self.assertEqual(engine.train_step, 2)

  def test_dispatch_intervals_are_labelled_as_such(self):

    class NoCachedLosses(MaxTextLikeEngine):
      """An engine that keeps its losses nowhere the driver can see."""
      losses_attribute = "_losses_elsewhere"

    device = Device()
    records, summary, lines = run(TrainerWorker(NoCachedLosses(device, 0.0)), device, steps=2,
                                  micro_steps=3)
    self.assertTrue(all(record.microbatch_timing == "dispatch" for record in records))
    self.assertEqual(summary["microbatch_timing"], "dispatch")
    self.assertTrue(
        all('"microbatch_timing":"dispatch"' in line
            for line in lines
            if line.startswith("BENCH_STEP ")))
    # The step still ends when the device is done (a leaf of the new state), update included.
    for record in records[1:]:
      self.assertGreater(record.seconds, 3 * MB_SECONDS + UPDATE_SECONDS)

  def test_device_times_on_the_dropless_replay_engine(self):
    # Call 5 (step 1's second) overflows: its dropless rerun runs after call 6's kernel.
    device = Device()
    records, summary, lines = run(TrainerWorker(DroplessReplayEngine(device, overflow_at=[5])),
                                  device)
    for record in records:
      self.assertEqual((record.microbatch_timing, record.microbatch_timing_source),
                       ("device", "loss"), record)
      for value in record.microbatch_s[1:3]:
        self.assertAlmostEqual(value, MB_SECONDS, delta=SLACK_SECONDS, msg=record)
    # The rerun lands in the micro-batch after next.
    self.assertAlmostEqual(records[1].microbatch_s[3], 2 * MB_SECONDS, delta=SLACK_SECONDS)
    self.assertEqual([record.replays for record in records], [0, 1, 0])
    self.assertEqual(summary["microbatch_timing"], "device")
    self.assertIn("_pending_overflow_check", summary["microbatch_timing_why"])
    self.assertTrue(all('"replays":' in line for line in lines if line.startswith("BENCH_STEP ")))
    # Step 1's loss holds the rerun's (doubled) loss in place of the overflowed one.
    self.assertAlmostEqual(records[1].metrics["loss"], (3 * 3.0 + 6.0) / 8.0)

  def test_the_staged_boundary_removes_the_transfer_bubble(self):
    device = Device()
    off, _, _ = run(StagingTrainerWorker(MaxTextLikeEngine(device, 0.0)), device,
                    stage=bd.StagePlan("off", False, "test"))
    device = Device()
    on, summary, _ = run(StagingTrainerWorker(MaxTextLikeEngine(device, 0.0)), device,
                         stage=bd.StagePlan("on", True, "test"))
    self.assertEqual([r.staged for r in on], [False, True, True])
    self.assertEqual(summary["stage_boundary"]["staged_steps"], 2)
    self.assertIsNone(summary["stage_boundary"]["latched_off"])
    for staged, whole in zip(on[1:], off[1:]):
      # The staged step saves about one transfer; its device work is the same.
      self.assertLess(staged.seconds, whole.seconds - 0.6 * TRANSFER_SECONDS, msg=(staged, whole))
      self.assertEqual(staged.update, "deferred")
      self.assertEqual(whole.update, "fused")

  def test_a_failing_stage_latches_staging_off(self):
    device = Device()
    worker = StagingTrainerWorker(MaxTextLikeEngine(device, 0.0),
                                  stage_error=RuntimeError("host unreachable"))
    logs: List[str] = []
    records, summary, _ = run(worker, device, stage=bd.StagePlan("on", True, "test"),
                              state_log=logs)
    self.assertEqual(worker.stages, 1)
    self.assertEqual([r.staged for r in records], [False, False, False])
    self.assertIn("stage_fwd_bwd failed: host unreachable",
                  summary["stage_boundary"]["latched_off"])
    self.assertEqual(len([line for line in logs if "off for the rest of the run" in line]), 1)
    self.assertEqual([r.update for r in records], ["deferred", "fused", "fused"])


if __name__ == "__main__":
  unittest.main()
