"""Tests of BENCH_SUMMARY "versions": what code a run imported."""

import hashlib
import os
import tempfile
import types
import unittest

from driver_loader import load_driver

driver = load_driver()


def module_from(path: str, name: str, version: str = "") -> types.ModuleType:
  module = types.ModuleType(name)
  module.__file__ = path
  if version:
    module.__version__ = version  # type: ignore[attr-defined]  # as packages set it
  return module


class VersionsTest(unittest.TestCase):

  def setUp(self):
    directory = tempfile.TemporaryDirectory()
    self.addCleanup(directory.cleanup)
    self.root = directory.name

  def source(self, filename: str, text: str) -> str:
    """Writes `text` to `filename` in this test's folder; returns its path."""
    path = os.path.join(self.root, filename)
    with open(path, "w", encoding="utf-8") as handle:
      handle.write(text)
    return path

  def test_hashes_name_the_code_and_change_with_it(self):
    worker = module_from(self.source("worker.py", "A = 1\n"), "tunix.worker")
    modules = {"tunix.worker": worker}
    first = driver.imported_versions([worker], modules)
    expected = hashlib.sha256(b"A = 1\n").hexdigest()[:12]
    self.assertEqual(first["modules"], {"tunix.worker": expected})
    self.assertEqual(len(first["code"]), 12)
    self.source("worker.py", "A = 2\n")
    second = driver.imported_versions([worker], modules)
    self.assertNotEqual(first["modules"], second["modules"])
    self.assertNotEqual(first["code"], second["code"])

  def test_objects_count_by_their_module_once(self):
    module = module_from(self.source("engine.py", "class Engine: pass\n"), "maxtext.engine")
    engine_class = type("Engine", (), {"__module__": "maxtext.engine"})
    record = driver.imported_versions([engine_class(), module, None], {"maxtext.engine": module})
    self.assertEqual(list(record["modules"]), ["maxtext.engine"])

  def test_packages_not_imported_are_null(self):
    record = driver.imported_versions([], {})
    self.assertEqual(set(record["packages"]), set(driver.PACKAGES))
    self.assertTrue(all(value is None for value in record["packages"].values()))
    self.assertIsNone(record["code"])
    self.assertEqual(record["modules"], {})

  def test_a_package_version_from_its_module(self):
    fake = module_from("/nonexistent.py", "tunix", version="9.9.9")
    self.assertEqual(driver.package_version("tunix", {"tunix": fake}), "9.9.9")
    # numpy is installed: its distribution's version, which numpy also reports.
    import numpy  # pylint: disable=import-outside-toplevel  # the test's own real package
    self.assertEqual(driver.package_version("numpy", {"numpy": numpy}), numpy.__version__)

  def test_a_file_that_cannot_be_read_has_no_hash(self):
    self.assertIsNone(driver.file_hash(module_from("/nonexistent/x.py", "x")))
    self.assertIsNone(driver.file_hash(types.ModuleType("builtin_like")))


if __name__ == "__main__":
  unittest.main()
