"""Tests of the data files the driver reads (embedded.py): inline in the shipped file, beside the
package in the source tree."""

import os
import unittest

from driver_loader import DRIVER_DIR, load_driver

bd = load_driver()


class EmbeddedTextTest(unittest.TestCase):

  def test_the_settings_table_is_the_sources(self):
    with open(os.path.join(DRIVER_DIR, "settings.tsv"), encoding="utf-8") as handle:
      self.assertEqual(bd.embedded_text("settings.tsv"), handle.read())

  def test_a_file_that_is_not_there(self):
    with self.assertRaises(FileNotFoundError):
      bd.embedded_text("no-such-file-for-the-driver.tsv")


if __name__ == "__main__":
  unittest.main()
