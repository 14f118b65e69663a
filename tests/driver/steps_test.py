"""Tests of the step loop (steps.py: StepRunner, run_steps) with fake workers, a fake profiler
and a fake clock: which calls a step makes and in what order, how it ends, what it records."""

import unittest
from typing import Any

from fakes import (AsyncWorker, ExplicitWorker, ForwardingWorker, FusedWorker, Harness,
                   KwargsFusedWorker, LegacyWorker, LiarWorker, Request, StagedNothingWorker,
                   StagingWorker, TokenFusedWorker, make_plan, stage_plan)
from doubles import InlineCompletionWatcher
from driver_loader import load_driver

bd = load_driver()


class UpdateTest(unittest.TestCase):

  def test_explicit_update_for_a_worker_without_apply_optimizer(self):
    harness = Harness(ExplicitWorker)
    records = harness.run(make_plan(steps=2, micro_steps=3))
    worker = harness.worker
    self.assertEqual(worker.updates, 2)
    self.assertEqual(len(worker.fwd_bwd_calls), 6)
    # fwd_bwd(request, **kwargs) may take apply_optimizer through them (google/tunix#2719): the
    # warm-up step asks; this worker does not say `updated`, so the later steps do not ask.
    for index, (request, kwargs) in enumerate(worker.fwd_bwd_calls):
      self.assertIsInstance(request, Request)
      if index < 3:
        self.assertEqual(kwargs, {"skip_jit": False, "apply_optimizer": index == 2})
      else:
        self.assertEqual(kwargs, {"skip_jit": False})
    payloads = [request.payload for request, _ in worker.fwd_bwd_calls]
    self.assertEqual(payloads, ["REGULAR", "REGULAR", "FINAL"] * 2)
    names = [name for name in harness.events.names() if name in ("fwd_bwd", "update")]
    self.assertEqual(names, ["fwd_bwd"] * 3 + ["update"] + ["fwd_bwd"] * 3 + ["update"])
    self.assertEqual([record.fused_update for record in records], [False, False])
    self.assertEqual([record.train_step for record in records], [1, 2])

  def test_a_train_step_of_0_is_kept(self):
    # A trainer that counts its steps from 0 reports train_step 0 after the first update.

    class FromZero(ExplicitWorker):

      def update(self) -> Any:
        super().update()
        return {"train_step": self.updates - 1}

    harness = Harness(FromZero)
    records = harness.run(make_plan(steps=2, micro_steps=2))
    self.assertEqual([record.train_step for record in records], [0, 1])
    self.assertEqual([step["train_step"] for step in harness.bench_steps()], [0, 1])

  def test_no_second_update_after_a_fused_one(self):
    harness = Harness(FusedWorker)
    records = harness.run(make_plan(steps=3, micro_steps=4))
    worker = harness.worker
    self.assertEqual(worker.updates, 3)  # one per step, all inside fwd_bwd
    self.assertNotIn("update", harness.events.names())
    flags = [kwargs["apply_optimizer"] for _, kwargs in worker.fwd_bwd_calls]
    self.assertEqual(flags, [False, False, False, True] * 3)
    self.assertTrue(all(kwargs["accumulate_gradients"] for _, kwargs in worker.fwd_bwd_calls))
    self.assertEqual([record.fused_update for record in records], [True] * 3)
    self.assertEqual([record.train_step for record in records], [1, 2, 3])
    self.assertTrue(all(step["fused_update"] for step in harness.bench_steps()))

  def test_legacy_worker_takes_the_payload_and_fuses(self):
    harness = Harness(LegacyWorker)
    records = harness.run(make_plan(steps=2, micro_steps=2))
    self.assertEqual(harness.worker.updates, 2)
    self.assertNotIn("update", harness.events.names())
    payload, kwargs = harness.worker.fwd_bwd_calls[0]
    self.assertEqual(payload, "REGULAR")
    self.assertEqual(kwargs["apply_optimizer"], False)
    self.assertEqual(harness.worker.fwd_bwd_calls[1][1]["apply_optimizer"], True)
    self.assertTrue(all(record.fused_update for record in records))

  def test_a_worker_that_reports_no_update_gets_update(self):
    harness = Harness(LiarWorker)
    records = harness.run(make_plan(steps=2, micro_steps=2))
    self.assertEqual(harness.events.names().count("update"), 2)
    self.assertFalse(any(record.fused_update for record in records))


