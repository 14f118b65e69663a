"""Tests of the parsers of setting values and argv flags (values.py)."""

import os
import tempfile
import unittest

from settings_env import base_env, settings_error
from driver_loader import load_driver

bd = load_driver()


class RoutingTableTest(unittest.TestCase):

  def test_forms(self):
    self.assertEqual(bd.parse_routing_table("1.5,2,3", "t"), [1.5, 2.0, 3.0])
    self.assertEqual(bd.parse_routing_table("# header comment\n1.5\n\n2 # two\n3\n", "t"),
                     [1.5, 2.0, 3.0])
    self.assertEqual(bd.parse_routing_table("layer,max_over_mean\n2,3\n0,1.5\n1,2\n", "t"),
                     [1.5, 2.0, 3.0])
    self.assertEqual(bd.parse_routing_table("0,1.25\n", "t"), [1.25])

  def test_errors_name_the_line(self):
    for text, fragment in [
        ("0,1.5\n2,2\n", "layer 1 is missing"),
        ("0,1.5\n0,2\n", "t:2: layer 0 given twice"),
        ("1.5\n0,2\n", "mixes"),
        ("1,2,3\n4,5,6\n", "multi-line"),
        ("1.5\nabc\n", "t:2: 'abc' is not a number"),
        ("x,1.5\ny,2\n", "not a layer index"),
        ("# nothing\n", "empty"),
        ("1.5\n0.5\n", "t:2: routing target '0.5' is below 1"),
    ]:
      with self.subTest(text=text):
        self.assertIn(fragment, settings_error(self, bd.parse_routing_table, text, "t"))

  def test_file_reference(self):
    with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as handle:
      handle.write("layer,max_over_mean\n0,3.9452\n1,5.8123\n")
    try:
      settings = bd.parse_settings(base_env(ROUTING_TARGETS="@" + handle.name))
      self.assertEqual(settings.routing_targets, [3.9452, 5.8123])
    finally:
      os.unlink(handle.name)
    self.assertIn(
        "cannot read /nonexistent/table.csv",
        settings_error(self, bd.parse_settings,
                       base_env(ROUTING_TARGETS="@/nonexistent/table.csv")))


class NumberTest(unittest.TestCase):

  def test_parse_int(self):
    self.assertEqual(bd.parse_int("N", " 12 "), 12)
    self.assertEqual(bd.parse_int("N", "-3"), -3)  # no minimum: any integer
    self.assertEqual(bd.parse_int("N", "1", 1), 1)  # the minimum itself is allowed
    self.assertEqual(settings_error(self, bd.parse_int, "N", "1.5"), "N='1.5': not an integer")
    self.assertEqual(settings_error(self, bd.parse_int, "N", "0x10"), "N='0x10': not an integer")
    self.assertEqual(settings_error(self, bd.parse_int, "N", "0", 1), "N='0': must be >= 1")

  def test_parse_float(self):
    self.assertEqual(bd.parse_float("X", " 2.5 "), 2.5)
    self.assertEqual(bd.parse_float("X", "1e-3", 0.0), 0.001)
    self.assertEqual(settings_error(self, bd.parse_float, "X", "abc"), "X='abc': not a number")
    for text in ("nan", "inf", "-inf"):
      with self.subTest(text=text):
        self.assertEqual(settings_error(self, bd.parse_float, "X", text),
                         f"X={text!r}: must be finite")
    self.assertEqual(settings_error(self, bd.parse_float, "X", "0.25", 0.5),
                     "X='0.25': must be >= 0.5")

  def test_parse_pad_align(self):
    self.assertEqual(bd.parse_pad_align("A", "128"), 128)
    self.assertEqual(bd.parse_pad_align("A", "64"), 64)
    self.assertEqual(settings_error(self, bd.parse_pad_align, "A", "100"),
                     "A='100': must be a multiple of the segment alignment 64")
    self.assertEqual(settings_error(self, bd.parse_pad_align, "A", "0"), "A='0': must be >= 1")


class WordsTest(unittest.TestCase):

  def test_parse_choice_is_case_and_space_blind(self):
    self.assertEqual(bd.parse_choice("P", " Start ", ("end", "start")), "start")
    self.assertEqual(settings_error(self, bd.parse_choice, "P", "middle", ("end", "start")),
                     "P='middle': must be one of end|start")

  def test_parse_bool_word(self):
    for word in ("1", "true", "yes", "on", "t", "y", " TRUE ", "Yes"):
      with self.subTest(word=word):
        self.assertIs(bd.parse_bool_word("B", word), True)
    for word in ("0", "false", "no", "off", "f", "n", "", "  ", "OFF"):
      with self.subTest(word=word):
        self.assertIs(bd.parse_bool_word("B", word), False)
    self.assertEqual(settings_error(self, bd.parse_bool_word, "B", "maybe"),
                     "B='maybe': not a boolean (true/false, 1/0, yes/no, on/off)")

  def test_parse_window(self):
    self.assertEqual(bd.parse_window("W", "10:4"), (10, 4))
    self.assertEqual(bd.parse_window("W", " 0 : 1 "), (0, 1))
    for text, message in [
        ("10", "W='10': expected START:COUNT (timed steps, 0-based start)"),
        ("a:b", "W='a:b': expected START:COUNT (timed steps, 0-based start)"),
        ("1:2:3", "W='1:2:3': expected START:COUNT (timed steps, 0-based start)"),
        ("-1:2", "W='-1:2': START must be >= 0"),
        ("3:0", "W='3:0': COUNT must be >= 1"),
    ]:
      with self.subTest(text=text):
        self.assertEqual(settings_error(self, bd.parse_window, "W", text), message)

  def test_parse_argv_words(self):
    self.assertEqual(bd.parse_argv_words("A", "--a=1 --b 'two words' \"--c={'k': 1}\""),
                     ["--a=1", "--b", "two words", "--c={'k': 1}"])
    self.assertEqual(settings_error(self, bd.parse_argv_words, "A", "  "), "A is empty")
    self.assertIn("A: cannot split into shell words",
                  settings_error(self, bd.parse_argv_words, "A", "--a='1"))


