"""Fakes of the step loop's world, shared by the driver's unit tests: a clock, workers of each
TrainerWorker generation, a profiler, device results on the fake clock, and Harness, which runs
the driver's own run_steps on them and keeps every line it printed.

They are test code: they never ship in the pod, and render-bench does not embed this file. Each
fake moves the fake clock by a known amount, so a test can state the times the driver must
report. doubles.py holds the single-threaded CompletionWatcher they run with.
"""

import contextlib
import json
import types
from typing import Any, Dict, Iterator, List, Optional, Set, Tuple

import numpy as np

from doubles import InlineCompletionWatcher, WeightedMetric
from driver_loader import load_driver

bd = load_driver()


class FakeClock:
  """The fake clock: it moves only when a fake says so."""

  def __init__(self) -> None:
    self.now = 1000.0

  def __call__(self) -> float:
    return self.now

  def advance(self, seconds: float) -> None:
    self.now += seconds


class Response:
  """Stands in for datatypes.Response: metadata and a request id."""

  def __init__(self, **metadata: Any) -> None:
    self.metadata = metadata
    self.request_id: Optional[str] = None


class Request:
  """Stands in for datatypes.TrainRequest."""

  def __init__(self, payload: Any) -> None:
    self.payload = payload
    self.metadata: Dict[str, Any] = {}
    self.request_id = "train_req_test"


class Events:
  """One ordered log shared by the fakes, so tests can check what happened before what."""

  def __init__(self) -> None:
    self.items: List[Tuple[Any, ...]] = []

  def add(self, *item: Any) -> None:
    self.items.append(item)

  def names(self) -> List[Any]:
    return [item[0] for item in self.items]


class FakeProfiler:
  """jax.profiler's start_trace / stop_trace, logged to the shared events."""

  def __init__(self, events: Events, fail_start: bool = False,
               clock: Optional[FakeClock] = None) -> None:
    self.events = events
    self.active = False
    self.starts: List[str] = []
    self.stops = 0
    self.fail_start = fail_start
    self.clock = clock
    self.cost_s = 0.0  # what each start and stop takes on the clock

  def start(self, log_dir: str) -> None:
    if self.fail_start:
      raise RuntimeError("profiler busy")
    if self.clock:
      self.clock.advance(self.cost_s)
    self.starts.append(log_dir)
    self.active = True
    self.events.add("profiler_start", log_dir)

  def stop(self) -> None:
    if self.clock:
      self.clock.advance(self.cost_s)
    self.stops += 1
    self.active = False
    self.events.add("profiler_stop")

  @contextlib.contextmanager
  def step(self, step: int) -> Iterator[None]:
    """jax.profiler.StepTraceAnnotation: the step's span in the shared events."""
    self.events.add("step_begin", step)
    yield
    self.events.add("step_end", step)


class EngineState:
  """What a trainer keeps of its train state: MaxText's engine rebinds `_state_pure` from each
  update's output (maxtext_engine.py@b8bf66d6); None before the first update."""

  def __init__(self) -> None:
    self._state_pure: Any = None


class WorkerBase:
  """What every fake worker has: the calls it received, update() and get_metrics(); each
  generation adds its own fwd_bwd, whose signature is what the driver reads."""

  def __init__(self, clock: FakeClock, events: Events, mb_seconds: float = 2.0,
               update_seconds: float = 0.5, fail_at: Optional[int] = None) -> None:
    self.clock, self.events = clock, events
    self.mb_seconds, self.update_seconds = mb_seconds, update_seconds
    self.fail_at = fail_at
    self.fwd_bwd_calls: List[Tuple[Any, Dict[str, Any]]] = []
    self.updates = 0
    self.profiler: Optional[FakeProfiler] = None
    self._trainer: Any = EngineState()

  def publish_state(self) -> None:
    """The update's new state, as MaxText's engine rebinds it (ready once the update is)."""
    self._trainer._state_pure = {
        "model": {"w": Token(self.clock, self.events, self.clock.now, f"state{self.updates}")}
    }

  def update(self) -> Any:
    self.updates += 1
    self.events.add("update", self.updates)
    self.clock.advance(self.update_seconds)
    self.publish_state()
    return self.updates

  def get_metrics(self) -> Any:
    self.events.add("get_metrics")
    return {"loss": np.float32(1.5), "gradient_norm": 0.25, "note": "text"}


