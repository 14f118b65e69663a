"""Tests of the entry point (main.py): the mode the arguments ask for and the exit code of each
outcome."""

import contextlib
import importlib.util
import io
import json
import os
import signal
import subprocess
import sys
import time
import unittest
from typing import Dict, List, Optional, Tuple

import fake_tunix
from settings_env import base_env, ORCH_ARGV
from driver_loader import driver_path, load_driver

bd = load_driver()


class MainTest(unittest.TestCase):
  """The driver run as the pod runs it: python3 bench_driver.py with the environment."""

  def run_driver(self, env, *args):
    full_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    full_env.update(env)
    return subprocess.run([sys.executable, driver_path(), *args], env=full_env, capture_output=True,
                          text=True, timeout=60)

  def test_bad_setting_exits_2_with_one_line(self):
    result = self.run_driver(base_env(STEPS="0"))
    self.assertEqual(result.returncode, 2)
    self.assertEqual(result.stdout, "")
    self.assertEqual(result.stderr, "bench_driver: STEPS='0': must be >= 1\n")

  def test_missing_argv_exits_2(self):
    result = self.run_driver({"ORCH_ARGV": ORCH_ARGV})
    self.assertEqual(result.returncode, 2)
    self.assertEqual(len(result.stderr.splitlines()), 1)
    self.assertIn("TRAINER_ARGV is not set", result.stderr)

  def test_unexpected_arguments_exit_2(self):
    result = self.run_driver(base_env(), "--steps=3")
    self.assertEqual(result.returncode, 2)
    self.assertIn("unexpected arguments", result.stderr)

  def test_help(self):
    result = self.run_driver({}, "--help")
    self.assertEqual(result.returncode, 0)
    for name in ("TRAINER_ARGV", "ORCH_ARGV", "STEPS", "MICRO_STEPS", "ROUTING_TARGETS",
                 "PROFILE_WINDOW", "BENCH_SUMMARY", "TRAINER_STEP_TIMING", "--dump-payload"):
      self.assertIn(name, result.stdout)

  @unittest.skipIf(importlib.util.find_spec("tunix") is not None, "Tunix is installed here")
  def test_without_tunix_exits_1_naming_the_module(self):
    result = self.run_driver(base_env(BENCH_NAME="b1", ROUTING_TARGETS="2"))
    self.assertEqual(result.returncode, 1, result.stderr)
    self.assertTrue(result.stdout.startswith("[TrainerBench] b1: bench driver starting"),
                    result.stdout)
    lines = result.stderr.splitlines()
    self.assertEqual(len(lines), 1, result.stderr)
    self.assertIn("cannot import tunix.experimental.examples.common.run_trainer_node", lines[0])

  def test_short_help_and_print_settings(self):
    result = self.run_driver({}, "-h")
    self.assertEqual(result.returncode, 0)
    self.assertEqual(result.stdout, self.run_driver({}, "--help").stdout)
    result = self.run_driver(base_env(STEPS="3", PROFILE_WINDOW="1:2"), "--print-settings")
    self.assertEqual(result.returncode, 0, result.stderr)
    printed = json.loads(result.stdout)
    self.assertEqual((printed["STEPS"], printed["PROFILE_WINDOW"]), (3, "1:2"))
    self.assertEqual(printed["ORCH_ARGV"][1], "--batch_size=16")
    result = self.run_driver(base_env(ROUTING="sometimes"), "--print-settings")
    self.assertEqual(result.returncode, 2)
    self.assertEqual(result.stdout, "")
    self.assertEqual(result.stderr, "bench_driver: ROUTING='sometimes': must be one of "
                     "auto|on|off\n")

  def test_preflight_takes_no_other_argument(self):
    result = self.run_driver(base_env(), "--preflight", "--steps=3")
    self.assertEqual(result.returncode, 2)
    self.assertEqual(
        result.stderr, "bench_driver: unexpected arguments --preflight --steps=3 (settings come "
        "from the environment; see --help)\n")