class RoutingTargetsTest(unittest.TestCase):

  def test_single_line_forms(self):
    # One line of two numbers is an inline table, unless it reads as layer 0's entry.
    self.assertEqual(bd.parse_routing_table("1,2", "t"), [1.0, 2.0])
    self.assertEqual(bd.parse_routing_table("0,2", "t"), [2.0])
    self.assertEqual(bd.parse_routing_table("2.5", "t"), [2.5])
    self.assertEqual(bd.parse_routing_table("1.5, 2 # inline\n", "t"), [1.5, 2.0])
    self.assertIn("t: empty routing target table",
                  settings_error(self, bd.parse_routing_table, "layer,target\n", "t"))

  def test_inline_values_name_their_index(self):
    self.assertEqual(bd.parse_routing_targets("R", " 1.5, 2,3 "), [1.5, 2.0, 3.0])
    self.assertEqual(settings_error(self, bd.parse_routing_targets, "R", "1.5,x"),
                     "R value 1: 'x' is not a number")
    self.assertEqual(settings_error(self, bd.parse_routing_targets, "R", "0.5"),
                     "R value 0: routing target '0.5' is below 1 (max/mean load is at least 1)")

  def test_a_multi_line_value_is_a_table(self):
    self.assertEqual(bd.parse_routing_targets("R", "layer,target\n1,3\n0,2"), [2.0, 3.0])
    self.assertIn("R:3: layer 1 given twice",
                  settings_error(self, bd.parse_routing_targets, "R", "0,2\n1,3\n1,4"))

  def test_a_file_is_read_as_a_table(self):
    with tempfile.TemporaryDirectory() as directory:
      path = os.path.join(directory, "targets.txt")
      with open(path, "w", encoding="utf-8") as handle:
        handle.write("1.5\n2\n")
      self.assertEqual(bd.parse_routing_targets("R", "@" + path), [1.5, 2.0])
      with open(path, "w", encoding="utf-8") as handle:
        handle.write("1.5\nx\n")
      self.assertEqual(settings_error(self, bd.parse_routing_targets, "R", "@" + path),
                       f"{path}:2: 'x' is not a number")
      missing = os.path.join(directory, "missing.txt")
      self.assertEqual(settings_error(self, bd.parse_routing_targets, "R", "@" + missing),
                       f"R: cannot read {missing}: No such file or directory")

  def test_scale_targets(self):
    self.assertEqual(bd.scale_targets([1.0, 3.0], 0.5), [1.0, 2.0])
    self.assertEqual(bd.scale_targets([1.0, 3.0], 0.0), [1.0, 1.0])
    self.assertEqual(bd.scale_targets([2.0], 2.0), [3.0])


class FlagsTest(unittest.TestCase):

  def test_bool_flag_forms(self):
    flag = "--pipeline_step_boundary"
    self.assertIsNone(bd.bool_flag(["--other", "--pipeline_step_boundaryx"], flag))
    self.assertIs(bd.bool_flag([flag], flag), True)
    self.assertIs(bd.bool_flag([flag, "--next"], flag), True)
    self.assertIs(bd.bool_flag([flag + "=false"], flag), False)
    self.assertIs(bd.bool_flag([flag + "=1"], flag), True)
    self.assertIs(bd.bool_flag([flag, "no"], flag), False)  # --f V
    self.assertIs(bd.bool_flag([flag, "True"], flag), True)
    # A following word that is no boolean is not the flag's value.
    self.assertIs(bd.bool_flag([flag, "maybe"], flag), True)
    self.assertIs(bd.bool_flag([flag, ""], flag), True)
    for negated in ("--nopipeline_step_boundary", "--no_pipeline_step_boundary",
                    "--no-pipeline_step_boundary"):
      with self.subTest(negated=negated):
        self.assertIs(bd.bool_flag([negated], flag), False)

  def test_bool_flag_last_one_wins(self):
    flag = "--f"
    self.assertIs(bd.bool_flag([flag, "--nof"], flag), False)
    self.assertIs(bd.bool_flag(["--no-f", flag + "=yes"], flag), True)
    self.assertIs(bd.bool_flag([flag + "=off", flag], flag), True)

  def test_bool_flag_refuses_a_value_that_is_no_boolean(self):
    self.assertEqual(settings_error(self, bd.bool_flag, ["--f=maybe"], "--f"),
                     "--f='maybe': not a boolean (true/false, 1/0, yes/no, on/off)")

  def test_flag_value(self):
    self.assertEqual(bd.flag_value(["--a=1"], "--a"), "1")
    self.assertEqual(bd.flag_value(["--a", "x"], "--a"), "x")
    self.assertEqual(bd.flag_value(["--a=1", "--b", "--a", "2"], "--a"), "2")  # last one wins
    self.assertEqual(bd.flag_value(["--a="], "--a"), "")
    self.assertIsNone(bd.flag_value(["--a"], "--a"))  # no value follows
    self.assertIsNone(bd.flag_value(["--ab=1", "--ab", "2"], "--a"))
    self.assertIsNone(bd.flag_value([], "--a"))


if __name__ == "__main__":
  unittest.main()
