"""Tests of `bench_driver.py --preflight` (preflight.py): the pod's set-up checked on CPU, one
line per check, against the stand-ins of fake_tunix.py; no trainer is built. The checklist's
lines and exit codes are also checked in-process."""

import subprocess
import unittest
from typing import Any, Dict, List, Optional, Tuple

import fake_tunix
from fake_tunix import FAKES
from driver_loader import load_driver

bd = load_driver()


class PreflightTest(fake_tunix.FakeTunixTestCase):
  """The preflight's check lines and exit codes (0 all good, 1 a problem, 2 bad settings)."""

  def preflight(
      self, root: Optional[str] = None, **settings: str
  ) -> Tuple["subprocess.CompletedProcess[str]", List[Dict[str, Any]], Dict[str, str]]:
    """Runs `--preflight` on CPU: (the process, the stand-ins' calls, check name -> its status
    word, ok, FAIL or skip)."""
    result, calls = self.run_driver(root=root, args=["--preflight"], JAX_PLATFORMS="cpu",
                                    **settings)
    lines = [line for line in result.stdout.splitlines() if line.startswith("preflight: ")]
    status = {}
    for line in lines:
      parts = line[len("preflight: "):].split(None, 1)
      if parts[0] in ("ok", "FAIL", "skip") and ":" in parts[1]:
        status[parts[1].split(":", 1)[0]] = parts[0]
    return result, calls, status

  def test_preflight_all_good(self):
    result, calls, status = self.preflight(LOGP_GATES="off")
    self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
    self.assertEqual(set(status.values()), {"ok"}, status)
    for item in ("trainer module", "TRAINER_ARGV", "MaxText", "TrainerWorker", "datatypes",
                 "orchestrator module", "ORCH_ARGV", "GRPO config", "tokenizer",
                 "batch configuration", "warm-up payload", "payload", "staged step boundary",
                 "jax"):
      self.assertIn(item, status)
    self.assertIn("seq_logprob_error_threshold=2.0 turned off", result.stdout)
    self.assertTrue(result.stdout.rstrip().endswith("preflight: all good (exit 0)"))
    # No trainer was built, no JAX initialized, nothing timed: no weights load.
    events = [call["event"] for call in calls]
    for event in ("trainer", "worker", "jax_initialize", "compile", "fwd_bwd"):
      self.assertNotIn(event, events)

  def test_preflight_finds_a_missing_module(self):
    root = self.variant(remove=["tunix/experimental/orchestrator/batch_assembly.py"])
    result, _, status = self.preflight(root=root)
    self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
    self.assertEqual(status["batch configuration"], "FAIL")
    self.assertIn("cannot import tunix.experimental.orchestrator.batch_assembly", result.stdout)
    self.assertEqual(status["warm-up payload"], "skip")  # needs the assembler
    self.assertEqual(status["GRPO config"], "ok")  # the rest is still checked
    self.assertEqual(status["TrainerWorker"], "ok")

  def test_preflight_finds_maxtext_missing(self):
    root = self.variant(remove=["maxtext"])  # the package, not only its __init__
    result, _, status = self.preflight(root=root)
    self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
    self.assertEqual(status["MaxText"], "FAIL")
    self.assertIn("cannot import maxtext", result.stdout)

  def test_preflight_finds_a_changed_signature(self):
    assembly = FAKES["tunix/experimental/orchestrator/batch_assembly.py"].replace(
        "class BatchConfig:\n          pad_id: int = 0",
        "class BatchConfig:\n          token_policy: str\n          pad_id: int = 0")
    root = self.variant(replace={"tunix/experimental/orchestrator/batch_assembly.py": assembly})
    result, _, status = self.preflight(root=root)
    self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
    self.assertEqual(status["batch configuration"], "FAIL")
    line = next(line for line in result.stdout.splitlines() if "FAIL  batch configuration" in line)
    self.assertIn("'token_policy'", line)
    self.assertIn("batch_assembly.py", line)

  def test_preflight_finds_a_gate_that_cannot_be_turned_off(self):
    orchestrator = FAKES["tunix/experimental/examples/deepswe_dist/run_deepswe_dist.py"].replace(
        "          sampler_is_threshold: float = 2.0\n",
        "          sampler_is_threshold: float = 2.0\n"
        "          @property\n"
        "          def tis_mode(self):\n"
        "            return 'token'  # derived: nothing can set it\n")
    self.assertNotEqual(orchestrator,
                        FAKES["tunix/experimental/examples/deepswe_dist/run_deepswe_dist.py"])
    root = self.variant(
        replace={"tunix/experimental/examples/deepswe_dist/run_deepswe_dist.py": orchestrator})
    result, _, status = self.preflight(root=root, LOGP_GATES="off")
    self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
    self.assertEqual(status["GRPO config"], "FAIL")
    self.assertIn("cannot turn off tis_mode='token'", result.stdout)
    # The pod run stops there too, before timing anything.
    result, calls = self.run_driver(root=root, LOGP_GATES="off")
    self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
    self.assertNotIn("fwd_bwd", [call["event"] for call in calls])

  def test_preflight_bad_settings_exit_2(self):
    result, _, status = self.preflight(STAGE_BOUNDARY="on")
    self.assertEqual(result.returncode, 2, result.stdout + result.stderr)
    self.assertEqual(status["staged step boundary"], "FAIL")
    result, _, _ = self.preflight(STEPS="0")
    self.assertEqual(result.returncode, 2)
    self.assertIn("STEPS", result.stderr)


class ChecklistTest(unittest.TestCase):
  """The preflight's checklist, in-process: one line per check, and the exit code."""

  def test_lines_and_exit_codes(self):
    lines: List[str] = []
    checks = bd.Checklist(lines.append)

    def bad_setting() -> str:
      raise bd.SettingsError("STEPS='0':\nmust be >= 1")

    def missing() -> str:
      raise bd.TunixMissing("")

    self.assertTrue(checks.check("jax", lambda: "jax 0.7:\n 8 devices"))
    self.assertEqual(checks.exit_code(), 0)
    self.assertFalse(checks.check("tokenizer", missing, needs=["jax"]))
    self.assertEqual(checks.exit_code(), 1)
    self.assertFalse(checks.check("batch configuration", lambda: "x", needs=["jax", "tokenizer"]))
    self.assertFalse(checks.check("settings", bad_setting))
    self.assertEqual(checks.exit_code(), 2)  # bad settings outrank a failed check
    self.assertEqual(lines, [
        "preflight: ok    jax: jax 0.7: 8 devices",
        "preflight: FAIL  tokenizer: TunixMissing",
        "preflight: skip  batch configuration: needs tokenizer",
        "preflight: FAIL  settings: STEPS='0': must be >= 1",
    ])
    self.assertEqual(checks.failed, ["tokenizer", "settings"])  # a skipped check is no failure
    self.assertEqual(checks.passed, {"jax"})

  def test_preflight_experts_reach_every_target(self):
    self.assertEqual(bd.preflight_experts(None), 16)
    self.assertEqual(bd.preflight_experts([1.0, 3.5]), 16)
    self.assertEqual(bd.preflight_experts([9.0]), 36)
    self.assertEqual(bd.preflight_experts([12.5]), 52)  # the highest target rounded up
    for targets in ([1.0], [4.0, 2.0], [9.0], [12.5]):
      with self.subTest(targets=targets):
        # max/mean <= experts / top-k: the small payload can reach every target.
        self.assertGreaterEqual(bd.preflight_experts(targets) / bd.PREFLIGHT_TOPK, max(targets))


if __name__ == "__main__":
  unittest.main()
