"""What the step loop runs and what it records: the plan, one record per step (BENCH_STEP),
the profiler window and the staged boundary's state while it runs."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import statistics
from typing import Any, Callable, Dict, List, Optional, Tuple

from .calls import find_in, UPDATE_EXPLICIT
from .common import describe_exception, one_line
from .metrics import dropped_tokens_of, replays_of
from .observers import SOURCE_DISPATCH
from .resolve import StagePlan


class JaxProfiler:
  """jax.profiler traces (the default profiler of the step loop)."""

  def start(self, log_dir: str) -> None:
    import jax  # pylint: disable=import-outside-toplevel  # only the pod has JAX
    jax.profiler.start_trace(log_dir)

  def stop(self) -> None:
    import jax  # pylint: disable=import-outside-toplevel  # only the pod has JAX
    jax.profiler.stop_trace()

  def step(self, step: int) -> Any:
    """Marks one timed step in the trace (XProf's step marker: a host event with a `step_num`
    stat, which profile-report reads as the step's span)."""
    import jax  # pylint: disable=import-outside-toplevel  # only the pod has JAX
    return jax.profiler.StepTraceAnnotation(STEP_ANNOTATION, step_num=step)


# The name of the driver's step annotation in a trace.
STEP_ANNOTATION = "bench_step"


def profile_dir_of(setting: Optional[str], output_dir: Optional[str]) -> str:
  """PROFILE_DIR, else <--maxtext_output_directory>/bench_profile (/tmp without one)."""
  return setting or os.path.join(output_dir or "/tmp", "bench_profile")


def hlo_dump_flags(profile_dir: str) -> str:
  """The XLA_FLAGS that make XLA write every module it compiles, after optimizations (the
  scheduled module) included, as HLO text next to the trace (DUMP_HLO)."""
  return f"--xla_dump_to={os.path.join(profile_dir, 'hlo')} --xla_dump_hlo_as_text"


# What each figure measures; BENCH_SUMMARY carries this table, README explains it.
DEFINITIONS = {
    "seconds": "one optimizer step: from its first fwd_bwd dispatch until all of its device "
               "work, the update included, is done",
    "microbatch_s/device": "from the later of the call's dispatch and the previous call's device "
                           "completion to its own device completion",
    "microbatch_s/dispatch": "host dispatch intervals (the next call's dispatch minus this "
                             "one's; the last call: until the step's end); with an "
                             "asynchronous engine they lag the device by up to "
                             "max_inflight_computations calls",
    "tokens_per_s_per_chip": "rows x tokens_per_row x micro_steps (padding included, the seed's "
                             "definition) / seconds / chips",
    "real_tokens_per_s_per_chip": "real (non-padding) tokens of the step / seconds / chips",
    "first_step_s": "step 0, which includes the compile when the trainer compiles lazily "
                    "(MaxText's compile() only stages)",
    "median_microbatch_s": "median over the steady steps of their regular micro-batches: 3..N "
                           "(1-based; the first two follow the step boundary), all of a step's "
                           "when it has fewer than 3, never a short final one (FINAL_ROWS < "
                           "rows)",
    "train_step_s": "seconds minus the step's actor log-prob passes (the sum of logps_pass_s); "
                    "seconds when there is no pass",
    "boundary_free_step_s": "an ESTIMATE, not a measurement: seconds with the first micro-batch "
                            "replaced by the step's median regular micro-batch (3..N, 1-based, "
                            "never a short final one), which the step boundary does not change "
                            "(the seed's 'median of micro-batches 3 to 9'); null unless the "
                            "micro-batches were device-timed and there are 3 or more (4 or more "
                            "with a short final one); in "
                            "BENCH_SUMMARY the mean over the steady steps",
    "fence_s": "one wait on an array the last update produced, timed on an idle device after "
               "the last step: what ending a step on that array costs",
}


def regular_microbatches(microbatch_s: List[float], short_final: bool) -> List[float]:
  """A step's regular micro-batches: 3..N (1-based), or all of them when there are fewer than 3,
  never a short final one (FINAL_ROWS < rows)."""
  values = list(microbatch_s[:-1] if short_final else microbatch_s)
  return values[2:] if len(microbatch_s) >= 3 else values


def boundary_free_estimate(seconds: float, microbatch_s: List[float], device_times: bool,
                           short_final: bool) -> Optional[float]:
  """BENCH_STEP boundary_free_step_s (an estimate, see DEFINITIONS); None when it cannot be
  made."""
  regular = regular_microbatches(microbatch_s, short_final)
  if not device_times or len(microbatch_s) < 3 or not regular:
    return None
  return seconds - microbatch_s[0] + statistics.median(regular)


@dataclasses.dataclass
class BenchPlan:
  """What the step loop runs: payloads, counts, and how to turn time into throughput."""
  name: str
  steps: int
  micro_steps: int
  regular: Any
  final: Any
  tokens_regular: int
  tokens_final: int
  chips: int
  padded_tokens_per_call: int = 0  # rows x tokens_per_row
  profile_window: Optional[Tuple[int, int]] = None
  profile_dir: Optional[str] = None
  stage_boundary: Optional["StagePlan"] = None
  # The actor log-prob pass before each micro-batch (LOGPS_PASS): called with the micro-batch's
  # payload, it returns when the trainer has scored it. None: no pass.
  logps_pass: Optional[Callable[[Any], Any]] = None
  # Whether the final micro-batch has fewer rows than the regular ones (FINAL_ROWS < rows): it
  # is then no regular micro-batch.
  short_final: bool = False
  # A same-pod A/B's run: {"arm": ..., "run": ...} (Settings.arm_fields), first in every
  # BENCH_STEP and in BENCH_SUMMARY; empty for a bench of one arm.
  arm_fields: Dict[str, Any] = dataclasses.field(default_factory=dict)

  @property
  def tokens_per_step(self) -> int:
    return self.tokens_regular * (self.micro_steps - 1) + self.tokens_final

  @property
  def padded_tokens_per_step(self) -> int:
    return self.padded_tokens_per_call * self.micro_steps

  def profiled(self, step: int) -> bool:
    """Whether timed step `step` (0-based) is inside PROFILE_WINDOW."""
    return self.profile_window is not None and 0 <= step - self.profile_window[0] < \
        self.profile_window[1]


@dataclasses.dataclass
class StepRecord:
  step: int
  seconds: float
  microbatch_s: List[float]
  tokens: int
  tokens_per_s_per_chip: float
  fused_update: bool
  microbatch_timing: str = "dispatch"
  microbatch_timing_source: str = SOURCE_DISPATCH
  padded_tokens: int = 0
  real_tokens_per_s_per_chip: float = 0.0
  update: str = UPDATE_EXPLICIT
  staged: bool = False
  profiled: bool = False
  train_step: Optional[int] = None
  metrics: Optional[Dict[str, float]] = None
  logps_pass_s: Optional[List[float]] = None
  # Why the micro-batches were timed the way they were (BENCH_SUMMARY "microbatch_timing_why");
  # not a BENCH_STEP field.
  timing_why: Optional[str] = None
  boundary_free_step_s: Optional[float] = None

  @property
  def replays(self) -> Optional[int]:
    """MoE dropless replays the trainer counted in this step (None: not counted)."""
    return replays_of(self.metrics)

  @property
  def train_step_s(self) -> float:
    return self.seconds - sum(self.logps_pass_s or [])

  def as_json(self) -> Dict[str, Any]:
    record: Dict[str, Any] = {
        "step": self.step,
        "seconds": round(self.seconds, 6),
        "train_step_s": round(self.train_step_s, 6),
        "boundary_free_step_s":
            (None if self.boundary_free_step_s is None else round(self.boundary_free_step_s, 6)),
        "microbatch_s": [round(value, 6) for value in self.microbatch_s],
        "microbatch_timing": self.microbatch_timing,
        "microbatch_timing_source": self.microbatch_timing_source,
        "tokens": self.tokens,
        "padded_tokens": self.padded_tokens,
        "tokens_per_s_per_chip": round(self.tokens_per_s_per_chip, 3),
        "real_tokens_per_s_per_chip": round(self.real_tokens_per_s_per_chip, 3),
        "update": self.update,
        "fused_update": self.fused_update,
        "staged": self.staged,
        "profiled": self.profiled,
        "replays": self.replays,
    }
    if self.logps_pass_s is not None:
      record["logps_pass_s"] = [round(value, 6) for value in self.logps_pass_s]
    if self.train_step is not None:
      record["train_step"] = self.train_step
    if self.metrics:
      record["metrics"] = self.metrics
      dropped, _ = dropped_tokens_of(self.metrics)
      if dropped is not None:
        record["dropped_tokens"] = dropped
    return record


class ProfileWindow:
  """The PROFILE_WINDOW state (in timed steps): the trace starts before the window's first step's
  clock and stops after its last step's end, exactly once."""

  def __init__(self, window: Optional[Tuple[int, int]], log_dir: Optional[str], profiler: Any,
               log: Callable[[str], None]):
    self.window = window
    self.log_dir = log_dir or "/tmp/bench_profile"
    self.profiler = profiler
    self.log = log
    self.started = False
    self.stopped = False

  def is_first(self, step: int) -> bool:
    return self.window is not None and step == self.window[0]

  def is_last(self, step: int) -> bool:
    return self.window is not None and step == self.window[0] + self.window[1] - 1

  def start(self, step: int) -> None:
    if self.started or self.window is None or not self.is_first(step):
      return
    self.log(f"profiler: tracing steps {self.window[0]}..{sum(self.window) - 1} to {self.log_dir}")
    try:
      self.profiler.start(self.log_dir)
    except Exception as exc:  # pylint: disable=broad-except  # no trace, the timings go on
      # The timings are still worth having; say loudly that there is no trace.
      self.log(f"profiler: start failed, no trace: {describe_exception(exc)}")
      self.window = None
      return
    self.started = True

  def step(self, step: int) -> Any:
    """A context that marks `step` (0-based) in the trace while the window is set: the whole
    step, from its first dispatch until its device work is done. A profiler without step
    markers, or no window, marks nothing."""
    mark = getattr(self.profiler, "step", None)
    if self.window is None or mark is None:
      return contextlib.nullcontext()
    return mark(step)

  def stop(self, reason: str = "") -> None:
    if self.started and not self.stopped:
      self.stopped = True
      self.profiler.stop()
      self.log(f"profiler: trace stopped{reason}")


class StageState:
  """Staging while it runs: latched off by the first failed stage, or the first without positive
  evidence that it staged and overlapped the device."""

  def __init__(self, plan: Optional[StagePlan], log: Callable[[str], None]):
    self.plan = plan
    self.active = bool(plan and plan.resolved)
    self.log = log
    self.staged_steps: List[int] = []
    self.latched_off: Optional[str] = None

  def latch_off(self, reason: str) -> None:
    if self.active:
      self.active = False
      self.latched_off = reason
      self.log(f"staged step boundary: off for the rest of the run: {reason}")

  def summary(self) -> Dict[str, Any]:
    return {
        "requested": self.plan.requested if self.plan else "off",
        "resolved": "on" if self.plan and self.plan.resolved else "off",
        "source": self.plan.source if self.plan else "",
        "position":
            ("before_update" if not self.plan or self.plan.before_update else "after_update"),
        "engaged": bool(self.staged_steps),
        "staged_steps": len(self.staged_steps),
        "latched_off": self.latched_off,
    }


def stage_evidence(response: Any, request: Any, busy: Optional[bool]) -> Optional[str]:
  """None when a stage response is positive evidence that the next micro-batch was staged with an
  overlap: it says `staged`, carries the staged request's id (`request_id` or `handle`) to be
  passed back with that request, and an overlap > 0 (the worker's `overlap_s`, else the driver's
  own look: the previous micro-batch still busy on the device when the stage began). Else why
  the step cannot count as staged. A call that merely did not raise proves nothing."""
  staged = find_in(response, "staged")
  if staged is not True:
    reason = find_in(response, "reason")
    if staged is False:
      return "the worker staged nothing" + (f" ({one_line(reason)})" if reason else "")
    return "the worker's stage response does not say it staged (no `staged`: true)"
  sent = getattr(request, "request_id", None)
  handle = find_in(response, "request_id")
  handle = handle if handle is not None else find_in(response, "handle")
  if sent is None or handle != sent:
    return (f"the stage response's request id {handle!r} does not match the staged request's "
            f"{sent!r}: nothing to pass back")
  overlap = find_in(response, "overlap_s")
  if isinstance(overlap, (int, float)) and not isinstance(overlap, bool):
    if overlap > 0:
      return None
    return "the stage measured no overlap with the device (the worker's overlap_s is 0)"
  if busy is None:
    return ("neither the worker (no overlap_s) nor the driver (no completion to check) saw the "
            "stage overlap the device")
  if not busy:
    return ("the stage measured no overlap: the step's last micro-batch was done on the device "
            "before the stage began")
  return None