class UpdatePathTest(unittest.TestCase):
  """Which update path the steps ran (BENCH_SUMMARY update_path), learnt in the warm-up step."""

  def runner(self, harness, plan):
    return bd.StepRunner(harness.worker, plan, clock=harness.clock, profiler=harness.profiler,
                         calls=bd.WorkerCalls(harness.worker, Request), out=harness.lines.append,
                         log=harness.logs.append, watcher=InlineCompletionWatcher(harness.clock),
                         observer=bd.DeviceObserver())

  def test_a_kwargs_worker_that_applies_the_update_fuses(self):
    harness = Harness(KwargsFusedWorker)
    runner = self.runner(harness, make_plan(steps=3, micro_steps=2))
    records = runner.run()
    self.assertEqual([r.update for r in records], ["fused"] * 3)
    self.assertNotIn("update", harness.events.names())  # no second update
    flags = [kwargs.get("apply_optimizer") for _, kwargs in harness.worker.fwd_bwd_calls]
    self.assertEqual(flags, [False, True] * 3)
    path = runner.summary_facts()["update_path"]
    self.assertEqual(path["ran"], "fused")
    self.assertIn("through **kwargs and applied it in the warm-up step", path["why"])

  def test_a_kwargs_worker_that_does_not_apply_it_is_asked_once(self):
    harness = Harness(ExplicitWorker)
    runner = self.runner(harness, make_plan(steps=2, micro_steps=2))
    runner.run()
    path = runner.summary_facts()["update_path"]
    self.assertEqual(path["ran"], "explicit")
    self.assertIn("did not apply it in the warm-up step", path["why"])

  def test_a_worker_that_forwards_apply_optimizer_to_a_rejecting_trainer_fails_in_step_0(self):
    harness = Harness(ForwardingWorker)
    with self.assertRaisesRegex(
        bd.TunixMissing, r"^the worker's fwd_bwd takes \*\*kwargs, so the warm-up step "
        r"asked it for the fused update .*unexpected keyword"):
      harness.run(make_plan(steps=2, micro_steps=2))
    self.assertEqual(len(harness.worker.fwd_bwd_calls), 1)  # the first call of step 0
    self.assertEqual(harness.bench_steps(), [])

  def test_named_and_mixed_paths(self):
    harness = Harness(FusedWorker)
    runner = self.runner(harness, make_plan(steps=2, micro_steps=2))
    runner.run()
    self.assertEqual(
        runner.summary_facts()["update_path"], {
            "ran": "fused", "why": "the worker's fwd_bwd names apply_optimizer and its "
                                   "response said `updated`"
        })
    harness = Harness(StagingWorker, stage_error=RuntimeError("down"))
    state = bd.StageState(stage_plan(True), harness.logs.append)
    runner = bd.StepRunner(harness.worker, make_plan(steps=3, micro_steps=2,
                                                     stage=stage_plan(True)), clock=harness.clock,
                           profiler=harness.profiler, calls=bd.WorkerCalls(harness.worker, Request),
                           out=harness.lines.append, log=harness.logs.append,
                           watcher=InlineCompletionWatcher(harness.clock),
                           observer=bd.DeviceObserver(), stage_state=state)
    runner.run()
    path = runner.summary_facts()["update_path"]
    self.assertEqual(path["ran"], "mixed")
    self.assertTrue(path["why"].startswith("deferred in steps [0]: staging defers"), path["why"])
    self.assertIn("; fused in steps [1, 2]: ", path["why"])