class ExplicitWorker(WorkerBase):
  """The current TrainerWorker: fwd_bwd(request, **kwargs) queues, update() applies."""

  def fwd_bwd(self, request: Any, **kwargs: Any) -> Any:
    index = len(self.fwd_bwd_calls)
    self.fwd_bwd_calls.append((request, dict(kwargs)))
    self.events.add("fwd_bwd", index, bool(self.profiler and self.profiler.active))
    if self.fail_at is not None and index == self.fail_at:
      raise RuntimeError("device lost")
    self.clock.advance(self.mb_seconds)
    return Response(queued=True)


class FusedWorker(WorkerBase):
  """A worker that applies the optimizer inside the last fwd_bwd and says so (tunix#2719)."""

  def fwd_bwd(self, request: Any, accumulate_gradients: bool = False, apply_optimizer: bool = False,
              skip_jit: bool = False) -> Any:
    index = len(self.fwd_bwd_calls)
    self.fwd_bwd_calls.append((request,
                               dict(accumulate_gradients=accumulate_gradients,
                                    apply_optimizer=apply_optimizer, skip_jit=skip_jit)))
    self.events.add("fwd_bwd", index, bool(self.profiler and self.profiler.active))
    self.clock.advance(self.mb_seconds)
    if apply_optimizer:
      self.updates += 1
      self.clock.advance(self.update_seconds)
      self.publish_state()
      return Response(queued=True, updated=True, train_step=self.updates)
    return Response(queued=True)


class LegacyWorker(WorkerBase):
  """The old TrainerWorker: fwd_bwd(payload=None, **kwargs) pops the optimizer flags."""

  def fwd_bwd(self, payload: Any = None, **kwargs: Any) -> Any:
    self.fwd_bwd_calls.append((payload, dict(kwargs)))
    self.events.add("fwd_bwd", len(self.fwd_bwd_calls) - 1, False)
    accumulate = bool(kwargs.pop("accumulate_gradients", False))
    apply = bool(kwargs.pop("apply_optimizer", False))
    kwargs.pop("skip_jit", None)
    assert not kwargs, kwargs
    self.clock.advance(self.mb_seconds)
    if apply:
      self.updates += 1
      self.publish_state()
      return {"queued": True, "updated": True, "train_step": self.updates}
    return {"queued": True, "updated": False} if accumulate else Response(queued=True)


class KwargsFusedWorker(WorkerBase):
  """google/tunix#2719: fwd_bwd(request, **kwargs) pops apply_optimizer from its keyword
  arguments, applies the update inside the last call and says `updated`."""

  def fwd_bwd(self, request: Any, **kwargs: Any) -> Any:
    self.fwd_bwd_calls.append((request, dict(kwargs)))
    self.events.add("fwd_bwd", len(self.fwd_bwd_calls) - 1, False)
    apply = bool(kwargs.pop("apply_optimizer", False))
    kwargs.pop("skip_jit", None)
    assert not kwargs, kwargs
    self.clock.advance(self.mb_seconds)
    if not apply:
      return Response(queued=True)
    self.updates += 1
    self.clock.advance(self.update_seconds)
    self.publish_state()
    return Response(queued=True, updated=True, train_step=self.updates)


class RejectingEngine:
  """A trainer whose fwd_bwd names its arguments: an unknown keyword is a TypeError."""

  def __init__(self) -> None:
    self._state_pure: Any = None

  def fwd_bwd(self, payload: Any) -> None:
    del payload


class ForwardingWorker(ExplicitWorker):
  """Tunix's TrainerWorker: fwd_bwd(request, **kwargs) pops skip_jit and forwards the rest to
  the trainer's fwd_bwd (trainer_worker.py), here one that rejects keywords it does not name."""

  def __init__(self, clock: FakeClock, events: Events, **kwargs: Any) -> None:
    super().__init__(clock, events, **kwargs)
    self._trainer = RejectingEngine()

  def fwd_bwd(self, request: Any, **kwargs: Any) -> Any:
    self.fwd_bwd_calls.append((request, dict(kwargs)))
    kwargs.pop("skip_jit", None)
    self._trainer.fwd_bwd(request.payload, **kwargs)
    self.clock.advance(self.mb_seconds)
    return Response(queued=True)


class LiarWorker(FusedWorker):
  """Takes apply_optimizer but reports that it did not update: the driver must call update()."""

  def fwd_bwd(self, request: Any, accumulate_gradients: bool = False, apply_optimizer: bool = False,
              skip_jit: bool = False) -> Any:
    super().fwd_bwd(request, accumulate_gradients, False, skip_jit)
    return {"updated": False}


