"""Tests of how the driver calls a TrainerWorker (calls.py): the call shapes of each Tunix
generation (WorkerCalls) and what a response carries."""

import unittest

from fakes import Events, ExplicitWorker, FakeClock, FusedWorker, LegacyWorker, Response
from driver_loader import load_driver

bd = load_driver()


class WorkerCallsTest(unittest.TestCase):

  def test_worker_calls_detects_the_generation(self):
    events, clock = Events(), FakeClock()
    explicit = bd.WorkerCalls(ExplicitWorker(clock, events))
    self.assertTrue(explicit.takes_request)
    self.assertFalse(explicit.can_fuse)
    fused = bd.WorkerCalls(FusedWorker(clock, events))
    self.assertTrue(fused.takes_request and fused.can_fuse)
    legacy = bd.WorkerCalls(LegacyWorker(clock, events))
    self.assertFalse(legacy.takes_request)
    self.assertTrue(legacy.can_fuse)
    self.assertEqual(legacy.payload_keyword, "payload")


class ResponseTest(unittest.TestCase):

  def test_response_updated(self):
    self.assertTrue(bd.response_updated({"updated": True}))
    self.assertTrue(bd.response_updated(Response(updated=True)))
    self.assertTrue(bd.response_updated({"metadata": {"updated": True}}))
    self.assertFalse(bd.response_updated(Response(queued=True)))
    self.assertFalse(bd.response_updated(None))
    self.assertFalse(bd.response_updated(7))


if __name__ == "__main__":
  unittest.main()
