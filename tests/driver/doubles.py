"""Test doubles shared by the bench driver's tests.

They stand in for what the pod has and a test must not (threads that wait on device arrays, the
real clock) so that a test can run the driver's own code on a fake clock. They are test code: they
never ship in the pod, and render-bench does not embed this file.
"""

import dataclasses
from typing import Any, Callable, Dict, List, Optional, Sequence

from driver_loader import load_driver

driver = load_driver()


class InlineCompletionWatcher:
  """The driver's CompletionWatcher for single-threaded tests on a fake clock.

  The pod's watcher waits on each call's waitable in a thread and notes the clock as each becomes
  ready. This one waits inline, always in the order the calls were watched: a call's waitable is
  waited on once the next call has been dispatched (settle), or when the step loop asks for it
  (wait, drain). Its completion time is the fake clock after that wait, which the fake device has
  moved to when the work is done.
  """

  def __init__(self, clock: Callable[[], float]) -> None:
    self.clock = clock
    self._order: List[Any] = []
    self._waitables: Dict[Any, Any] = {}
    self._times: Dict[Any, float] = {}

  def watch(self, key: Any, waitable: Any) -> None:
    self._order.append(key)
    self._waitables[key] = waitable

  def _resolve_through(self, index: int) -> None:
    for key in self._order[:index + 1]:
      if key not in self._times:
        driver.block_tree(self._waitables[key])
        self._times[key] = self.clock()

  def settle(self) -> None:
    """Waits for every watched call but the newest (the one just dispatched)."""
    self._resolve_through(len(self._order) - 2)

  def is_done(self, key: Any) -> bool:
    return key in self._times

  def wait(self, key: Any) -> Optional[float]:
    """The completion time of `key`, waiting for it and every call before it; None if unwatched."""
    if key not in self._waitables:
      return None
    self._resolve_through(self._order.index(key))
    return self._times[key]

  def drain(self, keys: Sequence[Any]) -> Dict[Any, float]:
    return {key: when for key in keys if (when := self.wait(key)) is not None}

  def forget(self, keys: Sequence[Any]) -> None:
    for key in keys:
      if key in self._waitables:
        self._order.remove(key)
        self._waitables.pop(key)
        self._times.pop(key, None)


@dataclasses.dataclass
class WeightedMetric:
  """MaxText's and Tunix's WeightedMetric: a metric's unreduced sum and its denominator."""
  unreduced_sum: Any
  denominator: Any


@dataclasses.dataclass
class MetricsBuffer:
  """MaxText's MetricsBuffer: per-micro-batch entries and their aggregation functions."""
  id: Any
  weighted_metrics: Dict[str, Any] = dataclasses.field(default_factory=dict)
  scalar_metrics: Dict[str, Any] = dataclasses.field(default_factory=dict)
  aggregation_fns: Dict[str, Any] = dataclasses.field(default_factory=dict)