class TimingWorker(ExplicitWorker):
  """A worker with get_step_timing(), which takes `rtt` seconds and returns `timing` (or raises
  `error`)."""

  def __init__(self, clock: FakeClock, events: Events, timing: Any = None,
               error: Optional[BaseException] = None, rtt: float = 0.25) -> None:
    super().__init__(clock, events)
    self.timing, self.error, self.rtt = timing, error, rtt
    self.timing_calls = 0

  def get_step_timing(self) -> Any:
    self.timing_calls += 1
    self.clock.advance(self.rtt)
    if self.error is not None:
      raise self.error
    return self.timing


class Token:
  """A device result: block_until_ready() moves the clock to when it is ready."""

  def __init__(self, clock: FakeClock, events: Events, ready_at: float, label: str) -> None:
    self.clock, self.events, self.ready_at, self.label = clock, events, ready_at, label

  def block_until_ready(self) -> "Token":
    self.events.add("wait", self.label)
    self.clock.now = max(self.clock.now, self.ready_at)
    return self

  def is_ready(self) -> bool:
    return self.clock.now >= self.ready_at


class AsyncWorker(ExplicitWorker):
  """Dispatch returns at once; the device runs micro-batches back to back (tokens in the
  response), like a trainer that publishes readiness."""

  def __init__(self, clock: FakeClock, events: Events, device_seconds: float = 3.0,
               dispatch_seconds: float = 0.1) -> None:
    super().__init__(clock, events)
    self.device_seconds, self.dispatch_seconds = device_seconds, dispatch_seconds
    self.device_free = clock.now

  def _run(self, label: str, seconds: float) -> Token:
    self.clock.advance(self.dispatch_seconds)
    start = max(self.clock.now, self.device_free)
    self.device_free = start + seconds
    return Token(self.clock, self.events, self.device_free, label)

  def fwd_bwd(self, request: Any, **kwargs: Any) -> Any:
    self.fwd_bwd_calls.append((request, dict(kwargs)))
    index = len(self.fwd_bwd_calls) - 1
    self.events.add("fwd_bwd", index, False)
    return {"queued": True, "loss": self._run(f"mb{index}", self.device_seconds)}

  def update(self) -> Any:
    self.updates += 1
    self.events.add("update", self.updates)
    return {"train_step": self.updates, "token": self._run(f"update{self.updates}", 1.0)}


class DeviceModel:
  """A device on the fake clock: work runs back to back; the trainer publishes readiness
  tokens (last_fwd_bwd_token / last_update_token, as Tunix's StepTimer reads them)."""

  def __init__(self, clock: FakeClock, events: Events) -> None:
    self.clock, self.events = clock, events
    self.device_free = clock.now
    self.last_fwd_bwd_token: Optional[Token] = None
    self.last_update_token: Optional[Token] = None

  def run(self, label: str, seconds: float) -> Token:
    start = max(self.clock.now, self.device_free)
    self.device_free = start + seconds
    return Token(self.clock, self.events, self.device_free, label)


class StagingWorker(WorkerBase):
  """Stands in for the seed's TrainerWorker staging change (PIPELINE_STEP_BOUNDARY /
  STAGE_NEXT_MICROBATCH; AI-Hypercomputer/maxtext#5718 underneath): stage_fwd_bwd(request)
  sends a micro-batch to the trainer host ahead of its fwd_bwd, fwd_bwd(..., defer_update=True)
  defers the fused update, apply_deferred_update() dispatches it. No public Tunix has these.

  Sending a micro-batch takes `transfer_seconds` of host time; the device waits for it unless
  the micro-batch was staged while it computed the previous one."""

  def __init__(self, clock: FakeClock, events: Events, mb_seconds: float = 2.0,
               update_seconds: float = 0.5, transfer_seconds: float = 1.0,
               stage_error: Optional[BaseException] = None) -> None:
    super().__init__(clock, events, mb_seconds=mb_seconds, update_seconds=update_seconds)
    self.transfer_seconds = transfer_seconds
    self.stage_error = stage_error
    self._trainer = DeviceModel(clock, events)
    self.staged: Set[int] = set()
    self.deferred = False
    self.calls: List[Any] = []

  @property
  def device_free(self) -> float:
    return self._trainer.device_free

  def _update(self) -> None:
    self.updates += 1
    self._trainer.last_update_token = self._trainer.run(f"update{self.updates}",
                                                        self.update_seconds)

  def fwd_bwd(self, request: Any, accumulate_gradients: bool = False, apply_optimizer: bool = False,
              skip_jit: bool = False, defer_update: bool = False) -> Any:
    index = len(self.fwd_bwd_calls)
    self.fwd_bwd_calls.append(
        (request, dict(apply_optimizer=apply_optimizer, defer_update=defer_update)))
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

  def stage_fwd_bwd(self, request: Any) -> Any:
    self.events.add("stage")
    if self.stage_error is not None:
      raise self.stage_error
    self.clock.advance(self.transfer_seconds)
    self.staged.add(id(request))
    response = Response(staged=True)
    response.request_id = request.request_id  # the handle the staged request carries back
    return response

  def apply_deferred_update(self) -> Any:
    assert self.deferred, "apply_deferred_update without a deferred update"
    self.deferred = False
    self.events.add("apply_deferred_update")
    self._update()
    return self.updates

  def update(self) -> Any:
    raise AssertionError("the staged path never calls update()")


