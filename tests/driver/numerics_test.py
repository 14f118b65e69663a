"""Tests of `bench_driver.py --preflight --numerics` (numerics.py): one fwd_bwd and one update on
CPU through the (fake) image's worker and engine, built for a miniature model, checking that the
numerics knobs do what they claim; against fake_tunix.py's stand-ins with NUMERICS_WORKER, a
NumPy engine that computes its gradient from the payload."""

import subprocess
import textwrap
import types
import unittest
from typing import Any, Dict, List, Optional, Tuple

import fake_tunix
from fake_tunix import FAKES, NUMERICS_WORKER
from driver_loader import load_driver

bd = load_driver()

WORKER_PATH = "tunix/experimental/worker/trainer_worker.py"


class NumericsPreflightTest(fake_tunix.FakeTunixTestCase):
  """The numerics checks' lines and exit codes (0 all good, 1 a knob that does not do what it
  claims, 2 bad settings)."""

  def numerics(
      self, exit_code: int, **settings: str
  ) -> Tuple["subprocess.CompletedProcess[str]", List[Dict[str, Any]], Dict[str, str]]:
    """Runs `--preflight --numerics` on the numerics stand-in, which must exit with `exit_code`:
    (the process, the stand-ins' calls, check name -> ok, FAIL or skip)."""
    root = self.variant(replace={
        WORKER_PATH: textwrap.dedent(FAKES[WORKER_PATH]) + textwrap.dedent(NUMERICS_WORKER)
    })
    result, calls = self.run_driver(worker="numerics", root=root,
                                    args=["--preflight",
                                          "--numerics"], JAX_PLATFORMS="cpu", **settings)
    status = {}
    for line in result.stdout.splitlines():
      if not line.startswith("preflight: "):
        continue
      parts = line[len("preflight: "):].split(None, 1)
      if parts[0] in ("ok", "FAIL", "skip") and ":" in parts[1]:
        status[parts[1].split(":", 1)[0]] = parts[0]
    self.assertEqual(result.returncode, exit_code, result.stdout + result.stderr)
    return result, calls, status

  def check_fails(self, bug: str, check: str,
                  why: str) -> Tuple["subprocess.CompletedProcess[str]", Dict[str, str]]:
    """Asserts that with the numerics engine's `bug`, `check` fails saying `why` (exit 1):
    (the process, check name -> status)."""
    result, _, status = self.numerics(1, LOGP_GATES="off", FAKE_NUMERICS_BUG=bug)
    self.assertEqual(status[check], "FAIL")
    self.assertIn(why, self.line(result, check))
    return result, status

  def line(self, result: "subprocess.CompletedProcess[str]", name: str) -> str:
    return next(line for line in result.stdout.splitlines() if f" {name}:" in line)

  def test_the_knobs_do_what_they_claim(self):
    result, calls, status = self.numerics(0, LOGP_GATES="off")
    self.assertEqual(set(status.values()), {"ok"}, status)
    for name in ("miniature trainer", "ADVANTAGES=random step", "LOGP_GATES=off masks nothing",
                 "ADVANTAGES=random gives a gradient", "ADVANTAGES=zero step",
                 "ADVANTAGES=zero gives no policy gradient"):
      self.assertIn(name, status)
    self.assertTrue(result.stdout.rstrip().endswith("preflight: numerics: all good (exit 0)"))
    # The miniature model reached the engine through MAXTEXT_EXTRA_FLAGS, on one device.
    (engine,) = [call for call in calls if call["event"] == "numerics_engine"]
    self.assertIn("base_num_decoder_layers=2", engine["flags"])
    self.assertIn("num_experts=4", engine["flags"])
    self.assertIn("--mesh_fsdp 2 -> 1", self.line(result, "miniature trainer"))
    # One fwd_bwd and one update per advantage setting, random first.
    events = [call for call in calls if call["event"] in ("fwd_bwd", "update")]
    self.assertEqual([call["event"] for call in events], ["fwd_bwd", "update"] * 2)
    self.assertGreater(events[0]["advantages"], 0)
    self.assertEqual(events[2]["advantages"], 0)
    self.assertFalse(events[0]["kwargs"].get("apply_optimizer"))  # no update inside the call
    self.assertIn("the loss counted all", self.line(result, "LOGP_GATES=off masks nothing"))
    self.assertIn("the engine's accumulated gradients",
                  self.line(result, "ADVANTAGES=random gives a gradient"))

  def test_a_mask_the_gates_do_not_lift_fails(self):
    result, status = self.check_fails("mask", "LOGP_GATES=off masks nothing",
                                      "LOGP_GATES=off still masks tokens")
    self.assertEqual(status["ADVANTAGES=random gives a gradient"], "ok")
    self.assertTrue(result.stdout.rstrip().endswith("(exit 1)"))

  def test_a_loss_blind_to_zero_advantages_fails(self):
    self.check_fails("advantages", "ADVANTAGES=zero gives no policy gradient",
                     "the loss does not scale with the advantages")

  def test_an_engine_that_shows_nothing_is_not_all_good(self):
    result, _, status = self.numerics(1, LOGP_GATES="off", FAKE_NUMERICS_BUG="opaque")
    self.assertEqual(status["ADVANTAGES=random gives a gradient"], "skip")
    self.assertEqual(status["nothing measured"], "FAIL")
    self.assertIn("numerics: 1 problem(s): nothing measured (exit 1)", result.stdout)

  def test_gates_on_is_a_skip_not_a_failure(self):
    result, _, status = self.numerics(0)  # LOGP_GATES=on: the e2e's gates stay, and mask
    self.assertEqual(status["LOGP_GATES=off masks nothing"], "skip")
    self.assertIn("LOGP_GATES=on: the gates may mask tokens by design",
                  self.line(result, "LOGP_GATES=off masks nothing"))

  def test_the_flags_can_be_replaced_and_are_checked(self):
    result, calls, _ = self.numerics(
        0, LOGP_GATES="off", NUMERICS_MAXTEXT_FLAGS="base_num_decoder_layers=1 num_experts=8")
    (engine,) = [call for call in calls if call["event"] == "numerics_engine"]
    self.assertEqual(engine["flags"], "base_num_decoder_layers=1 num_experts=8")
    line = self.run_stopped(2, worker="numerics", args=["--preflight", "--numerics"],
                            NUMERICS_MAXTEXT_FLAGS="num_experts=4 oops")
    self.assertIn("NUMERICS_MAXTEXT_FLAGS: 'oops' is not a MaxText KEY=VALUE item", line)

  def test_numerics_alone_is_not_a_mode(self):
    line = self.run_stopped(2, args=["--numerics"])
    self.assertIn("unexpected arguments --numerics", line)


