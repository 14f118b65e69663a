"""Golden BENCH_STEP, TRAINER_STEP_TIMING and BENCH_SUMMARY lines of the bench driver.

Why: bench_driver.py is to be split into a package, and bench-report and the A/B comparisons read
these machine lines, so the split must keep every byte of them. Each scenario runs the driver's
own step loop (run_steps), summary (summarize) and dropped-token verdict (token_dropping) with a
fake worker on a fake clock, collects every line the loop prints, then the BENCH_SUMMARY line as
run_pod prints it, and compares them line by line with testdata/driver/golden_bench_lines.txt
(one section per scenario: a line `== <scenario>`, then its lines).

Nothing in a scenario reads the real clock, sleeps or starts a thread (the test refuses all three
while a scenario runs): the fake device moves the fake clock, so the lines are the same on every
machine and in every run.

Regenerating the golden file: set RTB_UPDATE_GOLDEN=1, which rewrites it from the driver under
test before comparing:

  cd tests/driver && RTB_UPDATE_GOLDEN=1 \
      RTB_DRIVER=$PWD/../../tools/render-bench/driver/bench_driver.py \
      python3 -m unittest -v golden_lines_test

Do that only for a change of the lines that is meant, and say in the commit why they changed. The
committed file was generated from the unchanged bench_driver.py (testdata/SOURCES.md names the
commit); a refactoring such as the package split must pass without it.
"""

import contextlib
import dataclasses
import json
import math
import os
import threading
import time
import types
import unittest
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple
from unittest import mock

import numpy as np

from doubles import InlineCompletionWatcher, MetricsBuffer, WeightedMetric
from driver_loader import load_driver

driver = load_driver()

GOLDEN_PATH = os.path.normpath(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "testdata", "driver",
                 "golden_bench_lines.txt"))
UPDATE_VARIABLE = "RTB_UPDATE_GOLDEN"
SECTION = "== "

REGULAR = "regular-micro-batch"
FINAL = "final-micro-batch"

# ------------------------------------------------------------------------------------------------
# Fakes: a clock, a device on it, and one worker per TrainerWorker generation the driver serves.
# ------------------------------------------------------------------------------------------------


class Clock:
  """The fake clock: it moves only when a fake says so."""

  def __init__(self, start: float = 500.0) -> None:
    self.now = start

  def __call__(self) -> float:
    return self.now

  def advance(self, seconds: float) -> None:
    self.now += seconds


class Ready:
  """A result on the fake device: waiting for it moves the clock to when the device is done."""

  def __init__(self, clock: Clock, at: float) -> None:
    self.clock = clock
    self.at = at

  def block_until_ready(self) -> "Ready":
    self.clock.now = max(self.clock.now, self.at)
    return self

  def is_ready(self) -> bool:
    return self.clock.now >= self.at


class Device:
  """The fake accelerator: runs what is dispatched back to back, after the host dispatched it."""

  def __init__(self, clock: Clock) -> None:
    self.clock = clock
    self.free = clock.now

  def run(self, seconds: float) -> Ready:
    self.free = max(self.clock.now, self.free) + seconds
    return Ready(self.clock, self.free)


class Request:
  """Stands in for Tunix's TrainRequest."""

  def __init__(self, payload: Any, number: int) -> None:
    self.payload = payload
    self.metadata: Dict[str, Any] = {}
    self.request_id = f"train_req_{number}"


def request_maker() -> Callable[[Any], Request]:
  """WorkerCalls' make_request, numbering the requests of one scenario from 0."""
  made: List[Request] = []

  def make(payload: Any) -> Request:
    made.append(Request(payload, len(made)))
    return made[-1]

  return make


class Response:
  """Stands in for Tunix's Response: what a call reports sits in its metadata."""

  def __init__(self, **metadata: Any) -> None:
    self.metadata = metadata


class Trainer:
  """What a TrainerWorker keeps as `_trainer`: the readiness tokens Tunix's StepTimer reads, and
  MaxText's engine's list of each call's loss."""

  def __init__(self) -> None:
    self.last_fwd_bwd_token: Optional[Ready] = None
    self.last_update_token: Optional[Ready] = None
    self._cached_losses: List[WeightedMetric] = []
    # MaxText's engine rebinds its pure state from each update's output (b8bf66d6).
    self._state_pure: Optional[Dict[str, Ready]] = None

  def cache_loss(self, loss: WeightedMetric) -> None:
    self._cached_losses.append(loss)

  def clear_losses(self) -> None:
    self._cached_losses.clear()


class Profiler:
  """A profiler whose start and stop take host time, as jax.profiler's do."""

  def __init__(self, clock: Clock) -> None:
    self.clock = clock
    self.calls: List[str] = []

  def start(self, log_dir: str) -> None:
    self.calls.append(f"start {log_dir}")
    self.clock.advance(0.5)

  def stop(self) -> None:
    self.calls.append("stop")
    self.clock.advance(0.25)


