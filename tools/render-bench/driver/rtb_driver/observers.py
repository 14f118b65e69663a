"""Watching the device: for each call, something that becomes ready when its device work is
done (DeviceObserver), and a thread that notes when it does without holding up dispatch
(CompletionWatcher)."""

from __future__ import annotations

import dataclasses
import threading
import time
from itertools import islice
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from .calls import blockable_leaves, block_tree, find_token, is_blockable

# Where a call's device completion comes from (BENCH_STEP "microbatch_timing_source").
SOURCE_STEP_TIMING = "step_timing"  # the trainer's TRAINER_STEP_TIMING ready times

SOURCE_TOKEN = "token"  # a readiness token (trainer or response)

SOURCE_LOSS = "loss"  # the call's own loss array in the trainer's metric buffer

SOURCE_DISPATCH = "dispatch"  # none: host dispatch intervals

# MaxText's one-late engine (retry_when_tokens_dropped, maxtext_engine.py@b8bf66d6): the pending
# micro-batch whose overflow flag is read after the next dispatch; its `loss` is that call's.
PENDING_CHECK = "_pending_overflow_check"

# Where a trainer keeps its train state, most direct first: MaxText's engine's pure-pytree mirrors
# of the state and the parameters, then the NNX train state (maxtext_engine.py@b8bf66d6).
STATE_ATTRIBUTES = ("_state_pure", "_params_pure", "_state")
# How many of the state's leaves the step end looks through for one the update replaced.
FRESH_LEAVES = 8


def trainer_of(worker: Any) -> Any:
  return getattr(worker, "_trainer", None)


def engines_of(worker: Any) -> List[Any]:
  """The trainer and what it wraps (Tunix's MaxText adapter keeps the engine as `engine` /
  `_engine`), outermost first."""
  found: List[Any] = []
  current = trainer_of(worker)
  while current is not None and len(found) < 4 and all(current is not seen for seen in found):
    found.append(current)
    current = next((getattr(current, name)
                    for name in ("_engine", "engine")
                    if getattr(current, name, None) is not None), None)
  return found


class DeviceObserver:
  """Finds, for each call, something that becomes ready when the call's device work is done.

  In order: a blockable array in the call's response, or the trainer's fresh readiness token
  (`last_fwd_bwd_token` / `last_update_token`, which Tunix's StepTimer reads); else the loss
  that the call's own kernel produced, which MaxText's engine keeps in `_cached_losses` (its
  fwd_bwd returns None at dispatch). Reading that list never changes it. The trainer's own
  ready times (get_step_timing) outrank all of these; the step loop prefers them when a step's
  record has every one.

  The step ends on an array the update produced: its readiness token (the update's result or
  the trainer's `last_update_token`), else a leaf of the trainer's new state
  (fresh_state_leaf).
  """

  def __init__(self) -> None:
    # The last token / loss entry seen, held (not only its id) so that a freed array's id can
    # never make a new one look stale.
    self._seen: Dict[str, Any] = {}
    self._seen_loss: Any = None
    # Why the newest call without a completion had none, and whether a completion came from the
    # one-late engine's pending overflow check (both for BENCH_SUMMARY "microbatch_timing_why").
    self.missing = "no call has been observed"
    self.one_late = False

  def _fresh_trainer_token(self, worker: Any, name: str) -> Any:
    for trainer in engines_of(worker):
      token = getattr(trainer, name, None)
      if not is_blockable(token):
        continue
      if self._seen.get(name) is token:
        return None  # stale: the same array as after the previous call
      self._seen[name] = token
      return token
    return None

  def _fresh_loss(self, worker: Any) -> Any:
    # MaxText's engine appends each fwd_bwd's loss (a WeightedMetric of device arrays, an
    # output of that call's kernel) to `_cached_losses` and clears the list in update()
    # (AI-Hypercomputer/maxtext src/maxtext/training_engine/maxtext_engine.py@e591f30c). Under
    # retry_when_tokens_dropped (@b8bf66d6) the call's loss waits in `_pending_overflow_check`
    # (its `loss` field) until the next call or update() reads the overflow flag; only then does
    # it reach `_cached_losses`, one call late. The pending check is this call's; the list's
    # newest entry is the previous call's.
    for trainer in engines_of(worker):
      pending = getattr(trainer, PENDING_CHECK, None)
      if pending is not None and hasattr(pending, "loss"):
        if self._seen_loss is pending:
          self.missing = (f"the engine's {PENDING_CHECK} was the previous call's after this "
                          "call")
          return None
        self._seen_loss = pending
        if not _has_blockable(pending.loss):
          self.missing = f"the loss in the engine's {PENDING_CHECK} holds no device array"
          return None
        self.one_late = True
        return pending.loss
      losses = getattr(trainer, "_cached_losses", None)
      if not isinstance(losses, list):
        continue
      if not losses:
        self.missing = "the engine's _cached_losses was empty after the call"
        return None
      newest = losses[-1]
      if self._seen_loss is newest:
        self.missing = "the call added no loss to the engine's _cached_losses"
        return None  # the call added nothing: not this call's result
      self._seen_loss = newest
      if not _has_blockable(newest):
        self.missing = "the engine's newest loss holds no device array"
        return None
      return newest
    self.missing = ("the trainer offers none: no readiness token, no ready times "
                    "(get_step_timing) and no loss list (_cached_losses) on the trainer or its "
                    "engine")
    return None

  def completion(self, worker: Any, response: Any, kind: str) -> Tuple[Any, str]:
    """(waitable, source) for a call just dispatched; (None, "dispatch") when nothing fits."""
    token = find_token(response)
    if token is not None:
      return token, SOURCE_TOKEN
    name = "last_update_token" if kind == "update" else "last_fwd_bwd_token"
    token = self._fresh_trainer_token(worker, name)
    if token is not None:
      return token, SOURCE_TOKEN
    if kind == "fwd_bwd":
      loss = self._fresh_loss(worker)
      if loss is not None:
        return loss, SOURCE_LOSS
    return None, SOURCE_DISPATCH

  def timing_why(self, source: str) -> str:
    """Why a step's micro-batches were timed from `source` (BENCH_SUMMARY
    "microbatch_timing_why")."""
    if source == SOURCE_STEP_TIMING:
      return "device times from the trainer's own ready times (get_step_timing)"
    if source == SOURCE_TOKEN:
      return "device times from each call's readiness token"
    if source == SOURCE_LOSS and self.one_late:
      return (f"device times from each call's own loss, read from the engine's {PENDING_CHECK}: "
              "under retry_when_tokens_dropped the engine records a micro-batch's loss only "
              "when the next one is dispatched (and clears the list in update()); a replayed "
              "micro-batch's dropless rerun runs after the next call's kernel, so its time "
              "counts in the micro-batch after next (in the step's end when there is none)")
    if source == SOURCE_LOSS:
      return "device times from each call's own loss in the engine's _cached_losses"
    return (f"host dispatch intervals: a call had nothing to wait on ({self.missing}); they lag "
            "the device by up to max_inflight_computations calls")

  def fresh_state_leaf(self, worker: Any) -> Any:
    """A leaf of the trainer's state that the last update produced, or None.

    MaxText's engine rebinds its state from the update kernel's output (`nnx.update(self._state,
    new_state_pure)`, then `_publish_state`; maxtext_engine.py@b8bf66d6 `update`), and every
    output of one executable becomes ready together: that leaf is ready when the update is done.
    A leaf that is the same array as after the previous step was not produced by this update
    (an rng key or a frozen variable the update leaves alone): the first of the state's first
    FRESH_LEAVES leaves that was not among them after the previous step is taken. Only their ids
    are kept, so no old array stays alive for this."""
    for trainer in engines_of(worker):
      for name in STATE_ATTRIBUTES:
        leaves = list(islice(blockable_leaves(getattr(trainer, name, None)), FRESH_LEAVES))
        if not leaves:
          continue
        before = self._seen.get("state") or ()
        self._seen["state"] = tuple(id(leaf) for leaf in leaves)
        return next((leaf for leaf in leaves if id(leaf) not in before), None)
    return None