class StagedNothingWorker(StagingWorker):
  """The seed's staging calls, but a stage that answers "staged nothing" (`staged`: false with a
  reason) and keeps no micro-batch: the next micro-batch's fwd_bwd carries the whole of it."""

  def stage_fwd_bwd(self, request: Any) -> Any:
    self.events.add("stage")
    return Response(staged=False, reason="trainer host busy")


class TokenFusedWorker(StagingWorker):
  """Publishes readiness tokens and fuses the update into the last call (no staging)."""

  stage_fwd_bwd = None  # type: ignore[assignment]  # absent, as on a public Tunix
  apply_deferred_update = None  # type: ignore[assignment]  # absent, likewise

  def fwd_bwd(  # type: ignore[override]  # the signature is what the driver reads
      self, request: Any, accumulate_gradients: bool = False, apply_optimizer: bool = False,
      skip_jit: bool = False) -> Any:
    return super().fwd_bwd(request, accumulate_gradients, apply_optimizer, skip_jit)


class PendingOverflowCheck:
  """MaxText's _PendingOverflowCheck (maxtext_engine.py@b8bf66d6), the fields the driver reads:
  the call's overflow flag and its loss."""

  def __init__(self, has_overflow: bool, loss: Any, micro_step: int) -> None:
    self.has_overflow, self.loss, self.micro_step = has_overflow, loss, micro_step


class OneLateLossEngine:
  """MaxText's engine under retry_when_tokens_dropped (maxtext_engine.py@b8bf66d6) on the fake
  clock: fwd_bwd dispatches the capped kernel and parks its loss in `_pending_overflow_check`;
  the next fwd_bwd (or update()) reads the flag, reruns an overflowed micro-batch on the dropless
  kernel (one more device run, counted in `_dropless_replays`), and only then appends the loss to
  `_cached_losses`, which update() clears; update() records moe_dropless_replays."""

  def __init__(self, clock: FakeClock, events: Events, mb_seconds: float, update_seconds: float,
               rerun_seconds: float, overflow_at: Set[int]) -> None:
    self.clock, self.events = clock, events
    self.mb_seconds, self.update_seconds, self.rerun_seconds = (mb_seconds, update_seconds,
                                                                rerun_seconds)
    self.overflow_at = overflow_at
    self._config = types.SimpleNamespace(retry_when_tokens_dropped=True, skip_step_on_spikes=False,
                                         capacity_factor=-1.0, ragged_buffer_factor=2.75)
    self._dropless_replay = True
    self._dropless_replays = 0
    self._pending_overflow_check: Optional[PendingOverflowCheck] = None
    self._cached_losses: List[Any] = []
    self._state_pure: Any = None
    self.device_free = clock.now
    self.calls = 0
    self.recorded: List[float] = []

  def _run(self, label: str, seconds: float) -> Token:
    start = max(self.clock.now, self.device_free)
    self.device_free = start + seconds
    return Token(self.clock, self.events, self.device_free, label)

  def _resolve_overflow_check(self) -> None:
    check, self._pending_overflow_check = self._pending_overflow_check, None
    if check is None:
      return
    loss = check.loss
    if check.has_overflow:  # reading the flag waits for the capped kernel
      self.events.add("rerun", check.micro_step)
      rerun = self._run(f"rerun{check.micro_step}", self.rerun_seconds)
      loss = WeightedMetric(rerun, rerun)
      self._dropless_replays += 1
    self._cached_losses.append(loss)

  def fwd_bwd(self, index: int) -> None:
    token = self._run(f"mb{index}", self.mb_seconds)
    check = PendingOverflowCheck(index in self.overflow_at, WeightedMetric(token, token), index)
    self._resolve_overflow_check()
    self._pending_overflow_check = check

  def update(self) -> Token:
    self._resolve_overflow_check()
    token = self._run("update", self.update_seconds)
    # The new state comes out of the update kernel (nnx.update + _publish_state at b8bf66d6).
    self._state_pure = {"model": {"w": token}}
    self.recorded.append(float(self._dropless_replays))
    self._dropless_replays = 0
    self._cached_losses.clear()
    return token