class Worker:
  """What every fake worker shares: host time per call (the first one compiles), device time per
  micro-batch (the final micro-batch may be shorter) and per update."""

  def __init__(self, clock: Clock, device: Device, *, host_s: float, regular_s: float,
               final_s: float, update_s: float, compile_s: float) -> None:
    self.clock = clock
    self.device = device
    self.host_s = host_s
    self.regular_s = regular_s
    self.final_s = final_s
    self.update_s = update_s
    self.compile_s = compile_s
    self.compiled = False
    self.train_step = 0
    self._trainer = Trainer()

  def dispatch(self, payload: Any) -> Ready:
    """Host time for a call, then its device work."""
    if not self.compiled:
      self.compiled = True
      self.clock.advance(self.compile_s)
    self.clock.advance(self.host_s)
    return self.device.run(self.final_s if payload == FINAL else self.regular_s)

  def dispatch_update(self) -> Ready:
    self.clock.advance(self.host_s)
    self.train_step += 1
    done = self.device.run(self.update_s)
    self._trainer._state_pure = {"params": done}
    return done


class TokenWorker(Worker):
  """Explicit update(): each response carries a readiness token, and so does update()'s. Its
  metrics hold a weighted loss and per-layer dropped-token counts."""

  def fwd_bwd(self, request: Request, **kwargs: Any) -> Dict[str, Any]:
    del kwargs  # skip_jit only: this worker takes no optimizer flags
    return {"queued": True, "loss": self.dispatch(request.payload)}

  def update(self) -> Dict[str, Any]:
    token = self.dispatch_update()
    return {"train_step": self.train_step, "token": token}

  def get_metrics(self) -> Dict[str, Any]:
    step = self.train_step
    loss = WeightedMetric(np.array([3.0, 2.5, 2.25, 1.0]) / step, np.array([4.0, 4.0, 4.0, 3.0]))
    layer_0: Dict[str, Any] = {"dropped_tokens": np.int64(5 * (step - 1))}
    layer_1: Dict[str, Any] = {"dropped_tokens": 2}
    metrics: Dict[str, Any] = {"loss": loss, "learning_rate": np.float32(3e-6)}
    metrics["gradient_norm"] = 0.8125 / step
    metrics["moe"] = {"layer_0": layer_0, "layer_1": layer_1}
    metrics["run_name"] = "golden"  # text: not a metric, left out
    return metrics


class FusedWorker(Worker):
  """tunix#2719: the last fwd_bwd(apply_optimizer=True) applies the update and reports `updated`
  and `train_step`; readiness only through the trainer's tokens."""

  def __init__(self, clock: Clock, device: Device, **timing: float) -> None:
    super().__init__(clock, device, **timing)
    self._trainer = Trainer()

  def fwd_bwd(self, request: Request, accumulate_gradients: bool = False,
              apply_optimizer: bool = False, skip_jit: bool = False) -> Response:
    del accumulate_gradients, skip_jit
    self._trainer.last_fwd_bwd_token = self.dispatch(request.payload)
    if not apply_optimizer:
      return Response(queued=True)
    self._trainer.last_update_token = self.dispatch_update()
    return Response(queued=True, updated=True, train_step=self.train_step)

  def get_metrics(self) -> Dict[str, Any]:
    step = self.train_step
    return {
        "loss": {"value": np.array([1.5, 1.25, 1.0]) * step, "weight": np.array([2.0, 2.0, 1.0])},
        "kl": WeightedMetric(np.array([0.0]), np.array([0.0])),
        "is_ratio": [np.float32(1.0), np.float32(1.25), 0.875],
        # A non-finite metric is kept (the numerics gates look for it): NaN in the JSON.
        "gradient_norm": float("nan") if step == 2 else 0.5 * step,
        "tokens_dropped": 0,
    }


class TimingWorker(Worker):
  """Explicit update() without tokens; get_step_timing() publishes each call's ready time (the
  orchestrator's TRAINER_STEP_TIMING record). Its third record is None and its fourth call fails,
  as an RPC to a busy trainer can."""

  def __init__(self, clock: Clock, device: Device, **timing: float) -> None:
    super().__init__(clock, device, **timing)
    self.ready: List[Ready] = []
    self.update_ready: Optional[Ready] = None
    self.timing_calls = 0

  def fwd_bwd(self, request: Request, **kwargs: Any) -> Response:
    del kwargs
    self.ready.append(self.dispatch(request.payload))
    return Response(queued=True)

  def update(self) -> int:
    self.update_ready = self.dispatch_update()
    return self.train_step

  def get_step_timing(self) -> Optional[Dict[str, Any]]:
    self.timing_calls += 1
    self.clock.advance(0.0625)
    now = self.clock.now
    ready, self.ready = self.ready, []
    self.clock.advance(0.0625)
    if self.timing_calls == 3:
      return None
    if self.timing_calls == 4:
      raise RuntimeError("rpc\ndeadline exceeded")
    assert self.update_ready is not None
    return {
        "v": 1,
        "train_step": np.int64(self.train_step),
        "mb": [
            {"i": index, "ready_ago_s": round(now - done.at, 3)} for index, done in enumerate(ready)
        ],
        "update": {"ready_ago_s": round(now - self.update_ready.at, 3)},
        "prepare": None,
        "host_s": np.float32(0.1),
    }


