"""Tests of the settings table (settings.tsv) and of what the driver generates from it."""

import os
import unittest

from driver_loader import DRIVER_DIR, load_driver

driver = load_driver()

HEADER = "name\tkind\tdefault\toption\tmeaning\n"


class TableTest(unittest.TestCase):

  def test_the_shipped_table_is_the_file(self):
    with open(os.path.join(DRIVER_DIR, "settings.tsv"), encoding="utf-8") as handle:
      text = handle.read()
    self.assertEqual(driver.embedded_text("settings.tsv"), text)
    names = [row.name for row in driver.setting_rows()]
    self.assertEqual(len(names), len(set(names)))
    self.assertIn("STEPS", names)

  def test_every_row_is_a_settings_field_and_every_field_a_row(self):
    fields = {field for field in driver.Settings.__dataclass_fields__}
    rows = {row.field for row in driver.setting_rows()}
    self.assertEqual(rows, fields)

  def test_defaults_come_from_the_table(self):
    settings = driver.Settings(trainer_argv=["--x"], orch_argv=["--y"])
    for row in driver.setting_rows():
      if row.default is None or row.name == "LOGP_GATES":
        continue
      self.assertEqual(getattr(settings, row.field), row.parse(row.default), row.name)
    self.assertTrue(settings.logp_gates)  # LOGP_GATES=on, stored as a switch

  def test_each_kind_refuses_in_its_words(self):
    cases = [
        ("int>=1", "0", "must be >= 1"),
        ("int>=1", "x", "not an integer"),
        ("int", "1.5", "not an integer"),
        ("float>=0", "-1", "must be >= 0"),
        ("float>=0", "inf", "must be finite"),
        ("float>=0", "x", "not a number"),
        ("choice:on|off", "maybe", "must be one of on|off"),
        ("bool", "maybe", "not a boolean (true/false, 1/0, yes/no, on/off)"),
        ("pad_align", "100", "must be a multiple of the segment alignment 64"),
        ("pad_align", "0", "must be >= 1"),
        ("window", "5", "expected START:COUNT (timed steps, 0-based start)"),
        ("window", "-1:2", "START must be >= 0"),
        ("window", "1:0", "COUNT must be >= 1"),
        # ASCII only, as render-bench reads them: no other Unicode digits or spaces.
        ("int>=1", "\u0663", "not an integer"),
        ("int", "5\u00a0", "not an integer"),
        ("float>=0", "\u0661.5", "not a number"),
        ("choice:on|off", "on\u00a0", "must be one of on|off"),
        ("bool", "\u00a0yes", "not a boolean (true/false, 1/0, yes/no, on/off)"),
        ("window", "\u0661:2", "expected START:COUNT (timed steps, 0-based start)"),
    ]
    for kind, text, reason in cases:
      with self.subTest(kind=kind, text=text):
        with self.assertRaises(driver.SettingsError) as caught:
          driver.parse_kind(kind, "X", text)
        self.assertEqual(str(caught.exception), f"X={text!r}: {reason}")

  def test_each_kind_reads_its_values(self):
    cases = [("int>=1", " 3 ", 3), ("float>=0", "0.5", 0.5), ("choice:auto|on|off", "ON", "on"),
             ("bool", "yes", True), ("bool", "0", False), ("pad_align", "128", 128),
             ("window", " 2 : 3 ", (2, 3)), ("argv", "--a 'b c'", ["--a", "b c"]),
             ("targets", "1.5,2", [1.5, 2.0]), ("text", " x ", "x")]
    for kind, text, value in cases:
      with self.subTest(kind=kind, text=text):
        self.assertEqual(driver.parse_kind(kind, "X", text), value)

  def test_a_broken_table_names_its_line(self):
    cases = [
        ("", "no settings"),
        ("a\tb\n", ":1: 2 tab-separated columns"),
        ("name\tkind\tdefault\toption\tmeanings\n", ":1: the header must be"),
        (HEADER + "A\tint>=1\t0\t-\tm\n", "A='0': must be >= 1"),
        (HEADER + "A\tnumber\t-\t-\tm\n", ":2: unknown kind 'number'"),
        (HEADER + "A\tint\t-\t-\tm\nA\tint\t-\t-\tm\n", ":3: A is listed twice"),
    ]
    for text, message in cases:
      with self.subTest(text=text):
        with self.assertRaises(driver.SettingsError) as caught:
          driver.parse_table(text, "t.tsv")
        self.assertIn(message, str(caught.exception))

  def test_comments_and_blank_lines(self):
    rows = driver.parse_table("# c\n\n" + HEADER + "# c\nA\tint>=1\t2\t--a\tthe meaning\n", "t")
    self.assertEqual([(row.name, row.default, row.option, row.line) for row in rows],
                     [("A", "2", "--a", 5)])

  def test_help_lists_every_setting_with_its_meaning(self):
    text = driver.help_text()
    for row in driver.setting_rows():
      self.assertIn(f"  {row.name}", text)
    self.assertIn("optimizer steps to time [integer >= 1; default 5]", text)
    self.assertTrue(all(len(line) <= 100 for line in text.splitlines()))


if __name__ == "__main__":
  unittest.main()
