"""Tests of watching the device (observers.py): DeviceObserver's choice of what to wait on for
each call, its fence, and CompletionWatcher."""

import dataclasses
import threading
import time
import types
import unittest
from typing import Any, Optional

from fakes import Events, FakeClock, Response, Token
from driver_loader import load_driver

bd = load_driver()


class DeviceObserverTest(unittest.TestCase):

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

  def test_the_update_token_is_the_updates_only(self):
    events, clock = Events(), FakeClock()
    trainer = types.SimpleNamespace(last_fwd_bwd_token=Token(clock, events, 1.0, "mb"),
                                    last_update_token=None)
    worker = types.SimpleNamespace(_trainer=trainer)
    observer = bd.DeviceObserver()
    self.assertEqual(observer.completion(worker, None, "update"), (None, "dispatch"))
    trainer.last_update_token = Token(clock, events, 2.0, "update")
    self.assertEqual(observer.completion(worker, None, "update"),
                     (trainer.last_update_token, "token"))
    self.assertFalse(observer.can_fence())
    self.assertTrue(bd.DeviceObserver(block_all=lambda: None).can_fence())

  def test_engines_of(self):
    self.assertEqual(bd.engines_of(object()), [])
    engine = types.SimpleNamespace(engine=None)
    trainer = types.SimpleNamespace(_engine=engine)
    self.assertEqual(bd.engines_of(types.SimpleNamespace(_trainer=trainer)), [trainer, engine])
    looped = types.SimpleNamespace()
    looped.engine = looped
    self.assertEqual(bd.engines_of(types.SimpleNamespace(_trainer=looped)), [looped])
    chain: Any = types.SimpleNamespace()
    for _ in range(6):
      chain = types.SimpleNamespace(_engine=chain)
    self.assertEqual(len(bd.engines_of(types.SimpleNamespace(_trainer=chain))), 4)

  def test_the_engines_loss_is_read_through_the_wrapper(self):
    events, clock = Events(), FakeClock()
    loss = {"unreduced_sum": Token(clock, events, 1.0, "sum"), "denominator": 2.0}
    engine = types.SimpleNamespace(_cached_losses=[loss])
    worker = types.SimpleNamespace(_trainer=types.SimpleNamespace(_engine=engine))
    self.assertEqual(bd.DeviceObserver().completion(worker, None, "fwd_bwd"), (loss, "loss"))
    # A loss record without a device array is nothing to wait on.
    engine._cached_losses.append({"unreduced_sum": 1.0, "denominator": 2.0})
    self.assertEqual(bd.DeviceObserver().completion(worker, None, "fwd_bwd"), (None, "dispatch"))


class Gate:
  """A waitable that becomes ready when the test releases it (or fails then, with `error`)."""

  def __init__(self, error: Optional[BaseException] = None) -> None:
    self.event = threading.Event()
    self.error = error

  def block_until_ready(self) -> "Gate":
    if not self.event.wait(10):
      raise TimeoutError("the test never released this gate")
    if self.error is not None:
      raise self.error
    return self


class CountingClock:
  """A clock that reads 1, 2, 3, ... : the watcher's n-th completion time is n."""

  def __init__(self) -> None:
    self.lock = threading.Lock()
    self.reads = 0

  def __call__(self) -> float:
    with self.lock:
      self.reads += 1
      return float(self.reads)


class CompletionWatcherTest(unittest.TestCase):
  """The pod's watcher: a thread that notes when each call's device work completes."""

  def test_completion_times_in_order_without_holding_up_dispatch(self):
    watcher = bd.CompletionWatcher(CountingClock())
    first, second = Gate(), Gate()
    watcher.watch("first", first)
    watcher.watch("second", second)  # returns although nothing is ready yet
    watcher.settle()
    self.assertFalse(watcher.is_done("first"))
    second.event.set()  # ready first, but the thread waits in watch order
    self.assertFalse(watcher.is_done("first"))
    first.event.set()
    self.assertEqual(watcher.wait("first"), 1.0)
    self.assertEqual(watcher.drain(["first", "second", "unwatched"]), {"first": 1.0, "second": 2.0})
    self.assertTrue(watcher.is_done("second"))
    self.assertIsNone(watcher.wait("unwatched"))
    self.assertFalse(watcher.is_done("unwatched"))

  def test_forget(self):
    watcher = bd.CompletionWatcher(CountingClock())
    gate = Gate()
    gate.event.set()
    watcher.watch("k", gate)
    self.assertEqual(watcher.wait("k"), 1.0)
    watcher.forget(["k"])
    self.assertFalse(watcher.is_done("k"))
    self.assertIsNone(watcher.wait("k"))
    self.assertEqual(watcher.drain(["k"]), {})

  def test_forgetting_a_key_still_waited_on_keeps_the_thread(self):
    # The thread is blocked on `pending` when the step loop forgets it; once it is ready the
    # thread must go on to the next key (a forgotten key's completion is dropped, not a
    # KeyError that ends the thread).
    watcher = bd.CompletionWatcher(CountingClock())
    pending, queued, later = Gate(), Gate(), Gate()
    watcher.watch("pending", pending)
    watcher.watch("queued", queued)
    watcher.forget(["pending", "queued"])
    pending.event.set()
    queued.event.set()
    later.event.set()
    watcher.watch("later", later)
    deadline = time.monotonic() + 10
    while not watcher.is_done("later") and time.monotonic() < deadline:
      time.sleep(0.01)
    self.assertTrue(watcher.is_done("later"), "the watcher thread stopped")
    self.assertIsNotNone(watcher.wait("later"))
    self.assertFalse(watcher.is_done("pending"))
    self.assertIsNone(watcher.wait("pending"))

  def test_a_failed_wait_is_raised_to_the_step_loop(self):
    watcher = bd.CompletionWatcher(CountingClock())
    failing, after = Gate(RuntimeError("device lost")), Gate()
    watcher.watch("failing", failing)
    watcher.watch("after", after)
    failing.event.set()
    after.event.set()
    with self.assertRaisesRegex(RuntimeError, "^device lost$"):
      watcher.wait("failing")
    self.assertEqual(watcher.wait("after"), 1.0)  # the thread goes on


if __name__ == "__main__":
  unittest.main()
