"""Tests of how the driver calls a TrainerWorker (calls.py): the call shapes of each Tunix
generation (WorkerCalls) and what a response carries."""

import dataclasses
import types
import unittest
from typing import Any, List

import numpy as np

from fakes import (Events, ExplicitWorker, FakeClock, FusedWorker, LegacyWorker, Request, Response,
                   StagingWorker, Token)
from driver_loader import load_driver

bd = load_driver()


class WorkerCallsTest(unittest.TestCase):

  def test_worker_calls_detects_the_generation(self):
    events, clock = Events(), FakeClock()
    explicit = bd.WorkerCalls(ExplicitWorker(clock, events))
    self.assertTrue(explicit.takes_request)
    # fwd_bwd(request, **kwargs): asked for the fused update until the warm-up step tells.
    self.assertTrue(explicit.can_fuse and explicit.apply_through_kwargs)
    explicit.learn_update(False)
    self.assertFalse(explicit.can_fuse)
    explicit.learn_update(True)  # learnt once
    self.assertFalse(explicit.can_fuse)
    fused = bd.WorkerCalls(FusedWorker(clock, events))
    self.assertTrue(fused.takes_request and fused.can_fuse)
    legacy = bd.WorkerCalls(LegacyWorker(clock, events))
    self.assertFalse(legacy.takes_request)
    self.assertTrue(legacy.can_fuse)
    self.assertEqual(legacy.payload_keyword, "payload")

  def test_the_arguments_each_generation_gets(self):
    events, clock = Events(), FakeClock()
    explicit = ExplicitWorker(clock, events)
    explicit_calls = bd.WorkerCalls(explicit)
    explicit_calls.fwd_bwd("REQ", apply_optimizer=True)
    # Through **kwargs: apply_optimizer (google/tunix#2719) until the warm-up step says it did
    # not apply it; accumulate_gradients never.
    explicit_calls.learn_update(False)
    explicit_calls.fwd_bwd("REQ", apply_optimizer=True)
    self.assertEqual(explicit.fwd_bwd_calls, [("REQ", {"skip_jit": False, "apply_optimizer": True}),
                                              ("REQ", {"skip_jit": False})])
    fused = FusedWorker(clock, events)
    bd.WorkerCalls(fused).fwd_bwd("REQ", apply_optimizer=True)
    self.assertEqual(
        fused.fwd_bwd_calls,
        [("REQ", {"accumulate_gradients": True, "apply_optimizer": True, "skip_jit": False})])
    legacy = LegacyWorker(clock, events)
    bd.WorkerCalls(legacy).fwd_bwd("PAYLOAD", apply_optimizer=False)
    self.assertEqual(
        legacy.fwd_bwd_calls,
        [("PAYLOAD", {"skip_jit": False, "accumulate_gradients": True, "apply_optimizer": False})])

  def test_the_payload_goes_by_the_name_the_worker_gives_it(self):
    received: List[Any] = []

    class BatchWorker:

      def fwd_bwd(self, batch, apply_optimizer=False):
        received.append(("batch", batch, apply_optimizer))

    class PositionalWorker:

      def fwd_bwd(self, data):
        received.append(("positional", data))

    class DeferringWorker:

      def fwd_bwd(self, request, apply_optimizer=False, defer_update=False):
        received.append(("request", request, apply_optimizer, defer_update))

    bd.WorkerCalls(BatchWorker()).fwd_bwd("P", apply_optimizer=True)
    bd.WorkerCalls(PositionalWorker()).fwd_bwd("P", apply_optimizer=True)
    deferring = bd.WorkerCalls(DeferringWorker())
    deferring.fwd_bwd("R", apply_optimizer=True)
    deferring.fwd_bwd("R", apply_optimizer=True, defer_update=True)
    self.assertEqual(received, [("batch", "P", True), ("positional", "P"),
                                ("request", "R", True, False), ("request", "R", True, True)])
    self.assertEqual(bd.WorkerCalls(BatchWorker()).payload_keyword, "batch")
    self.assertIsNone(bd.WorkerCalls(PositionalWorker()).payload_keyword)
    self.assertTrue(deferring.can_defer)

  def test_a_request_for_a_worker_that_takes_one(self):
    events, clock = Events(), FakeClock()
    make = lambda payload: ("request of", payload)
    self.assertEqual(
        bd.WorkerCalls(ExplicitWorker(clock, events), make).request("P"), ("request of", "P"))
    self.assertEqual(bd.WorkerCalls(ExplicitWorker(clock, events)).request("P"), "P")
    self.assertEqual(bd.WorkerCalls(LegacyWorker(clock, events), make).request("P"), "P")

  def test_staging_gaps(self):
    events, clock = Events(), FakeClock()
    stage = "TrainerWorker.stage_fwd_bwd(request)"
    defer = "fwd_bwd(..., defer_update=True)"
    apply = "TrainerWorker.apply_deferred_update()"
    staging = bd.WorkerCalls(StagingWorker(clock, events))
    self.assertEqual(staging.staging_gaps(True), [])
    self.assertEqual(staging.staging_gaps(False), [])
    fused = bd.WorkerCalls(FusedWorker(clock, events))
    self.assertEqual(fused.staging_gaps(True), [stage, defer, apply])
    self.assertEqual(fused.staging_gaps(False), [stage])  # after the update: nothing to defer
    self.assertEqual(bd.WorkerCalls(ExplicitWorker(clock, events)).staging_gaps(True), [stage])
    self.assertEqual(
        bd.WorkerCalls(LegacyWorker(clock, events)).staging_gaps(True), [
            "fwd_bwd(request=...) (staging hands the next step's TrainRequest over)", stage, defer,
            apply
        ])

    class PayloadStager(ExplicitWorker):

      def stage_fwd_bwd(self, payload):
        raise AssertionError("never called")

    self.assertEqual(bd.WorkerCalls(PayloadStager(clock, events)).staging_gaps(True), [stage])

  def test_stage_update_and_apply_deferred_update_reach_the_worker(self):
    events, clock = Events(), FakeClock()
    worker = StagingWorker(clock, events)
    calls = bd.WorkerCalls(worker)
    staged = calls.stage(Request("R"))
    self.assertEqual((staged.metadata, staged.request_id), ({"staged": True}, "train_req_test"))
    worker.deferred = True
    self.assertEqual(calls.apply_deferred_update(), 1)
    self.assertEqual(events.names(), ["stage", "apply_deferred_update"])
    self.assertEqual(bd.WorkerCalls(ExplicitWorker(clock, events)).update(), 1)


