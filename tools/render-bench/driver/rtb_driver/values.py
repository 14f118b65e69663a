"""Parsers of setting values (integers, choices, booleans, windows, argv strings, routing
target tables) and of flags in an argv; each refusal is a SettingsError whose words the
settings table's kinds promise to render-bench too."""

from __future__ import annotations

import math
import re
import shlex
from typing import Dict, List, Optional, Sequence, Tuple

from .common import SEGMENT_ALIGN, SettingsError

# The white space a value is trimmed of: what str.strip() removes, in ASCII. Values are read as
# ASCII only (Python would also take other Unicode digits and spaces), so that render-bench, which
# checks the same settings in C++ (lib/rtb/bench/driver_settings.cc), reads them exactly alike.
BLANKS = " \t\n\v\f\r\x1c\x1d\x1e\x1f"


def parse_int(name: str, text: str, minimum: Optional[int] = None) -> int:
  try:
    if not text.isascii():
      raise ValueError(text)
    value = int(text.strip(BLANKS), 10)
  except ValueError:
    raise SettingsError(f"{name}={text!r}: not an integer") from None
  if minimum is not None and value < minimum:
    raise SettingsError(f"{name}={text!r}: must be >= {minimum}")
  return value


def parse_float(name: str, text: str, minimum: Optional[float] = None) -> float:
  try:
    if not text.isascii():
      raise ValueError(text)
    value = float(text.strip(BLANKS))
  except ValueError:
    raise SettingsError(f"{name}={text!r}: not a number") from None
  if not math.isfinite(value):
    raise SettingsError(f"{name}={text!r}: must be finite")
  if minimum is not None and value < minimum:
    raise SettingsError(f"{name}={text!r}: must be >= {minimum:g}")
  return value


def parse_choice(name: str, text: str, choices: Sequence[str]) -> str:
  value = text.strip(BLANKS).lower()
  if value not in choices:
    raise SettingsError(f"{name}={text!r}: must be one of {'|'.join(choices)}")
  return value


def parse_pad_align(name: str, text: str) -> int:
  value = parse_int(name, text, 1)
  if value % SEGMENT_ALIGN:
    raise SettingsError(f"{name}={text!r}: must be a multiple of the segment alignment "
                        f"{SEGMENT_ALIGN}")
  return value


def parse_window(name: str, text: str) -> Tuple[int, int]:
  match = re.fullmatch(r"\s*(-?\d+)\s*:\s*(-?\d+)\s*", text, flags=re.ASCII)
  if not match:
    raise SettingsError(f"{name}={text!r}: expected START:COUNT (timed steps, 0-based start)")
  start, count = int(match.group(1)), int(match.group(2))
  if start < 0:
    raise SettingsError(f"{name}={text!r}: START must be >= 0")
  if count < 1:
    raise SettingsError(f"{name}={text!r}: COUNT must be >= 1")
  return start, count


def parse_argv_words(name: str, text: str) -> List[str]:
  try:
    words = shlex.split(text)
  except ValueError as exc:
    raise SettingsError(f"{name}: cannot split into shell words: {exc}") from None
  if not words:
    raise SettingsError(f"{name} is empty")
  return words


def _parse_target_value(source: str, line: int, text: str) -> float:
  where = f"{source}:{line}" if line else source
  try:
    value = float(text)
  except ValueError:
    raise SettingsError(f"{where}: {text!r} is not a number") from None
  if not math.isfinite(value):
    raise SettingsError(f"{where}: routing target {text!r} is not finite")
  if value < 1.0:
    raise SettingsError(f"{where}: routing target {text!r} is below 1 "
                        "(max/mean load is at least 1)")
  return value