class DispatchWorker(Worker):
  """MaxText's engine without anything to wait on: fwd_bwd and update return None at dispatch,
  the host blocks only when two results are in flight (max_inflight_computations), and
  get_metrics() returns one MetricsBuffer per step since the last call."""

  def __init__(self, clock: Clock, device: Device, **timing: float) -> None:
    super().__init__(clock, device, **timing)
    self.inflight: List[Ready] = []

  def _throttle(self, result: Ready) -> None:
    self.inflight.append(result)
    if len(self.inflight) > 2:
      self.inflight.pop(0).block_until_ready()

  def fwd_bwd(self, request: Request, **kwargs: Any) -> None:
    del kwargs
    self._throttle(self.dispatch(request.payload))

  def update(self) -> None:
    self._throttle(self.dispatch_update())

  def get_metrics(self) -> List[MetricsBuffer]:
    step = self.train_step
    buffers = []
    for buffer_id in (step - 1, step):
      loss = WeightedMetric(np.array([2.0, 3.0, 1.0]) * buffer_id, np.array([2.0, 2.0, 2.0]))
      ratios = np.array([1.0, 1.75, 1.5])
      scalars = {
          "gradient_norm": np.array([0.3 * buffer_id]), "is_ratio/max": ratios,
          "is_ratio/mean": ratios
      }
      buffers.append(MetricsBuffer(buffer_id, {"loss": loss}, scalars, {"is_ratio/max": np.max}))
    return buffers


class LegacyWorker(Worker):
  """The older TrainerWorker: fwd_bwd(payload=None, **kwargs) takes the payload itself, pops the
  optimizer flags and updates inside the last call (a mapping response); nothing to wait on."""

  def fwd_bwd(self, payload: Any = None, **kwargs: Any) -> Dict[str, Any]:
    apply = bool(kwargs.pop("apply_optimizer", False))
    kwargs.pop("accumulate_gradients", None)
    kwargs.pop("skip_jit", None)
    assert not kwargs, kwargs
    self.dispatch(payload)
    if not apply:
      return {"queued": True, "updated": False}
    self.dispatch_update()
    return {"queued": True, "updated": True, "train_step": self.train_step}


class StagingWorker(Worker):
  """The seed's staging change: stage_fwd_bwd(request) sends the next step's first micro-batch to
  the trainer host while the device computes, fwd_bwd(..., defer_update=True) defers the fused
  update, apply_deferred_update() dispatches it. A micro-batch that was not staged costs
  `transfer_s` of host time in its fwd_bwd. The stage answers are given in order. No metrics."""

  def __init__(self, clock: Clock, device: Device, *, transfer_s: float,
               stage_answers: Sequence[Response], **timing: float) -> None:
    super().__init__(clock, device, **timing)
    self._trainer = Trainer()
    self.transfer_s = transfer_s
    self.stage_answers = list(stage_answers)
    self.staged: List[str] = []
    self.deferred = False

  def fwd_bwd(self, request: Request, accumulate_gradients: bool = False,
              apply_optimizer: bool = False, skip_jit: bool = False,
              defer_update: bool = False) -> Response:
    del accumulate_gradients, skip_jit
    if request.request_id in self.staged:
      self.staged.remove(request.request_id)
    else:
      self.clock.advance(self.transfer_s)
    self._trainer.last_fwd_bwd_token = self.dispatch(request.payload)
    if not apply_optimizer:
      return Response(queued=True)
    if defer_update:
      self.deferred = True
      return Response(queued=True, deferred=True)
    self._trainer.last_update_token = self.dispatch_update()
    return Response(queued=True, updated=True, train_step=self.train_step)

  def stage_fwd_bwd(self, request: Request) -> Response:
    answer = self.stage_answers.pop(0)
    if answer.metadata.get("staged"):
      self.clock.advance(self.transfer_s)
      self.staged.append(request.request_id)
    return answer

  def apply_deferred_update(self) -> int:
    assert self.deferred, "apply_deferred_update without a deferred update"
    self.deferred = False
    self._trainer.last_update_token = self.dispatch_update()
    return self.train_step


class CachedLossWorker(Worker):
  """Tunix's TrainerWorker over MaxText's engine: fwd_bwd appends the call's loss (device arrays)
  to the engine's `_cached_losses`, update() clears it and returns None."""

  def __init__(self, clock: Clock, device: Device, **timing: float) -> None:
    super().__init__(clock, device, **timing)
    self._trainer = Trainer()

  def fwd_bwd(self, request: Request, **kwargs: Any) -> Response:
    del kwargs
    done = self.dispatch(request.payload)
    self._trainer.cache_loss(WeightedMetric(done, done))
    return Response(queued=True)

  def update(self) -> None:
    self._trainer.clear_losses()
    self.dispatch_update()

  def get_metrics(self) -> Dict[str, Any]:
    return {"loss": [np.float32(2.0) / self.train_step, 1.5, np.float64(1.25)]}