def _has_blockable(tree: Any) -> bool:
  """Whether a loss record holds a device array (directly or as a dataclass / mapping field)."""
  if is_blockable(tree):
    return True
  if dataclasses.is_dataclass(tree) and not isinstance(tree, type):
    return any(is_blockable(getattr(tree, field.name, None)) for field in dataclasses.fields(tree))
  if isinstance(tree, Mapping):
    return any(is_blockable(value) for value in tree.values())
  return False


class CompletionWatcher:
  """Records when each watched call's device work completes, without holding up dispatch.

  A daemon thread waits on the calls' waitables in order and notes the clock as each becomes
  ready, as Tunix's StepTimer does with its "step-timer-ready" thread; the step loop never blocks
  between dispatches, so MaxText's own throttle (max_inflight_computations) alone decides how
  far the host runs ahead, as in the e2e run. A call whose waitable was handed over after it was
  already ready gets the hand-over time: an upper bound, reached only when the device was
  waiting for the host anyway.
  """

  def __init__(self, clock: Callable[[], float] = time.monotonic):
    self.clock = clock
    self._lock = threading.Lock()
    self._pending: List[Tuple[Any, Any, threading.Event]] = []
    self._wake = threading.Condition(self._lock)
    self._times: Dict[Any, float] = {}
    self._errors: Dict[Any, BaseException] = {}
    self._done: Dict[Any, threading.Event] = {}
    self._thread = threading.Thread(target=self._run, name="bench-completion", daemon=True)
    self._thread.start()

  def watch(self, key: Any, waitable: Any) -> None:
    with self._lock:
      done = threading.Event()
      self._done[key] = done
      self._pending.append((key, waitable, done))
      self._wake.notify()

  def settle(self) -> None:
    """Nothing to do: the thread observes completions as they happen."""

  def _run(self) -> None:
    while True:
      with self._lock:
        while not self._pending:
          self._wake.wait()
        key, waitable, done = self._pending.pop(0)
      try:
        block_tree(waitable)
        when = self.clock()
        with self._lock:
          if self._done.get(key) is done:  # not forgotten meanwhile
            self._times[key] = when
      except BaseException as exc:  # pylint: disable=broad-except  # handed to the step loop
        with self._lock:
          if self._done.get(key) is done:
            self._errors[key] = exc
      done.set()  # its own event: a key forgotten meanwhile has none in _done

  def is_done(self, key: Any) -> bool:
    event = self._done.get(key)
    return event is not None and event.is_set()

  def wait(self, key: Any) -> Optional[float]:
    """Blocks until `key` completed; its completion time (None if it was never watched)."""
    event = self._done.get(key)
    if event is None:
      return None
    event.wait()
    with self._lock:
      if key in self._errors:
        raise self._errors.pop(key)
      return self._times.get(key)

  def drain(self, keys: Sequence[Any]) -> Dict[Any, float]:
    return {key: when for key in keys if (when := self.wait(key)) is not None}

  def forget(self, keys: Sequence[Any]) -> None:
    """Drops what is known of `keys`; one still queued is not waited on, one being waited on
    completes unnoted."""
    with self._lock:
      forgotten = set(keys)
      self._pending = [entry for entry in self._pending if entry[0] not in forgotten]
      for key in keys:
        self._times.pop(key, None)
        self._errors.pop(key, None)
        self._done.pop(key, None)
