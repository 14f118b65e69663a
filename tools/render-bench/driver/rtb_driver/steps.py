"""The step loop: times STEPS optimizer steps of MICRO_STEPS fwd_bwd calls each.

Every call accumulates gradients; the last of a step asks for the optimizer update, which the
worker applies inside the call (fused), defers until apply_deferred_update() (staged boundary),
or leaves to update() (explicit); the warm-up step (step 0) tells whether a worker asked through
**kwargs applies it. A step ends when an array the update produced is ready: the update's
readiness token, else a leaf of the trainer's new state; without either the run stops
(TunixMissing). That wait is timed once more on the idle device after the last step (fence_s).
Micro-batch times are
device times when every call of the step has a completion (the trainer's ready times, a readiness
token, or the call's loss array), else dispatch intervals; each BENCH_STEP says which.
"""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

import numpy as np

from .calls import (find_in, block_tree, response_updated, UPDATE_DEFERRED, UPDATE_EXPLICIT,
                    UPDATE_FUSED, WorkerCalls)
from .common import int_or_none, describe_exception, emit, say, TunixMissing
from .metrics import log_step_timing, ready_times, scalar_metrics, TimingSnapshot
from .observers import (CompletionWatcher, DeviceObserver, SOURCE_DISPATCH, SOURCE_LOSS,
                        SOURCE_STEP_TIMING, SOURCE_TOKEN, STATE_ATTRIBUTES)
from .plan import (boundary_free_estimate, ProfileWindow, stage_evidence, BenchPlan, JaxProfiler,
                   StageState, StepRecord)


@dataclasses.dataclass
class StepCalls:
  """What one step's fwd_bwd calls left behind: when each was dispatched, what to wait on for its
  completion (key None: nothing), where that completion comes from, and the log-prob passes."""
  begins: List[float] = dataclasses.field(default_factory=list)
  keys: List[Any] = dataclasses.field(default_factory=list)
  waitables: List[Any] = dataclasses.field(default_factory=list)
  sources: List[str] = dataclasses.field(default_factory=list)
  logps_s: List[float] = dataclasses.field(default_factory=list)
  response: Any = None  # the last call's

  def watched(self) -> List[Any]:
    return [key for key in self.keys if key is not None]


