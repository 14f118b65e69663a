"""Tests of amalgamate.py, which joins the rtb_driver package into the one file the pod runs."""

import ast
import base64
import gzip
import importlib.util
import os
import subprocess
import tempfile
import textwrap
import unittest
from types import ModuleType
from typing import Dict

from driver_loader import DRIVER_DIR, PYTHON, driver_path

PACKAGE = os.path.join(DRIVER_DIR, "rtb_driver")
TABLE = os.path.join(DRIVER_DIR, "settings.tsv")
# The tables the shipped file carries inline, as CMake builds it.
SECRETS_TABLE = os.path.join(DRIVER_DIR, "..", "..", "..", "data", "secrets.tsv")
TABLES = [TABLE, SECRETS_TABLE]


def load_amalgamate() -> ModuleType:
  spec = importlib.util.spec_from_file_location("amalgamate_under_test",
                                                os.path.join(DRIVER_DIR, "amalgamate.py"))
  assert spec is not None and spec.loader is not None
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


amalgamate = load_amalgamate()


def write_package(root: str, modules: Dict[str, str]) -> str:
  """A package `pkg` under `root` with a docstring and the given modules; its path."""
  package = os.path.join(root, "pkg")
  os.makedirs(package)
  files = {"__init__": '"""A test package."""\n', **modules}
  for name, text in files.items():
    with open(os.path.join(package, name + ".py"), "w", encoding="utf-8") as handle:
      handle.write(textwrap.dedent(text))
  return package


MAIN = """\
    import sys

    from .a import A


    def main() -> int:
      print(A)
      return 0
    """


class RealPackageTest(unittest.TestCase):

  def test_two_builds_give_the_same_bytes(self):
    first = amalgamate.amalgamate(PACKAGE, TABLES)
    second = amalgamate.amalgamate(PACKAGE, TABLES)
    self.assertEqual(first, second)

  def test_the_shipped_driver_is_this_build(self):
    # The file the tests (and render-bench) use is exactly what the package builds to today.
    with open(driver_path(), encoding="utf-8") as handle:
      self.assertEqual(handle.read(), amalgamate.amalgamate(PACKAGE, TABLES))

  def test_the_shipped_packed_form_is_the_shipped_driver(self):
    # render-bench embeds both forms; the packed one must unpack to the text, byte for byte.
    with open(driver_path(), "rb") as text, open(driver_path() + ".gz.b64", "rb") as packed:
      self.assertEqual(gzip.decompress(base64.b64decode(packed.read())), text.read())

  def test_the_packed_form_is_reproducible_and_unpacks(self):
    with tempfile.TemporaryDirectory() as directory:
      outputs = []
      for name in ("a", "b"):
        target = os.path.join(directory, name + ".py")
        self.assertEqual(
            amalgamate.main([
                PACKAGE, target, *[f"--embed={t}" for t in TABLES], "--packed", target + ".gz.b64"
            ]), 0)
        with open(target + ".gz.b64", "rb") as handle:
          outputs.append(handle.read())
        with open(target, "rb") as handle:
          self.assertEqual(gzip.decompress(base64.b64decode(outputs[-1])), handle.read())
        # rtb::base64_encode's lines: 76 characters, each line ending in a newline.
        lines = outputs[-1].split(b"\n")
        self.assertEqual(lines[-1], b"")
        self.assertTrue(all(len(line) == 76 for line in lines[:-2]))
        self.assertTrue(0 < len(lines[-2]) <= 76)
      self.assertEqual(outputs[0], outputs[1], "no time or name in the gzip header")

  def test_modules_come_after_what_they_import(self):
    text = amalgamate.amalgamate(PACKAGE, TABLES)
    banners = [
        line.split("module: ", 1)[1].rstrip(" -")
        for line in text.splitlines()
        if line.startswith("# ---- module: ")
    ]
    modules = sorted(name[:-3]
                     for name in os.listdir(PACKAGE)
                     if name.endswith(".py") and name not in ("__init__.py", "__main__.py"))
    self.assertEqual(sorted(banners), modules)
    position = {name: index for index, name in enumerate(banners)}
    for name in modules:
      with open(os.path.join(PACKAGE, name + ".py"), encoding="utf-8") as handle:
        tree = ast.parse(handle.read())
      for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
          self.assertLess(position[node.module], position[name], f"{name} imports {node.module}")

  def test_no_intra_package_import_and_one_future_import_survive(self):
    text = amalgamate.amalgamate(PACKAGE, TABLES)
    tree = ast.parse(text)
    relative = [node for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level]
    self.assertEqual(relative, [])
    self.assertEqual(text.count("from __future__ import annotations"), 1)
    self.assertTrue(text.startswith("#!/usr/bin/env python3\n"))
    self.assertTrue(text.rstrip().endswith("sys.exit(main())"))

  def test_the_settings_table_travels_inline(self):
    with tempfile.TemporaryDirectory() as root:
      path = os.path.join(root, "bench_driver.py")
      with open(path, "w", encoding="utf-8") as handle:
        handle.write(amalgamate.amalgamate(PACKAGE, TABLES))
      # Run from elsewhere, with no settings.tsv beside it: the table comes from the file.
      result = subprocess.run([PYTHON, path, "--help"], cwd=root, capture_output=True, text=True)
    self.assertEqual(result.returncode, 0, result.stderr)
    self.assertIn("ROUTING_SCALE", result.stdout)
    text = amalgamate.amalgamate(PACKAGE, TABLES)
    tree = ast.parse(text)
    embedded = next(node for node in tree.body if isinstance(node, ast.AnnAssign) and
                    isinstance(node.target, ast.Name) and node.target.id == "EMBEDDED_FILES")
    assert isinstance(embedded, ast.AnnAssign) and embedded.value is not None
    inline = {}
    for path in TABLES:
      with open(path, encoding="utf-8") as handle:
        inline[os.path.basename(path)] = handle.read()
    self.assertEqual(ast.literal_eval(embedded.value), inline)

  def test_the_package_runs_as_the_file_does(self):
    # `python3 -m rtb_driver` (the package) and the built file print the same --help.
    package = subprocess.run([PYTHON, "-m", "rtb_driver", "--help"], cwd=DRIVER_DIR,
                             capture_output=True, text=True, check=True)
    built = subprocess.run([PYTHON, driver_path(), "--help"], capture_output=True, text=True,
                           check=True)
    self.assertEqual(package.stdout, built.stdout)