class OneLateLossWorker(WorkerBase):
  """Tunix's TrainerWorker over OneLateLossEngine: fwd_bwd returns at dispatch with nothing to
  wait on; the engine sits at `_trainer`, where Tunix keeps it; get_metrics() carries the
  step's moe_dropless_replays."""

  def __init__(self, clock: FakeClock, events: Events, mb_seconds: float = 2.0,
               update_seconds: float = 0.5, rerun_seconds: float = 3.0,
               overflow_at: Optional[Set[int]] = None, dispatch_seconds: float = 0.1) -> None:
    super().__init__(clock, events, mb_seconds=mb_seconds, update_seconds=update_seconds)
    self.dispatch_seconds = dispatch_seconds
    self._trainer = OneLateLossEngine(clock, events, mb_seconds, update_seconds, rerun_seconds,
                                      overflow_at or set())

  @property
  def device_free(self) -> float:
    return self._trainer.device_free

  def fwd_bwd(self, request: Any, **kwargs: Any) -> Any:
    index = len(self.fwd_bwd_calls)
    self.fwd_bwd_calls.append((request, dict(kwargs)))
    self.events.add("fwd_bwd", index, False)
    self.clock.advance(self.dispatch_seconds)
    self._trainer.fwd_bwd(index)
    return Response(queued=True)

  def update(self) -> Any:
    self.updates += 1
    self.events.add("update", self.updates)
    self._trainer.update()
    return None

  def get_metrics(self) -> Any:
    return {"loss": 1.5, "moe_dropless_replays": self._trainer.recorded[-1]}


def make_plan(steps: int = 2, micro_steps: int = 3, window: Optional[Tuple[int, int]] = None,
              chips: int = 4, tokens_regular: int = 100, tokens_final: int = 40, padded: int = 128,
              stage: Any = None) -> Any:
  """A BenchPlan whose payloads are the strings REGULAR and FINAL."""
  return bd.BenchPlan(name="bench-x", steps=steps, micro_steps=micro_steps, regular="REGULAR",
                      final="FINAL", tokens_regular=tokens_regular, tokens_final=tokens_final,
                      chips=chips, padded_tokens_per_call=padded, profile_window=window,
                      profile_dir="/tmp/trace-dir", stage_boundary=stage)


def stage_plan(resolved: bool = True, before_update: bool = True) -> Any:
  """A StagePlan as STAGE_BOUNDARY=on (resolved) or off resolves it."""
  return bd.StagePlan("on" if resolved else "off", resolved, "test", before_update)


class Harness:
  """Runs run_steps on a worker and keeps what it printed."""

  def __init__(self, worker_class: Any = ExplicitWorker, **worker_kwargs: Any) -> None:
    self.clock = FakeClock()
    self.events = Events()
    self.worker = worker_class(self.clock, self.events, **worker_kwargs)
    self.profiler = FakeProfiler(self.events, clock=self.clock)
    self.worker.profiler = self.profiler
    self.lines: List[str] = []
    self.logs: List[str] = []

  def run(self, plan: Any, **kwargs: Any) -> List[Any]:
    calls = bd.WorkerCalls(self.worker, make_request=Request)
    kwargs.setdefault("watcher", InlineCompletionWatcher(self.clock))
    kwargs.setdefault("observer", bd.DeviceObserver())
    return bd.run_steps(self.worker, plan, clock=self.clock, profiler=self.profiler, calls=calls,
                        out=self.lines.append, log=self.logs.append, **kwargs)

  def machine(self, prefix: str) -> List[str]:
    return [line for line in self.lines if line.startswith(prefix)]

  def bench_steps(self) -> List[Dict[str, Any]]:
    return [json.loads(line[len("BENCH_STEP "):]) for line in self.machine("BENCH_STEP ")]


def summary_of(plan: Any, records: List[Any], **shape: Any) -> Dict[str, Any]:
  """BENCH_SUMMARY of a run on a dense model of one 8-token row (7 real, one segment), without
  routing; `shape` overrides any of summarize()'s keywords."""
  keywords: Dict[str, Any] = dict(rows=1, tokens_per_row=8, real_len=7, segments=1, final_rows=1,
                                  layers=None, topk=None, experts=None, routing=[],
                                  routing_final=None, knobs={})
  keywords.update(shape)
  return bd.summarize(plan, records, **keywords)
