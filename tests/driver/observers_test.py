"""Tests of watching the device (observers.py): DeviceObserver's choice of what to wait on for
each call, its fence, and CompletionWatcher."""

import dataclasses
import threading
import time
import types
import unittest
from typing import Any, Optional

from fakes import (Events, FakeClock, Harness, make_plan, OneLateLossWorker, PendingOverflowCheck,
                   Response, Token)
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


class FreshStateLeafTest(unittest.TestCase):
  """The step ends on a leaf of the trainer's state that the update replaced."""

  def test_a_leaf_the_update_leaves_alone_is_passed_over(self):
    events, clock = Events(), FakeClock()
    rng = Token(clock, events, 0.0, "rng")  # the same array after every update
    engine = types.SimpleNamespace(_state_pure=None, _params_pure=None)
    worker = types.SimpleNamespace(_trainer=engine)
    observer = bd.DeviceObserver()
    first = Token(clock, events, 1.0, "w1")
    engine._state = {"rng": rng, "model": {"w": first}}
    self.assertIs(observer.fresh_state_leaf(worker), rng)  # nothing seen before: the first
    second = Token(clock, events, 2.0, "w2")
    engine._state = {"rng": rng, "model": {"w": second}}
    self.assertIs(observer.fresh_state_leaf(worker), second)
    # An update that replaced nothing gives nothing to end the step on.
    self.assertIsNone(observer.fresh_state_leaf(worker))


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


class OneLateLossEngineTest(unittest.TestCase):
  """MaxText's engine under retry_when_tokens_dropped (maxtext_engine.py@b8bf66d6) holds each
  call's loss in `_pending_overflow_check` until the next call: the call's completion is that
  pending loss, never the list's newest entry (the previous call's)."""

  def test_the_pending_checks_loss_is_the_calls_completion(self):
    events, clock = Events(), FakeClock()
    engine = types.SimpleNamespace(_cached_losses=[], _pending_overflow_check=None)
    worker = types.SimpleNamespace(_trainer=types.SimpleNamespace(_engine=engine))
    observer = bd.DeviceObserver()
    first = PendingOverflowCheck(False, Token(clock, events, 1.0, "mb0"), 0)
    engine._pending_overflow_check = first
    self.assertEqual(observer.completion(worker, None, "fwd_bwd"), (first.loss, "loss"))
    # The next call settled the first (its loss joins the list) and parked its own.
    engine._cached_losses.append(first.loss)
    second = PendingOverflowCheck(True, Token(clock, events, 2.0, "mb1"), 1)
    engine._pending_overflow_check = second
    self.assertEqual(observer.completion(worker, None, "fwd_bwd"), (second.loss, "loss"))
    # A call that parked nothing new has no completion of its own.
    self.assertEqual(observer.completion(worker, None, "fwd_bwd"), (None, "dispatch"))
    self.assertIn("_pending_overflow_check was the previous call's", observer.missing)
    self.assertIn("_pending_overflow_check", observer.timing_why("loss"))
    self.assertIn("retry_when_tokens_dropped", observer.timing_why("loss"))

  def test_without_a_pending_check_the_list_is_read_as_before(self):
    # b8bf66d6 without the replay: the attribute exists and stays None; losses go to the list.
    events, clock = Events(), FakeClock()
    loss = Token(clock, events, 1.0, "mb0")
    engine = types.SimpleNamespace(_cached_losses=[loss], _pending_overflow_check=None)
    observer = bd.DeviceObserver()
    worker = types.SimpleNamespace(_trainer=engine)
    self.assertEqual(observer.completion(worker, None, "fwd_bwd"), (loss, "loss"))
    self.assertEqual(observer.timing_why("loss"),
                     "device times from each call's own loss in the engine's _cached_losses")

  def test_dispatch_timing_names_its_reason(self):
    observer = bd.DeviceObserver()
    worker = types.SimpleNamespace(_trainer=types.SimpleNamespace(_cached_losses=[]))
    self.assertEqual(observer.completion(worker, None, "fwd_bwd"), (None, "dispatch"))
    why = observer.timing_why("dispatch")
    self.assertIn("_cached_losses was empty after the call", why)
    self.assertNotIn("throttle", why)
    observer.completion(types.SimpleNamespace(), None, "fwd_bwd")
    self.assertIn("the trainer offers none", observer.timing_why("dispatch"))
    self.assertIn("get_step_timing", observer.timing_why("step_timing"))
    self.assertIn("readiness token", observer.timing_why("token"))

  def test_every_step_is_device_timed_on_the_one_late_engine(self):
    # Four calls a step, 2 s each back to back on the device after 0.1 s dispatches; call 1 of
    # step 0 overflows: its 3 s dropless rerun runs after call 2's kernel, inside call 3's time.
    harness = Harness(OneLateLossWorker, overflow_at={1})
    plan = make_plan(steps=2, micro_steps=4)
    records = harness.run(plan)
    for record in records:
      self.assertEqual((record.microbatch_timing, record.microbatch_timing_source),
                       ("device", "loss"), record)
      self.assertIn("_pending_overflow_check", record.timing_why)
    self.assertEqual([round(value, 6) for value in records[0].microbatch_s], [2.1, 2.0, 2.0, 5.0])
    self.assertEqual([round(value, 6) for value in records[1].microbatch_s], [2.1, 2.0, 2.0, 2.0])
    self.assertEqual([step["replays"] for step in harness.bench_steps()], [1, 0])
    self.assertEqual(harness.events.items.count(("rerun", 1)), 1)

  def test_the_last_calls_rerun_lands_in_the_steps_end(self):
    harness = Harness(OneLateLossWorker, overflow_at={2})
    (record,) = harness.run(make_plan(steps=1, micro_steps=3))
    self.assertEqual([round(value, 6) for value in record.microbatch_s], [2.1, 2.0, 2.0])
    # 0.1 s dispatch, three 2 s kernels, the 3 s rerun update() starts, then the 0.5 s update.
    self.assertAlmostEqual(record.seconds, 0.1 + 6.0 + 3.0 + 0.5)
    self.assertEqual(record.replays, 1)


if __name__ == "__main__":
  unittest.main()
