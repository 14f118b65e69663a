"""Data files the driver reads: beside the package in the source tree, inline in the shipped file.

The one-file driver carries them in EMBEDDED_FILES, which amalgamate.py fills in at build time;
run from the package, they are read from tools/render-bench/driver/, else from the repository's
data/ (the tables the C++ library embeds too).
"""

from __future__ import annotations

import os
from typing import Dict

EMBEDDED_FILES: Dict[str, str] = {}


def embedded_text(name: str) -> str:
  """The text of data file `name` (e.g. settings.tsv)."""
  if name in EMBEDDED_FILES:
    return EMBEDDED_FILES[name]
  driver_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  path = os.path.join(driver_dir, name)
  if not os.path.exists(path):
    path = os.path.join(driver_dir, "..", "..", "..", "data", name)
  with open(path, encoding="utf-8") as handle:
    return handle.read()
