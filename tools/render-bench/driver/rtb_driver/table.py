"""The settings table (settings.tsv): one row per driver setting, the one source of truth that
render-bench's knobs and this driver's parser and --help are both generated from.

Each row names an environment variable, its kind (which parser reads it, and so which words a
bad value is refused with), its default, the render-bench option that writes it and its meaning.
A kind's refusals are the same words in render-bench (lib/rtb/bench/driver_settings.cc), which a
contract test checks.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import textwrap
from typing import Any, Dict, List, Optional, Tuple

from .common import SettingsError
from .embedded import embedded_text
from .values import (parse_argv_words, parse_bool_word, parse_choice, parse_float, parse_int,
                     parse_pad_align, parse_routing_targets, parse_window)

TABLE_FILE = "settings.tsv"
COLUMNS = ("name", "kind", "default", "option", "meaning")
# A default or option of "-": none (resolved at run time, required, or written only through
# render-bench's --driver-env).
NONE = "-"
# Rows whose option is ORCH_COPY are the e2e orchestrator's environment, ROLLOUT_COPY the e2e
# rollout JobSet's setting, copied by render-bench; the driver keeps their text as written (it is
# logged as the source of an auto setting).
ORCH_COPY = "orch"
ROLLOUT_COPY = "rollout"


@dataclasses.dataclass(frozen=True)
class SettingRow:
  """One row of the table."""
  name: str
  kind: str
  default: Optional[str]  # None: no default
  option: Optional[str]  # None: only through --driver-env
  meaning: str
  line: int  # in settings.tsv

  @property
  def field(self) -> str:
    """The Settings attribute that holds it."""
    return self.name.lower()

  @property
  def keeps_text(self) -> bool:
    return self.option in (ORCH_COPY, ROLLOUT_COPY)

  def parse(self, text: str, where: Optional[str] = None) -> Any:
    """The value of `text` for this setting; a SettingsError naming `where` (default: the
    setting's name) in the kind's words when it is refused."""
    return parse_kind(self.kind, where or self.name, text)

  def describe_kind(self) -> str:
    """The kind in words, for --help."""
    return describe_kind(self.kind)


def _int_minimum(kind: str) -> Tuple[str, Optional[str]]:
  match = re.fullmatch(r"(int|float)(?:>=(-?\d+(?:\.\d+)?))?", kind)
  if not match:
    return "", None
  return match.group(1), match.group(2)


def parse_kind(kind: str, name: str, text: str) -> Any:
  """Reads `text` as a value of `kind` (see settings.tsv)."""
  number, minimum = _int_minimum(kind)
  if number == "int":
    return parse_int(name, text, None if minimum is None else int(minimum))
  if number == "float":
    return parse_float(name, text, None if minimum is None else float(minimum))
  if kind.startswith("choice:"):
    return parse_choice(name, text, tuple(kind[len("choice:"):].split("|")))
  readers = {
      "bool": parse_bool_word,
      "pad_align": parse_pad_align,
      "window": parse_window,
      "argv": parse_argv_words,
      "targets": parse_routing_targets,
      "text": lambda _name, value: value.strip(),
  }
  if kind not in readers:
    raise SettingsError(f"{TABLE_FILE}: unknown kind {kind!r} for {name}")
  return readers[kind](name, text)


def describe_kind(kind: str) -> str:
  number, minimum = _int_minimum(kind)
  if number:
    word = "integer" if number == "int" else "number"
    return f"{word} >= {minimum}" if minimum is not None else word
  if kind.startswith("choice:"):
    return kind[len("choice:"):]
  return {
      "bool": "true/false, 1/0, yes/no, on/off",
      "pad_align": "integer > 0, a multiple of 64",
      "window": "START:COUNT",
      "argv": "shell-quoted words",
      "targets": "comma-separated numbers or @FILE",
      "text": "text",
  }[kind]


def parse_table(text: str, source: str = TABLE_FILE) -> List[SettingRow]:
  """The rows of a settings table; a malformed one is a SettingsError naming its line."""
  rows: List[SettingRow] = []
  header_seen = False
  for number, line in enumerate(text.splitlines(), 1):
    if not line.strip() or line.startswith("#"):
      continue
    cells = line.split("\t")
    if len(cells) != len(COLUMNS):
      raise SettingsError(f"{source}:{number}: {len(cells)} tab-separated columns, expected "
                          f"{len(COLUMNS)} ({', '.join(COLUMNS)})")
    if not header_seen:
      if tuple(cells) != COLUMNS:
        raise SettingsError(f"{source}:{number}: the header must be {' '.join(COLUMNS)}")
      header_seen = True
      continue
    name, kind, default, option, meaning = (cell.strip() for cell in cells)
    row = SettingRow(name=name, kind=kind, default=None if default == NONE else default,
                     option=None if option == NONE else option, meaning=meaning, line=number)
    try:
      describe_kind(kind)
    except KeyError:
      raise SettingsError(f"{source}:{number}: unknown kind {kind!r}") from None
    if row.default is not None:
      row.parse(row.default)  # a default its own kind refuses is a broken table
    if any(seen.name == name for seen in rows):
      raise SettingsError(f"{source}:{number}: {name} is listed twice")
    rows.append(row)
  if not rows:
    raise SettingsError(f"{source}: no settings")
  return rows


@functools.lru_cache(maxsize=1)
def setting_rows() -> Tuple[SettingRow, ...]:
  """The driver's settings table (read once: it never changes while the driver runs)."""
  return tuple(parse_table(embedded_text(TABLE_FILE)))


def rows_by_name() -> Dict[str, SettingRow]:
  return {row.name: row for row in setting_rows()}


def table_default(name: str) -> Any:
  """The parsed default of a setting (None when it has none)."""
  row = rows_by_name()[name]
  return None if row.default is None else row.parse(row.default)


def contract_help(width: int = 100) -> str:
  """The environment contract as --help prints it, one entry per row of the table."""
  lines = []
  indent = " " * 30
  for row in setting_rows():
    default = ("required" if row.default is None and row.kind == "argv" else
               f"default {row.default}" if row.default is not None else "unset by default")
    text = f"{row.meaning} [{row.describe_kind()}; {default}]"
    head = f"  {row.name:<27} "
    if len(head) > len(indent):
      lines.append(head.rstrip())
      head = indent
    lines.extend(
        textwrap.wrap(text, width=width, initial_indent=head, subsequent_indent=indent,
                      break_on_hyphens=False, break_long_words=False))
  return "\n".join(lines)