@dataclasses.dataclass
class PendingCheck:
  """MaxText's _PendingOverflowCheck: a call's overflow flag and its loss (maxtext_engine.py
  @b8bf66d6)."""
  has_overflow: bool
  loss: WeightedMetric


class OneLateTrainer(Trainer):
  """MaxText's engine under retry_when_tokens_dropped: the newest call's loss is pending."""

  def __init__(self) -> None:
    super().__init__()
    self._pending_overflow_check: Optional[PendingCheck] = None


class OneLateLossWorker(Worker):
  """Tunix's TrainerWorker over MaxText's engine under retry_when_tokens_dropped
  (maxtext_engine.py@b8bf66d6): each call's loss waits in `_pending_overflow_check` until the
  next call or update() reads its overflow flag, reruns an overflowed micro-batch on the dropless
  kernel and appends the loss to `_cached_losses`; update() records moe_dropless_replays."""

  def __init__(self, clock: Clock, device: Device, *, overflow_at: Sequence[int], rerun_s: float,
               **timing: float) -> None:
    super().__init__(clock, device, **timing)
    self.engine = OneLateTrainer()
    self._trainer = self.engine
    self.overflow_at = set(overflow_at)
    self.rerun_s = rerun_s
    self.calls = 0
    self.replays = 0
    self.recorded: List[int] = []

  def resolve(self) -> None:
    check, self.engine._pending_overflow_check = self.engine._pending_overflow_check, None
    if check is None:
      return
    loss = check.loss
    if check.has_overflow:
      done = self.device.run(self.rerun_s)
      loss = WeightedMetric(done, done)
      self.replays += 1
    self._trainer.cache_loss(loss)

  def fwd_bwd(self, request: Request, **kwargs: Any) -> Response:
    del kwargs
    done = self.dispatch(request.payload)
    check = PendingCheck(self.calls in self.overflow_at, WeightedMetric(done, done))
    self.calls += 1
    self.resolve()
    self.engine._pending_overflow_check = check
    return Response(queued=True)

  def update(self) -> None:
    self.resolve()
    self.dispatch_update()
    self.recorded.append(self.replays)
    self.replays = 0
    self._trainer.clear_losses()

  def get_metrics(self) -> Dict[str, Any]:
    return {"loss": 1.5, "moe_dropless_replays": self.recorded[-1]}


# ------------------------------------------------------------------------------------------------
# Scenarios: each runs the driver's step loop and summary and returns the lines it printed.
# ------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Shape:
  """The payload's shape as the summary reports it, and the chips that time it."""
  rows: int = 2
  tokens_per_row: int = 4096
  real_len: int = 3811
  segments: int = 3
  final_rows: int = 2
  layers: Optional[int] = 2
  topk: Optional[int] = 4
  experts: Optional[int] = 16
  chips: int = 4


def routing_of(shape: Shape, rows: int) -> List[Any]:
  """Fixed per-layer routing results (targets 1.5, 2.25, ...) for `rows` real rows."""
  if shape.layers is None:
    return []
  mean = rows * shape.real_len * (shape.topk or 1) / (shape.experts or 1)
  return [
      driver.LayerRouting(layer, 1.5 + 0.75 * layer, (1.5 + 0.75 * layer) * (1 + 0.0013 * layer),
                          int(mean * (1.5 + 0.75 * layer)) + layer, mean)
      for layer in range(shape.layers)
  ]


class Bench:
  """One scenario's driver run: settings from a fixed environment, a fake clock, device and
  profiler, and the lines the driver prints."""

  def __init__(self, shape: Shape, **env: str) -> None:
    self.env = dict(TRAINER_ARGV="--model_name=golden-moe --mesh_fsdp=4",
                    ORCH_ARGV="--batch_size=4 --num_generations=2")
    self.env.update(env)
    self.shape = shape
    self.clock = Clock()
    self.device = Device(self.clock)
    self.profiler = Profiler(self.clock)
    self.lines: List[str] = []
    self.log_lines: List[str] = []
    self.summary: Dict[str, Any] = {}

  def timing(self, **overrides: float) -> Dict[str, float]:
    """A worker's host and device times: the defaults with `overrides`."""
    values = {"host_s": 0.1, "regular_s": 1.3, "final_s": 1.3, "update_s": 0.45, "compile_s": 7.0}
    values.update(overrides)
    return values

  def run(self, worker: Any, *, config: Any,
          logps_pass: Optional[Callable[[Any], Any]] = None) -> List[str]:
    shape = self.shape
    settings = driver.parse_settings(self.env)
    calls = driver.WorkerCalls(worker, request_maker())
    stage_plan = driver.check_staging(driver.resolve_stage_boundary(settings), calls)
    short_final = shape.final_rows < shape.rows
    plan = driver.BenchPlan(
        name=settings.bench_name, steps=settings.steps, micro_steps=settings.micro_steps,
        regular=REGULAR, final=FINAL if short_final else REGULAR,
        tokens_regular=shape.rows * shape.real_len, tokens_final=shape.final_rows * shape.real_len,
        chips=shape.chips, padded_tokens_per_call=shape.rows * shape.tokens_per_row,
        profile_window=settings.profile_window, profile_dir=settings.profile_dir or
        "/tmp/golden/bench_profile", stage_boundary=stage_plan, logps_pass=logps_pass,
        short_final=short_final)
    stage_state = driver.StageState(stage_plan, self.log_lines.append)
    runner = driver.StepRunner(worker, plan, clock=self.clock, profiler=self.profiler,
                               observer=driver.DeviceObserver(),
                               watcher=InlineCompletionWatcher(self.clock), calls=calls,
                               out=self.lines.append, log=self.log_lines.append,
                               stage_state=stage_state)
    records = runner.run()
    self.summary = driver.summarize(
        plan, records, rows=shape.rows, tokens_per_row=shape.tokens_per_row,
        real_len=shape.real_len, segments=shape.segments, final_rows=shape.final_rows,
        layers=shape.layers, topk=shape.topk, experts=shape.experts,
        routing=routing_of(shape, shape.rows),
        routing_final=routing_of(shape, shape.final_rows) if short_final else None,
        knobs=settings.knobs(), stage=stage_state.summary(), extra={
            "token_dropping": driver.token_dropping(config, records, shape.experts),
            "grad_norm": driver.grad_norm(config, records), **runner.summary_facts()
        })
    self.lines.append("BENCH_SUMMARY " + json.dumps(self.summary, separators=(",", ":")))
    return self.lines