class ResponseTest(unittest.TestCase):

  def test_response_updated(self):
    self.assertTrue(bd.response_updated({"updated": True}))
    self.assertTrue(bd.response_updated(Response(updated=True)))
    self.assertTrue(bd.response_updated({"metadata": {"updated": True}}))
    self.assertFalse(bd.response_updated(Response(queued=True)))
    self.assertFalse(bd.response_updated(None))
    self.assertFalse(bd.response_updated(7))

  def test_find_in(self):
    self.assertEqual(bd.find_in({"train_step": 3}, "train_step"), 3)
    self.assertEqual(bd.find_in({"metadata": {"train_step": 4}}, "train_step"), 4)
    self.assertEqual(bd.find_in(Response(train_step=5), "train_step"), 5)
    self.assertEqual(bd.find_in(types.SimpleNamespace(train_step=6), "train_step"), 6)
    # A method of that name is not the value: the metadata is read instead.
    with_method = types.SimpleNamespace(train_step=lambda: 1, metadata={"train_step": 7})
    self.assertEqual(bd.find_in(with_method, "train_step"), 7)
    self.assertIsNone(bd.find_in(Response(), "train_step"))
    self.assertIsNone(bd.find_in({"metadata": "text"}, "train_step"))
    self.assertIsNone(bd.find_in(None, "train_step"))

  def test_find_token(self):
    events, clock = Events(), FakeClock()
    token = Token(clock, events, 1.0, "t")
    self.assertIs(bd.find_token(token), token)
    self.assertIs(bd.find_token({"queued": True, "loss": token}), token)
    self.assertIs(bd.find_token({"aux": {"inner": token}}), token)
    self.assertIs(bd.find_token(types.SimpleNamespace(loss=token)), token)
    self.assertIs(bd.find_token(types.SimpleNamespace(metadata={"token": token})), token)
    self.assertIsNone(bd.find_token(Response(queued=True)))
    self.assertIsNone(bd.find_token(None))
    self.assertIsNone(bd.find_token({"cls": Token}))  # a class is not a result
    self.assertFalse(bd.is_blockable(Token))
    self.assertTrue(bd.is_blockable(token))


class NamedParamsTest(unittest.TestCase):

  def test_named_params(self):

    def function(a, b=1, *args, c, **kwargs):
      del args, kwargs

    params, var_kw = bd.named_params(function)
    self.assertEqual(list(params), ["a", "b", "c"])
    self.assertTrue(var_kw)
    params, var_kw = bd.named_params(lambda x, *rest: None)
    self.assertEqual(list(params), ["x"])
    self.assertFalse(var_kw)
    self.assertEqual(bd.named_params(42), ({}, False))  # no signature


@dataclasses.dataclass
class Result:
  loss: Any
  note: str = "text"


class BlockTreeTest(unittest.TestCase):

  def test_every_leaf_is_waited_on(self):
    events, clock = Events(), FakeClock()
    tokens = {label: Token(clock, events, clock.now + 5.0, label) for label in "abcde"}
    tree = {
        "a": tokens["a"],
        "list": [tokens["b"], ("x", tokens["c"])],
        "result": Result(tokens["d"]),
        "object": types.SimpleNamespace(inner=tokens["e"]),
        "array": np.zeros(3),
    }
    bd.block_tree(tree)
    self.assertEqual(sorted(label for _, label in events.items), list("abcde"))
    self.assertEqual(clock.now, 1005.0)  # waited until the last was ready

  def test_deep_trees_stop_at_depth_six(self):
    events, clock = Events(), FakeClock()
    shallow: Any = Token(clock, events, 1.0, "shallow")
    deep: Any = Token(clock, events, 1.0, "deep")
    for _ in range(6):
      shallow = [shallow]
    for _ in range(7):
      deep = [deep]
    bd.block_tree([shallow[0], deep[0]])  # depths 6 and 7 below the root list
    self.assertEqual(events.items, [("wait", "shallow")])


if __name__ == "__main__":
  unittest.main()
