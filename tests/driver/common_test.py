"""Tests of what every module of the driver shares (common.py): its line writers, one-line
messages and the errors behind exit codes 2 and 1."""

import contextlib
import io
import unittest

from driver_loader import load_driver

bd = load_driver()


class OneLineTest(unittest.TestCase):

  def test_one_line_joins_every_run_of_whitespace(self):
    self.assertEqual(bd.one_line("a\n  b\tc\r\n"), "a b c")
    self.assertEqual(bd.one_line("  "), "")
    self.assertEqual(bd.one_line(12), "12")
    self.assertEqual(bd.one_line(ValueError("bad\nvalue")), "bad value")

  def test_describe_exception(self):
    self.assertEqual(bd.describe_exception(RuntimeError("device\n lost")), "device lost")
    # An exception without a message is named by its type.
    self.assertEqual(bd.describe_exception(RuntimeError()), "RuntimeError")
    self.assertEqual(bd.describe_exception(TimeoutError(" ")), "TimeoutError")
    self.assertEqual(bd.describe_exception(KeyError("k")), "'k'")
    self.assertEqual(bd.describe_exception(bd.TunixMissing("x")), "x")


class IntOrNoneTest(unittest.TestCase):

  def test_int_or_none(self):
    self.assertEqual(bd.int_or_none(3), 3)
    self.assertEqual(bd.int_or_none("7"), 7)
    self.assertEqual(bd.int_or_none(2.9), 2)
    self.assertIsNone(bd.int_or_none(None))
    self.assertIsNone(bd.int_or_none(True))  # a flag is not a count
    self.assertIsNone(bd.int_or_none("seven"))
    self.assertIsNone(bd.int_or_none(object()))


class LinesTest(unittest.TestCase):

  def test_say_tags_human_lines_and_emit_writes_machine_lines_as_they_are(self):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
      bd.say("compile call returned")
      bd.emit("BENCH_STEP {}")
    self.assertEqual(out.getvalue(), "[TrainerBench] compile call returned\nBENCH_STEP {}\n")


class ErrorsTest(unittest.TestCase):

  def test_the_two_errors_are_told_apart(self):
    # main() maps SettingsError to exit 2 and TunixMissing to exit 1; neither may catch the other.
    self.assertFalse(issubclass(bd.SettingsError, bd.TunixMissing))
    self.assertFalse(issubclass(bd.TunixMissing, bd.SettingsError))
    self.assertTrue(issubclass(bd.TunixMissing, RuntimeError))


if __name__ == "__main__":
  unittest.main()