def factors(capacity: Optional[float], ragged: Optional[float]) -> types.SimpleNamespace:
  """A trainer config with MaxText's two token-dropping knobs (None: the config lacks it)."""
  config = types.SimpleNamespace()
  if capacity is not None:
    config.capacity_factor = capacity
  if ragged is not None:
    config.ragged_buffer_factor = ragged
  return config


def explicit_update_tokens() -> List[str]:
  """update() after the last call, readiness tokens in every response, a compile in step 0;
  metrics with a weighted loss and per-layer dropped-token counts (counted: dropped)."""
  bench = Bench(Shape(), BENCH_NAME="golden-explicit", STEPS="3", MICRO_STEPS="4", SEED="11",
                ROUTING_TARGETS="1.5,2.25")
  worker = TokenWorker(bench.clock, bench.device, **bench.timing())
  return bench.run(worker, config=factors(1.25, -1.0))


def fused_update_train_step() -> List[str]:
  """The update inside the last fwd_bwd (response metadata `updated`, `train_step`); readiness
  from the trainer's last_fwd_bwd_token / last_update_token; a NaN metric; zero dropped tokens
  counted."""
  bench = Bench(Shape(experts=8), BENCH_NAME="golden-fused", STEPS="3", MICRO_STEPS="3")
  worker = FusedWorker(
      bench.clock, bench.device,
      **bench.timing(host_s=0.05, regular_s=2.0, final_s=2.0, update_s=0.6, compile_s=5.0))
  return bench.run(worker, config=factors(-1.0, 2.75))


def step_timing_ready_times() -> List[str]:
  """get_step_timing's ready times (TRAINER_STEP_TIMING lines, source step_timing), then a None
  record and a failed call (unavailable lines, dispatch intervals: the steady steps are mixed);
  no metrics and a ragged buffer factor that may drop tokens (unknown)."""
  bench = Bench(Shape(experts=8), BENCH_NAME="golden-step-timing", STEPS="4", MICRO_STEPS="3")
  worker = TimingWorker(bench.clock, bench.device,
                        **bench.timing(regular_s=1.7, final_s=1.7, update_s=0.3))
  return bench.run(worker, config=factors(-1.0, 2.75))


def dispatch_only_fence() -> List[str]:
  """Nothing to wait on (no token, no loss, no step timing): dispatch intervals, the host held
  back by two results in flight, each step ended on the engine's new state; MetricsBuffer
  metrics; dropless by configuration."""
  bench = Bench(Shape(experts=8), BENCH_NAME="golden-dispatch", STEPS="3", MICRO_STEPS="3")
  worker = DispatchWorker(bench.clock, bench.device,
                          **bench.timing(host_s=0.2, regular_s=1.1, final_s=1.1, update_s=0.3))
  return bench.run(worker, config=factors(-1.0, -1.0))


def staged_boundary_latch_off() -> List[str]:
  """STAGE_BOUNDARY auto from the orchestrator's --pipeline_step_boundary: step 1's first
  micro-batch is staged (deferred update, apply_deferred_update); the second stage reports that it
  staged nothing, which latches staging off, and the later steps fuse the update."""
  bench = Bench(Shape(experts=512, topk=8), BENCH_NAME="golden-staged", STEPS="4", MICRO_STEPS="3",
                ORCH_ARGV="--batch_size=4 --num_generations=2 --pipeline_step_boundary=true")
  answers = [
      Response(staged=True, overlap_s=0.7, request_id="train_req_3"),
      Response(staged=False, reason="trainer host\nbusy")
  ]
  worker = StagingWorker(bench.clock, bench.device, transfer_s=0.7, stage_answers=answers,
                         **bench.timing(host_s=0.05, regular_s=2.0, final_s=2.0, update_s=0.5))
  return bench.run(worker, config=None)


