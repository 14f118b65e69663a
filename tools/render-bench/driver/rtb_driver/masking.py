"""Credentials never reach the pod's log: every line the driver writes goes through scrub().

The rule is the library's (lib/rtb/base/secrets, docs/secrets.md), from the same table
(data/secrets.tsv, carried inline in the shipped file): a setting whose name ends in a credential
word and whose value looks like one, a word shaped like a known token, a PEM private key, a URL's
password. A masked value prints as `***#` and eight hex digits of an HMAC-SHA256 under a key drawn
once per process, so one log still tells two secrets apart and a kept log cannot be checked
against a guessed password. tests/driver/masking_test.py and tests/base/secrets_test.cc read the
same cases (testdata/secrets/cases.jsonl), so the two implementations cannot drift apart.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import hmac
import os
import re
from typing import List, Optional, Sequence, Tuple

from .embedded import embedded_text

SECRETS_TABLE = "secrets.tsv"
MASK_PREFIX = "***#"
BLOCK_BEGIN = "-----BEGIN "
BLOCK_END = "-----END "
PLAIN_WORDS = ("true", "false", "yes", "no", "on", "off", "none", "null")
ALPHABETS = ("alnum", "alnum_", "alnum_-", "upper_digit")
NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
# Drawn once per process: fingerprints repeat within one log, never across runs.
PROCESS_KEY = os.urandom(32)


@dataclasses.dataclass(frozen=True)
class SecretRule:
  kind: str  # name-suffix | value-prefix | block
  pattern: str
  min_length: int
  alphabet: str


def parse_rules(text: str, source: str = SECRETS_TABLE) -> Tuple[SecretRule, ...]:
  """The table's rules; a ValueError naming the line for a malformed row."""
  rules: List[SecretRule] = []
  header = False
  for number, line in enumerate(text.splitlines(), 1):
    if not line or line.startswith("#"):
      continue
    cells = line.split("\t")
    if len(cells) != 5:
      raise ValueError(f"{source}:{number}: expected 5 tab-separated columns")
    if not header:
      if cells[0] != "kind":
        raise ValueError(f"{source}:{number}: the first row must be the header")
      header = True
      continue
    kind, pattern, minimum, alphabet = cells[:4]
    if kind not in ("name-suffix", "value-prefix", "block") or not pattern:
      raise ValueError(f"{source}:{number}: bad kind or empty pattern")
    if kind == "value-prefix" and (not minimum.isdigit() or alphabet not in ALPHABETS):
      raise ValueError(f"{source}:{number}: value-prefix needs a minimum length and an alphabet")
    rules.append(
        SecretRule(kind, pattern,
                   int(minimum) if kind == "value-prefix" else 0,
                   alphabet if kind == "value-prefix" else ""))
  return tuple(rules)


@functools.lru_cache(maxsize=1)
def secret_rules() -> Tuple[SecretRule, ...]:
  return parse_rules(embedded_text(SECRETS_TABLE))


def _is_alnum(c: str) -> bool:
  return c.isascii() and c.isalnum()


def _is_word(c: str) -> bool:
  return _is_alnum(c) or c == "_"


def _is_name(c: str) -> bool:
  return _is_word(c) or c in "-."


def _in_alphabet(c: str, alphabet: str) -> bool:
  if alphabet == "upper_digit":
    return c.isascii() and (c.isupper() or c.isdigit())
  if alphabet == "alnum":
    return _is_alnum(c)
  if alphabet == "alnum_":
    return _is_word(c)
  return _is_word(c) or c == "-"


def _is_number(text: str) -> bool:
  return NUMBER.fullmatch(text) is not None


def _is_placeholder(text: str) -> bool:
  if len(text) >= 2 and (text[0], text[-1]) in (("<", ">"), ("[", "]"), ("{", "}")):
    return True
  if text.startswith("${") or text.startswith("$("):
    return True
  return len(text) >= 2 and text[0] == "$" and all(_is_word(c) for c in text[1:])


def _quote_at(text: str, at: int) -> int:
  """The length of a quote at `at`: 1 for ' or ", 2 for one escaped inside a JSON string (\\");
  0 when there is none."""
  if at < len(text) and text[at] in "\"'":
    return 1
  if at + 1 < len(text) and text[at] == "\\" and text[at + 1] in "\"'":
    return 2
  return 0


def _url_password(text: str, scheme_end: int) -> Tuple[int, int]:
  """[begin, end) of the password in the authority starting at `scheme_end`; (0, 0) if none."""
  end = scheme_end
  while end < len(text) and text[end] not in " \t\r\n/?#\"'>":
    end += 1
  authority = text[scheme_end:end]
  at = authority.rfind("@")
  colon = authority.find(":")
  if at < 0 or colon < 0 or colon > at or colon + 1 == at:
    return 0, 0
  return scheme_end + colon + 1, scheme_end + at


def _normalized(name: str) -> str:
  name = name.lstrip("-\"'").rstrip("\"'")
  out = []
  for i, c in enumerate(name):
    before = name[i - 1] if i > 0 else ""
    if c.isascii() and c.isupper() and before.isascii() and (before.islower() or before.isdigit()):
      out.append("_")
    out.append("_" if c in "-." else (c.upper() if c.isascii() else c))
  return "".join(out)


def is_credential_name(name: str, rules: Sequence[SecretRule] = ()) -> bool:
  normal = _normalized(name)
  if not normal:
    return False
  for rule in rules or secret_rules():
    if rule.kind != "name-suffix":
      continue
    if normal.endswith(rule.pattern) or (rule.pattern[0] == "_" and normal == rule.pattern[1:]):
      return True
  return False