class ProfilerTest(unittest.TestCase):

  def test_window_holds_whole_steps(self):
    harness = Harness(ExplicitWorker)
    records = harness.run(make_plan(steps=4, micro_steps=3, window=(1, 2)))
    self.assertEqual([record.profiled for record in records], [False, True, True, False])
    self.assertEqual(harness.profiler.starts, ["/tmp/trace-dir"])
    self.assertEqual(harness.profiler.stops, 1)
    traced = [item[1] for item in harness.events.items if item[0] == "fwd_bwd" and item[2]]
    self.assertEqual(traced, [3, 4, 5, 6, 7, 8])  # every call of steps 1 and 2
    # The trace opens before step 1's mark and closes after step 2's, its update included.
    names = harness.events.names()
    start, stop = names.index("profiler_start"), names.index("profiler_stop")
    inside = [
        item for item in harness.events.items[start + 1:stop]
        if item[0] in ("step_begin", "update", "step_end")
    ]
    self.assertEqual(inside, [("step_begin", 1), ("update", 2), ("step_end", 1), ("step_begin", 2),
                              ("update", 3), ("step_end", 2)])

  def test_starting_and_stopping_the_trace_is_timed_in_no_step(self):
    harness = Harness(ExplicitWorker)
    harness.profiler.cost_s = 100.0
    records = harness.run(make_plan(steps=4, micro_steps=2, window=(1, 2)))
    self.assertEqual([record.profiled for record in records], [False, True, True, False])
    self.assertEqual(len({record.seconds for record in records}), 1,
                     [record.seconds for record in records])

  def test_each_step_is_marked_from_its_first_dispatch_to_its_end(self):
    harness = Harness(ExplicitWorker)
    harness.run(make_plan(steps=3, micro_steps=2, window=(1, 1)))
    names = harness.events.names()
    marks = [item for item in harness.events.items if item[0] in ("step_begin", "step_end")]
    self.assertEqual(marks, [("step_begin", 0), ("step_end", 0), ("step_begin", 1), ("step_end", 1),
                             ("step_begin", 2), ("step_end", 2)])
    first = names.index("step_begin", names.index("step_end"))
    self.assertEqual(names[first - 1:first + 2], ["profiler_start", "step_begin", "fwd_bwd"])
    self.assertLess(names.index("update", first), names.index("step_end", first))
    self.assertEqual(names[names.index("step_end", first) + 1], "profiler_stop")

  def test_no_window_marks_no_step(self):
    harness = Harness(ExplicitWorker)
    harness.run(make_plan(steps=2, micro_steps=2))
    self.assertNotIn("step_begin", harness.events.names())

  def test_trace_is_stopped_on_an_exception(self):
    harness = Harness(ExplicitWorker, fail_at=4)
    with self.assertRaises(RuntimeError):
      harness.run(make_plan(steps=3, micro_steps=3, window=(0, 3)))
    self.assertEqual(len(harness.profiler.starts), 1)
    self.assertEqual(harness.profiler.stops, 1)

  def test_no_stop_when_the_failure_precedes_the_window(self):
    harness = Harness(ExplicitWorker, fail_at=1)
    with self.assertRaises(RuntimeError):
      harness.run(make_plan(steps=3, micro_steps=3, window=(1, 2)))
    self.assertEqual(harness.profiler.starts, [])
    self.assertEqual(harness.profiler.stops, 0)

  def test_a_profiler_that_cannot_start_leaves_the_run_going(self):
    harness = Harness(ExplicitWorker)
    harness.profiler.fail_start = True
    records = harness.run(make_plan(steps=2, micro_steps=2, window=(0, 2)))
    self.assertEqual(len(records), 2)
    self.assertEqual(harness.profiler.stops, 0)
    self.assertTrue(any("start failed" in line for line in harness.logs))


