"""The bench driver module under test, shared by the driver's test modules."""

import importlib.util
import os
import sys


def load_driver():
  """Imports bench_driver.py from $RTB_DRIVER (ctest sets it), else from the source tree, once."""
  name = "bench_driver_under_test"
  if name in sys.modules:
    return sys.modules[name]
  path = os.environ.get("RTB_DRIVER") or os.path.join(
      os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "render-bench", "driver",
      "bench_driver.py")
  spec = importlib.util.spec_from_file_location(name, path)
  module = importlib.util.module_from_spec(spec)
  sys.modules[name] = module
  spec.loader.exec_module(module)
  return module