def parse_routing_table(text: str, source: str) -> List[float]:
  """Parses a routing target table in the forms that render-bench and check-payload accept.

  One inline line of comma-separated numbers; or one number per line (line i is layer i); or
  `layer,target` lines with 0-based layers, each exactly once (an optional `layer,...` header is
  skipped). `#` starts a comment; blank lines are ignored.
  """
  lines = []
  for number, raw in enumerate(text.splitlines(), 1):
    content = raw.split("#", 1)[0].strip()
    if content:
      lines.append((number, [field.strip() for field in content.split(",")]))
  if lines and len(lines[0][1]) == 2 and lines[0][1][0].lower() == "layer":
    lines.pop(0)
  if not lines:
    raise SettingsError(f"{source}: empty routing target table (no values)")
  if len(lines) == 1 and len(lines[0][1]) >= 2 and not (len(lines[0][1]) == 2 and
                                                        lines[0][1][0] == "0"):
    number, fields = lines[0]
    return [_parse_target_value(source, number, field) for field in fields]
  width = len(lines[0][1])
  if width > 2:
    raise SettingsError(f"{source}:{lines[0][0]}: {width} values on a line of a multi-line table "
                        "(expected one target, or `layer,target`)")
  for number, fields in lines:
    if len(fields) != width:
      raise SettingsError(f"{source}:{number}: {len(fields)} values on this line but {width} on "
                          f"line {lines[0][0]} (the table mixes `target` and `layer,target`)")
  if width == 1:
    return [_parse_target_value(source, number, fields[0]) for number, fields in lines]
  entries: Dict[int, Tuple[int, float]] = {}
  for number, (layer_text, target_text) in lines:
    if not re.fullmatch(r"\d+", layer_text):
      raise SettingsError(f"{source}:{number}: {layer_text!r} is not a layer index "
                          "(a 0-based integer)")
    layer = int(layer_text)
    if layer in entries:
      raise SettingsError(f"{source}:{number}: layer {layer} given twice "
                          f"(first on line {entries[layer][0]})")
    entries[layer] = (number, _parse_target_value(source, number, target_text))
  for layer in range(len(entries)):
    if layer not in entries:
      raise SettingsError(f"{source}: layer {layer} is missing (layers 0..{max(entries)} must "
                          "each appear once)")
  return [entries[layer][1] for layer in range(len(entries))]


def parse_routing_targets(name: str, text: str) -> List[float]:
  """ROUTING_TARGETS: inline comma-separated numbers, or @FILE."""
  text = text.strip()
  if text.startswith("@"):
    path = text[1:]
    try:
      with open(path, encoding="utf-8") as handle:
        content = handle.read()
    except OSError as exc:
      raise SettingsError(f"{name}: cannot read {path}: {exc.strerror or exc}") from None
    return parse_routing_table(content, path)
  if "\n" in text:
    return parse_routing_table(text, name)
  fields = [field.strip() for field in text.split(",")]
  return [
      _parse_target_value(f"{name} value {index}", 0, field) for index, field in enumerate(fields)
  ]


def scale_targets(targets: Sequence[float], scale: float) -> List[float]:
  return [1.0 + scale * (target - 1.0) for target in targets]


TRUE_WORDS = ("1", "true", "yes", "on", "t", "y")

FALSE_WORDS = ("0", "false", "no", "off", "f", "n", "")


def parse_bool_word(name: str, text: str) -> bool:
  value = text.strip(BLANKS).lower()
  if value in TRUE_WORDS:
    return True
  if value in FALSE_WORDS:
    return False
  raise SettingsError(f"{name}={text!r}: not a boolean (true/false, 1/0, yes/no, on/off)")


def bool_flag(words: Sequence[str], flag: str) -> Optional[bool]:
  """A boolean flag of an argv (`--f`, `--f=V`, `--f V`, `--nof`, `--no_f`, `--no-f`), the last
  one winning; None when absent. A value that is not a boolean is a SettingsError."""
  name = flag.lstrip("-")
  value = None
  for index, word in enumerate(words):
    if word == flag:
      following = words[index + 1] if index + 1 < len(words) else None
      if following is not None and following.strip().lower() in TRUE_WORDS + FALSE_WORDS[:-1]:
        value = parse_bool_word(flag, following)
      else:
        value = True
    elif word.startswith(flag + "="):
      value = parse_bool_word(flag, word[len(flag) + 1:])
    elif word in (f"--no{name}", f"--no_{name}", f"--no-{name}"):
      value = False
  return value


def flag_value(words: Sequence[str], flag: str) -> Optional[str]:
  """The value of --flag=V or --flag V in argv words (last one wins)."""
  value = None
  for index, word in enumerate(words):
    if word.startswith(flag + "="):
      value = word[len(flag) + 1:]
    elif word == flag and index + 1 < len(words):
      value = words[index + 1]
  return value