class TimingTest(unittest.TestCase):

  def test_bench_step_json(self):
    harness = Harness(ExplicitWorker, mb_seconds=2.0, update_seconds=0.5)
    harness.run(make_plan(steps=2, micro_steps=3, chips=4, tokens_regular=100, tokens_final=40))
    steps = harness.bench_steps()
    self.assertEqual([step["step"] for step in steps], [0, 1])  # from 0, as the orchestrator
    for step in steps:
      self.assertTrue({
          "step", "seconds", "microbatch_s", "tokens", "tokens_per_s_per_chip",
          "real_tokens_per_s_per_chip", "padded_tokens", "microbatch_timing",
          "microbatch_timing_source", "update", "staged", "profiled", "fused_update"
      } <= set(step))
      self.assertEqual(step["tokens"], 100 * 2 + 40)
      self.assertEqual(step["padded_tokens"], 128 * 3)
      self.assertAlmostEqual(step["seconds"], 6.5)
      # Without anything to wait on a micro-batch lasts until the next dispatch; the last one
      # until the step's end, update included; and the step says so.
      self.assertEqual(step["microbatch_s"], [2.0, 2.0, 2.5])
      self.assertEqual(step["microbatch_timing"], "dispatch")
      self.assertEqual(step["microbatch_timing_source"], "dispatch")
      # The seed's tokens/s/chip counts padding; the real-token figure stands beside it.
      self.assertAlmostEqual(step["tokens_per_s_per_chip"], round(384 / 6.5 / 4, 3))
      self.assertAlmostEqual(step["real_tokens_per_s_per_chip"], round(240 / 6.5 / 4, 3))
      self.assertEqual(step["update"], "explicit")
      self.assertFalse(step["staged"] or step["profiled"])
      self.assertFalse(step["fused_update"])
      self.assertEqual(step["metrics"], {"loss": 1.5, "gradient_norm": 0.25})
    for line in harness.machine("BENCH_STEP"):
      self.assertTrue(line.startswith("BENCH_STEP {"))
      self.assertNotIn("\n", line)

  def test_device_tokens_give_device_intervals(self):
    harness = Harness(AsyncWorker, device_seconds=3.0, dispatch_seconds=0.1)
    records = harness.run(make_plan(steps=2, micro_steps=4))
    for record in records:
      self.assertEqual(len(record.microbatch_s), 4)
      # The first includes its own dispatch (the device was idle); the rest are back to back.
      self.assertAlmostEqual(record.microbatch_s[0], 3.1, places=6)
      for value in record.microbatch_s[1:]:
        self.assertAlmostEqual(value, 3.0, places=6)
      self.assertEqual(record.microbatch_timing, "device")
      self.assertEqual(record.microbatch_timing_source, "token")
    # step: 0.1 dispatch, 4 x 3 s back to back, then the update's 1 s
    self.assertAlmostEqual(records[0].seconds, 0.1 + 12.0 + 1.0, places=6)
    waits = [item[1] for item in harness.events.items if item[0] == "wait"]
    self.assertEqual(waits[:5], ["mb0", "mb1", "mb2", "mb3", "update1"])

  def test_the_boundary_free_estimate(self):
    # Device times: the first micro-batch (3.1 s, its dispatch included) is replaced by the
    # median of micro-batches 3..4 (3.0 s).
    harness = Harness(AsyncWorker, device_seconds=3.0, dispatch_seconds=0.1)
    records = harness.run(make_plan(steps=2, micro_steps=4))
    for record, step in zip(records, harness.bench_steps()):
      self.assertAlmostEqual(record.boundary_free_step_s, record.seconds - 0.1, places=6)
      self.assertAlmostEqual(step["boundary_free_step_s"], round(record.seconds - 0.1, 6))
    # Dispatch intervals: no estimate.
    harness = Harness(ExplicitWorker)
    harness.run(make_plan(steps=1, micro_steps=4))
    self.assertIsNone(harness.bench_steps()[0]["boundary_free_step_s"])

  def test_step_end_waits_for_the_device(self):
    harness = Harness(AsyncWorker, device_seconds=5.0, dispatch_seconds=0.0)
    records = harness.run(make_plan(steps=1, micro_steps=2))
    self.assertAlmostEqual(records[0].seconds, 11.0, places=6)