def profile_window() -> List[str]:
  """PROFILE_WINDOW 1:2: steps 1 and 2, whole (left out of the means); the calls are timed
  through MaxText's cached loss (source loss); a dense model (not-moe)."""
  bench = Bench(Shape(layers=None, topk=None, experts=None), BENCH_NAME="golden-profile", STEPS="4",
                MICRO_STEPS="3", PROFILE_WINDOW="1:2", PROFILE_DIR="/tmp/golden-trace")
  worker = CachedLossWorker(bench.clock, bench.device, **bench.timing(regular_s=0.9, final_s=0.9))
  lines = bench.run(worker, config=factors(None, None))
  assert bench.profiler.calls == ["start /tmp/golden-trace", "stop"], bench.profiler.calls
  return lines


def logps_pass() -> List[str]:
  """LOGPS_PASS on: the actor scores each micro-batch on the device before it trains, timed
  inside the step (logps_pass_s)."""
  bench = Bench(Shape(final_rows=1), BENCH_NAME="golden-logps", STEPS="2", MICRO_STEPS="3",
                LOGPS_PASS="on", FINAL_ROWS="1")
  worker = TokenWorker(bench.clock, bench.device, **bench.timing(final_s=0.7))

  def score(payload: Any) -> None:
    bench.clock.advance(0.02)
    bench.device.run(0.4 if payload == REGULAR else 0.15).block_until_ready()

  return bench.run(worker, config=factors(-1.0, -1.0), logps_pass=score)


def final_micro_batch_fewer_tokens() -> List[str]:
  """A final micro-batch of 1 of 3 rows (fewer real tokens, shorter on the device; routing_final)
  with two micro-batches per step (the median covers the first alone: a short final micro-batch
  is no regular one); the legacy worker that takes
  the payload itself."""
  bench = Bench(Shape(rows=3, real_len=3900, final_rows=1, segments=2), BENCH_NAME="golden-final",
                STEPS="3", MICRO_STEPS="2", FINAL_ROWS="1", REAL_LEN="3900")
  worker = LegacyWorker(bench.clock, bench.device,
                        **bench.timing(regular_s=2.4, final_s=0.85, update_s=0.35))
  return bench.run(worker, config=factors(0.0, None))


def one_step_without_fence() -> List[str]:
  """A single step (it is its own steady step) of a worker with nothing to wait on: the step ends
  on the engine's new state, when the update is done."""
  bench = Bench(Shape(), BENCH_NAME="golden-one-step", STEPS="1", MICRO_STEPS="2")
  worker = DispatchWorker(bench.clock, bench.device, **bench.timing())
  return bench.run(worker, config=factors(-1.0, -1.0))


def one_late_loss_replays() -> List[str]:
  """MaxText's engine under retry_when_tokens_dropped at the seed's ragged_buffer_factor 2.75:
  each call's completion is its pending overflow check's loss (device timing in every step); call
  4 overflows and is rerun dropless after call 5's kernel (replays 1 in step 1: verdict
  replayed); no gradient norm with skip_step_on_spikes off."""
  bench = Bench(Shape(experts=8), BENCH_NAME="golden-replays", STEPS="3", MICRO_STEPS="3")
  worker = OneLateLossWorker(bench.clock, bench.device, overflow_at=[4], rerun_s=2.5,
                             **bench.timing(regular_s=1.5, final_s=1.5, update_s=0.4))
  config = types.SimpleNamespace(capacity_factor=-1.0, ragged_buffer_factor=2.75,
                                 retry_when_tokens_dropped=True, skip_step_on_spikes=False)
  return bench.run(worker, config=config)


@dataclasses.dataclass
class Scenario:
  run: Callable[[], List[str]]
  # Text that the scenario's lines must hold, so that a regenerated golden file still covers
  # what the scenario is named for.
  covers: Tuple[str, ...]


