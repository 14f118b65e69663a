"""The one-file bench driver under test, shared by the driver's test modules.

The tests run the driver as it ships: the file amalgamate.py builds from the rtb_driver package
(ctest passes the build's artifact as $RTB_DRIVER). Run by hand without it, the file is built
from the package into a temporary directory, once per process.
"""

import atexit
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from types import ModuleType

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DRIVER_DIR = os.path.join(REPO, "tools", "render-bench", "driver")
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
MODULE_NAME = "bench_driver_under_test"


def build_driver(directory: str) -> str:
  """Builds the one-file driver from the package into `directory`; its path."""
  path = os.path.join(directory, "bench_driver.py")
  subprocess.run([
      PYTHON,
      os.path.join(DRIVER_DIR, "amalgamate.py"),
      os.path.join(DRIVER_DIR, "rtb_driver"), path, "--embed",
      os.path.join(DRIVER_DIR, "settings.tsv"), "--embed",
      os.path.join(REPO, "data", "secrets.tsv"), "--packed", path + ".gz.b64"
  ], check=True)
  return path


def driver_path() -> str:
  """$RTB_DRIVER, else a driver built from the package for this process."""
  given = os.environ.get("RTB_DRIVER")
  if given:
    return given
  built = os.environ.get("RTB_DRIVER_BUILT_FOR_TESTS")
  if built and os.path.exists(built):
    return built
  directory = tempfile.mkdtemp(prefix="rtb-driver-")
  atexit.register(shutil.rmtree, directory, True)
  path = build_driver(directory)
  os.environ["RTB_DRIVER_BUILT_FOR_TESTS"] = path  # subprocesses of this test run reuse it
  return path


def load_driver() -> ModuleType:
  """Imports the one-file driver (once per process) as module `bench_driver_under_test`."""
  if MODULE_NAME in sys.modules:
    return sys.modules[MODULE_NAME]
  spec = importlib.util.spec_from_file_location(MODULE_NAME, driver_path())
  assert spec is not None and spec.loader is not None
  module = importlib.util.module_from_spec(spec)
  sys.modules[MODULE_NAME] = module
  spec.loader.exec_module(module)
  return module
