"""Data files the driver reads: beside the package in the source tree, inline in the shipped file.

The one-file driver carries them in EMBEDDED_FILES, which amalgamate.py fills in at build time;
run from the package, they are read from tools/render-bench/driver/.
"""

from __future__ import annotations

import os
from typing import Dict

EMBEDDED_FILES: Dict[str, str] = {}


def embedded_text(name: str) -> str:
  """The text of data file `name` (e.g. settings.tsv)."""
  if name in EMBEDDED_FILES:
    return EMBEDDED_FILES[name]
  path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), name)
  with open(path, encoding="utf-8") as handle:
    return handle.read()