SCENARIOS: Dict[str, Scenario] = {
    "explicit-update-tokens": Scenario(explicit_update_tokens,
                                       ('"update":"explicit"', '"microbatch_timing_source":"token"',
                                        '"dropped_tokens":', '"verdict":"dropped"')),
    "fused-update-train-step": Scenario(
        fused_update_train_step,
        ('"update":"fused"', '"fused_update":true', '"update_path":{"ran":"fused",',
         '"train_step":3', '"kl":0.0', '"gradient_norm":NaN')),
    "step-timing-ready-times": Scenario(
        step_timing_ready_times,
        ("TRAINER_STEP_TIMING step=0 policy_version=1 rtt_s=",
         '"microbatch_timing_source":"step_timing"', "TRAINER_STEP_TIMING step=2 unavailable: ",
         "TRAINER_STEP_TIMING step=3 unavailable: ", '"microbatch_timing":"mixed"')),
    "dispatch-only-fence": Scenario(
        dispatch_only_fence,
        ('"microbatch_timing":"dispatch"', '"is_ratio/max":1.75', '"verdict":"none"')),
    "staged-boundary-latch-off": Scenario(staged_boundary_latch_off,
                                          ('"update":"deferred"', '"staged":true', '"engaged":true',
                                           '"latched_off":"the worker staged nothing')),
    "profile-window": Scenario(profile_window,
                               ('"profiled":true', '"profiled_steps":[1,2]',
                                '"microbatch_timing_source":"loss"', '"verdict":"not-moe"')),
    "logps-pass": Scenario(logps_pass, ('"logps_pass_s":[', '"logps_pass":"on"')),
    "final-micro-batch-fewer-tokens": Scenario(
        final_micro_batch_fewer_tokens, ('"routing_final":[', '"final_rows":1', '"tokens":15600')),
    "one-step-without-fence": Scenario(one_step_without_fence,
                                       ('"steady_steps":[0]', '"fence_s":0.0')),
    "one-late-loss-replays": Scenario(
        one_late_loss_replays,
        ('"replays":1', '"microbatch_timing_source":"loss"', '"verdict":"replayed"',
         '"retry_when_tokens_dropped":true', "_pending_overflow_check", '"reported":false')),
}


@contextlib.contextmanager
def no_real_time() -> Iterator[None]:
  """Refuses the real clock, sleeping and threads while a scenario runs (the driver may catch the
  refusal, so it is also noted and raised afterwards)."""
  refused: List[str] = []

  def refuse(name: str) -> Callable[..., Any]:

    def call(*args: Any, **kwargs: Any) -> Any:
      del args, kwargs
      refused.append(name)
      raise AssertionError(f"a golden scenario called {name}")

    return call

  with contextlib.ExitStack() as stack:
    for name in ("monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns", "time", "time_ns",
                 "sleep"):
      stack.enter_context(mock.patch.object(time, name, refuse(f"time.{name}")))
    stack.enter_context(mock.patch.object(threading.Thread, "start", refuse("Thread.start")))
    yield
  if refused:
    raise AssertionError(f"a golden scenario called {', '.join(sorted(set(refused)))}")


def render(name: str) -> List[str]:
  """The lines of one scenario, as the driver under test prints them."""
  with no_real_time():
    lines = SCENARIOS[name].run()
  for line in lines:
    if "\n" in line or line.startswith(SECTION):
      raise AssertionError(f"scenario {name}: a line the golden file cannot hold: {line!r}")
  return lines


# ------------------------------------------------------------------------------------------------
# The golden file and the comparison.
# ------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Section:
  lines: List[str]
  first_line: int  # the file's line number of the section's first line (1-based)


def format_golden(sections: Mapping[str, Sequence[str]]) -> str:
  out = []
  for name, lines in sections.items():
    out.append(SECTION + name)
    out.extend(lines)
  return "\n".join(out) + "\n"


def parse_golden(text: str) -> Dict[str, Section]:
  sections: Dict[str, Section] = {}
  current: Optional[Section] = None
  for number, line in enumerate(
      text.split("\n")[:-1] if text.endswith("\n") else text.split("\n"), 1):
    if line.startswith(SECTION):
      name = line[len(SECTION):]
      if name in sections:
        raise ValueError(f"{GOLDEN_PATH}:{number}: scenario {name} appears twice")
      current = sections[name] = Section([], number + 1)
    elif current is None:
      raise ValueError(f"{GOLDEN_PATH}:{number}: a line before the first `== <scenario>` line")
    else:
      current.lines.append(line)
  return sections


def write_golden(sections: Mapping[str, Sequence[str]]) -> None:
  os.makedirs(os.path.dirname(GOLDEN_PATH), exist_ok=True)
  temporary = GOLDEN_PATH + ".tmp"
  with open(temporary, "w", encoding="utf-8", newline="\n") as handle:
    handle.write(format_golden(sections))
  os.replace(temporary, GOLDEN_PATH)


def read_golden() -> Dict[str, Section]:
  with open(GOLDEN_PATH, encoding="utf-8", newline="") as handle:
    return parse_golden(handle.read())


def split_json(line: str) -> Optional[Tuple[str, Any]]:
  """(the text before the JSON, the parsed JSON) of a machine line; None when it has none."""
  for marker in ("BENCH_STEP ", "BENCH_SUMMARY ", " timing="):
    at = line.find(marker)
    if at >= 0 and (marker.startswith(" ") or at == 0):
      head = line[:at + len(marker)]
      try:
        return head, json.loads(line[len(head):])
      except ValueError:
        return None
  return None