class InProcessTest(unittest.TestCase):
  """main() called with its arguments and environment, as the tests can without a process."""

  def main(self, argv: List[str], env: Optional[Dict[str, str]] = None) -> Tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
      code = bd.main(argv, {} if env is None else env)
    return code, out.getvalue(), err.getvalue()

  def test_help(self):
    self.assertEqual(self.main(["--help"]), (0, bd.help_text() + "\n", ""))
    self.assertEqual(self.main(["-h"]), (0, bd.help_text() + "\n", ""))

  def test_print_settings_reads_the_given_environment(self):
    code, out, err = self.main(["--print-settings"], base_env(SEED="-4", LOGP_GATES="off"))
    self.assertEqual((code, err), (0, ""))
    self.assertEqual(out, bd.print_settings(base_env(SEED="-4", LOGP_GATES="off")) + "\n")
    self.assertEqual(json.loads(out)["SEED"], -4)

  def test_bad_settings_and_arguments_exit_2_with_one_line(self):
    self.assertEqual(self.main([], {}), (2, "", "bench_driver: TRAINER_ARGV is not set (the "
                                         "trainer argv as a shell-quoted string)\n"))
    self.assertEqual(self.main(["--print-settings"], base_env(STEPS="0")),
                     (2, "", "bench_driver: STEPS='0': must be >= 1\n"))
    self.assertEqual(self.main(["--help", "--x"], base_env()),
                     (2, "", "bench_driver: unexpected arguments --help --x (settings come from "
                      "the environment; see --help)\n"))
    code, out, err = self.main(["--dump-payload", "/nonexistent/x.npz", "--rows", "1"])
    self.assertEqual((code, out), (2, ""))
    self.assertTrue(err.startswith("bench_driver: the following arguments are required: "), err)

  def test_sigterm_unwinds(self):
    with self.assertRaises(SystemExit) as caught:
      bd._terminate(signal.SIGTERM, None)  # pylint: disable=protected-access  # the handler itself
    self.assertEqual(caught.exception.code, 128 + signal.SIGTERM)


class SigtermTest(fake_tunix.FakeTunixTestCase):
  """SIGTERM (a JobSet being deleted) ends a run that is timing steps: exit 143, and an open
  trace is stopped on the way out."""

  def test_sigterm_during_a_step_stops_the_trace(self):
    worker_path = "tunix/experimental/worker/trainer_worker.py"
    dispatched = ("                            jax_platforms=os.environ.get(\"JAX_PLATFORMS\"))\n"
                  "            return datatypes.Response(queued=True)\n")
    self.assertIn(dispatched, fake_tunix.FAKES[worker_path])
    slow = fake_tunix.FAKES[worker_path].replace(
        dispatched,
        dispatched.replace("            return", "            __import__(\"time\").sleep(60)\n"
                           "            return"))
    root = self.variant(replace={worker_path: slow})
    env = self.driver_env(root, PROFILE_WINDOW="0:2",
                          TRAINER_ARGV=fake_tunix.TRAINER_ARGV_UNPROFILED)
    process = subprocess.Popen([fake_tunix.PYTHON, driver_path()], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    self.addCleanup(process.wait)
    self.addCleanup(process.kill)
    deadline = time.monotonic() + 60
    while not any(call["event"] == "fwd_bwd" for call in self.logged_calls(root)):
      self.assertIsNone(process.poll(), "the driver ended before its first fwd_bwd")
      self.assertLess(time.monotonic(), deadline, "no fwd_bwd within 60 s")
      time.sleep(0.05)
    process.send_signal(signal.SIGTERM)
    stdout, stderr = process.communicate(timeout=60)
    self.assertEqual(process.returncode, 128 + signal.SIGTERM, stdout + stderr)
    events = [call["event"] for call in self.logged_calls(root)]
    self.assertEqual(events.count("start_trace"), 1)
    self.assertEqual(events.count("stop_trace"), 1)
    self.assertIn("[TrainerBench] profiler: trace stopped after a failure", stdout)
    self.assertNotIn("BENCH_STEP", stdout)


if __name__ == "__main__":
  unittest.main()