class StagedBoundaryTest(unittest.TestCase):

  def test_staging_removes_the_transfer_bubble(self):
    off = Harness(StagingWorker)
    records_off = off.run(make_plan(steps=3, micro_steps=3, stage=stage_plan(False)))
    on = Harness(StagingWorker)
    state = bd.StageState(stage_plan(True), on.logs.append)
    records_on = on.run(make_plan(steps=3, micro_steps=3, stage=stage_plan(True)),
                        stage_state=state)
    # Off: every step starts with a 1 s transfer to an idle device: 1 + 3 x 2 + 0.5.
    self.assertEqual([round(r.seconds, 6) for r in records_off], [7.5] * 3)
    self.assertTrue(all(r.update == "fused" for r in records_off))
    # On: steps 1 and 2 start with a staged micro-batch; the bubble is gone.
    self.assertEqual([round(r.seconds, 6) for r in records_on], [7.5, 6.5, 6.5])
    self.assertEqual([r.staged for r in records_on], [False, True, True])
    self.assertTrue(all(r.update == "deferred" for r in records_on))
    summary = state.summary()
    self.assertEqual(summary["staged_steps"], 2)
    self.assertTrue(summary["engaged"])
    self.assertIsNone(summary["latched_off"])
    # The order the seed's orchestrator uses: last fwd_bwd (deferred), stage, apply the update.
    names = [n for n in on.events.names() if n in ("fwd_bwd", "stage", "apply_deferred_update")]
    self.assertEqual(names[2:5], ["fwd_bwd", "stage", "apply_deferred_update"])
    self.assertEqual(names[-2:], ["fwd_bwd", "apply_deferred_update"])  # no stage after the last
    flags = [kwargs for _, kwargs in on.worker.fwd_bwd_calls]
    self.assertEqual(flags[2], {"apply_optimizer": True, "defer_update": True})
    # Device-mode micro-batch times from the readiness tokens.
    self.assertTrue(all(r.microbatch_timing == "device" for r in records_on))
    self.assertAlmostEqual(records_on[1].microbatch_s[2], 2.0)

  def test_a_failed_stage_latches_staging_off(self):
    harness = Harness(StagingWorker, stage_error=RuntimeError("trainer host\nunreachable"))
    state = bd.StageState(stage_plan(True), harness.logs.append)
    records = harness.run(make_plan(steps=3, micro_steps=2, stage=stage_plan(True)),
                          stage_state=state)
    self.assertEqual(harness.events.names().count("stage"), 1)  # never tried again
    self.assertFalse(any(r.staged for r in records))  # the next micro-batch went whole
    summary = state.summary()
    self.assertFalse(summary["engaged"])
    self.assertIn("stage_fwd_bwd failed: trainer host unreachable", summary["latched_off"])
    self.assertEqual(len([l for l in harness.logs if "off for the rest of the run" in l]), 1)
    # Once off, steps run as before (the fused update).
    self.assertEqual([r.update for r in records], ["deferred", "fused", "fused"])

  def test_a_deferred_warm_up_step_does_not_decide_the_kwargs_update_path(self):
    # A worker that names defer_update and takes apply_optimizer through **kwargs: step 0 defers
    # its update, so it says nothing of whether the worker applies apply_optimizer; the first
    # step that asks (once staging latched off) does.
    class KwargsStagingWorker(StagingWorker):

      def fwd_bwd(  # type: ignore[override]  # the signature is what the driver reads
          self, request: Any, defer_update: bool = False, **kwargs: Any) -> Any:
        return super().fwd_bwd(request, defer_update=defer_update, **kwargs)

    harness = Harness(KwargsStagingWorker, stage_error=RuntimeError("host unreachable"))
    records = harness.run(make_plan(steps=3, micro_steps=2, stage=stage_plan(True)),
                          stage_state=bd.StageState(stage_plan(True), harness.logs.append))
    self.assertEqual([r.update for r in records], ["deferred", "fused", "fused"])

  def test_a_stage_without_overlap_latches_staging_off(self):
    harness = Harness(StagingWorker, mb_seconds=0.0)  # the device is done before the stage
    state = bd.StageState(stage_plan(True), harness.logs.append)
    records = harness.run(make_plan(steps=3, micro_steps=2, stage=stage_plan(True)),
                          stage_state=state)
    # No overlap is no evidence: not counted, and the next micro-batch goes whole.
    self.assertEqual([r.staged for r in records], [False, False, False])
    self.assertIn("no overlap", state.summary()["latched_off"])
    self.assertEqual(state.summary()["staged_steps"], 0)

  def test_a_stage_that_staged_nothing_counts_nothing(self):
    harness = Harness(StagedNothingWorker)
    state = bd.StageState(stage_plan(True), harness.logs.append)
    records = harness.run(make_plan(steps=3, micro_steps=2, stage=stage_plan(True)),
                          stage_state=state)
    self.assertEqual([r.staged for r in records], [False, False, False])
    summary = state.summary()
    self.assertFalse(summary["engaged"])
    self.assertEqual(summary["staged_steps"], 0)
    self.assertEqual(summary["latched_off"], "the worker staged nothing (trainer host busy)")
    # Step 1's first micro-batch went whole, in a request of its own (not the one staged).
    staged_request = harness.worker.fwd_bwd_calls[2][0]
    self.assertIsInstance(staged_request, Request)
    self.assertEqual(harness.events.names().count("stage"), 1)
    self.assertEqual([round(r.seconds, 6) for r in records][1:], [round(records[1].seconds, 6)] * 2)


