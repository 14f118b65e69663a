"""What every module of the driver shares: its log tag and line writers, its errors (exit codes
2 and 1), and the constants of the payload contract (docs/payload-spec.md)."""

from __future__ import annotations

import sys
from typing import Any, Optional

from .masking import scrub

TAG = "[TrainerBench]"

PROG = "bench_driver"

# Segment starts sit on this grid (the GatedDeltaNet chunk, Tunix's segment_align_multiple).
SEGMENT_ALIGN = 64

# The bench's regular rows: 4,588 padding tokens in a 65,536-token budget (docs/payload-spec.md).
REGULAR_PADDING = 4588

REGULAR_BUDGET = 65536

# Qwen3.5-397B-A17B, the default vocabulary of the payload file mode.
DEFAULT_VOCAB = 248320

# A target is "hit" when the achieved max/mean is within this relative distance.
TARGET_TOLERANCE = 0.01

DEFAULT_TRAINER_MODULE = "tunix.experimental.examples.common.run_trainer_node"

DEFAULT_ORCH_MODULE = "tunix.experimental.examples.deepswe_dist.run_deepswe_dist"

RUNTIME_FLAGS = ("--process_main", "--process_executor", "--discovery_id", "--discovery_port",
                 "--discovery_addrs")


class SettingsError(Exception):
  """A bad setting or an impossible combination: exit code 2."""


class TunixMissing(RuntimeError):
  """The image's Tunix lacks a module or function the driver needs, or a check of what Tunix
  built failed (a warm-up signature mismatch, a gate that stays on): exit code 1."""


def say(message: str) -> None:
  """A human log line; credentials in it masked (docs/secrets.md), as in every line the driver
  writes."""
  print(scrub(f"{TAG} {message}"), flush=True)


def emit(line: str) -> None:
  """A machine line (BENCH_STEP, BENCH_SUMMARY, ...), credentials masked."""
  print(scrub(line), flush=True)


def error_line(message: str) -> None:
  """An error on stderr, `bench_driver: MESSAGE`, credentials masked."""
  print(scrub(f"{PROG}: {message}"), file=sys.stderr, flush=True)


def one_line(text: Any) -> str:
  return " ".join(str(text).split())


def describe_exception(exc: BaseException) -> str:
  text = one_line(exc)
  return text if text else type(exc).__name__


def int_or_none(value: Any) -> Optional[int]:
  try:
    return None if value is None or isinstance(value, bool) else int(value)
  except (TypeError, ValueError):
    return None