class StepRunner:
  """Runs a BenchPlan on a worker: one method per phase of a step, in the order the e2e
  trainer's calls come (dispatch, stage, update, wait, metrics, record)."""

  def __init__(self, worker: Any, plan: BenchPlan, *, clock: Callable[[], float] = time.monotonic,
               profiler: Any = None, observer: Optional[DeviceObserver] = None, watcher: Any = None,
               calls: Optional[WorkerCalls] = None, out: Callable[[str], None] = emit,
               log: Callable[[str], None] = say, stage_state: Optional[StageState] = None):
    self.worker = worker
    self.plan = plan
    self.clock = clock
    self.observer = observer or DeviceObserver()
    self.watcher = watcher if watcher is not None else CompletionWatcher(clock)
    self.calls = calls or WorkerCalls(worker)
    self.out = out
    self.log = log
    self.stage = stage_state or StageState(plan.stage_boundary, log)
    self.profile = ProfileWindow(plan.profile_window, plan.profile_dir, profiler or JaxProfiler(),
                                 log)
    self.warned_metrics: Set[Tuple[str, str]] = set()
    self.records: List[StepRecord] = []
    self.fence_target: Any = None  # what the last step ended on
    self.fence_s: Optional[float] = None
    if (self.stage.active and self.stage.plan and self.stage.plan.before_update and
        not self.calls.can_defer):
      self.calls.decline_kwargs_apply("staging before the update needs the update outside the "
                                      "last call, and this worker cannot defer it")
    self.staged_request: Any = None  # the next step's first request, staged on the trainer host

  def run(self) -> List[StepRecord]:
    """Times plan.steps optimizer steps (numbered from 0); one BENCH_STEP line each."""
    records = []
    try:
      for step in range(self.plan.steps):
        records.append(self.run_step(step))
      self.records = records
      self.fence_s = self.measure_fence()
    finally:
      if self.profile.started and not self.profile.stopped:
        try:
          self.profile.stop(" after a failure")
        except Exception as exc:  # pylint: disable=broad-except  # the failure itself propagates
          self.log(f"profiler: stop failed: {describe_exception(exc)}")
    return records

  def run_step(self, step: int) -> StepRecord:
    staged_now = self.staged_request is not None
    # A worker that fuses the update into the last call defers it while staging is on, so that
    # the stage runs before the update (the seed's --stage_before_update). The last step defers
    # too, so that every step takes the same path.
    plan_before = bool(self.stage.plan and self.stage.plan.before_update)
    deferred = bool(self.stage.active and self.calls.can_fuse and plan_before)
    # PROFILE_WINDOW holds whole steps: the trace starts before the first one's mark and clock
    # (a mark begun before the trace is not recorded, jax's TraceMe) and stops after the last
    # one's end, so neither is timed in a step. The mark spans the step (profile-report's steps).
    self.profile.start(step)
    with self.profile.step(step):
      step_start = self.clock()
      calls = self.dispatch(step, deferred)
      fused = bool(self.calls.can_fuse and not deferred and response_updated(calls.response))
      if not deferred:
        # The first step whose last call was asked to apply the update (step 0 unless staging
        # defers it) tells whether a **kwargs worker applies it; a deferred one asks nothing.
        self.calls.learn_update(fused)
      update_kind, train_step, update_result = self.update(step, calls, deferred, fused)
      step_end, observed = self.wait_for_step_end(calls, update_result)
    if self.profile.is_last(step):
      self.profile.stop()  # the step's device work, the update included, is done
    metrics = self.read_metrics(step)
    # policy_version: the version after this step's update (Tunix docs/trainer_step_timing.md).
    snapshot = log_step_timing(self.worker, step, step + 1, self.clock, self.out)
    microbatch_s, ends_known, source = self.microbatch_times(calls, observed, snapshot, step_end)
    seconds = step_end - step_start
    record = self.record(step, seconds, microbatch_s, ends_known, source, update_kind, fused,
                         staged_now, train_step, calls, metrics)
    self.report(record, staged_now)
    return record

  def dispatch(self, step: int, deferred: bool) -> StepCalls:
    """The step's fwd_bwd calls, each watched for its device completion without waiting."""
    plan, calls = self.plan, StepCalls()
    for index in range(plan.micro_steps):
      last = index == plan.micro_steps - 1
      payload = plan.final if last else plan.regular
      if index == 0 and self.staged_request is not None:
        request, self.staged_request = self.staged_request, None
      else:
        request = self.calls.request(payload)
      if plan.logps_pass is not None:
        # The e2e program scores each micro-batch with the actor before it trains on it.
        pass_start = self.clock()
        plan.logps_pass(payload)
        calls.logps_s.append(self.clock() - pass_start)
      calls.begins.append(self.clock())
      if last and deferred:
        calls.response = self.calls.fwd_bwd(request, apply_optimizer=True, defer_update=True)
      else:
        calls.response = self.calls.fwd_bwd(request, apply_optimizer=last)
      waitable, source = self.observer.completion(self.worker, calls.response, "fwd_bwd")
      key = (step, index)
      calls.keys.append(key if waitable is not None else None)
      calls.waitables.append(waitable)
      calls.sources.append(source)
      if waitable is not None:
        self.watcher.watch(key, waitable)
        self.watcher.settle()
    return calls

  def update(self, step: int, calls: StepCalls, deferred: bool,
             fused: bool) -> Tuple[str, Optional[int], Any]:
    """The step's optimizer update (unless the last call applied it), with the next step's
    first micro-batch staged before or after it: (update kind, train step, update result)."""
    update_kind = UPDATE_FUSED if fused else (UPDATE_DEFERRED if deferred else UPDATE_EXPLICIT)
    train_step = int_or_none(find_in(calls.response, "train_step")) if fused else None
    before_update = bool(self.stage.plan and self.stage.plan.before_update)
    update_result = None
    if self.stage.active and before_update and not fused:
      self.stage_next(step, calls)
    if deferred:
      update_result = self.calls.apply_deferred_update()
    elif not fused:
      update_result = self.calls.update()
    if self.stage.active and not before_update:
      self.stage_next(step, calls)
    if update_result is not None:
      if isinstance(update_result, (int, np.integer)) and not isinstance(update_result, bool):
        train_step = int(update_result)
      else:
        reported = int_or_none(find_in(update_result, "train_step"))
        # 0 is a step number (a trainer counting from 0), not "none reported".
        train_step = reported if reported is not None else train_step
    return update_kind, train_step, update_result

  def stage_next(self, step: int, calls: StepCalls) -> None:
    """Sends the next step's first micro-batch to the trainer host while the device computes this
    step's last one; latches staging off when it fails or overlaps nothing."""
    if not self.stage.active or step + 1 >= self.plan.steps:
      return
    # Overlap: the last micro-batch still on the device when the stage begins.
    busy = None
    if calls.keys[-1] is not None:
      is_ready = getattr(calls.waitables[-1], "is_ready", None)
      busy = not (is_ready() if callable(is_ready) else self.watcher.is_done(calls.keys[-1]))
    next_payload = self.plan.final if self.plan.micro_steps == 1 else self.plan.regular
    request = self.calls.request(next_payload)
    try:
      result = self.calls.stage(request)
    except Exception as exc:  # pylint: disable=broad-except  # any failure latches staging off
      self.stage.latch_off(f"stage_fwd_bwd failed: {describe_exception(exc)}; the next "
                           "micro-batch is sent whole")
      return
    verdict = stage_evidence(result, request, busy)
    if verdict is not None:
      # Not counted: the next step sends its first micro-batch whole, in a fresh request.
      self.stage.latch_off(verdict)
      return
    self.staged_request = request  # staged: its train call carries no data
    self.stage.staged_steps.append(step + 1)

  def wait_for_step_end(self, calls: StepCalls,
                        update_result: Any) -> Tuple[float, Dict[Any, float]]:
    """Waits for every call, then for an array the update produced: (the step's end on the clock,
    each watched call's completion time). No such array stops the run: waiting on every live
    array would also wait for work that is not the step's."""
    observed = self.watcher.drain(calls.watched())
    target, _ = self.observer.completion(self.worker, update_result, "update")
    if target is None:
      target = self.observer.fresh_state_leaf(self.worker)
    if target is None:
      raise TunixMissing(
          "no way to end the step on its update: no readiness token (the update's result, the "
          "trainer's last_update_token) and no fresh leaf of the trainer's state "
          f"({', '.join(STATE_ATTRIBUTES)}); the step time would not include the update")
    block_tree(target)
    step_end = self.clock()
    self.fence_target = target
    self.watcher.forget(calls.watched())
    return step_end, observed

  def measure_fence(self) -> Optional[float]:
    """fence_s: the step-end wait once more, on the idle device after the last step."""
    if self.fence_target is None:
      return None
    start = self.clock()
    block_tree(self.fence_target)
    return self.clock() - start

  def update_path(self) -> Dict[str, Any]:
    """BENCH_SUMMARY update_path: the update path of every step, and why."""
    steps: Dict[str, List[int]] = {}
    for record in self.records:
      steps.setdefault(record.update, []).append(record.step)
    if not steps:
      return {"ran": None, "why": "no step ran"}
    if len(steps) == 1:
      kind = next(iter(steps))
      return {"ran": kind, "why": self.calls.update_why(kind)}
    return {
        "ran": "mixed", "why": "; ".join(f"{kind} in steps {numbers}: {self.calls.update_why(kind)}"
                                         for kind, numbers in steps.items())
    }

  def summary_facts(self) -> Dict[str, Any]:
    """What BENCH_SUMMARY takes from the run beyond its records."""
    return {
        "update_path": self.update_path(),
        "fence_s": None if self.fence_s is None else round(self.fence_s, 6),
    }

  def read_metrics(self, step: int) -> Any:
    """What the trainer's get_metrics() reports after the step (None without it)."""
    if not callable(getattr(self.worker, "get_metrics", None)):
      return None
    try:
      return self.worker.get_metrics()
    except Exception as exc:  # pylint: disable=broad-except  # a step without metrics still counts
      self.log(f"get_metrics failed after step {step}: {describe_exception(exc)}")
      return None

  def microbatch_times(self, calls: StepCalls, observed: Dict[Any, float],
                       snapshot: Optional[TimingSnapshot],
                       step_end: float) -> Tuple[List[float], bool, str]:
    """(seconds per micro-batch, whether they are device times, their completion source): the
    trainer's ready times, else observed completions, else dispatch intervals."""
    micro_steps = self.plan.micro_steps
    published = ready_times(snapshot, micro_steps)
    ends: Optional[List[float]] = None
    source = SOURCE_DISPATCH
    if published is not None:
      ends, source = published[0], SOURCE_STEP_TIMING
    elif all(key is not None and key in observed for key in calls.keys):
      ends = [observed[key] for key in calls.keys]
      source = SOURCE_LOSS if SOURCE_LOSS in calls.sources else SOURCE_TOKEN
    begins = calls.begins
    if ends is not None:
      times = []
      for index in range(micro_steps):
        start = begins[index] if index == 0 else max(begins[index], ends[index - 1])
        times.append(max(0.0, ends[index] - start))
      return times, True, source
    times = []
    for index in range(micro_steps):
      end = begins[index + 1] if index + 1 < micro_steps else step_end
      times.append(max(0.0, end - begins[index]))
    return times, False, source

  def record(self, step: int, seconds: float, microbatch_s: List[float], device_times: bool,
             source: str, update_kind: str, fused: bool, staged_now: bool,
             train_step: Optional[int], calls: StepCalls, metrics: Any) -> StepRecord:
    plan = self.plan
    per_chip = plan.padded_tokens_per_step / seconds / plan.chips if seconds > 0 else 0.0
    real_per_chip = plan.tokens_per_step / seconds / plan.chips if seconds > 0 else 0.0
    return StepRecord(
        step=step, seconds=seconds, microbatch_s=microbatch_s, tokens=plan.tokens_per_step,
        tokens_per_s_per_chip=per_chip, fused_update=fused,
        microbatch_timing="device" if device_times else "dispatch", microbatch_timing_source=source,
        padded_tokens=plan.padded_tokens_per_step, real_tokens_per_s_per_chip=real_per_chip,
        update=update_kind, staged=staged_now, profiled=plan.profiled(step), train_step=train_step,
        logps_pass_s=calls.logps_s if plan.logps_pass is not None else None,
        timing_why=self.observer.timing_why(source),
        boundary_free_step_s=boundary_free_estimate(seconds, microbatch_s, device_times,
                                                    plan.short_final),
        metrics=scalar_metrics(metrics, warn=self.log, warned=self.warned_metrics) or None)

  def report(self, record: StepRecord, staged_now: bool) -> None:
    """The step's BENCH_STEP line and its human line."""
    line = {**self.plan.arm_fields, **record.as_json()}
    self.out("BENCH_STEP " + json.dumps(line, separators=(",", ":")))
    self.log(f"{self.plan.name} step {record.step} ({record.step + 1}/{self.plan.steps}): "
             f"{record.seconds:.3f} s, {record.tokens_per_s_per_chip:.1f} tok/s/chip (padding "
             f"included), {record.update} update, micro-batches timed by "
             f"{record.microbatch_timing} ({record.microbatch_timing_source})"
             f"{', first micro-batch staged' if staged_now else ''}"
             f"{', profiled' if record.profiled else ''}")


def run_steps(worker: Any, plan: BenchPlan, **options: Any) -> List[StepRecord]:
  """Times the plan's steps on `worker` (StepRunner's options); their records."""
  return StepRunner(worker, plan, **options).run()