class StepEndTest(unittest.TestCase):

  def test_a_fused_update_is_part_of_its_step(self):
    # The update the worker dispatches inside the last call takes 4 s on the device; the step
    # ends when it is done, and the next step's first micro-batch does not absorb it.
    harness = Harness(TokenFusedWorker, mb_seconds=1.0, update_seconds=4.0, transfer_seconds=0.0)
    records = harness.run(make_plan(steps=2, micro_steps=2))
    self.assertEqual([r.update for r in records], ["fused", "fused"])
    self.assertEqual([round(r.seconds, 6) for r in records], [6.0, 6.0])
    self.assertEqual([r.microbatch_s for r in records], [[1.0, 1.0], [1.0, 1.0]])
    self.assertIn(("wait", "update1"), harness.events.items)

  def test_without_an_update_token_the_step_ends_at_a_fence(self):

    class NoUpdateToken(TokenFusedWorker):

      def _update(self):
        self.updates += 1
        self._trainer.run(f"update{self.updates}", self.update_seconds)  # no token published

    harness = Harness(NoUpdateToken, mb_seconds=1.0, update_seconds=4.0, transfer_seconds=0.0)
    # Nothing the update produced to wait on: an error, not a wait on every live array.
    with self.assertRaisesRegex(bd.TunixMissing, "^no way to end the step on its update: "):
      harness.run(make_plan(steps=2, micro_steps=2))

  def test_the_step_ends_on_a_leaf_of_the_new_state(self):

    class StateOnly(TokenFusedWorker):
      """No update token: the update's output is the trainer's new state (MaxText's engine)."""

      def _update(self):
        self.updates += 1
        self._trainer._state_pure = {
            "model": {"w": self._trainer.run(f"state{self.updates}", self.update_seconds)}
        }

    harness = Harness(StateOnly, mb_seconds=1.0, update_seconds=4.0, transfer_seconds=0.0)
    runner = bd.StepRunner(harness.worker, make_plan(steps=2, micro_steps=2), clock=harness.clock,
                           profiler=harness.profiler, calls=bd.WorkerCalls(harness.worker, Request),
                           out=harness.lines.append, log=harness.logs.append,
                           watcher=InlineCompletionWatcher(harness.clock),
                           observer=bd.DeviceObserver())
    records = runner.run()
    self.assertEqual([round(r.seconds, 6) for r in records], [6.0, 6.0])
    waits = [item[1] for item in harness.events.items if item[0] == "wait"]
    self.assertEqual(waits.count("state1"), 1)
    self.assertEqual(waits.count("state2"), 2)  # the step end, then fence_s on the idle device
    self.assertEqual(runner.summary_facts()["fence_s"], 0.0)

    # A leaf that the update did not replace is not its output.

    class StaleState(StateOnly):

      def _update(self):
        if self.updates == 0:
          super()._update()
        else:
          self.updates += 1

    with self.assertRaisesRegex(bd.TunixMissing, "no way to end the step"):
      Harness(StaleState, transfer_seconds=0.0).run(make_plan(steps=2, micro_steps=2))

  def test_a_profiled_step_keeps_its_metrics(self):
    harness = Harness(ExplicitWorker)
    records = harness.run(make_plan(steps=3, micro_steps=3, window=(1, 1)))
    self.assertEqual([r.profiled for r in records], [False, True, False])
    steps = harness.bench_steps()
    self.assertEqual([step["profiled"] for step in steps], [False, True, False])
    keys = [sorted(step.get("metrics", {})) for step in steps]
    self.assertEqual(keys, [["gradient_norm", "loss"]] * 3)

  def test_the_trainers_ready_times_come_first(self):

    class Published(StagingWorker):
      stage_fwd_bwd = None  # type: ignore[assignment]  # absent, as on a public Tunix
      apply_deferred_update = None  # type: ignore[assignment]  # absent, likewise

      def fwd_bwd(self, request, accumulate_gradients=False, apply_optimizer=False, skip_jit=False):
        response = super().fwd_bwd(request, accumulate_gradients, False, skip_jit)
        token = self._trainer.last_fwd_bwd_token
        assert token is not None  # StagingWorker.fwd_bwd publishes one
        self.ready = getattr(self, "ready", []) + [token.ready_at]
        self._trainer.last_fwd_bwd_token = None  # readiness only through get_step_timing
        return response

      def update(self):
        self.updates += 1
        self._trainer._state_pure = {"w": self._trainer.run("update", self.update_seconds)}
        return self.updates

      def get_step_timing(self):
        self.clock.advance(0.1)
        now = self.clock.now
        record = {
            "v": 1, "train_step": self.updates, "update": None, "prepare": None, "mb": [
                {"i": i, "ready_ago_s": round(now - ready, 3)} for i, ready in enumerate(self.ready)
            ]
        }
        self.ready = []
        self.clock.advance(0.1)
        return record

    harness = Harness(Published, mb_seconds=2.0, transfer_seconds=0.0)
    records = harness.run(make_plan(steps=2, micro_steps=3))
    for record in records:
      self.assertEqual(record.microbatch_timing, "device")
      self.assertEqual(record.microbatch_timing_source, "step_timing")
      for value in record.microbatch_s:
        self.assertAlmostEqual(value, 2.0, places=6)


