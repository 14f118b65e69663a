"""Tests of the entry point (main.py): the mode the arguments ask for and the exit code of each
outcome."""

import importlib.util
import os
import subprocess
import sys
import unittest

from settings_env import base_env, ORCH_ARGV
from driver_loader import driver_path


class MainTest(unittest.TestCase):
  """The driver run as the pod runs it: python3 bench_driver.py with the environment."""

  def run_driver(self, env, *args):
    full_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    full_env.update(env)
    return subprocess.run([sys.executable, driver_path(), *args],
                          env=full_env,
                          capture_output=True,
                          text=True,
                          timeout=60)

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


if __name__ == "__main__":
  unittest.main()