def json_differences(golden: Any, actual: Any, path: str = "") -> List[str]:
  """Where two JSON values differ, one entry per key path (`a.b[2]`)."""
  where = path or "<top level>"
  if isinstance(golden, dict) and isinstance(actual, dict):
    out = [
        f"{path}{'.' if path else ''}{key}: only in the golden line" for key in golden
        if key not in actual
    ]
    out += [
        f"{path}{'.' if path else ''}{key}: only in the driver's line" for key in actual
        if key not in golden
    ]
    for key in golden:
      if key in actual:
        out += json_differences(golden[key], actual[key], f"{path}{'.' if path else ''}{key}")
    if not out and list(golden) != list(actual):
      out.append(f"{where}: the same keys in another order")
    return out
  if isinstance(golden, list) and isinstance(actual, list) and len(golden) == len(actual):
    out = []
    for index, (left, right) in enumerate(zip(golden, actual)):
      out += json_differences(left, right, f"{path}[{index}]")
    return out
  both_nan = (isinstance(golden, float) and isinstance(actual, float) and math.isnan(golden) and
              math.isnan(actual))
  if type(golden) is not type(actual) or (golden != actual and not both_nan):
    return [
        f"{where}: {json.dumps(golden)} in the golden line, {json.dumps(actual)} from the "
        "driver"
    ]
  return []


def describe_difference(golden: Optional[str], actual: Optional[str]) -> List[str]:
  """What differs between two lines, beyond the lines themselves."""
  if golden is None:
    return ["the golden section ends before this line"]
  if actual is None:
    return ["the driver printed no such line"]
  left, right = split_json(golden), split_json(actual)
  if left is None or right is None:
    return []
  notes = []
  if left[0] != right[0]:
    notes.append(f"text before the JSON: {left[0]!r} in the golden line, {right[0]!r} from the "
                 "driver")
  keys = json_differences(left[1], right[1])
  if keys:
    notes.append("JSON differences:")
    notes += [f"  {entry}" for entry in keys[:20]]
    if len(keys) > 20:
      notes.append(f"  ... and {len(keys) - 20} more")
  elif left[0] == right[0]:
    notes.append("the JSON values are equal; the text differs (spacing or number spelling)")
  return notes


def compare(name: str, golden: Section, actual: Sequence[str], shown: int = 5) -> Optional[str]:
  """None when the lines match, else a message: scenario, line numbers, both lines, JSON keys."""
  differing = [
      index for index in range(max(len(golden.lines), len(actual)))
      if index >= len(golden.lines) or index >= len(actual) or golden.lines[index] != actual[index]
  ]
  if not differing:
    return None
  out = [
      f"scenario {name}: {len(differing)} line(s) differ from {GOLDEN_PATH} (the golden "
      f"section has {len(golden.lines)} lines, the driver printed {len(actual)})"
  ]
  for index in differing[:shown]:
    left = golden.lines[index] if index < len(golden.lines) else None
    right = actual[index] if index < len(actual) else None
    kind = (left or right or "").split(" ", 1)[0]
    out.append(f"line {index + 1} of the scenario ({kind}; file line "
               f"{golden.first_line + index}):")
    out.append(f"  golden: {'<none>' if left is None else left}")
    out.append(f"  driver: {'<none>' if right is None else right}")
    out += [f"  {note}" for note in describe_difference(left, right)]
  if len(differing) > shown:
    out.append(f"... and {len(differing) - shown} more differing line(s)")
  out.append(f"If the change is meant, regenerate with {UPDATE_VARIABLE}=1 (see the docstring of "
             "golden_lines_test.py) and say why in the commit.")
  return "\n".join(out)


class GoldenLinesTest(unittest.TestCase):
  golden: Dict[str, Section] = {}

  @classmethod
  def setUpClass(cls) -> None:
    if os.environ.get(UPDATE_VARIABLE) == "1":
      write_golden({name: render(name) for name in SCENARIOS})
      print(f"\n{UPDATE_VARIABLE}=1: wrote {GOLDEN_PATH}", flush=True)
    cls.golden = read_golden()

  def check_scenario(self, name: str) -> None:
    if name not in self.golden:
      self.fail(f"scenario {name} has no section in {GOLDEN_PATH} (regenerate with "
                f"{UPDATE_VARIABLE}=1)")
    message = compare(name, self.golden[name], render(name))
    if message is not None:
      self.fail(message)

  def test_the_golden_file_holds_the_scenarios_in_order(self) -> None:
    self.assertEqual(list(self.golden), list(SCENARIOS),
                     f"the sections of {GOLDEN_PATH} are not the scenarios of this test")

  def test_scenarios_are_deterministic(self) -> None:
    for name in SCENARIOS:
      with self.subTest(scenario=name):
        self.assertEqual(render(name), render(name))

  def test_scenarios_cover_what_they_are_named_for(self) -> None:
    for name, scenario in SCENARIOS.items():
      text = "\n".join(render(name))
      for expected in scenario.covers:
        with self.subTest(scenario=name, expected=expected):
          self.assertIn(expected, text)


def _scenario_test(name: str) -> Callable[[GoldenLinesTest], None]:

  def test(self: GoldenLinesTest) -> None:
    self.check_scenario(name)

  return test


for _name in SCENARIOS:
  setattr(GoldenLinesTest, "test_scenario_" + _name.replace("-", "_"), _scenario_test(_name))

if __name__ == "__main__":
  unittest.main()