class LogpsPassTest(unittest.TestCase):

  def test_the_pass_runs_before_each_micro_batch_inside_the_step(self):
    harness = Harness(ExplicitWorker, mb_seconds=2.0, update_seconds=0.5)
    scored = []

    def score(payload):
      scored.append(payload)
      harness.events.add("logps", payload)
      harness.clock.advance(0.25)

    plan = make_plan(steps=2, micro_steps=3)
    plan.logps_pass = score
    records = harness.run(plan)
    self.assertEqual(scored, ["REGULAR", "REGULAR", "FINAL"] * 2)
    names = [n for n in harness.events.names() if n in ("logps", "fwd_bwd")]
    self.assertEqual(names, ["logps", "fwd_bwd"] * 6)
    for record in records:
      self.assertEqual(record.logps_pass_s, [0.25] * 3)
      self.assertAlmostEqual(record.seconds, 6.5 + 0.75)
    self.assertEqual(harness.bench_steps()[0]["logps_pass_s"], [0.25] * 3)
    self.assertNotIn("logps_pass_s", Harness(ExplicitWorker).run(make_plan())[0].as_json())
    # train_step_s: the step without its passes; the bare step when there are none.
    self.assertEqual([step["train_step_s"] for step in harness.bench_steps()], [6.5, 6.5])
    self.assertEqual(Harness(ExplicitWorker).run(make_plan())[0].as_json()["train_step_s"], 6.5)


if __name__ == "__main__":
  unittest.main()
