"""Tests of `--help` (usage.py): how to run the driver, with the environment contract generated
from the settings table."""

import unittest

from driver_loader import load_driver

bd = load_driver()


class HelpTest(unittest.TestCase):

  def test_help_is_intro_contract_and_details(self):
    text = bd.help_text()
    self.assertEqual(text, bd.INTRO + "\n" + bd.contract_help() + "\n" + bd.DETAILS)
    self.assertTrue(text.startswith("rl-trainer-bench driver: times the RL trainer program"))

  def test_every_setting_and_mode_is_named(self):
    text = bd.help_text()
    for row in bd.setting_rows():
      with self.subTest(setting=row.name):
        # A name longer than the column stands on its own line, its meaning below it.
        self.assertRegex(text, rf"\n  {row.name}[ \n]")
    for mode in ("--preflight", "--print-settings", "--dump-payload", "--help"):
      self.assertIn(f"python3 bench_driver.py {mode}", text)
    self.assertIn("Exit codes: 0 success, 2 bad settings, 1 a failure while running.", text)

  def test_lines_fit_the_terminal(self):
    for line in bd.help_text().splitlines():
      self.assertLessEqual(len(line), 100, line)


if __name__ == "__main__":
  unittest.main()
