"""Tests of watching the device (observers.py): DeviceObserver's choice of what to wait on for
each call, its fence, and CompletionWatcher."""

import dataclasses
import unittest
from typing import Any

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


if __name__ == "__main__":
  unittest.main()