class RefusalTest(unittest.TestCase):

  def refusal(self, modules: Dict[str, str]) -> str:
    with tempfile.TemporaryDirectory() as root:
      package = write_package(root, modules)
      with self.assertRaises(amalgamate.AmalgamationError) as caught:
        amalgamate.amalgamate(package)
      return str(caught.exception)

  def test_a_name_defined_in_two_modules(self):
    message = self.refusal({"a": "A = 1\n", "b": "A = 2\n", "main": MAIN})
    self.assertIn("A is also defined in", message)
    self.assertIn("one namespace", message)

  def test_a_definition_that_shadows_another_modules_import(self):
    message = self.refusal({"a": "A = 1\njson = 2\n", "b": "import json\n", "main": MAIN})
    self.assertIn("binds json", message)

  def test_an_import_of_a_name_the_module_lacks(self):
    message = self.refusal({"a": "B = 1\n", "main": MAIN})
    self.assertIn("imports A from .a, which does not define it", message)

  def test_module_qualified_access(self):
    message = self.refusal({"a": "A = 1\n", "main": "from . import a\n\ndef main():\n  return 0\n"})
    self.assertIn("module-qualified", message)

  def test_an_import_cycle(self):
    message = self.refusal(
        {"a": "from .b import B\nA = 1\n", "b": "from .a import A\nB = 2\n", "main": MAIN})
    self.assertIn("import cycle among the modules a, b", message)

  def test_no_main(self):
    self.assertIn("no module `main`", self.refusal({"a": "A = 1\n"}))

  def test_a_renamed_intra_package_import(self):
    message = self.refusal(
        {"a": "A = 1\n", "main": "from .a import A as B\n\ndef main():\n"
                                 "  return B\n"})
    self.assertIn("no `as`", message)


class BuildTest(unittest.TestCase):

  def test_a_small_package_joins_and_runs(self):
    with tempfile.TemporaryDirectory() as root:
      package = write_package(
          root, {"a": '"""Module a."""\nimport json\nA = json.dumps([1])\n', "main": MAIN})
      output = os.path.join(root, "out.py")
      result = subprocess.run(
          [PYTHON, os.path.join(DRIVER_DIR, "amalgamate.py"), package, output], capture_output=True,
          text=True)
      self.assertEqual(result.returncode, 0, result.stderr)
      with open(output, encoding="utf-8") as handle:
        text = handle.read()
      self.assertIn("# ---- module: a ----\n# Module a.\n", text)
      self.assertLess(text.index("module: a "), text.index("module: main "))
      self.assertEqual(text.count("import json"), 1)
      run = subprocess.run([PYTHON, output], capture_output=True, text=True)
      self.assertEqual((run.returncode, run.stdout), (0, "[1]\n"))

  def test_a_refusal_is_one_line_and_exit_2_and_writes_nothing(self):
    with tempfile.TemporaryDirectory() as root:
      package = write_package(root, {"a": "A = 1\n", "b": "A = 2\n", "main": MAIN})
      output = os.path.join(root, "out.py")
      result = subprocess.run(
          [PYTHON, os.path.join(DRIVER_DIR, "amalgamate.py"), package, output], capture_output=True,
          text=True)
      self.assertEqual(result.returncode, 2)
      self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
      self.assertTrue(result.stderr.startswith("amalgamate.py: "))
      self.assertFalse(os.path.exists(output))


if __name__ == "__main__":
  unittest.main()