class NumericsChecksTest(unittest.TestCase):
  """The checks on measured values, in-process."""

  def measured(self, norm: Optional[float], denominator: Optional[float] = 10.0) -> Dict[str, Any]:
    return {
        "completion_tokens": 10.0, "denominator": denominator, "norm": norm,
        "norm_source": "the engine's accumulated gradients"
    }

  def test_mask(self):
    settings = types.SimpleNamespace(logp_gates=False)
    self.assertIn("all 10", bd.check_mask(settings, self.measured(1.0)))
    with self.assertRaisesRegex(AssertionError, "counted 9 tokens of the completion mask's 10"):
      bd.check_mask(settings, self.measured(1.0, denominator=9.0))
    with self.assertRaises(bd.NotApplicable):
      bd.check_mask(settings, self.measured(1.0, denominator=None))
    with self.assertRaises(bd.NotApplicable):
      bd.check_mask(types.SimpleNamespace(logp_gates=True), self.measured(1.0))

  def test_gradients(self):
    self.assertIn("> 0", bd.check_random(self.measured(0.5)))
    for bad in (0.0, float("nan"), float("inf")):
      with self.subTest(norm=bad), self.assertRaisesRegex(AssertionError, "trains nothing"):
        bd.check_random(self.measured(bad))
    with self.assertRaises(bd.NotApplicable):
      bd.check_random(self.measured(None))
    setup = types.SimpleNamespace(algo_config=types.SimpleNamespace(beta=0.0))
    self.assertIn("with zero advantages",
                  bd.check_zero(setup, self.measured(2.0), self.measured(1e-7)))
    with self.assertRaisesRegex(AssertionError, "does not scale"):
      bd.check_zero(setup, self.measured(2.0), self.measured(1e-3))
    kl = types.SimpleNamespace(algo_config=types.SimpleNamespace(beta=0.04))
    with self.assertRaisesRegex(bd.NotApplicable, "beta 0.04"):
      bd.check_zero(kl, self.measured(2.0), self.measured(1.0))

  def test_what_is_read_from_the_engine(self):
    engine = types.SimpleNamespace(_accumulated_grads={"a": [[3.0], [0.0]], "b": (4.0,)},
                                   _accumulated_denominator=7.0)
    worker = types.SimpleNamespace(_trainer=engine)
    self.assertEqual(bd.accumulated_gradient_norm(worker), 5.0)
    self.assertEqual(bd.loss_denominator(worker), 7.0)
    # e591f30c: no accumulated denominator; the call's loss carries one.
    loss = types.SimpleNamespace(denominator=6.0)
    older = types.SimpleNamespace(_cached_losses=[loss], _pending_overflow_check=None)
    self.assertEqual(bd.loss_denominator(types.SimpleNamespace(_trainer=older)), 6.0)
    pending = types.SimpleNamespace(
        _cached_losses=[loss],
        _pending_overflow_check=types.SimpleNamespace(loss=types.SimpleNamespace(denominator=5.0)))
    self.assertEqual(bd.loss_denominator(types.SimpleNamespace(_trainer=pending)), 5.0)
    self.assertIsNone(bd.accumulated_gradient_norm(types.SimpleNamespace(_trainer=older)))

  def test_a_pending_overflow_check_is_settled_before_the_sums_are_read(self):
    settled: List[str] = []

    class Engine:
      _pending_overflow_check: Any = object()

      def _resolve_overflow_check(self) -> None:
        settled.append("settled")
        self._pending_overflow_check = None

    engine = Engine()
    bd.settle_overflow_check(types.SimpleNamespace(_trainer=engine))
    self.assertEqual(settled, ["settled"])
    bd.settle_overflow_check(types.SimpleNamespace(_trainer=engine))  # nothing pending
    self.assertEqual(settled, ["settled"])


if __name__ == "__main__":
  unittest.main()
