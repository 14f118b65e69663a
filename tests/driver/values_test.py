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


if __name__ == "__main__":
  unittest.main()