def looks_like_credential(value: str) -> bool:
  if not value or value.startswith(MASK_PREFIX) or _is_number(value) or _is_placeholder(value):
    return False
  if value.lower() in PLAIN_WORDS:
    return False
  if value.startswith(("/", "./", "../", "~/")):
    return False
  scheme = value.find("://")
  if scheme >= 0:
    return _url_password(value, scheme + 3)[1] != 0
  return True


class SecretMasker:
  """Masks credentials in text under one key (None: shows them in clear)."""

  def __init__(self, key: Optional[bytes] = PROCESS_KEY) -> None:
    self.key = key
    self.rules = secret_rules()

  def fingerprint(self, value: str) -> str:
    if self.key is None:
      return value
    digest = hmac.new(self.key, value.encode("utf-8"), hashlib.sha256).digest()
    return MASK_PREFIX + digest[:4].hex()

  def _token_end(self, rest: str) -> int:
    """The length of a token-shaped word at the start of `rest`, else 0."""
    for rule in self.rules:
      if rule.kind != "value-prefix" or not rest.startswith(rule.pattern):
        continue
      end = len(rule.pattern)
      while end < len(rest) and _in_alphabet(rest[end], rule.alphabet):
        end += 1
      if end - len(rule.pattern) < rule.min_length or (end < len(rest) and _is_word(rest[end])):
        continue
      return end
    return 0

  def _block_end(self, rest: str) -> int:
    """The length of a PEM private key block at the start of `rest`, else 0."""
    if not rest.startswith(BLOCK_BEGIN):
      return 0
    first_line = rest.split("\n", 1)[0]
    if not any(rule.kind == "block" and rule.pattern in first_line for rule in self.rules):
      return 0
    end = rest.find(BLOCK_END)
    if end < 0:
      return len(rest)
    close = rest.find("-----", end + len(BLOCK_END))
    return len(rest) if close < 0 else close + 5

  def scrub(self, text: str) -> str:
    """`text` with every credential in it masked (the forms of docs/secrets.md)."""
    if self.key is None:
      return text
    out: List[str] = []
    pending_env_credential = False
    i = 0
    while i < len(text):
      rest = text[i:]
      block = self._block_end(rest)
      if block:
        out.append(self.fingerprint(rest[:block]))
        i += block
        continue
      if rest.startswith("://"):
        begin, end = _url_password(text, i + 3)
        if end and not _is_placeholder(text[begin:end]):
          out.append(text[i:begin] + self.fingerprint(text[begin:end]))
          i = end
          continue
      if i == 0 or not _is_name(text[i - 1]):
        token = self._token_end(rest)
        if token:
          out.append(self.fingerprint(rest[:token]))
          i += token
          continue
        name_end = 0
        while name_end < len(rest) and _is_name(rest[name_end]):
          name_end += 1
        name = rest[:name_end]
        if name and any(_is_alnum(c) for c in name):
          masked = self._setting(rest, name, pending_env_credential)
          if masked is not None:
            consumed, replacement, pending_env_credential = masked
            out.append(replacement)
            i += consumed
            continue
          out.append(name)
          i += name_end
          continue
      out.append(text[i])
      i += 1
    return "".join(out)

  def _setting(self, rest: str, name: str, pending: bool) -> Optional[Tuple[int, str, bool]]:
    """A setting (NAME=VALUE, --name value, "name": "value", name: value) written at the start
    of `rest`: (characters consumed, what they print as, the new pending-env state), which is
    the name alone when its value stays in clear; None when `rest` holds no setting."""
    cursor = len(name) + _quote_at(rest, len(name))  # a quoted name's close
    separator_end = cursor
    if separator_end < len(rest) and rest[separator_end] == "=":
      separator_end += 1
    elif (separator_end + 1 < len(rest) and rest[separator_end] == ":" and
          (rest[separator_end + 1] == " " or _quote_at(rest, separator_end + 1))):
      separator_end += 1
      while separator_end < len(rest) and rest[separator_end] == " ":
        separator_end += 1
    elif name.startswith("-") and separator_end < len(rest) and rest[separator_end] == " ":
      separator_end += 1  # --name value
    elif name.startswith("-") and cursor > len(name):
      # "--name", "value": an argv written as a JSON or Python list.
      after = rest[cursor:].lstrip(" ")
      if not after.startswith(","):
        return None
      value_at = len(rest) - len(after[1:].lstrip(" "))
      if not _quote_at(rest, value_at):
        return None
      separator_end = value_at
    else:
      return None
    value_begin = value_end = separator_end
    quote = _quote_at(rest, value_begin)
    if quote:
      # Quoted ('v', "v", or \"v\" inside a JSON string): to the same closing quote.
      closing = rest[value_begin:value_begin + quote]
      value_begin += quote
      value_end = value_begin
      while (value_end < len(rest) and rest[value_end] != "\n" and
             not rest.startswith(closing, value_end)):
        value_end += 2 if (closing == '"' and rest[value_end] == "\\" and
                           value_end + 1 < len(rest)) else 1
      value_end = min(value_end, len(rest))
    else:
      while value_end < len(rest) and rest[value_end] not in " \t\r\n,;}])\"'\\":
        value_end += 1
    value = rest[value_begin:value_end]
    credential_key = is_credential_name(name, self.rules)
    env_value = pending and name == "value"
    new_pending = name == "name" and is_credential_name(value, self.rules)
    if (credential_key or env_value) and looks_like_credential(value):
      return value_end, rest[:value_begin] + self.fingerprint(value), new_pending
    return len(name), name, new_pending


@functools.lru_cache(maxsize=1)
def process_masker() -> SecretMasker:
  return SecretMasker()


def scrub(text: str) -> str:
  """`text` as the driver may log it: credentials masked under the process's key."""
  return process_masker().scrub(text)
